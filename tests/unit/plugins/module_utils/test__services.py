"""Several vLLM services on one host: what the list may hold, and what each service ends up with."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.airgap.vllm.plugins.action.validate import load_role_options
from ansible_collections.airgap.vllm.plugins.module_utils.service import _services as S
from ansible_collections.airgap.vllm.plugins.module_utils.service._services import (
    instance_plan,
    instances,
    recorded_plans,
)

HOST = {"vllm_service_name": "vllm", "vllm_service_port": 8000, "vllm_plan_gpus": []}


def options():
    out = {}
    for opts in load_role_options(roles=["vllm_plan", "vllm_service"]).values():
        out.update(opts)
    return out


def lines(problems):
    return [p.line() for p in problems]


def test_no_list_is_one_service_from_the_host():
    r = S.resolve([], dict(HOST, vllm_service_name="chat", vllm_plan_gpus=["1"]))
    assert r.pop("preflight") == [{"name": "chat", "port": 8000, "gpus": ["1"]}]
    assert r == {
        "services": [{"name": "chat", "port": 8000, "gpus": ["1"], "gpu_memory_utilization": None, "settings": {}}],
        "variables": [],
        "gpu_memory_utilization": None,
        "kv_offloading": False,
    }


def test_the_host_wide_values_come_from_every_service():
    services = [
        {"vllm_service_name": "a", "vllm_plan_gpus": ["0"], "vllm_plan_gpu_memory_utilization": 0.8},
        {
            "vllm_service_name": "b",
            "vllm_plan_gpus": ["1"],
            "vllm_service_port": 8001,
            "vllm_plan_kv_offloading_gib": 64,
        },
    ]
    host = dict(HOST, vllm_plan_gpu_memory_utilization=0.93, vllm_plan_kv_offloading_gib=0)
    r = S.resolve(services, host)
    assert r["gpu_memory_utilization"] == 0.93 and r["kv_offloading"] is True  # b: the host's 0.93; b offloads
    services[1]["vllm_plan_kv_offloading_gib"] = 0
    assert S.resolve(services, host)["kv_offloading"] is False
    # A service that says nothing takes the host's offload; so does the host's own single service.
    assert S.resolve(services[:1], dict(host, vllm_plan_kv_offloading_gib=32))["kv_offloading"] is True
    assert S.resolve([], dict(host, vllm_plan_kv_offloading_gib="16"))["kv_offloading"] is True
    assert S.resolve([], host)["gpu_memory_utilization"] == 0.93


def test_two_services_on_their_own_gpus_and_ports():
    services = [
        {"vllm_service_name": "vllm", "vllm_plan_gpus": ["0"]},
        {
            "vllm_service_name": "vllm-b",
            "vllm_plan_gpus": [1],
            "vllm_service_port": 8001,
            "vllm_plan_concurrency": 8,
            "vllm_service_api_keys": ["sk-b"],
        },
    ]
    assert S.service_problems(services, HOST, options()) == []
    r = S.resolve(services, HOST)
    got = [(s["name"], s["port"], s["gpus"]) for s in r["services"]]
    assert got == [("vllm", 8000, ["0"]), ("vllm-b", 8001, ["1"])]
    assert r["variables"] == [
        "vllm_plan_concurrency",
        "vllm_plan_gpus",
        "vllm_service_api_keys",
        "vllm_service_name",
        "vllm_service_port",
    ]
    assert r["services"][1]["settings"]["vllm_plan_concurrency"] == 8


def test_every_problem_is_named_with_its_place():
    services = [
        {"vllm_service_name": "a", "vllm_plan_gpus": ["0", "1"]},
        {"vllm_service_name": "a", "vllm_plan_gpus": ["1"]},  # name, port and GPU 1 shared
        {"vllm_plan_gpus": ["2"], "vllm_service_port": 8002},  # no name
        {"vllm_service_name": "c", "vllm_service_port": 8003},  # no GPUs with several services
        {
            "vllm_service_name": "d",
            "vllm_service_port": 8004,
            "vllm_plan_gpus": ["3"],
            "vllm_service_image": "x",
            "preflight_port": 1,
            "vllm_plan_concurency": 2,
            "vllm_plan_concurrency": "many",
        },
        "not a mapping",
    ]
    got = "\n".join(lines(S.service_problems(services, HOST, options())))
    for want in [
        "airgap_vllm_services[1].vllm_service_name: got 'a' (a string); wants a name no other service uses "
        "(airgap_vllm_services[0] has it)",
        "airgap_vllm_services[1].vllm_service_port: got 8000 (an integer); wants a host port no other service uses",
        "airgap_vllm_services[1].vllm_plan_gpus: got ['1'] (a list); wants GPUs no other service uses, or exactly "
        "the GPUs of the services it shares them with (airgap_vllm_services[0] has 0, 1: a card is shared whole",
        "airgap_vllm_services[2].vllm_service_name: got nothing (not set)",
        "airgap_vllm_services[3].vllm_plan_gpus: got all GPUs (not set)",
        "airgap_vllm_services[4].vllm_service_image: got 'x' (a string); wants nothing: vllm_service_image is one per host",
        "airgap_vllm_services[4].preflight_port: got 1 (an integer); wants only vllm_plan_* and vllm_service_*",
        "airgap_vllm_services[4].vllm_plan_concurency: got 2 (an integer); wants a variable of the vllm_plan or "
        "vllm_service role",
        "airgap_vllm_services[4].vllm_plan_concurrency: got 'many' (a string); wants an integer",
        "airgap_vllm_services[5]: got 'not a mapping' (a string); wants a mapping",
    ]:
        assert want in got, want
    with pytest.raises(ValueError, match=r"airgap_vllm_services\[1\].vllm_service_name"):
        S.resolve(services, HOST)


def test_services_listing_the_same_gpus_share_them():
    # The plan stage splits the card between them (_plan_share) and refuses a split that cannot fit.
    rag = [
        {"vllm_service_name": "chat", "vllm_plan_gpus": ["0"], "vllm_service_port": 8000},
        {"vllm_service_name": "embed", "vllm_plan_gpus": ["0"], "vllm_service_port": 8001},
        {"vllm_service_name": "rerank", "vllm_plan_gpus": [0], "vllm_service_port": 8002},
        {"vllm_service_name": "other", "vllm_plan_gpus": ["1", "2"], "vllm_service_port": 8003},
    ]
    assert S.service_problems(rag, HOST, options()) == []
    part = rag + [{"vllm_service_name": "part", "vllm_plan_gpus": ["2"], "vllm_service_port": 8004}]
    assert [p.variable for p in S.service_problems(part, HOST, options())] == ["airgap_vllm_services[4].vllm_plan_gpus"]


def test_a_single_service_may_take_every_gpu():
    assert S.service_problems([{"vllm_service_name": "only"}], HOST, options()) == []


def test_not_a_list():
    assert lines(S.service_problems({"vllm_service_name": "x"}, HOST)) == [
        "airgap_vllm_services: got {'vllm_service_name': 'x'} (a mapping); wants a list of mappings, one per vLLM "
        "service of the host"
    ]


@pytest.mark.parametrize("name", ["../etc", "a b", "", "-x", "x" * 64])
def test_hostile_names_are_refused(name):
    problems = S.service_problems([{"vllm_service_name": name}], HOST)
    assert [p.variable for p in problems] == ["airgap_vllm_services[0].vllm_service_name"]


def test_no_settings_shown_for_secrets():
    # a key is a secret: its value never appears in a problem line
    services = [
        {
            "vllm_service_name": "a",
            "vllm_service_api_keys": {"k": "sk-secret-value"},
            "vllm_service_api_key": "sk-typo-value",
        }
    ]
    got = "\n".join(lines(S.service_problems(services, HOST, options())))
    assert "vllm_service_api_keys" in got and "vllm_service_api_key:" in got
    assert "sk-secret-value" not in got and "sk-typo-value" not in got


# instances(): what the vllm_plan and vllm_service roles loop over.
HOST_VARS = {
    "vllm_service_name": "vllm",
    "vllm_service_port": 8000,
    "vllm_plan_gpus": [],
    "vllm_plan_concurrency": 4,
    "vllm_service_api_keys": ["sk-host"],
    "vllm_plan_gpu_memory_utilization": 0.93,
}


def test_an_empty_list_is_the_hosts_one_service_with_its_own_variables():
    out = instances([], HOST_VARS)
    assert out == [{"name": "vllm", "vars": HOST_VARS, "listed": False}]


def test_each_listed_service_gets_the_hosts_variables_with_its_own_over_them_and_no_other_services():
    services = [
        {"vllm_service_name": "a", "vllm_plan_gpus": ["0"], "vllm_plan_concurrency": 2},
        {"vllm_service_name": "b", "vllm_plan_gpus": ["1"], "vllm_service_port": 8001},
    ]
    a, b = instances(services, HOST_VARS)
    assert a["listed"] and b["listed"]
    assert a["vars"]["vllm_plan_concurrency"] == 2 and b["vars"]["vllm_plan_concurrency"] == 4
    assert a["vars"]["vllm_service_port"] == 8000 and b["vars"]["vllm_service_port"] == 8001
    assert (a["vars"]["vllm_service_name"], b["vars"]["vllm_service_name"]) == ("a", "b")
    assert b["vars"]["vllm_service_api_keys"] == ["sk-host"]
    assert (
        HOST_VARS["vllm_plan_concurrency"] == 4 and "vllm_plan_gpus" in HOST_VARS and HOST_VARS["vllm_plan_gpus"] == []
    )


def _shared(order):
    return {"argv": ["/m"], "ledger": {"share": {"card_services": order, "order": 1}}}


def test_the_services_of_a_shared_card_start_in_the_splits_order():
    services = [
        {"vllm_service_name": "chat", "vllm_plan_gpus": ["0"]},
        {"vllm_service_name": "solo", "vllm_plan_gpus": ["1"], "vllm_service_port": 8001},
        {"vllm_service_name": "embed", "vllm_plan_gpus": ["0"], "vllm_service_port": 8002},
        {"vllm_service_name": "rerank", "vllm_plan_gpus": ["0"], "vllm_service_port": 8003},
    ]
    card = ["embed", "rerank", "chat"]  # the split's order: the encoders first, the one taking the rest last
    plans = {"chat": _shared(card), "solo": {"argv": ["/s"]}, "embed": _shared(card), "rerank": _shared(card)}
    # The card's services take the card's places in the list, in the split's order; the others keep theirs.
    assert [i["name"] for i in instances(services, HOST_VARS, plans)] == ["embed", "solo", "rerank", "chat"]
    # The plan role (no plans) plans them in the operator's order.
    assert [i["name"] for i in instances(services, HOST_VARS)] == ["chat", "solo", "embed", "rerank"]
    # A service without a plan (skipped) keeps its place.
    del plans["embed"]
    assert [i["name"] for i in instances(services, HOST_VARS, plans)] == ["rerank", "solo", "embed", "chat"]


def test_a_list_that_does_not_hold_raises_with_every_problem():
    with pytest.raises(ValueError) as err:
        instances([{"vllm_service_name": "a", "vllm_service_image": "x"}, {"vllm_service_name": "a"}], HOST_VARS)
    assert "vllm_service_image" in str(err.value) and "airgap_vllm_services[1].vllm_service_name" in str(err.value)


def test_each_service_runs_the_plan_made_for_its_name():
    plans = {"a": {"argv": ["/m", "--port", "8000"]}, "vllm": {"argv": ["/m"]}}
    services = [
        {"vllm_service_name": "a", "vllm_plan_gpus": ["0"]},
        {"vllm_service_name": "b", "vllm_plan_gpus": ["1"], "vllm_service_port": 8001},
    ]
    a, b = instances(services, dict(HOST_VARS, vllm_service_plan={"argv": ["/other"]}), plans)
    assert a["plan"] == plans["a"]
    # b has none: a skipped result (the role says so), never the host's or another service's plan.
    assert b["plan"] == {"skipped": True, "skip_reason": "no plan recorded for b"}


def test_the_hosts_one_service_falls_back_to_its_own_plan_then_to_a_hand_given_argv():
    assert instance_plan("vllm", {}, {"argv": ["/m"]}, listed=False) == {"argv": ["/m"]}
    assert instance_plan("vllm", {"vllm": {"argv": ["/n"]}}, {"argv": ["/m"]}, listed=False) == {"argv": ["/n"]}
    assert instance_plan("vllm", {}, {}, listed=False, own_argv=["/m"]) == {}
    assert instance_plan("vllm", {}, {}, listed=False)["skipped"] is True
    assert instance_plan("vllm", None, {"argv": ["/m"]}, listed=True)["skipped"] is True


def test_recorded_plans_by_service_leave_out_records_without_a_plan():
    records = {"vllm": {"facts": {"vllm_plan_result": {"argv": ["/m"]}}}, "b": {"facts": {}}, "c": None, "d": "x"}
    assert recorded_plans(records) == {"vllm": {"argv": ["/m"]}}
    assert recorded_plans(None) == {}


# part: what the roles may print (public) and what they take apart, no_log (secret) - issue 42.
SECRET_SERVICES = [
    {
        "vllm_service_name": "a",
        "vllm_plan_gpus": ["0"],
        "vllm_service_api_keys": ["sk-service-a-0123456789"],
        "vllm_service_extra_env": {"HF_TOKEN": "hf_service_a_0123456789", "VLLM_CPU_KVCACHE_SPACE": "1"},
    },
    {"vllm_service_name": "b", "vllm_plan_gpus": ["1"], "vllm_service_port": 8001},
]


def test_the_public_part_holds_no_secret_value_but_says_what_is_set():
    a, b = instances(SECRET_SERVICES, HOST_VARS, {}, part="public")
    assert "sk-service-a" not in repr(a) and "hf_service_a" not in repr(a) and "sk-host" not in repr(b)
    assert a["vars"]["vllm_service_api_keys"] == ["(hidden)"]
    assert a["vars"]["vllm_service_extra_env"] == {"HF_TOKEN": "(hidden)", "VLLM_CPU_KVCACHE_SPACE": "1"}
    assert a["vars"]["vllm_plan_concurrency"] == 4 and a["plan"]["skipped"] is True
    assert b["vars"]["vllm_service_api_keys"] == ["(hidden)"] and b["vars"]["vllm_service_port"] == 8001


def test_the_secret_part_is_each_services_secret_variables_by_name_as_given():
    secrets = instances(SECRET_SERVICES, HOST_VARS, {}, part="secret")
    assert secrets == {
        "a": {
            "vllm_service_api_keys": ["sk-service-a-0123456789"],
            "vllm_service_extra_env": {"HF_TOKEN": "hf_service_a_0123456789", "VLLM_CPU_KVCACHE_SPACE": "1"},
        },
        "b": {"vllm_service_api_keys": ["sk-host"]},
    }
    # Unset or empty, a secret variable is still given (the role's include reads it by name).
    assert instances([], dict(HOST_VARS, vllm_service_api_keys=[]), part="secret") == {
        "vllm": {"vllm_service_api_keys": []}
    }


def test_a_part_that_is_not_known_is_refused():
    with pytest.raises(ValueError):
        instances([], HOST_VARS, part="some")
