"""The planner's inputs (plugins/module_utils/planner/_plan_targets.py): defaults, checks and clear refusals, each
naming the input (never a traceback or --max-model-len 0)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_common as CM
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _planner as P

from .test__plan_model import FIXTURE, QWEN3, QWEN3_SCHEME, fixture_config, plan
from .test__planner import field


def test_pin_needs_a_measured_budget():
    with pytest.raises(CM.TargetsError) as exc:
        plan(fixture_config(), context=32768, pin_kv_cache_memory=True)
    assert "measured_kv_cache_bytes" in str(exc.value)
    r = plan(fixture_config(), context=32768, pin_kv_cache_memory=True, measured_kv_cache_bytes=30 * CM.GIB)
    argv = r["argv"]
    assert argv[argv.index("--kv-cache-memory-bytes") + 1] == str(30 * CM.GIB)


@pytest.mark.parametrize("cc", ["abc", "", "8", "8.x", "9.0.1", "sm_90"])
def test_non_numeric_compute_capability(cc):
    with pytest.raises(CM.TargetsError) as exc:
        plan(fixture_config(), context=32768, compute_capability=cc)
    assert "compute_capability" in str(exc.value) and "8.9" in str(exc.value)


@pytest.mark.parametrize("config", [QWEN3_SCHEME, fixture_config()])
@pytest.mark.parametrize("ctx", [0, "0", "0K", -5])
def test_context_zero_refused(config, ctx):
    with pytest.raises(CM.TargetsError) as exc:
        plan(config, context=ctx)
    assert "context" in str(exc.value)


@pytest.mark.parametrize(
    "name", ["qwen\n[Service]\nExecStartPre=/bin/sh", "qwen\r", "qwen\x00", "qw\x1ben", "   ", " qwen"]
)
def test_served_model_name_with_control_characters_is_refused(name):
    """It reaches the systemd unit and argv: a newline would add a line to the unit."""
    with pytest.raises(CM.PlanError) as exc:
        plan(QWEN3, context=8192, served_model_name=name)
    assert "served_model_name" in str(exc.value)


def test_served_model_name_plain_is_kept():
    r = plan(QWEN3, context=8192, served_model_name="qwen3-8b:v2")
    assert r["argv"][r["argv"].index("--served-model-name") + 1] == "qwen3-8b:v2"


@pytest.mark.parametrize("tokens", [0, -1, "x"])
def test_max_num_batched_tokens_zero_is_refused(tokens):
    """0 used to mean vLLM's default silently (``0 or default``)."""
    with pytest.raises(CM.PlanError) as exc:
        plan(QWEN3, context=8192, max_num_batched_tokens=tokens)
    assert "max_num_batched_tokens" in str(exc.value)


def test_bad_parser_rejected():
    with pytest.raises(CM.TargetsError):
        field("fp8_e4m3", tool_call_parser="qwen3-coder")


@pytest.mark.parametrize("spelling", ["max", "MAX", " Max "])
def test_max_context_in_any_case(spelling):
    r = P.plan(
        dict(
            model_dir=FIXTURE,
            gpu_total_bytes=97887 * CM.MIB,
            compute_capability="12.0",
            gpu_memory_utilization=0.95,
            concurrency=50,
            context=spelling,
            kv_cache_dtype="fp8_e4m3",
            num_speculative_tokens=3,
        )
    )
    assert r["ledger"]["max_model_len"] % 1024 == 0
