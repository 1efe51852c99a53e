"""vllm_card_plan as Ansible runs it: services on one card in, their plans, the split and the start order out."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.airgap.vllm.plugins.modules import vllm_card_plan as M
from ansible_collections.airgap.vllm.plugins.modules import vllm_launch_plan as LP

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
MODELS = os.path.join(ROOT, "tests", "fixtures", "models")
NVML = [
    {
        "index": 0,
        "uuid": "GPU-00000000-1111-2222-3333-444444444444",
        "name": "NVIDIA RTX 6000 Ada Generation",
        "memory_total": 51527024640,
        "memory_reserved": 503316480,
        "compute_capability": "8.9",
    }
]


def services(chat_context="max"):
    return [
        dict(
            name="chat",
            model_dir=os.path.join(MODELS, "qwen3.x-27b-fp8"),
            gpus=["0"],
            concurrency=4,
            context=chat_context,
            kv_cache_dtype="fp8_e4m3",
            num_speculative_tokens=3,
            language_model_only=True,
        ),
        dict(name="embed", model_dir=os.path.join(MODELS, "bge-m3"), gpus=["0"], concurrency=16),
        dict(name="rerank", model_dir=os.path.join(MODELS, "bge-reranker-v2-m3"), gpus=["0"], concurrency=16),
    ]


def test_the_card_is_split_and_each_service_planned(run_module):
    r = run_module(M, services=services(), nvml_gpus=NVML)
    assert not r.get("failed") and not r["changed"]
    assert r["order"] == ["embed", "rerank", "chat"]
    assert set(r["plans"]) == {"chat", "embed", "rerank"}
    # NVML's reserved memory is taken off the total, as for one service.
    assert r["split"]["cuda_total_bytes"] == 51527024640 - 503316480
    for name in r["order"]:
        argv = r["plans"][name]["argv"]
        share = r["plans"][name]["ledger"]["share"]
        assert float(argv[argv.index("--gpu-memory-utilization") + 1]) == share["gpu_memory_utilization"]
        assert "card share" in r["plans"][name]["ledger_text"]
    assert "left free on the card" in r["split_text"]


def test_a_split_that_cannot_fit_fails_naming_the_service(run_module):
    r = run_module(M, services=services(chat_context=262144), nvml_gpus=NVML)
    assert r["failed"] and "shrink chat by" in r["msg"]


def test_an_option_the_planner_does_not_take_is_refused(run_module):
    bad = services()
    bad[1]["model_directory"] = "/x"
    r = run_module(M, services=bad, nvml_gpus=NVML)
    assert r["failed"] and "model_directory is not an option" in r["msg"]


def test_every_service_option_is_one_of_vllm_launch_plan():
    # The services take the one planner's options: vllm_launch_plan's, no more (one default per setting).
    assert set(LP.argument_spec()) <= set(M.DEFAULTS)
