#!/usr/bin/env bash
# The committed lint settings, enforced: ruff (ruff.toml) on all Python, its lint and its formatter (ruff format
# --check: the tree as `ruff format .` leaves it), yamllint (.yamllint) on all YAML, and every role's README.md
# current with its meta/argument_specs.yml (tests/role_readme.py --check).
# Each check runs even when an earlier one failed. Usage: bash tests/lint-config.sh
set -uo pipefail
cd "$(dirname "$0")/.."
rc=0
for tool in ruff yamllint; do
  command -v "$tool" >/dev/null 2>&1 || { echo "$tool is not installed: python3 -m pip install -r tests/requirements-ci.txt"; rc=1; }
done
if command -v ruff >/dev/null 2>&1; then
  echo "--- ruff ($(ruff --version))"
  ruff check --no-cache --quiet . && echo "ruff: clean" || rc=1
  echo "--- ruff format"
  ruff format --check --no-cache . && echo "ruff format: clean" || { echo "to fix: ruff format ."; rc=1; }
fi
if command -v yamllint >/dev/null 2>&1; then
  echo "--- yamllint ($(yamllint --version))"
  yamllint --strict . && echo "yamllint: clean" || rc=1
fi
echo "--- role READMEs"
python3 tests/role_readme.py --check && echo "role READMEs: current" || rc=1
exit $rc
