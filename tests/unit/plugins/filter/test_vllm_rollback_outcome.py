"""airgap.vllm.vllm_rollback_outcome as vllm_service's tasks/start.yml calls it: the failed start's closing sentences
from the health wait of the restarted last good configuration (composed in _unit_wait.rollback_outcome, not Jinja)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import yaml

OUTCOME = "{{ back | airgap.vllm.vllm_rollback_outcome(name, dir ~ '/last-good', exists, noted) }}"
START = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "roles", "vllm_service", "tasks", "start.yml")


def test_healthy_again_and_a_refused_plan_noted(render):
    got = render(
        OUTCOME, back={"status": 200, "elapsed": 7}, name="vllm", dir="/etc/airgap-vllm/vllm", exists=True, noted=True
    )
    assert got["headline"] == "vllm did not come up healthy with the new configuration."
    assert got["rollback"] == (
        "Rolled back to the last good configuration (/etc/airgap-vllm/vllm/last-good): it is healthy again (after 7 s)."
    )
    assert got["refused"].startswith("This plan is noted as refused")


def test_nothing_to_roll_back_to(render):
    got = render(OUTCOME, back={"skipped": True}, name="vllm", dir="/d", exists=False, noted=False)
    assert got["rollback"] == "No earlier good configuration exists: the service is stopped."
    assert got["refused"] == ""


def test_the_roles_failure_only_lists_the_sentences():
    """No sentence of the rollback is joined in Jinja: each line of the failure is one value, no `~` and no inline
    if/else in the message."""
    with open(START) as f:
        tasks = yaml.safe_load(f)
    fails = []

    def walk(node):
        if isinstance(node, dict):
            if "ansible.builtin.fail" in node and node.get("name", "").startswith("Fail with vLLM's own reason"):
                fails.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(tasks)
    assert len(fails) == 1
    lines = fails[0]["ansible.builtin.fail"]["msg"]
    assert "{{ __vllm_service_outcome.rollback }}" in lines
    for line in lines:
        assert "~" not in line and " if " not in line, line
    assert "airgap.vllm.vllm_rollback_outcome" in fails[0]["vars"]["__vllm_service_outcome"]
