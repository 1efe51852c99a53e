#!/usr/bin/env bash
# Make the work tree resolvable as the collection airgap.vllm (FQCN) without installing it:
# build/collections/ansible_collections/airgap/vllm -> repo root. ansible.cfg and molecule point here.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
link="$root/build/collections/ansible_collections/airgap/vllm"
mkdir -p "$(dirname "$link")"
[ -L "$link" ] || ln -s "$root" "$link"
echo "$link"
