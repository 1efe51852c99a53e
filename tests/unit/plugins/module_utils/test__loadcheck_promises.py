"""The load check's promises: each row MET, MISSED, not witnessed or not measured from the profiles' records."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.service import _loadcheck_profiles as LP
from ansible_collections.airgap.vllm.plugins.module_utils.service import _loadcheck_promises as LR


def measured(**over):
    prof = {
        "long-context": {
            "figures": {"completed": 1, "failed": 0, "mean_prompt_tokens": 16305, "mean_output_tokens": 16},
            "delta": {"num_preemptions": 0},
        },
        "random": {"figures": {"completed": 32, "failed": 0, "decode_tok_s": 98.0}, "peak_running": 4.0},
        "shared-prefix": {
            "figures": {"completed": 16, "failed": 0},
            "peak_running": 4.0,
            "delta": {"prefix_cache_hit_rate": 0.88, "prefix_cache_hits": 880, "prefix_cache_queries": 1000},
        },
        "tools": {"figures": {"requests": 8, "tool_calls_parsed": 8, "with_reasoning": 8, "parse_rate": 1.0}},
        "single-stream": {"figures": {"completed": 3, "decode_tok_s": 113.6, "prefill_tok_s": 7103.0}},
        "_all": {
            "delta": {
                "num_preemptions": 0,
                "spec_mean_accepted_length": 2.875,
                "spec_acceptance_rate": 0.625,
                "spec_acceptance_per_pos": [0.83, 0.71, 0.33],
            }
        },
    }
    prof.update(over)
    return prof


PLAN = {"max_model_len": 16384, "concurrency": 4, "num_speculative_tokens": 3, "prefix_caching": True}


def by_key(rows):
    return dict((r["key"], r) for r in rows)


def test_every_promise_met_by_the_cpu_engine_figures():
    rows = by_key(LR.promises(PLAN, {}, measured()))
    assert set(rows) == {
        "context",
        "concurrency",
        "prefix_cache_hit_rate",
        "mtp_accepted_length",
        "tool_call_parse_rate",
        "single_stream_decode_tok_s",
        "per_stream_decode_tok_s",
        "prefill_tok_s",
        "preemptions",
    }
    assert all(r["status"] == "MET" for r in rows.values()), rows
    assert "16321 of 16384" in rows["context"]["measured"] and "2.88" in rows["mtp_accepted_length"]["measured"]


def test_an_impossible_promise_is_missed_with_advice():
    tradeoff = {
        "concurrency": 4,
        "speculative": [{"num_speculative_tokens": 0, "all_fit_len": 221184, "blocks": 230, "block_size": 1600}],
    }
    rows = by_key(
        LR.promises(PLAN, {}, measured(), {"mtp_accepted_length": 3.5, "single_stream_decode_tok_s": 1e6}, tradeoff)
    )
    mtp = rows["mtp_accepted_length"]
    assert mtp["status"] == "MISSED" and "num_speculative_tokens: 0" in mtp["advice"] and "221184" in mtp["advice"]
    assert (
        rows["single_stream_decode_tok_s"]["status"] == "MISSED"
        and "bandwidth" in rows["single_stream_decode_tok_s"]["advice"]
    )
    assert LR.promise_counts(list(rows.values()))["MISSED"] == 2


def dense(gap=0.3, samples=40):
    return {"samples": samples, "max_gap_s": gap}


@pytest.mark.parametrize(
    "random, shared, status",
    [
        # the engine's own gauge reached 4: MET, whatever the client saw
        ({"peak_running": 4.0, "sampling": dense()}, {"peak_running": 1.0, "sampling": dense()}, "MET"),
        # issue 42: the client's 4 overlapping streams are not the engine's evidence; the reads (every 0.3 s) could
        # not see 0.2 s of overlap: not witnessed, not MET
        (
            {"peak_running": 1.0, "sampling": dense(), "streams": (4, 0.2)},
            {"peak_running": 0.0, "sampling": dense(2.5, 2), "streams": (3, 0.1)},
            "not witnessed",
        ),
        # reads too sparse to see a run of 1 s (the 2 busy cores of the test world): not witnessed
        (
            {"peak_running": 1.0, "sampling": dense(1.2, 9)},
            {"peak_running": 0.0, "sampling": dense(2.0, 3)},
            "not witnessed",
        ),
        # reads every 0.3 s, streams of 4 overlapping for 3 s, the gauge never above 2: the engine's own "no"
        (
            {"peak_running": 2.0, "sampling": dense(), "streams": (4, 3.0)},
            {"peak_running": 1.0, "sampling": dense(0.9, 5)},
            "MISSED",
        ),
        # reads dense enough, the client never had 4 at once: queued (the old advice)
        (
            {"peak_running": 2.0, "sampling": dense(), "streams": (2, 5.0)},
            {"peak_running": 2.0, "sampling": dense()},
            "MISSED",
        ),
        # no /metrics at all: the engine was not asked
        ({"peak_running": None, "streams": (4, 3.0)}, {"peak_running": None}, "not measured"),
    ],
)
def test_concurrency_is_met_only_by_the_engines_own_gauge(random, shared, status):
    def record(spec, completed):
        figures = {"completed": completed, "failed": 0}
        if "streams" in spec:
            figures["streaming_at_once"], figures["streaming_at_once_s"] = spec["streams"]
        return {
            "figures": figures,
            "peak_running": spec["peak_running"],
            "sampling": spec.get("sampling"),
            "delta": {"prefix_cache_hit_rate": 0.88},
        }

    prof = measured(random=record(random, 16), **{"shared-prefix": record(shared, 16)})
    row = by_key(LR.promises(PLAN, {}, prof))["concurrency"]
    assert row["status"] == status, row
    assert row["status"] in LR.STATUSES
    if random.get("streams"):
        assert "(not the engine's evidence)" in row["measured"]
    if status == "not witnessed":
        assert "could not see it" in row["advice"] and "random:" in row["advice"]
    if status == "MET":
        assert row["measured"].startswith("engine: peak 4 running in /metrics")


def test_failed_requests_miss_the_concurrency_promise_whatever_the_gauge():
    prof = measured(random={"figures": {"completed": 15, "failed": 1}, "peak_running": 4.0, "sampling": dense()})
    row = by_key(LR.promises(PLAN, {}, prof))["concurrency"]
    assert row["status"] == "MISSED" and "1 failed" in row["measured"] and "errors" in row["advice"]


def test_missed_and_not_measured():
    prof = measured(
        **{
            "long-context": {
                "figures": {"completed": 0, "failed": 1, "mean_prompt_tokens": None},
                "delta": {"num_preemptions": 2},
            },
            "shared-prefix": {"figures": {}, "peak_running": 2.0, "delta": {"prefix_cache_hit_rate": 0.3}},
        }
    )
    del prof["tools"]
    rows = by_key(LR.promises(dict(PLAN, num_speculative_tokens=0), {}, prof))
    assert rows["context"]["status"] == "MISSED" and "re-plan" in rows["context"]["advice"]
    assert (
        rows["prefix_cache_hit_rate"]["status"] == "MISSED"
        and "reasoning_effort" in rows["prefix_cache_hit_rate"]["advice"]
    )
    assert rows["concurrency"]["status"] == "MET"  # random reached 4
    assert rows["tool_call_parse_rate"]["status"] == "not measured"
    assert rows["mtp_accepted_length"]["status"] == "not measured"
    off = by_key(LR.promises(dict(PLAN, prefix_caching=False), {}, prof))
    assert (
        off["prefix_cache_hit_rate"]["status"] == "MISSED"
        and "prefix caching" in off["prefix_cache_hit_rate"]["advice"]
    )
    nothing = LR.promises({}, {}, {})
    assert all(r["status"] == "not measured" for r in nothing)


@pytest.mark.parametrize(
    "thresholds,ok",
    [
        ({"prefix_cache_hit_rate": 0.9}, True),
        ({"prefix_cache_hit_rate": 1.5}, False),
        ({"prefill_tok_s": float("nan")}, False),
        ({"prefill_tok_s": -1}, False),
        ({"nope": 1}, False),
        ({"single_stream_decode_tok_s": "40"}, True),
    ],
)
def test_threshold_problems(thresholds, ok):
    assert (LR.threshold_problems(thresholds) == []) is ok


def test_planned_from_report_and_rendering():
    report = {
        "planned": {"max_model_len": 204800, "concurrency": 4, "block_size": 1600},
        "final": {"max_model_len": 196608, "concurrency": 4},
        "measured": {"enable_prefix_caching": True, "block_size": 1600},
        "ledger": {"num_speculative_tokens": 3},
    }
    p = LR.planned_from_report(report)
    assert p == {
        "max_model_len": 196608,
        "concurrency": 4,
        "num_speculative_tokens": 3,
        "prefix_caching": True,
        "block_size": 1600,
    }
    assert LR.planned_from_report(None) == {}
    text = LR.render_promises(LR.promises(PLAN, {}, measured(), {"prefill_tok_s": 1e9}))
    assert "MISSED       prefill_tok_s" in text and "-> prefill is bound by compute" in text
    line = LR.profile_line(
        "shared-prefix",
        {
            "figures": {"completed": 16, "failed": 0},
            "wall_s": 13.8,
            "delta": {"prefix_cache_hit_rate": 0.876},
            "peak_kv_usage": 0.02,
        },
    )
    assert "14 s" in line and "prefix cache hit 88 %" in line


def test_mtp_prefers_the_tools_profiles_natural_text():
    prof = measured()
    prof["tools"]["delta"] = {"spec_mean_accepted_length": 2.9, "spec_acceptance_rate": 0.63}
    prof["_all"]["delta"]["spec_mean_accepted_length"] = 1.2  # random tokens draft badly
    row = by_key(LR.promises(PLAN, {}, prof))["mtp_accepted_length"]
    assert row["status"] == "MET" and "2.90" in row["measured"] and "tools profile" in row["measured"]
    del prof["tools"]["delta"]
    row = by_key(LR.promises(PLAN, {}, prof))["mtp_accepted_length"]
    assert row["status"] == "MISSED" and "whole check" in row["measured"]


def test_no_tool_parser_says_why_tools_are_not_measured():
    prof = measured()
    del prof["tools"]
    row = by_key(LR.promises(PLAN, LP.engine_settings(["/m"]), prof))["tool_call_parse_rate"]
    assert row["status"] == "not measured" and "--enable-auto-tool-choice" in row["advice"]


def test_per_stream_decode_falls_back_to_the_shared_prefix_profile():
    prof = measured()
    del prof["random"]
    prof["shared-prefix"]["figures"]["decode_tok_s"] = 115.5
    row = by_key(LR.promises(PLAN, {}, prof))["per_stream_decode_tok_s"]
    assert row["status"] == "MET" and row["measured"] == "115.5"


@pytest.mark.parametrize("release", ["0.27.1+cpu", "vllm-0.27.1+cpu.dist-info"])
def test_speeds_on_vllms_cpu_build_are_shown_not_judged(release):
    """Issue 42 (a green run prints no avoidable warning): tests/simulate's CPU engine missed the field notes'
    40 tok/s single-stream decode, a GPU's figure, and the run warned "promise MISSED" with a GPU's advice."""
    rows = by_key(LR.promises(PLAN, {}, measured(), {"single_stream_decode_tok_s": 40}, release=release))
    for key, value in (
        ("single_stream_decode_tok_s", "113.6"),
        ("per_stream_decode_tok_s", "98.0"),
        ("prefill_tok_s", "7103.0"),
    ):
        row = rows[key]
        assert row["status"] == "not measured" and row["measured"].startswith(value + " on vLLM's CPU build"), row
        assert "the field notes' GPU's" in row["advice"] and "bandwidth" not in row["advice"]
    assert LR.promise_counts(list(rows.values()))["MISSED"] == 0
    assert rows["context"]["status"] == "MET"  # the engine's own evidence still counts on the CPU
    # A figure the operator set (molecule replan's million tokens a second) is judged on any engine.
    rows = by_key(LR.promises(PLAN, {}, measured(), {"single_stream_decode_tok_s": 1e6}, release=release))
    assert rows["single_stream_decode_tok_s"]["status"] == "MISSED"
    assert rows["per_stream_decode_tok_s"]["status"] == "not measured"


@pytest.mark.parametrize("release", [None, "", "0.27.1", "0.27.1+cu129", "not a version"])
def test_speeds_on_a_gpu_build_or_an_unknown_one_are_judged(release):
    rows = by_key(LR.promises(PLAN, {}, measured(), {"single_stream_decode_tok_s": 1e6}, release=release))
    assert rows["single_stream_decode_tok_s"]["status"] == "MISSED"
    assert rows["per_stream_decode_tok_s"]["status"] == "MET" and rows["per_stream_decode_tok_s"]["measured"] == "98.0"
