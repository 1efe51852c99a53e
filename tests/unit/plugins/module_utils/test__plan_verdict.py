"""The deployment's one verdict (plugins/module_utils/planner/_plan_verdict.py, issue 42): decided once, never "confirmed"
over a pool or a context that is not the planned one, and on the CPU engine it says what was measured and what
was not."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_common as CM
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_confirm as C
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_verdict as V

from .test__plan_confirm_report import cpu_metrics, simulated_plan

GIB = CM.GIB
PLANNED = {"kv_cache_memory_bytes": 44 * GIB, "max_model_len": 16384, "concurrency": 4}


def measured(pool=44 * GIB, ctx=None, weights=None):
    return {
        "budget_bytes": pool,
        "budget_how": "kv_cache_memory_bytes label (pinned pool)",
        "num_gpu_blocks": 2048,
        "block_size": 128,
        "max_model_len": ctx,
        "weights_bytes": weights,
    }


def pool(status, explained=False):
    out = {"status": status, "explained_by": None, "set_by": None}
    if explained:
        out["set_by"] = "VLLM_CPU_KVCACHE_SPACE=1"
        out["explained_by"] = "the CPU engine's VLLM_CPU_KVCACHE_SPACE=1 fixes its KV pool (a test setting)"
    return out


@pytest.mark.parametrize(
    "m, p, conc, refused, status",
    [
        (measured(), pool("as_planned"), 4.2, False, "confirmed"),
        (measured(ctx=16384), pool("as_planned"), 4.2, False, "confirmed"),
        # a pool or a context that is not the planned one is never confirmed, even when the requests fit
        (measured(pool=1 * GIB), pool("smaller"), 16.0, False, "not_as_planned"),
        (measured(pool=60 * GIB), pool("larger"), 5.5, False, "not_as_planned"),
        (measured(ctx=8192), pool("as_planned"), 4.2, False, "not_as_planned"),
        (measured(pool=1 * GIB, ctx=8192), pool("smaller", explained=True), 16.0, False, "not_as_planned"),
        # the CPU engine's pool: set by a test setting, the planned pool was not measured
        (measured(pool=1 * GIB), pool("smaller", explained=True), 16.0, False, "not_measured"),
        (measured(pool=None), pool("not_measured"), 4.2, False, "not_measured"),
        # the requests do not fit, or nothing to say it: a re-plan; did not start: refused
        (measured(pool=10 * GIB), pool("smaller"), 0.9, False, "replan_needed"),
        (measured(), pool("as_planned"), 3.99, False, "replan_needed"),
        (measured(pool=None), pool("not_measured"), None, False, "replan_needed"),
        (measured(), pool("as_planned"), 4.2, True, "refused"),
    ],
)
def test_one_status_for_each_case(m, p, conc, refused, status):
    v = V.verdict(PLANNED, m, p, conc, 4.0, refused=refused)
    assert v["status"] == status and v["status"] in V.VERDICTS
    assert set(v) == {"status", "text", "evidence"} and set(v["evidence"]) == {"measured", "not_measured"}
    if status != "confirmed":
        assert not v["text"].startswith("confirmed") and "confirmed:" not in v["text"]


def test_the_slack_is_rounding_only():
    assert V.holds(3.996, 4.0) and not V.holds(3.99, 4.0) and not V.holds(None, 1.0)


def test_the_cpu_engine_says_what_was_measured_and_what_was_not():
    v = V.verdict(PLANNED, measured(pool=1 * GIB), pool("smaller", explained=True), 16.0, 4.0)
    assert v["text"] == (
        "NOT CONFIRMED on this engine: measured: its KV pool of 1.00 GiB (VLLM_CPU_KVCACHE_SPACE=1, a test setting) "
        "holds context 16,384 x 4 requests (room for 16.00 full-length, 4.00 planned); not measured: the planned "
        "44.00 GiB KV pool"
    )
    assert v["evidence"]["measured"] == [
        "KV pool 1.00 GiB: kv_cache_memory_bytes label (pinned pool)",
        "2,048 blocks of 128 tokens",
    ]
    assert v["evidence"]["not_measured"][0] == (
        "the planned 44.00 GiB KV pool (VLLM_CPU_KVCACHE_SPACE=1 fixes this engine's pool)"
    )
    assert "weights" in v["evidence"]["not_measured"][1]


def test_the_words_name_what_differs():
    v = V.verdict(PLANNED, measured(pool=1 * GIB, ctx=8192), pool("smaller"), 16.0, 4.0)
    assert v["text"] == (
        "NOT as planned: KV pool 1.00 GiB, 44.00 GiB planned (smaller); context 8,192 tokens, 16,384 planned; "
        "context 16,384 x 4 requests still fit (room for 16.00 full-length, 4.00 planned)"
    )
    assert "context 8,192 tokens (journal)" in v["evidence"]["measured"]
    r = V.verdict(PLANNED, measured(), pool("as_planned"), None, 4.0, refused=True, refusal="--max-model-len too long")
    assert r["text"] == "refused: vLLM did not start with this plan: --max-model-len too long"
    w = V.verdict(PLANNED, measured(weights=20 * GIB), pool("as_planned"), 4.2, 4.0)
    assert w["text"].startswith("confirmed: the engine's KV pool of 44.00 GiB is the planned one (44.00 GiB planned)")
    assert "weights 20.00 GiB (journal)" in w["evidence"]["measured"] and w["evidence"]["not_measured"] == []


@pytest.mark.parametrize("env", [None, {"VLLM_CPU_KVCACHE_SPACE": "1"}])
def test_report_json_and_report_md_carry_the_one_verdict(env):
    """The issue's case: the simulated host (a 48 GB card planned, the CPU engine's 1 GiB pool measured)."""
    c = C.confirm(simulated_plan(), cpu_metrics(), engine_env=env)
    report = json.loads(json.dumps(c["report"]))
    assert report["verdict"] == c["verdict"] == ("not_measured" if env else "not_as_planned")
    assert report["verdict_text"] == c["verdict_text"] and report["verdict_evidence"] == c["verdict_evidence"]
    assert "**Verdict: %s**" % report["verdict_text"] in c["report_markdown"]
    assert c["summary"].splitlines()[0] == "vLLM plan " + report["verdict_text"]
    # the load check re-renders report.md from report.json: the same words, not a verdict of its own
    from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_confirm_report import render_markdown

    assert render_markdown(report) == c["report_markdown"]
