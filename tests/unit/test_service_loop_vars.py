"""The vllm_plan and vllm_service roles loop over the host's services themselves (tasks/main.yml): each service is one
data object (the loop item: its name, its variables with secrets redacted, its plan), and the included tasks read
every per-service setting through one role-private alias (vars/main.yml: __vllm_plan_settings,
__vllm_service_settings). A new per-service setting is added in argument_specs and defaults only; this test keeps the
shape from drifting: the loops hand no setting over one by one, and no task reads a per-service setting bare (it
would get the role's own value, not the service's)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import re

import pytest
import yaml

from ansible_collections.airgap.vllm.plugins.module_utils.service._services import HOST_WIDE, PER_SERVICE

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The loops over the services: (role, tasks file, loop variable, the identity the loop hands over).
LOOPS = [
    ("vllm_plan", "main.yml", "__vllm_plan_instance", {"vllm_service_name"}),
    ("vllm_service", "main.yml", "__vllm_service_instance", {"vllm_service_name", "vllm_service_plan"}),
    ("vllm_service", "loadcheck_services.yml", "__vllm_service_instance", {"vllm_service_name", "vllm_service_plan"}),
]
ALIAS = {"vllm_plan": "__vllm_plan_settings", "vllm_service": "__vllm_service_settings"}
# Files that run outside the services' loop, on the role's own variables (the uninstall of one service by name).
OUTSIDE_LOOP = {"uninstall.yml", "main.yml", "loadcheck_services.yml"}
CONDITIONALS = ("when", "that", "failed_when", "changed_when", "until")


def _load(*parts):
    with open(os.path.join(ROOT, *parts)) as handle:
        return yaml.safe_load(handle)


def _options(role):
    return set(_load("roles", role, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"])


def _per_service(role):
    return sorted(n for n in _options(role) if n not in HOST_WIDE and n != "vllm_service_name")


def _loop_tasks(role, tasks_file):
    return [
        t for t in _load("roles", role, "tasks", tasks_file) if "ansible.builtin.include_tasks" in t and "loop" in t
    ]


@pytest.mark.parametrize("role,tasks_file,loop_var,identity", LOOPS)
def test_one_loop_over_the_services_hands_over_their_identity_alone(role, tasks_file, loop_var, identity):
    loops = _loop_tasks(role, tasks_file)
    assert len(loops) == 1
    assert loops[0]["loop_control"]["loop_var"] == loop_var
    given = dict(loops[0].get("vars") or {})
    assert set(given) == identity
    assert given["vllm_service_name"] == "{{ %s.name }}" % loop_var
    if "vllm_service_plan" in given:
        assert given["vllm_service_plan"] == "{{ %s.plan }}" % loop_var


@pytest.mark.parametrize("role", sorted(ALIAS))
def test_the_settings_alias_is_the_loop_items_variables(role):
    value = _load("roles", role, "vars", "main.yml")[ALIAS[role]]
    loop_var = "__%s_instance" % role
    # In the loop, the loop item's variables; a task file included on its own (tasks_from: loadcheck.yml) gets the
    # role's own (vllm_service only).
    assert value.strip().startswith("{{ %s.vars" % loop_var) or value.strip().startswith("{{ (%s.vars" % loop_var)
    if value.strip().startswith("{{ ("):
        assert "if %s is defined" % loop_var in value
    if role == "vllm_service":
        # The secrets (redacted in the printable loop item) come from the no_log fact, by the service's name.
        assert "combine(__vllm_service_secrets[%s.name])" % loop_var in value


def _jinja(node, out):
    """Every Jinja text of a loaded tasks/vars file: {{ }} / {% %} blocks and the bare conditionals."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in CONDITIONALS:
                for cond in value if isinstance(value, list) else [value]:
                    if isinstance(cond, str):
                        out.append(cond)
            elif key != "name":
                _jinja(value, out)
    elif isinstance(node, list):
        for item in node:
            _jinja(item, out)
    elif isinstance(node, str):
        out.extend(re.findall(r"\{\{.*?\}\}|\{%.*?%\}", node, re.S))
    return out


def _role_texts(role):
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", role, "tasks", "*.yml"))):
        if os.path.basename(path) in OUTSIDE_LOOP:
            continue
        with open(path) as handle:
            yield path, _jinja(yaml.safe_load(handle), [])
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", role, "vars", "*.yml"))):
        with open(path) as handle:
            yield path, _jinja(yaml.safe_load(handle), [])
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", role, "templates", "*"))):
        with open(path) as handle:
            yield path, re.findall(r"\{\{.*?\}\}|\{%.*?%\}", handle.read(), re.S)


@pytest.mark.parametrize("role", sorted(ALIAS))
def test_no_task_reads_a_per_service_setting_bare(role):
    names = _per_service(role)
    assert names and all(PER_SERVICE.match(n) for n in names)
    bare = re.compile(r"(?<![\w.'\"])(%s)(?!\w)" % "|".join(names))
    found = []
    for path, texts in _role_texts(role):
        for text in texts:
            found.extend("%s: %s" % (os.path.relpath(path, ROOT), m) for m in bare.findall(text))
    assert not found, "read through %s.<name> instead: %s" % (ALIAS[role], found)


def test_the_check_sees_a_bare_read():
    names = _per_service("vllm_service")
    bare = re.compile(r"(?<![\w.'\"])(%s)(?!\w)" % "|".join(names))
    texts = _jinja([{"name": "x", "when": "vllm_service_loadcheck", "a": {"b": "{{ vllm_service_port | int }}"}}], [])
    assert [bare.findall(t) for t in texts] == [["vllm_service_loadcheck"], ["vllm_service_port"]]
    assert not bare.findall("{{ __vllm_service_settings.vllm_service_port }}")


def test_nothing_one_per_host_is_given_per_service():
    for role in ("vllm_plan", "vllm_service"):
        options = _options(role)
        assert "%s_instances" % role in options and "%s_instances" % role in HOST_WIDE


def test_a_number_given_per_service_is_never_tested_for_truth_as_text():
    """A number an inventory gives as text ("0" is true): a number's `or omit` / `if` in the roles' tasks must go
    through | int or | float first (molecule uninstall's two services: ttft_p95_max_ms "0" reached the load check
    as a threshold of 0)."""
    for role in ("vllm_plan", "vllm_service"):
        specs = _load("roles", role, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
        numbers = [n for n, o in specs.items() if (o or {}).get("type") in ("int", "float") and n not in HOST_WIDE]
        for path in glob.glob(os.path.join(ROOT, "roles", role, "tasks", "*.yml")):
            with open(path) as handle:
                text = handle.read()
            for name in numbers:
                ref = r"(?:%s\.)?%s" % (ALIAS[role], name)
                found = re.search(r"\b%s\s+(or|if|and)\b|\b(if|not)\s+%s\b" % (ref, ref), text)
                assert not found, "%s: %s is tested for truth as text" % (os.path.relpath(path, ROOT), name)
