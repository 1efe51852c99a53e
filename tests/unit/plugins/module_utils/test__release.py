"""Release day's decisions (plugins/module_utils/service/_release.py): the gate, the delta bundle's record, the dry run."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.service import _release as R


def loadcheck(
    single_decode=40.0, prefill=2400.0, per_stream=36.0, parse_rate=1.0, failed=0, context="MET", concurrency="MET"
):
    """A load check's saved result (loadcheck.json) in the shape vllm_load_check writes it."""
    profiles = {
        "random": {"figures": {"completed": 16, "failed": failed, "decode_tok_s": per_stream}},
        "long-context": {"figures": {"completed": 1, "failed": 0}},
        "single-stream": {
            "figures": {"completed": 3, "failed": 0, "decode_tok_s": single_decode, "prefill_tok_s": prefill}
        },
        "_all": {"delta": {}},
    }
    if parse_rate is not None:
        profiles["tools"] = {"figures": {"requests": 8, "completed": 8, "failed": 0, "parse_rate": parse_rate}}
    return {
        "profiles": profiles,
        "promises": [
            {"key": "context", "status": context, "measured": "16321 of 16384 tokens, finished, 0 preemption(s)"},
            {"key": "concurrency", "status": concurrency, "measured": "peak 4 running"},
        ],
    }


REPORT = {"verdict": "confirmed", "verdict_text": "CONFIRMED"}


def test_a_release_as_fast_as_the_previous_one_passes_and_says_every_figure():
    got = R.gate(REPORT, loadcheck(single_decode=39.0), loadcheck())
    assert got["ok"], got
    assert "confirm confirmed" in got["reason"] and "context MET" in got["reason"]
    assert "single-stream decode 0.97" in got["reason"] and "tool calls 100 %" in got["reason"]
    assert [c["check"] for c in got["checks"]] == [
        "confirm",
        "loadcheck",
        "context",
        "concurrency",
        "tool_calls",
        "tok_s",
    ]


def test_the_cpu_engines_not_measured_verdict_passes():
    assert R.gate({"verdict": "not_measured"}, loadcheck(), loadcheck())["ok"]


@pytest.mark.parametrize("verdict", ["not_as_planned", "replan_needed", "refused"])
def test_a_plan_the_engine_does_not_confirm_stops(verdict):
    got = R.gate({"verdict": verdict, "verdict_text": "the pool is 0.61 of the plan"}, loadcheck(), loadcheck())
    assert not got["ok"]
    assert got["reason"] == "confirm %s: the pool is 0.61 of the plan" % verdict


def test_no_report_stops():
    got = R.gate({}, loadcheck(), loadcheck())
    assert not got["ok"] and "no confirmation" in got["reason"]


def test_prefill_collapsing_stops_with_the_ratio_in_one_line():
    """The bad release of molecule release_day: the same plan, vLLM's default prefill chunk cut to 32 tokens."""
    got = R.gate(REPORT, loadcheck(prefill=38.0), loadcheck(prefill=1480.0))
    assert not got["ok"]
    assert got["reason"] == "prefill 38 tok/s is 0.03 of the previous release's 1480 on this host (at least 0.90)"
    assert "\n" not in got["reason"]


def test_the_worst_ratio_is_named_when_several_fall_short():
    got = R.gate(REPORT, loadcheck(single_decode=30.0, prefill=100.0), loadcheck(), {"min_tok_s_ratio": 0.8})
    assert got["reason"].startswith("prefill 100 tok/s is 0.04")


def test_the_threshold_is_the_operators():
    slower = loadcheck(single_decode=30.0)
    assert not R.gate(REPORT, slower, loadcheck())["ok"]
    assert R.gate(REPORT, slower, loadcheck(), {"min_tok_s_ratio": 0.7})["ok"]
    assert R.gate(REPORT, slower, loadcheck(), {"min_tok_s_ratio": 0})["ok"]


def test_a_missed_context_stops_with_what_was_measured():
    got = R.gate(REPORT, loadcheck(context="MISSED"), loadcheck())
    assert not got["ok"] and got["reason"].startswith("context MISSED (16321 of 16384")


def test_an_unmeasured_context_stops():
    lc = loadcheck()
    lc["promises"] = [p for p in lc["promises"] if p["key"] != "context"]
    assert R.gate(REPORT, lc, loadcheck())["reason"] == "context not measured"


def test_concurrency_missed_stops_but_not_witnessed_passes():
    assert R.gate(REPORT, loadcheck(concurrency="MISSED"), loadcheck())["reason"].startswith("concurrency MISSED")
    got = R.gate(REPORT, loadcheck(concurrency="not witnessed"), loadcheck())
    assert got["ok"] and "concurrency not witnessed (peak 4 running)" in got["reason"]


def test_failed_requests_stop():
    got = R.gate(REPORT, loadcheck(failed=2), loadcheck())
    assert got["reason"] == "2 request(s) failed in the load check"


def test_no_load_check_of_the_new_release_stops():
    assert R.gate(REPORT, {}, loadcheck())["reason"].startswith("no load check of the new release")


