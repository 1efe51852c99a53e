#!/usr/bin/env bash
# Build the stand-in vllm/vllm-openai:v0.27.1 image and save it as a docker-save tar for the bundle.
# Cached by input hash (Dockerfile, flags.json, sources, base image id): unchanged → seconds.
# Usage: bash tests/world/vllm-standin/build.sh [ARTIFACTS_DIR]   (default /var/cache/airgap-test/artifacts)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# Not the production tag on this machine: that one is the real engine (tests/world/build.sh engine).
image=airgap-test/vllm-standin:v0.27.1
base=airgap-test/base:bookworm
artifacts=${1:-${AIRGAP_TEST_ARTIFACTS:-/var/cache/airgap-test/artifacts}}
tar_path="$artifacts/vllm-openai-v0.27.1-standin.tar"

base_id=$(docker image inspect -f '{{.Id}}' "$base" 2>/dev/null) || {
  echo "vllm-standin: base image $base missing; run tests/world/build.sh first" >&2; exit 1; }
hash=$(cd "$here" && {
  echo "$base_id"
  find Dockerfile flags.json vllm.sh src -type f ! -name '*.pyc' -print0 | sort -z \
    | xargs -0 sha256sum
} | sha256sum | cut -c1-32)

current=$(docker image inspect -f '{{index .Config.Labels "airgap-test.input-hash"}}' "$image" 2>/dev/null || true)
built=0
if [ "$current" != "$hash" ]; then
  docker build -q --label "airgap-test.input-hash=$hash" -t "$image" "$here" >/dev/null
  built=1
fi
mkdir -p "$artifacts"
stamp="$artifacts/.vllm-standin.stamp"
if [ "$built" = 1 ] || [ ! -f "$tar_path" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$hash" ]; then
  docker save "$image" -o "$tar_path.tmp"
  chmod 0644 "$tar_path.tmp"
  mv "$tar_path.tmp" "$tar_path"
  echo "$hash" > "$stamp"
fi
echo "$image $hash $tar_path"
