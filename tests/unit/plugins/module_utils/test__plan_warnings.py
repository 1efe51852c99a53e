"""Planner warnings: a plan at the edge of its pool, utilisation above 0.95, SM 8.9 + FP8 + fp8 KV + MTP."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_common as CM
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_warnings as W
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _planner as P

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "models", "qwen3.x-27b-fp8")
ADA_48 = 49140 * CM.MIB


def ledger(**kw):
    base = {
        "num_gpu_blocks": 214,
        "blocks_per_full_request": 50,
        "concurrency": 4,
        "max_model_len": 204800,
        "block_size": 1600,
        "page_bytes": 1600 * 4096,
        "group_size": 16,
        "gpu_memory_utilization": 0.93,
        "compute_capability": "8.9",
        "kv_dtype": "fp8_e4m3",
        "num_speculative_tokens": 3,
    }
    base.update(kw)
    return base


def ids(warnings):
    return [w["id"] for w in warnings]


def test_every_warning_has_its_reason_and_source():
    found = W.plan_warnings(ledger(num_gpu_blocks=202, gpu_memory_utilization=0.97), {"quant_method": "fp8"})
    assert ids(found) == ["plan_at_edge", "utilization_high", "vllm_issue_44879"]
    for w in found:
        assert w["message"] and w["reason"] and w["source"]


@pytest.mark.parametrize("blocks,warned", [(200, True), (201, True), (203, True), (204, False), (199, False)])
def test_plan_at_edge_says_how_many_blocks(blocks, warned):
    found = [w for w in W.plan_warnings(ledger(num_gpu_blocks=blocks), {}) if w["id"] == "plan_at_edge"]
    assert bool(found) is warned  # 199 < 4 x 50: the "only N fit" warning of the ledger covers it
    if warned:
        spare = blocks - 200
        assert ("runs %d block" % spare) in found[0]["message"]
        assert "%d tokens" % (spare * 1600) in found[0]["message"] and "preempts" in found[0]["reason"]


@pytest.mark.parametrize("util,warned", [(0.95, False), (0.951, True), (0.93, False), (0.98, True)])
def test_utilization_above_095(util, warned):
    assert ("utilization_high" in ids(W.plan_warnings(ledger(gpu_memory_utilization=util), {}))) is warned


@pytest.mark.parametrize(
    "over,shape,warned",
    [
        ({}, {"quant_method": "fp8"}, True),
        ({}, {"quant_method": "compressed-tensors", "fp8_checkpoint": True}, True),
        ({"compute_capability": "9.0"}, {"quant_method": "fp8"}, False),
        ({"kv_dtype": "bfloat16"}, {"quant_method": "fp8"}, False),
        ({"num_speculative_tokens": 0}, {"quant_method": "fp8"}, False),
        ({}, {"quant_method": None}, False),
    ],
)
def test_known_bad_combination_44879(over, shape, warned):
    assert ("vllm_issue_44879" in ids(W.plan_warnings(ledger(**over), shape))) is warned


def test_the_planner_carries_them():
    r = P.plan(
        dict(
            model_dir=FIXTURE,
            gpu_total_bytes=ADA_48,
            compute_capability="8.9",
            gpu_memory_utilization=0.96,
            num_speculative_tokens=3,
            concurrency=4,
            context=204800,
            prefix_caching=True,
            kv_cache_dtype="fp8_e4m3",
        )
    )
    found = ids(r["plan_warnings"])
    assert "utilization_high" in found and "vllm_issue_44879" in found
    for w in r["plan_warnings"]:
        assert w["message"] in r["warnings"]
    quiet = P.plan(
        dict(
            model_dir=FIXTURE,
            gpu_total_bytes=ADA_48,
            compute_capability="8.9",
            gpu_memory_utilization=0.93,
            num_speculative_tokens=0,
            concurrency=1,
            context=8192,
            kv_cache_dtype="fp8_e4m3",
        )
    )
    assert quiet["plan_warnings"] == []
