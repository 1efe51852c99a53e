#!/usr/bin/env bash
# Make the tiny stand-in of the Qwen3.x-27B-FP8 checkpoint: the real config.json shape, tokenizer
# files with a chat template, preprocessor/generation configs and two small but valid safetensors
# shards whose index total_size is their real data size. Output is byte-reproducible.
# Usage: make-model.sh OUTDIR [TAR]   → OUTDIR/qwen3.x-27b-fp8-tiny/ and TAR
#        (TAR default /var/cache/airgap-test/artifacts/qwen3.x-27b-fp8-tiny.tar; "-" = no tar)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: make-model.sh OUTDIR [TAR]}
tar_path=${2:-/var/cache/airgap-test/artifacts/qwen3.x-27b-fp8-tiny.tar}
fixture="$here/../../fixtures/models/qwen3.x-27b-fp8/config.json"
name=qwen3.x-27b-fp8-tiny

mkdir -p "$out"
rm -rf "${out:?}/$name.tmp"
python3 "$here/make_model.py" "$out/$name.tmp" "$fixture"
rm -rf "${out:?}/$name"
mv "$out/$name.tmp" "$out/$name"

if [ "$tar_path" != "-" ]; then
  mkdir -p "$(dirname "$tar_path")"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
      -C "$out" -cf "$tar_path.tmp" "$name"
  if [ -f "$tar_path" ] && cmp -s "$tar_path" "$tar_path.tmp"; then
    rm -f "$tar_path.tmp"
  else
    mv "$tar_path.tmp" "$tar_path"
  fi
  echo "$tar_path"
fi
echo "$out/$name"
