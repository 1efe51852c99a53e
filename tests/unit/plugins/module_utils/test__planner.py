"""The launch plan as _planner.plan composes it (plugins/module_utils/planner/_planner.py): the targets, the model, the
ledger, the argv and the container around it. ``field`` is the 48 GB field card's plan the per-module tests share;
each part has its own test file (test__plan_<part>.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_common as CM
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _planner as P

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "models", "qwen3.x-27b-fp8")
ADA_48 = 49140 * CM.MIB


def field(kv, **kw):
    """The field run's plan (RTX 6000 Ada 48 GB, the fixture model, MTP 3, 4 x 200K) with ``kv`` KV and ``kw``."""
    base = dict(
        model_dir=FIXTURE,
        gpu_total_bytes=ADA_48,
        compute_capability="8.9",
        gpu_memory_utilization=0.93,
        num_speculative_tokens=3,
        concurrency=4,
        context=204800,
        prefix_caching=True,
        kv_cache_dtype=kv,
        reasoning_parser="qwen3",
        tool_call_parser="qwen3_coder",
    )
    base.update(kw)
    return P.plan(base)


def test_docker_and_env_decisions():
    r = field("fp8_e4m3", kv_offloading_gib=64, kernel="4.19.90-52.22.v2207.ky10.x86_64", docker_version="20.10.7")
    assert r["docker_options"][-2:] == ["--shm-size", "72g"]
    assert "seccomp=unconfined" in r["docker_options"] and r["needs_madvise_patch"]
    assert r["env"]["HF_HUB_OFFLINE"] == "1" and r["env"]["VLLM_NO_USAGE_STATS"] == "1"
    new = field("fp8_e4m3", kernel="5.15.0", docker_version="24.0.7")
    assert "seccomp=unconfined" not in new["docker_options"] and not new["needs_madvise_patch"]
    assert new["docker_options"][:2] == ["--gpus", "all"]
    assert "--swap-space" not in r["argv"]


def test_shm_is_always_sized():
    # The field manual: 4g without KV offload (Docker's 64 MiB default is too small), offload + 8g with it.
    plain = field("fp8_e4m3", kernel="5.15.0", docker_version="24.0.7")
    assert plain["docker_options"][-2:] == ["--shm-size", "4g"]
    offload = field("fp8_e4m3", kv_offloading_gib=2.5, kernel="5.15.0", docker_version="24.0.7")
    assert offload["docker_options"][-2:] == ["--shm-size", "11g"]
