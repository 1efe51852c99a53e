"""Unit tests for _plan_gpus and the GPU selection through plan(): budget, tensor parallel, container."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_common as CM
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_gpus as G
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _planner as P

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "models", "qwen3.x-27b-fp8")
U0 = "GPU-5f3e3c1e-8a2b-4c59-9e57-1b0c6a7d2e41"
U1 = "GPU-00000000-1111-2222-3333-444444444444"
NVML = [
    {
        "index": 0,
        "uuid": U0,
        "name": "NVIDIA RTX 6000 Ada Generation",
        "memory_total": 51527024640,
        "compute_capability": "8.9",
    },
    {
        "index": 1,
        "uuid": U1,
        "name": "NVIDIA RTX 6000 Ada Generation",
        "memory_total": 51000000000,
        "compute_capability": "8.9",
    },
    {
        "index": 2,
        "uuid": "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
        "name": "NVIDIA H200",
        "memory_total": 150754820096,
        "compute_capability": "9.0",
    },
]


def base(**kw):
    p = dict(
        model_dir=FIXTURE,
        nvml_gpus=NVML,
        gpu_memory_utilization=0.93,
        concurrency=4,
        kv_cache_dtype="fp8_e4m3",
        num_speculative_tokens=3,
        prefix_caching=True,
        docker_version="24.0.7",
        kernel="5.15.0",
    )
    p.update(kw)
    return p


def test_no_selection_is_the_first_gpu_count_cards():
    sel = G.select_gpus([], NVML, 2)
    assert sel["ids"] == [] and [c["index"] for c in sel["cards"]] == [0, 1] and sel["count"] == 2
    with pytest.raises(CM.TargetsError, match="NVML lists 3 GPU"):
        G.select_gpus(None, NVML, 4)


def test_selection_by_index_or_uuid():
    sel = G.select_gpus(["2", U0], NVML)
    assert [c["index"] for c in sel["cards"]] == [2, 0] and sel["count"] == 2
    assert G.select_gpus(["1"], None)["cards"] is None  # no NVML facts: the selection alone


@pytest.mark.parametrize(
    "selection,match",
    [
        (["0", "0"], "twice"),
        (["0", U0], "twice"),
        (["7"], "NVML does not list"),
        (["0,1"], "NVML index"),
        (["all"], "NVML index"),
        (['"device=0"'], "NVML index"),
        ([True], "NVML index"),
        (["GPU-123"], "NVML index"),
    ],
)
def test_bad_selections_are_refused(selection, match):
    with pytest.raises(CM.TargetsError, match=match):
        G.select_gpus(selection, NVML)


def test_tensor_parallel_fits_the_selection():
    assert G.tensor_parallel(None, 2) == 2 and G.tensor_parallel(1, 2) == 1
    with pytest.raises(CM.TargetsError, match="does not fit the 2 GPU"):
        G.tensor_parallel(4, 2)


def test_plan_budgets_from_the_selected_cards_only():
    one = P.plan(base(gpus=["0"]))
    two = P.plan(base(gpus=["0", "1"]))
    assert one["ledger"]["gpu_total_bytes"] == 51527024640
    assert two["ledger"]["gpu_total_bytes"] == 51000000000  # the smaller of the two
    assert two["argv"][two["argv"].index("--tensor-parallel-size") + 1] == "2"
    assert two["docker_options"][:2] == ["--gpus", '"device=0,1"']
    assert two["docker_options"][-2:] == ["--shm-size", "5g"]  # baseline 4g + 1g for the second rank
    assert two["gpus"] == {"selected": ["0", "1"], "count": 2, "tensor_parallel_size": 2}
    h200 = P.plan(base(gpus=["2"]))
    assert h200["ledger"]["compute_capability"] == "9.0"
    assert h200["ledger"]["gpu_total_bytes"] == 150754820096


def test_explicit_tensor_parallel_and_refusal():
    r = P.plan(base(gpus=["0", "1"], tensor_parallel_size=1))
    assert r["argv"][r["argv"].index("--tensor-parallel-size") + 1] == "1"
    assert any("sit idle" in w for w in r["warnings"])
    with pytest.raises(CM.TargetsError, match="does not fit"):
        P.plan(base(gpus=["0"], tensor_parallel_size=2))


def test_without_selection_the_plan_is_unchanged():
    old_style = P.plan(dict(base(), nvml_gpus=None, gpu_total_bytes=51527024640, compute_capability="8.9"))
    new_style = P.plan(base())
    for key in ("argv", "docker_options", "env", "ledger"):
        assert old_style[key] == new_style[key]
    assert new_style["docker_options"][:2] == ["--gpus", "all"]


def test_measured_pool_by_gpu_name():
    r = P.plan(
        base(
            gpus=["0"],
            measured_kv_cache_bytes_by_gpu={"NVIDIA RTX 6000 Ada Generation": 12 * CM.GIB},
            pin_measured_kv_cache=True,
        )
    )
    assert r["ledger"]["kv_pool_measured"] and r["ledger"]["kv_pool_bytes"] == 12 * CM.GIB
    assert r["argv"][r["argv"].index("--kv-cache-memory-bytes") + 1] == str(12 * CM.GIB)
    other = P.plan(base(gpus=["2"], measured_kv_cache_bytes_by_gpu={"NVIDIA RTX 6000 Ada Generation": 1}))
    assert not other["ledger"]["kv_pool_measured"]
