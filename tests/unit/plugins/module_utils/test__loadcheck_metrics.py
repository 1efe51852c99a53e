"""The load check's metrics reader: vLLM 0.27.1's counters (real /metrics text from the CPU engine), their deltas, a
bench result's stream intervals and figures."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.service import _loadcheck_metrics as LM

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "loadcheck")


def fixture(name):
    with open(os.path.join(FIX, name)) as fh:
        return fh.read()


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


def test_bench_figures_of_the_real_single_stream_run():
    f = LM.bench_figures(json.loads(fixture("bench-single-stream-0.27.1-cpu.json")))
    assert f["completed"] == 3 and f["failed"] == 0
    assert f["decode_tok_s"] == pytest.approx(1000.0 / f["mean_tpot_ms"])
    assert f["prefill_tok_s"] == pytest.approx(f["mean_prompt_tokens"] / (f["mean_ttft_ms"] / 1000.0))


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


@pytest.mark.parametrize(
    "value, expected",
    [
        (3, 3.0),
        ("2.5", 2.5),
        (True, None),
        (None, None),
        ("x", None),
        (float("nan"), None),
        ("inf", None),
        (10**400, None),
    ],
)
def test_finite_is_a_finite_float_or_none(value, expected):
    assert LM.finite(value) == expected
