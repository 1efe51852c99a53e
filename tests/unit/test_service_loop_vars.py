"""The vllm_plan and vllm_service roles loop over the host's services themselves (tasks/main.yml): a listed service
gets each variable it may set through the loop's vars, one line per variable. Those lines are wiring; what a service
may set is decided in _services.HOST_WIDE and the roles' argument_specs, and this test keeps the wiring in step:
a variable added to a role is either one per host (HOST_WIDE) or given to each service."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.airgap.vllm.plugins.module_utils._secrets import is_secret_name
from ansible_collections.airgap.vllm.plugins.module_utils._services import HOST_WIDE, PER_SERVICE

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The loops over the listed services: (role, tasks file, loop variable).
LOOPS = [
    ("vllm_plan", "main.yml", "__vllm_plan_instance"),
    ("vllm_service", "main.yml", "__vllm_service_instance"),
    ("vllm_service", "loadcheck_services.yml", "__vllm_service_instance"),
]


def _load(*parts):
    with open(os.path.join(ROOT, *parts)) as handle:
        return yaml.safe_load(handle)


def _options(role):
    return set(_load("roles", role, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"])


def _loop_tasks(role, tasks_file):
    return [
        t
        for t in _load("roles", role, "tasks", tasks_file)
        if "ansible.builtin.include_tasks" in t and "listed" in str(t.get("loop"))
    ]


@pytest.mark.parametrize("role,tasks_file,loop_var", LOOPS)
def test_a_listed_service_gets_every_variable_it_may_set_from_its_own_variables(role, tasks_file, loop_var):
    listed = [t for t in _loop_tasks(role, tasks_file) if "selectattr('listed')" in t["loop"]]
    assert len(listed) == 1
    given = dict(listed[0]["vars"])
    # Its plan, picked by name (_services.instance_plan), not one of the service's settings.
    assert given.pop("vllm_service_plan", None) in (None, "{{ %s.plan }}" % loop_var)
    per_service = set(n for n in _options(role) if n not in HOST_WIDE) | {"vllm_service_name"}
    assert set(given) == per_service
    for name, value in given.items():
        assert PER_SERVICE.match(name)
        if role == "vllm_service" and is_secret_name(name):
            # The loop item carries the service's variables with secrets redacted (it may be printed); the secret
            # ones come from the no_log fact taken apart, by the service's name.
            assert value == "{{ __vllm_service_secrets[%s.name].%s }}" % (loop_var, name)
        else:
            assert value == "{{ %s.vars.%s }}" % (loop_var, name)


@pytest.mark.parametrize("role,tasks_file,loop_var", LOOPS)
def test_the_hosts_one_service_runs_with_the_roles_own_variables(role, tasks_file, loop_var):
    one = [t for t in _loop_tasks(role, tasks_file) if "rejectattr('listed')" in t["loop"]]
    assert len(one) == 1
    assert set(one[0].get("vars") or {}) <= {"vllm_service_plan"}
    assert one[0]["loop_control"]["loop_var"] == loop_var


def test_nothing_one_per_host_is_given_per_service():
    for role in ("vllm_plan", "vllm_service"):
        options = _options(role)
        assert "%s_instances" % role in options and "%s_instances" % role in HOST_WIDE


def test_a_number_given_per_service_is_never_tested_for_truth_as_text():
    """A listed service's numbers reach the role through a template, and Ansible's templating makes them text
    ("0" is true): a number's `or omit` / `if` in the roles' tasks must go through | int or | float first
    (molecule uninstall's two services: ttft_p95_max_ms "0" reached the load check as a threshold of 0)."""
    import glob
    import re

    for role in ("vllm_plan", "vllm_service"):
        specs = _load("roles", role, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
        numbers = [n for n, o in specs.items() if (o or {}).get("type") in ("int", "float") and n not in HOST_WIDE]
        for path in glob.glob(os.path.join(ROOT, "roles", role, "tasks", "*.yml")):
            with open(path) as handle:
                text = handle.read()
            for name in numbers:
                bare = re.search(r"\b%s\s+(or|if|and)\b|\b(if|not)\s+%s\b" % (name, name), text)
                assert not bare, "%s: %s is tested for truth as text" % (os.path.relpath(path, ROOT), name)
