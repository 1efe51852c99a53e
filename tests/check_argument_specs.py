#!/usr/bin/env python
"""Fail when a role's meta/argument_specs.yml and defaults/main.yml list different variables.

prometheus.prometheus runs the same check in CI: a variable documented but not defaulted (or the
reverse) is a bug a user finds in production.
"""

import pathlib
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]

# A role's variables are prefixed with its name, except where operators already know them by another prefix: the
# uninstall role keeps the names playbooks/uninstall.yml has always taken (-e airgap_vllm_uninstall_confirm=true).
ROLE_PREFIXES = {"uninstall": "airgap_vllm_uninstall"}


def role_prefix(role):
    """The prefix of every variable of role (its name, or its entry of ROLE_PREFIXES), without the '_'."""
    return ROLE_PREFIXES.get(role, role)


def compare(role_dir):
    defaults_file = role_dir / "defaults" / "main.yml"
    specs_file = role_dir / "meta" / "argument_specs.yml"
    defaults = set((yaml.safe_load(defaults_file.read_text()) or {}) if defaults_file.exists() else {})
    if not specs_file.exists():
        return ["%s: meta/argument_specs.yml is missing" % role_dir.name]
    specs = yaml.safe_load(specs_file.read_text()) or {}
    option_specs = ((specs.get("argument_specs") or {}).get("main") or {}).get("options") or {}
    defaults_values = (yaml.safe_load(defaults_file.read_text()) or {}) if defaults_file.exists() else {}
    options = set(option_specs)
    problems = []
    for name in sorted(defaults & options):
        spec = option_specs[name] or {}
        if spec.get("required"):
            continue
        if "default" not in spec:
            problems.append("%s: %s has no documented default in argument_specs" % (role_dir.name, name))
        elif spec["default"] != defaults_values[name]:
            problems.append(
                "%s: %s default differs: argument_specs %r, defaults %r"
                % (role_dir.name, name, spec["default"], defaults_values[name])
            )
    for name in sorted(defaults - options):
        problems.append("%s: %s is in defaults but not in argument_specs" % (role_dir.name, name))
    for name in sorted(options - defaults):
        problems.append("%s: %s is in argument_specs but not in defaults" % (role_dir.name, name))
    prefix = role_prefix(role_dir.name)
    for name in sorted(defaults | options):
        if not name.startswith(prefix + "_"):
            problems.append("%s: %s is not prefixed with %s_" % (role_dir.name, name, prefix))
    return problems


def main():
    roles = sorted(p for p in (ROOT / "roles").iterdir() if p.is_dir())
    problems = [msg for role in roles for msg in compare(role)]
    for msg in problems:
        print("ERROR: " + msg)
    print("argument_specs: %d roles checked, %d problems" % (len(roles), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
