"""airgap.vllm.expose_plan as tasks/expose.yml calls it: registered loop results in, refusals as filter errors."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from ansible.errors import AnsibleFilterError

SETTINGS = dict(
    expose=True,
    address="10.20.0.15",
    port="8000",
    sources=["10.20.0.2"],
    firewalld="auto",
    zone="",
    service="vllm",
    host="gpu1",
    record="",
    daemon_json="",
)


def test_reads_from_registered_loop_results(render):
    first = render("{{ s | airgap.vllm.expose_plan([]) }}", s=SETTINGS)
    assert first["reads"] == [{"key": "state", "argv": ["firewall-cmd", "--state"]}]
    registered = [{"item": first["reads"][0], "rc": 0, "stdout": "running", "stderr": "", "changed": False}]
    second = render("{{ s | airgap.vllm.expose_plan(r) }}", s=SETTINGS, r=registered)
    assert [r["key"] for r in second["reads"]] == ["address", "zones", "default_zone"]


def test_a_skipped_loop_result_counts_as_not_asked(render):
    skipped = [{"item": {"key": "state", "argv": []}, "skipped": True}]
    assert render("{{ s | airgap.vllm.expose_plan(r) }}", s=SETTINGS, r=skipped)["reads"][0]["key"] == "state"


def test_refusal_is_a_filter_error(render):
    with pytest.raises(AnsibleFilterError, match="vllm_service_metrics_address is empty"):
        render("{{ s | airgap.vllm.expose_plan([]) }}", s=dict(SETTINGS, address=""))