def test_tool_calls_below_the_rate_stop_and_unmeasured_ones_stop_only_when_measured_before():
    assert R.gate(REPORT, loadcheck(parse_rate=0.5), loadcheck())["reason"] == "tool calls 50 % (at least 100 %)"
    assert R.gate(REPORT, loadcheck(parse_rate=0.5), loadcheck(), {"min_tool_call_rate": 0.5})["ok"]
    got = R.gate(REPORT, loadcheck(parse_rate=None), loadcheck())
    assert not got["ok"] and got["reason"].startswith("tool calls not measured under the new release")
    got = R.gate(REPORT, loadcheck(parse_rate=None), loadcheck(parse_rate=None))
    assert got["ok"] and "tool calls not measured under either release" in got["reason"]


def test_without_the_previous_releases_figures_the_gate_stops_and_says_how_to_get_them():
    for previous in (None, {}, {"profiles": {}}):
        got = R.gate(REPORT, loadcheck(), previous)
        assert not got["ok"] and "--tags loadcheck" in got["reason"]


def test_a_figure_measured_before_but_not_now_stops():
    lc = loadcheck()
    del lc["profiles"]["single-stream"]
    got = R.gate(REPORT, lc, loadcheck())
    assert got["reason"] == (
        "single-stream decode, prefill tok/s not measured under the new release (measured under the previous one)"
    )


def test_a_figure_that_is_no_number_counts_as_not_measured():
    got = R.gate(REPORT, loadcheck(prefill=float("nan")), loadcheck())
    assert got["reason"].startswith("prefill tok/s not measured under the new release")
    with pytest.raises(R.ReleaseError):
        R.thresholds_of({"min_tok_s_ratio": float("inf")})


def test_figures_not_measured_before_are_not_compared():
    previous = loadcheck()
    del previous["profiles"]["single-stream"]
    got = R.gate(REPORT, loadcheck(prefill=1.0), previous)
    assert got["ok"] and "per-stream decode 1.00" in got["reason"] and "prefill" not in got["reason"]


def test_bad_thresholds_and_inputs_are_refused():
    with pytest.raises(R.ReleaseError, match="unknown gate threshold"):
        R.gate(REPORT, loadcheck(), loadcheck(), {"min_ratio": 1})
    with pytest.raises(R.ReleaseError, match="<= 1"):
        R.thresholds_of({"min_tool_call_rate": 1.5})
    with pytest.raises(R.ReleaseError, match=">= 0"):
        R.thresholds_of({"min_tok_s_ratio": "fast"})
    with pytest.raises(R.ReleaseError, match="not a mapping"):
        R.gate(["verdict"], loadcheck(), loadcheck())
    assert R.thresholds_of({"min_tok_s_ratio": "0.5"})["min_tok_s_ratio"] == 0.5


STAGED = {
    "image": [
        {"name": "vllm-openai", "version": "v0.27.1", "path": "/b/artifacts/vllm-openai-v0.27.1.tar"},
        {"name": "haproxy", "version": "2.6", "path": "/b/artifacts/haproxy.tar"},
    ],
    "model": [{"name": "qwen3-tiny", "version": "1", "path": "/b/artifacts/qwen3-tiny.tar"}],
}
DELTA = {"image": [{"name": "vllm-openai", "version": "v0.30.0", "path": "/b/artifacts/vllm-openai-v0.30.0.tar"}]}


def test_a_delta_bundle_replaces_its_image_and_keeps_the_model_and_the_proxy():
    before = copy.deepcopy(STAGED)
    got = R.merge_staged(STAGED, DELTA)
    assert [e["version"] for e in got["image"]] == ["v0.30.0", "2.6"]
    assert got["model"] == STAGED["model"]
    assert STAGED == before  # the record read is not changed in place
    # Staged again: the same record (the walk's stage step is idempotent).
    assert R.merge_staged(got, DELTA) == got


def test_a_delta_of_a_new_kind_is_added_and_nothing_before_is_empty():
    got = R.merge_staged(STAGED, {"file": [{"name": "notes", "path": "/b/notes"}]})
    assert got["file"] == [{"name": "notes", "path": "/b/notes"}] and got["image"] == STAGED["image"]
    assert R.merge_staged(None, DELTA) == DELTA
    with pytest.raises(R.ReleaseError):
        R.merge_staged(STAGED, ["image"])


def test_the_dry_run_names_the_releases_the_argv_and_the_numbers_that_change():
    old = {
        "argv": ["--max-model-len", "16384", "--swap-space", "4"],
        "ledger": {"max_model_len": 16384, "concurrency": 4},
    }
    new = {
        "argv": ["--max-model-len", "16384", "--max-num-batched-tokens", "2048"],
        "ledger": {"max_model_len": 16384, "concurrency": 4, "max_num_batched_tokens": 2048},
    }
    lines = R.plan_change("vllm", "0.27.1+cpu", "0.30.0+cpu", old, new)
    assert lines[0] == "vllm: vLLM 0.27.1+cpu -> 0.30.0+cpu"
    assert lines[1] == "  argv: --max-model-len 16384 --max-num-batched-tokens 2048"
    assert lines[2] == "  argv changes: drops --swap-space; adds --max-num-batched-tokens"
    assert "  context: 16384" in lines and "  prefill chunk (max_num_batched_tokens): 2048 (was None)" in lines
    same = R.plan_change("vllm", "0.27.1", "0.27.1", old, old)
    assert "  argv unchanged" in same
    values = R.plan_change("vllm", "a", "b", old, {"argv": ["--max-model-len", "8192", "--swap-space", "4"]})
    assert "  argv changes: values only" in values and same[0] == "vllm: vLLM 0.27.1 -> 0.27.1"
    assert R.plan_change("vllm", "", "", {}, {})[0] == "vllm: vLLM ? -> ?"
