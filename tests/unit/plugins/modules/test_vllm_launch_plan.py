"""vllm_launch_plan as Ansible runs it: NVML facts in, GPU selection, extras, refusals as failures."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.planner import _planner as P
from ansible_collections.airgap.vllm.plugins.modules import vllm_launch_plan as M

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "models", "qwen3.x-27b-fp8")
NVML = [
    {
        "index": i,
        "uuid": "GPU-%08d-1111-2222-3333-444444444444" % i,
        "name": "NVIDIA RTX 6000 Ada Generation",
        "memory_total": 51527024640,
        "compute_capability": "8.9",
    }
    for i in range(2)
]


def base(**kw):
    args = dict(
        model_dir=FIXTURE,
        nvml_gpus=NVML,
        concurrency=4,
        kv_cache_dtype="fp8_e4m3",
        gpu_memory_utilization=0.93,
        docker_version="24.0.7",
        kernel="5.15.0",
    )
    args.update(kw)
    return args


def test_nvml_facts_replace_budget_and_capability(run_module):
    r = run_module(M, **base())
    assert not r.get("failed") and not r["changed"]
    assert r["ledger"]["gpu_total_bytes"] == 51527024640 and r["ledger"]["compute_capability"] == "8.9"
    assert r["docker_options"][:2] == ["--gpus", "all"]
    assert "--log-opt" in r["docker_options"]
    # The re-plan inputs carry the resolved budget, not the NVML list.
    assert "nvml_gpus" not in r["inputs"] and r["inputs"]["gpu_total_bytes"] == 51527024640
    again = P.plan(r["inputs"])
    assert again["argv"] == r["argv"] and again["docker_options"] == r["docker_options"]


def test_selection_tensor_parallel_and_extras(run_module):
    r = run_module(
        M, **base(gpus=["0", "1"], extra_args=["--seed", "7"], extra_docker_options=["--ulimit", "memlock=-1"])
    )
    assert r["gpus"]["tensor_parallel_size"] == 2
    assert r["docker_options"][:2] == ["--gpus", '"device=0,1"']
    assert r["argv"][-2:] == ["--seed", "7"] and r["docker_options"][-2:] == ["--ulimit", "memlock=-1"]
    assert P.plan(r["inputs"])["argv"] == r["argv"]


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(extra_args=["--max-num-seqs", "8"]), "duplicates the planned --max-num-seqs 4"),
        (dict(extra_args=["--api-key", "sk-x"]), "vllm_service_api_keys"),
        (dict(gpus=["0"], tensor_parallel_size=2), "does not fit"),
        (dict(gpus=["5"]), "NVML does not list"),
        (dict(log_max_size="huge"), "log_max_size"),
    ],
)
def test_refusals_are_clean_failures(run_module, kw, match):
    r = run_module(M, **base(**kw))
    assert r["failed"] and match in r["msg"]


def test_without_nvml_a_budget_is_required(run_module):
    r = run_module(M, **base(nvml_gpus=None))
    assert r["failed"] and "gpu_total_bytes is required" in r["msg"]


MODELS = os.path.join(ROOT, "tests", "fixtures", "models")
POOLING = dict(num_speculative_tokens=0, concurrency=16)


def _card(chat_context="max"):
    return [
        {
            "name": "chat",
            "options": {"model_dir": FIXTURE, "concurrency": 4, "context": chat_context, "kv_cache_dtype": "fp8_e4m3"},
        },
        {"name": "embed", "options": {"model_dir": os.path.join(MODELS, "bge-m3"), "concurrency": 16}},
    ]


def test_a_shared_card_plans_each_service_at_its_share(run_module):
    chat = run_module(M, **base(gpus=["0"], service_name="chat", card_services=_card()))
    embed = run_module(
        M,
        **base(
            gpus=["0"],
            model_dir=os.path.join(MODELS, "bge-m3"),
            service_name="embed",
            card_services=_card(),
            kv_cache_dtype="auto",
            **POOLING,
        ),
    )
    assert not chat.get("failed") and not embed.get("failed"), (chat.get("msg"), embed.get("msg"))
    # Both calls compute the one split; each plan runs at its share, and its re-plan inputs say so.
    assert chat["card"]["split"] == embed["card"]["split"] and chat["card"]["order"] == ["embed", "chat"]
    for r in (chat, embed):
        u = r["ledger"]["share"]["gpu_memory_utilization"]
        assert (
            r["argv"][r["argv"].index("--gpu-memory-utilization") + 1] == "%g" % u
            or float(r["argv"][r["argv"].index("--gpu-memory-utilization") + 1]) == u
        )
        assert r["inputs"]["gpu_memory_utilization"] == u and "card_services" not in r["inputs"]
        assert r["ledger_text"].startswith("card: ") and "card share" in r["ledger_text"]
        assert P.plan(r["inputs"])["argv"] == r["argv"]
    assert embed["ledger"]["share"]["order"] == 1 and chat["ledger"]["share"]["order"] == 2


def test_a_shared_card_that_cannot_fit_is_refused_naming_the_service_to_shrink(run_module):
    r = run_module(M, **base(gpus=["0"], service_name="chat", context="131072", card_services=_card("131072")))
    assert r["failed"] and "shrink chat by" in r["msg"]


def test_a_card_mate_not_imported_fails_or_in_check_mode_plans_alone(run_module, tmp_path):
    card = _card()
    card[1]["options"]["model_dir"] = str(tmp_path)
    r = run_module(M, **base(gpus=["0"], service_name="chat", card_services=card))
    assert r["failed"] and "embed, whose model is not imported" in r["msg"]
    r = run_module(M, check_mode=True, **base(gpus=["0"], service_name="chat", card_services=card))
    assert not r.get("failed") and "card" not in r and "share" not in r["ledger"]
