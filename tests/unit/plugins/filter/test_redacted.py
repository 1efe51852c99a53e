"""airgap.vllm.redacted and service_vars' parts, as the roles call them (issue 42: no secret reaches any output)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

HOST = {"vllm_service_name": "vllm", "vllm_service_port": 8000, "vllm_service_api_keys": ["sk-host-0123456789"]}


def test_service_vars_is_public_unless_told(render):
    public = render("{{ s | airgap.vllm.service_vars(h, {}) }}", s=[], h=HOST)
    assert public[0]["vars"]["vllm_service_api_keys"] == ["(hidden)"]
    secret = render("{{ s | airgap.vllm.service_vars(h, part='secret') }}", s=[], h=HOST)
    assert secret == {"vllm": {"vllm_service_api_keys": ["sk-host-0123456789"]}}
    every = render("{{ s | airgap.vllm.service_vars(h, part='all') }}", s=[], h=HOST)
    assert every[0]["vars"]["vllm_service_api_keys"] == ["sk-host-0123456789"]


def test_redacted_hides_a_resolved_services_keys(render):
    services = [{"vllm_service_name": "a", "vllm_service_api_keys": ["sk-a-0123456789"]}]
    resolved = render("{{ s | airgap.vllm.service_instances({}) }}", s=services)
    out = render("{{ r | airgap.vllm.redacted }}", r=resolved)
    assert out["services"][0]["settings"]["vllm_service_api_keys"] == ["(hidden)"]
    assert out["preflight"] == resolved["preflight"]
