"""One setting, one default: where a role hands one of its variables straight to an airgap.vllm module option
(``option: "{{ role_var }}"``), the module's default for that option, if it has one, is the role's default. Two
defaults that disagree mean a direct caller of the module and a deployment of the role get different plans
(vllm_plan_concurrency was 4 in the role, 1 in the module and in the planner)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import importlib
import os
import re

import pytest
import yaml

from ansible_collections.airgap.vllm.plugins.module_utils.common import _module

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PREFIX = "airgap.vllm."
# A role variable handed over whole: bare, or a service's setting read through its role's alias (vars/main.yml).
ONE_VAR = re.compile(r"^\{\{\s*(?:__vllm_(?:plan|service)_settings\.)?(\w+)\s*\}\}$")


class _Spec(Exception):
    pass


def module_spec(name, monkeypatch):
    """The argument spec a module's main() builds (through the module base), without running the module."""

    def capture(**kwargs):
        raise _Spec(kwargs["argument_spec"])

    monkeypatch.setattr(_module, "AnsibleModule", capture)
    module = importlib.import_module("ansible_collections.airgap.vllm.plugins.modules." + name)
    if not hasattr(module, "main"):
        return {}  # documentation of an action plugin (vllm_front_pki): the action checks its own arguments
    with pytest.raises(_Spec) as spec:
        module.main()
    return spec.value.args[0]


def _tasks(items):
    for task in items or []:
        if isinstance(task, dict):
            yield task
            for key in ("block", "rescue", "always"):
                yield from _tasks(task.get(key))


def handed_over():
    """(role, module, option, role variable) for every option a role sets to one of its own variables as it is."""
    out = []
    for defaults in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "defaults", "main.yml"))):
        role = defaults.split(os.sep)[-3]
        for path in sorted(glob.glob(os.path.join(ROOT, "roles", role, "tasks", "*.yml"))):
            with open(path) as handle:
                for task in _tasks(yaml.safe_load(handle)):
                    for key, args in task.items():
                        if key.startswith(PREFIX) and isinstance(args, dict):
                            for option, value in args.items():
                                m = ONE_VAR.match(value) if isinstance(value, str) else None
                                if m:
                                    out.append((role, key[len(PREFIX) :], option, m.group(1)))
    return sorted(set(out))


def role_defaults(role):
    with open(os.path.join(ROOT, "roles", role, "defaults", "main.yml")) as handle:
        return yaml.safe_load(handle) or {}


def test_the_roles_hand_variables_to_modules():
    assert ("vllm_plan", "vllm_launch_plan", "concurrency", "vllm_plan_concurrency") in handed_over()


# Still two defaults that disagree, each to be given one home (issue 41): the planner's and the load check's own
# defaults are what a direct caller of the module gets, the role's what a deployment gets. An entry that comes to
# agree must leave this list (the test says so), a new disagreement cannot join it silently.
KNOWN = {
    ("bundle_min_free_bytes", "bundle_peer_fetch", "min_free_bytes"),
    ("bundle_min_free_bytes", "bundle_stage", "min_free_bytes"),
    ("vllm_plan_gpu_memory_utilization", "vllm_launch_plan", "gpu_memory_utilization"),
    ("vllm_plan_kv_cache_dtype", "vllm_launch_plan", "kv_cache_dtype"),
    ("vllm_plan_num_speculative_tokens", "vllm_launch_plan", "num_speculative_tokens"),
    ("vllm_plan_pin_measured_kv_cache", "vllm_launch_plan", "pin_measured_kv_cache"),
    ("vllm_service_loadcheck_profiles", "vllm_load_check", "profiles"),
}


def disagreements(monkeypatch):
    """{(role variable, module, option): (role default, module default)} where both are opinions and differ.

    Not counted: a role default that is a template (derived from another variable: airgap_vllm_docker_bin), and a
    module default that is the empty value ('', [], {}): "nothing given", not a second opinion."""
    specs, out = {}, {}
    for role, module, option, var in handed_over():
        if module not in specs:
            specs[module] = module_spec(module, monkeypatch)
        spec, defaults = specs[module].get(option, {}), role_defaults(role)
        if var not in defaults or "default" not in spec or spec["default"] in ("", [], {}):
            continue
        if isinstance(defaults[var], str) and "{{" in defaults[var]:
            continue
        if spec["default"] != defaults[var]:
            out[(var, module, option)] = (defaults[var], spec["default"])
    return out


def test_a_module_default_is_the_role_default_it_stands_for(monkeypatch):
    found = disagreements(monkeypatch)
    new = ["%s: %r, %s %s: %r" % (k[0], v[0], k[1], k[2], v[1]) for k, v in sorted(found.items()) if k not in KNOWN]
    assert new == [], "a setting with two defaults that disagree: " + "; ".join(new)
    assert sorted(KNOWN - set(found)) == [], "these agree now: take them out of KNOWN"
