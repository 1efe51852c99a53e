#!/usr/bin/env bash
# Prepare what the GPU harness carries to the device machine (tests/gpu/README.md). Runs here, with PyPI:
#
#   tests/gpu/prepare.sh [DEST]        DEST default: build/gpu-carry of this checkout
#
# 1. vLLM's CUDA wheel (GPU_VLLM_VERSION, default 0.26.0: the release whose wheel pins the device's torch 2.11.0);
# 2. the wheels it needs that the device image lacks (deps.py: CPython 3.12, manylinux x86_64) and ansible-core
#    (GPU_ANSIBLE_CORE, default 2.17.14) with resolvelib, so the harness runs the collection's modules through Ansible;
# 3. pack.py: vLLM's CUDA fatbins stripped to one architecture (GPU_ARCH, default 90 = H100/H200) by
#    strip_fatbin.py, the parts a Hopper card never loads left out, the model directories (make_models.py), this
#    checkout's plugins as the collection, the harness scripts; each part under xz -9.
# Downloads are kept in GPU_CACHE (default build/gpu-cache) and reused. The device tool carries 64 MiB a call with
# the checkout: the total printed last must stay under about 55 MiB.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
DEST=${1:-$ROOT/build/gpu-carry}
CACHE=${GPU_CACHE:-$ROOT/build/gpu-cache}
VLLM=${GPU_VLLM_VERSION:-0.26.0}
ANSIBLE_CORE=${GPU_ANSIBLE_CORE:-2.17.14}
ARCH=${GPU_ARCH:-90}
MOE=${GPU_WITH_MOE:-0}
PY=${PYTHON:-python3}
export PIP_CONSTRAINT="" PIP_DISABLE_PIP_VERSION_CHECK=1
mkdir -p "$CACHE/vllm" "$CACHE/wheels" "$CACHE/ansible"

target=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
  --platform manylinux_2_31_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)

wheel=$(ls "$CACHE/vllm/vllm-$VLLM-"*.whl 2>/dev/null | head -1 || true)
if [ -z "$wheel" ]; then
  echo "== vllm $VLLM (about 300 MB)"
  "$PY" -m pip download -q --no-deps "${target[@]}" -d "$CACHE/vllm" "vllm==$VLLM"
  wheel=$(ls "$CACHE/vllm/vllm-$VLLM-"*.whl | head -1)
fi
echo "== $wheel"

echo "== dependencies the device lacks"
"$PY" "$HERE/deps.py" "$wheel" "$CACHE/wheels" | tail -3

echo "== ansible-core $ANSIBLE_CORE"
"$PY" -m pip download -q --no-deps "${target[@]}" -d "$CACHE/ansible" "ansible-core==$ANSIBLE_CORE" "resolvelib>=0.5.3,<1.1.0"
extra=()
for w in "$CACHE/ansible/"ansible_core-"$ANSIBLE_CORE"-*.whl "$CACHE/ansible/"resolvelib-*.whl; do extra+=(--extra-wheel "$w"); done

echo "== pack into $DEST"
moe=()
[ "$MOE" = 1 ] && moe=(--with-moe)
"$PY" "$HERE/pack.py" --vllm-wheel "$wheel" --wheels "$CACHE/wheels" "${extra[@]}" --arch "$ARCH" "${moe[@]}" \
  --root "$ROOT" --stage "$CACHE/stage" --dest "$DEST"
