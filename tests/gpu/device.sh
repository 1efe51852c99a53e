#!/usr/bin/env bash
# The GPU harness's command on the device machine (tests/gpu/README.md). Run from the checkout's root there:
#
#   bash build/gpu-carry/harness/device.sh CASE [CASE...]
#
# Unpacks what prepare.sh staged (once per machine: a warm machine keeps /tmp/gpu, checked by the payload's
# sha256), reports the image (check_env.py), runs the cases in order with harness.py under one deadline (a case
# is skipped when too little of the call is left), and leaves in $OUT: device.txt (this output), summary.json,
# work.tar.xz (every case's plan, confirm, load, full engine log) and <case>.log (the trimmed engine log).
# Environment: GPU_CARRY (default build/gpu-carry), GPU_CALL_SECONDS (default 560: the device tool allows 600 a
# command; the bundling after the last case needs the rest), GPU_VIA (ansible | python; default ansible).
set -u
T0=$(date +%s)
CARRY=${GPU_CARRY:-build/gpu-carry}
G=/tmp/gpu
OUT=${OUT:-$G/out}
DEADLINE=$((T0 + ${GPU_CALL_SECONDS:-560}))
VIA=${GPU_VIA:-ansible}
mkdir -p "$G" "$OUT"
exec > >(tee -a "$OUT/device.txt") 2>&1

say() { echo "[device $(date +%H:%M:%S) +$(($(date +%s) - T0))s] $*"; }

unpack() {  # unpack FILE.tar.xz into $G
  if command -v xz >/dev/null; then
    xz -dc -T0 "$1" | tar -x -C "$G"
  else
    python3 -c "import sys, tarfile; tarfile.open(sys.argv[1], 'r:xz').extractall(sys.argv[2])" "$1" "$G"
  fi
}

want=$(cat "$CARRY/payload.sha256")
if [ "$(cat "$G/payload.sha256" 2>/dev/null)" = "$want" ]; then
  say "payload already unpacked (warm machine)"
elif [ ! -e "$CARRY/site-deps.tar.xz" ]; then
  say "$CARRY only adds to the base payload (prepare.sh's DEST), which this machine does not hold: carry the base first"
  exit 4
else
  say "unpacking $(du -sh "$CARRY" | cut -f1) from $CARRY"
  rm -rf "$G/site" "$G/models" "$G/collections"
  for t in "$CARRY"/*.tar.xz; do unpack "$t" || { say "unpack of $t failed"; exit 2; }; done
  echo "$want" >"$G/payload.sha256"
  say "unpacked"
fi

for t in "$CARRY"/add-*.tar.xz; do  # parts carried alone onto the base (pack.py: the MoE kernels)
  [ -e "$t" ] || continue
  unpack "$t" || { say "unpack of $t failed"; exit 2; }
  say "added $(basename "$t")"
done

export PYTHONPATH="$G/site${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 LC_ALL=C.UTF-8 LANG=C.UTF-8
say "card: $(nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv,noheader 2>&1)"
python3 "$CARRY/harness/check_env.py" "$G/site" || say "check_env failed"
t=$(date +%s)
if ! python3 -c "import vllm.entrypoints.openai.api_server, vllm.v1.engine.core" >"$G/import.log" 2>&1; then
  tail -25 "$G/import.log"
  say "vLLM does not import: no case runs"
  exit 3
fi
say "vLLM imports ($(($(date +%s) - t)) s)"
if [ "$VIA" = ansible ] && ! python3 -c "import ansible.cli.playbook" 2>/dev/null; then
  say "ansible-core does not import here: the module_utils are called directly (--via python)"
  VIA=python
fi
cat "$CARRY/MANIFEST.json" 2>/dev/null | python3 -c "import json,sys; m=json.load(sys.stdin); print('collection commit', m.get('collection_commit'))" || true

mkdir -p "$G/work"
say "cases: $* (via $VIA, deadline +$((DEADLINE - T0))s)"
python3 "$CARRY/harness/harness.py" "$@" --work "$G/work" --out "$OUT" --models "$G/models" \
  --collections "$G/collections" --via "$VIA" --deadline "$DEADLINE"
rc=$?
say "cases done (rc $rc)"
tar -C "$G" --exclude=.ansible-tmp -cf - work | xz -6 -T0 >"$OUT/work.tar.xz"
python3 "$CARRY/harness/harness.py" --summary --work "$G/work" --out "$OUT" --models "$G/models" --collections "$G/collections"
say "call took $(($(date +%s) - T0)) s"
exit $rc
