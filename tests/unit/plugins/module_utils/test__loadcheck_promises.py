"""Load-check profiles, vLLM 0.27.1's counters (real /metrics text from the CPU engine) and the promises."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils import _loadcheck as L
from ansible_collections.airgap.vllm.plugins.module_utils import _loadcheck_metrics as LM
from ansible_collections.airgap.vllm.plugins.module_utils import _loadcheck_profiles as LP
from ansible_collections.airgap.vllm.plugins.module_utils import _loadcheck_promises as LR

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "loadcheck")
ARGS = [
    "/opt/airgap-vllm/models/qwen3-tiny",
    "--served-model-name",
    "qwen3-tiny",
    "--port",
    "8000",
    "--max-num-seqs",
    "4",
    "--max-model-len",
    "16384",
    "--enable-prefix-caching",
    "--speculative-config",
    '{"method":"mtp","num_speculative_tokens":3}',
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "qwen3_coder",
    "--reasoning-parser",
    "qwen3",
]


def fixture(name):
    with open(os.path.join(FIX, name)) as fh:
        return fh.read()


def test_engine_settings_from_the_argv():
    e = LP.engine_settings(ARGS)
    assert e["max_model_len"] == 16384 and e["max_num_seqs"] == 4
    assert e["speculative_method"] == "mtp" and e["num_speculative_tokens"] == 3
    assert e["prefix_caching"] is True and e["tools"] and e["reasoning"]
    assert LP.engine_settings(["/m", "--speculative-config", "{not json"])["num_speculative_tokens"] == 0
    assert LP.engine_settings(["/m", "--no-enable-prefix-caching"])["prefix_caching"] is False


def test_profile_settings_follow_the_engine():
    assert LP.profile_settings("long-context", {}, 4, 16384)["input_len"] == 16384 - 16 - LP.LONG_CONTEXT_MARGIN
    sp = LP.profile_settings("shared-prefix", {}, 4, 16384, 1600)
    assert sp["num_prompts"] == 16 and sp["prefix_len"] == 8 * 1600  # 8 hybrid blocks: a prefix that can hit
    assert LP.profile_settings("shared-prefix", {}, 4, 16384, 16)["prefix_len"] == LP.SHARED_PREFIX_MIN
    assert LP.profile_settings("shared-prefix", {}, 4, 4096, 1600)["prefix_len"] < 4096  # never over the context
    assert LP.profile_settings("tools", {}, 4)["num_prompts"] == 8
    assert LP.profile_settings("random", {"num_prompts": 16}, 4)["concurrency"] == 4
    assert LP.profile_settings("single-stream", {}, 4)["concurrency"] == 1


@pytest.mark.parametrize(
    "name,over,ctx",
    [
        ("nope", {}, 16384),
        ("random", {"prompts": 3}, 16384),  # no such setting
        ("random", {"num_prompts": 0}, 16384),
        ("random", {"num_prompts": float("nan")}, 16384),
        ("long-context", {}, None),  # context unknown
        ("long-context", {"input_len": 16384}, 16384),  # over the limit
    ],
)
def test_profile_settings_refused(name, over, ctx):
    with pytest.raises(L.LoadCheckError):
        LP.profile_settings(name, over, 4, ctx)


def test_profile_argv_uses_vllms_own_datasets_offline():
    facts = L.serving_facts(ARGS)
    lc = LP.profile_argv("long-context", facts, LP.profile_settings("long-context", {}, 4, 16384), "/tmp", "r.json")
    assert lc[lc.index("--endpoint") + 1] == "/v1/completions" and lc[lc.index("--backend") + 1] == "openai"
    assert lc[lc.index("--random-input-len") + 1] == str(16384 - 16 - LP.LONG_CONTEXT_MARGIN)
    assert lc[lc.index("--max-concurrency") + 1] == "1" and lc[lc.index("--tokenizer") + 1] == ARGS[0]
    sp = LP.profile_argv("shared-prefix", facts, LP.profile_settings("shared-prefix", {}, 4, 16384), "/tmp", "r.json")
    assert sp[sp.index("--dataset-name") + 1] == "prefix_repetition"
    assert sp[sp.index("--prefix-repetition-num-prefixes") + 1] == "1"
    assert "--random-input-len" not in sp and "--save-result" in sp and "--max-concurrency" in sp
    assert LP.profile_argv("tools", facts, {}, "/tmp", "r.json") is None
    ss = LP.profile_argv("single-stream", facts, LP.profile_settings("single-stream", {}, 4), "/tmp", "r.json")
    assert ss[ss.index("--max-concurrency") + 1] == "1"


def test_counters_of_the_real_engine_with_ngram_speculation():
    """Scrapes of vLLM 0.27.1's CPU engine (tiny Qwen3, --speculative-config ngram 3) at start and after the tools
    profile: the counters are NAME_total with engine/model_name labels, per position with `position`."""
    before = LM.parse_counters(fixture("metrics-0.27.1-cpu-ngram-start.txt"))
    after = LM.parse_counters(fixture("metrics-0.27.1-cpu-ngram.txt"))
    assert before["spec_decode_num_drafts"] == 0.0 and before["accepted_per_pos"] == {0: 0.0, 1: 0.0, 2: 0.0}
    d = LM.counter_delta(before, after)
    assert d["spec_decode_num_drafts"] == 48 and d["spec_decode_num_draft_tokens"] == 144
    assert d["spec_decode_num_accepted_tokens"] == 90
    assert d["spec_acceptance_rate"] == pytest.approx(90 / 144.0)
    assert d["spec_mean_accepted_length"] == pytest.approx(1 + 90 / 48.0)
    assert d["spec_acceptance_per_pos"] == [round(40 / 48.0, 4), round(34 / 48.0, 4), round(16 / 48.0, 4)]
    assert d["num_preemptions"] == 0 and d["prefix_cache_queries"] > 0


def test_prefix_cache_hit_rate_of_the_real_shared_prefix_profile():
    d = LM.counter_delta(
        LM.parse_counters(fixture("metrics-0.27.1-cpu-before-shared-prefix.txt")),
        LM.parse_counters(fixture("metrics-0.27.1-cpu-shared-prefix.txt")),
    )
    assert d["prefix_cache_queries"] == 35045 and d["prefix_cache_hits"] == 30720
    assert 0.85 < d["prefix_cache_hit_rate"] < 0.9
    assert d["spec_decode_num_drafts"] is None and d["spec_mean_accepted_length"] is None  # no speculation there


def test_counters_ignore_created_and_sum_engines():
    text = (
        'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 3.0\n'
        'vllm:prefix_cache_hits_created{engine="0",model_name="m"} 1.7e+09\n'
        'vllm:prefix_cache_hits_total{engine="1",model_name="m"} 4.0\n'
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25\n'
        'vllm:kv_cache_usage_perc{engine="1",model_name="m"} NaN\n'
        '# HELP vllm:num_preemptions_total x\n'
    )
    c = LM.parse_counters(text)
    assert c["prefix_cache_hits"] == 7.0 and c["kv_cache_usage_perc"] == 0.25 and c["num_preemptions"] is None
    assert LM.counter_delta({}, c)["prefix_cache_hit_rate"] is None  # no queries: no rate, not 0


def test_tool_answer_of_the_real_engine():
    answer = json.loads(fixture("tool-answer-0.27.1-cpu.json"))
    name, args, reasoning, _content = LP.tool_call_of(answer)
    assert name == "get_weather" and args == {"city": "Beijing"} and "Beijing" in reasoning
    out = LP.tool_outcome([answer, {"choices": [{"message": {"content": "sunny"}}]}], errors=1)
    assert out["requests"] == 3 and out["tool_calls_parsed"] == 1 and out["parse_rate"] == pytest.approx(1 / 3.0)
    bad = {"choices": [{"message": {"tool_calls": [{"function": {"name": "x", "arguments": "{oops"}}]}}]}
    assert LP.tool_outcome([bad])["tool_calls_parsed"] == 0


def test_bench_figures_of_the_real_single_stream_run():
    f = LM.bench_figures(json.loads(fixture("bench-single-stream-0.27.1-cpu.json")))
    assert f["completed"] == 3 and f["failed"] == 0
    assert f["decode_tok_s"] == pytest.approx(1000.0 / f["mean_tpot_ms"])
    assert f["prefill_tok_s"] == pytest.approx(f["mean_prompt_tokens"] / (f["mean_ttft_ms"] / 1000.0))


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


@pytest.mark.parametrize(
    "spans,n",
    [
        ([], None),
        ([(0, 1)], 1),
        ([(0, 1), (1, 2)], 2),
        ([(0, 1), (1.1, 2)], 1),
        ([(0, 4), (1, 2), (1.5, 3), (2.5, 5)], 3),
        ([(0, 1), (2, 1), (None, 3)], 1),
        ([(5, 5), (5, 5)], 2),
    ],
)
def test_streaming_at_once_is_the_most_overlapping_token_streams(spans, n):
    assert LM.streaming_at_once(spans) == n


def test_stream_intervals_from_a_detailed_bench_result_skip_failed_requests():
    raw = {
        "start_times": [10.0, 10.0, 10.1],
        "ttfts": [0.5, 0.0, 0.2],
        "itls": [[0.1, 0.1], [], [0.3]],
        "errors": ["", "Bad Request", ""],
    }
    got = LM.stream_intervals(raw)
    assert got == [(10.5, pytest.approx(10.7)), (pytest.approx(10.3), pytest.approx(10.6))]
    assert LM.bench_figures(raw)["streaming_at_once"] == 2 and LM.stream_intervals({"completed": 1}) == []


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


@pytest.mark.parametrize(
    "spans, count, seconds",
    [
        ([], 2, None),
        ([(0, 1)], None, None),
        ([(0, 1)], 1, 1.0),
        ([(0, 4), (1, 2), (1.5, 3), (2.5, 5)], 3, 0.5),
        ([(0, 4), (1, 2), (1.5, 3), (2.5, 5)], 2, 3.0),
        ([(0, 1), (1, 2)], 2, 0.0),
        ([(0, 1), (2, 3)], 2, 0.0),
    ],
)
def test_streaming_span_is_how_long_that_many_streams_overlapped(spans, count, seconds):
    got = LM.streaming_span(spans, count)
    assert got == (None if seconds is None else pytest.approx(seconds))


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


def test_api_requests_are_exact_token_prompts():
    lc = LP.profile_settings("long-context", {}, 4, 16384)
    path, bodies = LP.api_requests("long-context", "m", lc, 1024)
    assert path == "/v1/completions" and len(bodies) == 1
    body = bodies[0]
    assert len(body["prompt"]) == lc["input_len"] and body["ignore_eos"] and body["stream"]
    assert body["stream_options"] == {"include_usage": True} and body["max_tokens"] == body["min_tokens"] == 16
    assert all(128 <= t < 512 for t in body["prompt"])  # the middle of the vocabulary: no special tokens
    sp = LP.profile_settings("shared-prefix", {}, 4, 16384, 16)
    _path, bodies = LP.api_requests("shared-prefix", "m", sp, 151936)
    prefixes = set(tuple(b["prompt"][: sp["prefix_len"]]) for b in bodies)
    suffixes = set(tuple(b["prompt"][sp["prefix_len"] :]) for b in bodies)
    assert len(bodies) == 16 and len(prefixes) == 1 and len(suffixes) == 16
    _path, bodies = LP.api_requests("single-stream", "m", LP.profile_settings("single-stream", {}, 4), 1024)
    assert len(set(b["prompt"][0] for b in bodies)) == len(bodies) or len(set(tuple(b["prompt"]) for b in bodies)) == 3
    path, bodies = LP.api_requests("tools", "m", LP.profile_settings("tools", {}, 2), None)
    assert path == "/v1/chat/completions" and bodies[0]["tools"][0]["function"]["name"] == "get_weather"
    with pytest.raises(L.LoadCheckError):
        LP.api_requests("random", "m", {}, 1024)
    assert L.token_ids(5, 3, 1024) == L.token_ids(5, 3, 1024) != L.token_ids(5, 4, 1024)


def test_api_result_reads_like_the_bench():
    recs = [
        {"ttft": 0.5, "e2e": 1.5, "prompt_tokens": 1000, "completion_tokens": 101},
        {"ttft": 0.3, "e2e": 1.3, "prompt_tokens": 1000, "completion_tokens": 101},
        {"error": "HTTPError: 400"},
    ]
    r = LP.api_result(recs, 2.0, 2)
    assert r["completed"] == 2 and r["failed"] == 1 and r["errors"] == ["HTTPError: 400"]
    assert r["mean_ttft_ms"] == pytest.approx(400.0) and r["mean_tpot_ms"] == pytest.approx(10.0)
    f = LM.bench_figures(r)
    assert f["decode_tok_s"] == pytest.approx(100.0) and f["prefill_tok_s"] == pytest.approx(2500.0)
    s = L.summarize(r, 2, 3)
    assert not s["ok"] and "1 of 3 requests failed: HTTPError: 400" in s["problems"][0]
    assert LP.api_result([], None)["completed"] == 0


def test_vocab_size_of_config():
    assert L.vocab_size_of('{"vocab_size": 1024}') == 1024
    assert L.vocab_size_of('{"text_config": {"vocab_size": 248320}}') == 248320
    assert L.vocab_size_of("not json") is None and L.vocab_size_of("[]") is None


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
