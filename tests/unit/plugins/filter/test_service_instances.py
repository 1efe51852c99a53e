"""airgap.vllm.service_instances as site.yml calls it: the host's values as the play sees them (the roles' defaults
included, since site.yml imports both roles); a name nobody set is the default service's."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from ansible.errors import AnsibleFilterError

EXPR = "{{ services | airgap.vllm.service_instances(host) }}"


def test_an_empty_list_is_the_host_service_with_the_values_given(render):
    host = {
        "vllm_service_name": "",
        "vllm_service_port": 8000,
        "vllm_plan_gpus": [],
        "vllm_plan_gpu_memory_utilization": 0.93,
        "vllm_plan_kv_offloading_gib": 0,
    }
    r = render(EXPR, services=[], host=host)
    assert r["preflight"] == [{"name": "vllm", "port": 8000, "gpus": [], "gpu_memory_utilization": 0.93}]
    del r["preflight"]
    assert r == {
        "services": [{"name": "vllm", "port": 8000, "gpus": [], "gpu_memory_utilization": 0.93, "settings": {}}],
        "variables": [],
        "gpu_memory_utilization": 0.93,
        "kv_offloading": False,
    }


def test_values_nobody_set_stay_unknown_and_the_name_is_the_default_service(render):
    r = render(EXPR, services=[], host={"vllm_service_name": None, "vllm_service_port": ""})
    assert r["services"] == [{"name": "vllm", "port": None, "gpus": [], "gpu_memory_utilization": None, "settings": {}}]
    assert r["gpu_memory_utilization"] is None and r["kv_offloading"] is False


def test_services_without_a_known_port_are_not_a_port_clash(render):
    services = [
        {"vllm_service_name": "a", "vllm_plan_gpus": ["0"]},
        {"vllm_service_name": "b", "vllm_plan_gpus": ["1"]},
    ]
    r = render(EXPR, services=services, host={})
    assert [s["name"] for s in r["services"]] == ["a", "b"]


def test_a_service_without_a_port_takes_the_host_port(render):
    services = [
        {"vllm_service_name": "a", "vllm_plan_gpus": ["0"]},
        {"vllm_service_name": "b", "vllm_plan_gpus": ["1"], "vllm_service_port": 9001},
    ]
    r = render(EXPR, services=services, host={"vllm_service_port": 9000})
    assert [(s["name"], s["port"]) for s in r["services"]] == [("a", 9000), ("b", 9001)]


def test_a_list_that_does_not_hold_fails_with_every_problem(render):
    services = [{"vllm_service_name": "a"}, {"vllm_service_name": "a"}]
    with pytest.raises(AnsibleFilterError) as err:
        render(EXPR, services=services, host={})
    text = str(err.value)
    assert "airgap_vllm_services does not hold" in text
    assert "airgap_vllm_services[1].vllm_service_name" in text and "airgap_vllm_services[0].vllm_plan_gpus" in text


@pytest.mark.parametrize("name", ["docker", "sshd", "vllm\n", ".."])
def test_a_name_that_is_not_a_service_name_fails_the_filter(render, name):
    with pytest.raises(AnsibleFilterError, match="vllm_service_name"):
        render(EXPR, services=[{"vllm_service_name": name, "vllm_plan_gpus": ["0"]}], host={})
    with pytest.raises(AnsibleFilterError, match="vllm_service_name"):
        render(EXPR, services=[], host={"vllm_service_name": name})


def test_an_odd_utilisation_fails_the_filter_not_a_traceback(render):
    for value in ([1], {"a": 1}, "much"):
        with pytest.raises(AnsibleFilterError):
            render(EXPR, services=[{"vllm_service_name": "a", "vllm_plan_gpu_memory_utilization": value}], host={})
