#!/usr/bin/env bash
# Build a cached CPU-only venv holding the real vLLM 0.27.1 (its CLI parser validates our argv).
# Idempotent: a venv that already imports vLLM's parser is left alone.
# Usage: bash tests/vllm_parser/setup-venv.sh   → prints the venv path on the last line.
set -euo pipefail

VLLM_VERSION=0.27.1
TORCH_VERSION=2.13.0
CACHE="${AIRGAP_CACHE:-$HOME/.cache/airgap-vllm}"
VENV="$CACHE/vllm-${VLLM_VERSION}-venv"
WHEELS="$CACHE/wheels"
PY="${PYTHON:-python3}"
# GPU-only wheels: the parser never needs them and they would drag in CUDA (gigabytes).
SKIP_RE='^(torch|torchaudio|torchvision|torchcodec|pynvvideocodec|flashinfer-python|apache-tvm-ffi|tilelang|nvidia-.*|nvtx|fastsafetensors|quack-kernels|tokenspeed-mla|humming-kernels|numba|zentorch)$'

probe() {
  "$VENV/bin/python" - <<'PY' 2>/dev/null
from importlib.metadata import version
assert "cpu" in version("vllm"), version("vllm")
from vllm.entrypoints.openai.cli_args import make_arg_parser  # noqa: F401
print(version("vllm"))
PY
}

if [ -x "$VENV/bin/python" ] && probe >/dev/null; then
  echo "vllm venv ready: $(probe)"
  echo "$VENV"
  exit 0
fi

echo "setup-venv: creating $VENV (cold: not cached yet)"
mkdir -p "$WHEELS"
"$PY" -m venv "$VENV"
pip_() { "$VENV/bin/python" -m pip --disable-pip-version-check -q "$@"; }

# torch: only the CPU build may land here. Refuse before installing if pip would pick anything else.
have_torch=$("$VENV/bin/python" -c 'from importlib.metadata import version; print(version("torch"))' 2>/dev/null || true)
if [ "$have_torch" != "$TORCH_VERSION+cpu" ]; then
plan=$(pip_ install --dry-run --report - "torch==$TORCH_VERSION" 2>/dev/null || true)
if ! printf '%s' "$plan" | "$VENV/bin/python" -c '
import json, sys
rep = json.load(sys.stdin)
names = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in rep["install"]}
bad = [n for n in names if n.startswith("nvidia-") or n in ("triton",)]
if not names.get("torch", "").endswith("+cpu") or bad:
    sys.exit("pip would install torch %s with %s, not the CPU wheel" % (names.get("torch"), bad))
'; then
  echo "setup-venv: refusing: no CPU torch $TORCH_VERSION wheel found by pip" >&2
  exit 3
fi
pip_ install "torch==$TORCH_VERSION"
fi

whl=$(ls "$WHEELS"/vllm-"$VLLM_VERSION"-*.whl 2>/dev/null | head -n1 || true)
if [ -z "$whl" ]; then
  "$VENV/bin/python" -m pip download -q --no-deps "vllm==$VLLM_VERSION" -d "$WHEELS"
  whl=$(ls "$WHEELS"/vllm-"$VLLM_VERSION"-*.whl | head -n1)
fi
pip_ install --no-deps "$whl"
pip_ install packaging

# vLLM's own runtime deps minus the GPU-only ones, taken from the wheel's metadata (no hand list to rot).
deps=$("$VENV/bin/python" - "$SKIP_RE" <<'PY'
import re, sys
from importlib.metadata import requires
from packaging.requirements import Requirement
skip = re.compile(sys.argv[1])
out = []
for line in requires("vllm") or []:
    r = Requirement(line)
    if r.marker and not r.marker.evaluate({"extra": ""}):
        continue
    if skip.match(r.name.lower()):
        continue
    out.append(str(r).split(";")[0])
print("\n".join(out))
PY
)
mapfile -t deplist <<<"$deps"
pip_ install "${deplist[@]}" "torch==$TORCH_VERSION"
if "$VENV/bin/python" -m pip list 2>/dev/null | grep -qiE '^nvidia-'; then
  echo "setup-venv: a CUDA package slipped in; aborting" >&2
  exit 3
fi

# Report "+cpu" so vllm.platforms picks the CPU platform (platforms/__init__.py: vllm_version_matches_substr("cpu")).
meta=$(ls -d "$VENV"/lib/python3*/site-packages/vllm-"$VLLM_VERSION".dist-info)/METADATA
sed -i "s/^Version: $VLLM_VERSION\$/Version: $VLLM_VERSION+cpu/" "$meta"

probe >/dev/null || { echo "setup-venv: vLLM parser does not import:" >&2; "$VENV/bin/python" -c 'from vllm.entrypoints.openai.cli_args import make_arg_parser' >&2; exit 4; }
echo "vllm venv ready: $(probe)"
echo "$VENV"
