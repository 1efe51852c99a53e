#!/usr/bin/env bash
# ansible-test sanity on a copy of the collection laid out as ansible_collections/airgap/vllm.
# ansible-test bootstraps pip from a host CI cannot reach; it first looks for a cached bootstrap
# script, so we place a small one that uses the ensurepip + PyPI that are reachable.
# AIRGAP_SANITY_CORE=2.16 runs the ansible-test of that ansible-core (a venv cached under ~/.cache/airgap-vllm) with
# its own tests/sanity/ignore-<core>.txt: the collection claims 2.16 and 2.17, and each release's sanity differs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
core=${AIRGAP_SANITY_CORE:-}
if [ -n "$core" ]; then
  venv="$HOME/.cache/airgap-vllm/ansible-core-$core"
  if ! "$venv/bin/ansible-test" --version 2>/dev/null | grep -q "^ansible-test version $core\."; then
    rm -rf "$venv" && python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "ansible-core==$core.*"
  fi
  export PATH="$venv/bin:$PATH"
fi
work=${AIRGAP_SANITY_DIR:-/tmp/airgap-sanity${core:+-$core}}
dest="$work/ansible_collections/airgap/vllm"
rm -rf "$work"; mkdir -p "$dest"
git -C "$root" ls-files -co --exclude-standard -z | (cd "$root" && xargs -0 cp --parents -t "$dest" 2>/dev/null || true)
cd "$dest"
git init -q . && git add -A >/dev/null && git -c user.email=ci@localhost -c user.name=ci commit -qm sanity >/dev/null

cache="$HOME/.ansible/test/cache"
mkdir -p "$cache"
for ver in 23_1_2 24_0 24_2 25_1_1 25_2; do
  cat > "$cache/get_pip_$ver.py" <<'PY'
import ensurepip, subprocess, sys
ensurepip.bootstrap(upgrade=True)
args = [a for a in sys.argv[1:]]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", "--cert", "/etc/ssl/certs/ca-certificates.crt"] + args))
PY
done
py=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
ansible-test sanity --requirements --python "$py" --color no "$@"
