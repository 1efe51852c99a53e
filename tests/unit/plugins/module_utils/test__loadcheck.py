"""The load check's decisions: how the bench is called, what its result means."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.service import _loadcheck as L

ARGS = [
    "/opt/airgap-vllm/models/qwen3-tiny",
    "--served-model-name",
    "qwen3-tiny",
    "--port",
    "8000",
    "--max-num-seqs",
    "4",
    "--config",
    "/etc/vllm/keys.yaml",
]


def test_serving_facts_from_the_container_args():
    facts = L.serving_facts(ARGS)
    assert facts == {
        "model_dir": "/opt/airgap-vllm/models/qwen3-tiny",
        "served_model_name": "qwen3-tiny",
        "port": 8000,
        "max_num_seqs": 4,
    }
    assert L.serving_facts(["serve"] + ARGS[:1])["served_model_name"] == ARGS[0]
    with pytest.raises(L.LoadCheckError):
        L.serving_facts(["--help"])


def test_bench_argv_is_offline_and_at_the_planned_concurrency():
    argv = L.bench_argv(L.serving_facts(ARGS), 4, 32, 256, 64, "/tmp", "r.json")
    assert argv[:3] == ["vllm", "bench", "serve"]
    assert argv[argv.index("--max-concurrency") + 1] == "4"
    assert argv[argv.index("--tokenizer") + 1] == ARGS[0]  # the model directory: no hub
    assert argv[argv.index("--dataset-name") + 1] == "random"
    assert argv[argv.index("--base-url") + 1] == "http://127.0.0.1:8000"
    assert argv[argv.index("--metric-percentiles") + 1] == "50,95"
    assert not any("key" in a.lower() for a in argv)


def result(**kw):
    r = {
        "completed": 32,
        "failed": 0,
        "duration": 10.0,
        "output_throughput": 200.0,
        "request_throughput": 3.2,
        "max_concurrent_requests": 4,
        "errors": [""] * 32,
        "p50_ttft_ms": 80.0,
        "p95_ttft_ms": 120.0,
        "p50_tpot_ms": 20.0,
        "p95_tpot_ms": 30.0,
        "ttfts": [0.1] * 32,
    }
    r.update(kw)
    return r


def test_all_ok_only_reports():
    s = L.summarize(result(), 4, 32, peak_running_seen=4.0)
    assert s["ok"] and not s["warnings"] and not s["problems"]
    assert s["figures"]["p95_ttft_ms"] == 120.0 and s["figures"]["peak_running_in_metrics"] == 4.0
    assert "32 requests at concurrency 4: 32 ok, 0 failed" in L.render(s)


def test_failed_requests_fail_the_deployment_with_the_servers_error():
    s = L.summarize(result(completed=30, failed=2, errors=["", "Traceback ...\nHTTP 500 boom"]), 4, 32)
    assert not s["ok"] and s["problems"] == ["2 of 32 requests failed: HTTP 500 boom"]


def test_thresholds_warn_only_when_set():
    assert not L.summarize(result(p95_ttft_ms=99999.0), 4, 32)["warnings"]
    s = L.summarize(result(p95_ttft_ms=500.0, p95_tpot_ms=10.0), 4, 32, ttft_p95_max_ms=1, tpot_p95_max_ms=50)
    assert s["ok"] and s["warnings"] == ["TTFT p95 500.0 ms is over the threshold of 1 ms"]


def test_not_a_bench_result():
    with pytest.raises(L.LoadCheckError):
        L.summarize({"detail": "Not Found"}, 4, 32)


def test_peak_running_sums_engines_and_compact_drops_lists():
    text = 'vllm:num_requests_running{engine="0",model_name="m"} 3.0\nvllm:num_requests_running{engine="1"} 1.0\n'
    assert L.peak_running(text) == 4.0 and L.peak_running("other 1") is None
    assert "ttfts" not in L.compact(result()) and L.compact(result())["completed"] == 32


@pytest.mark.parametrize(
    "kw",
    [
        dict(num_prompts=0),
        dict(num_prompts=True),
        dict(timeout=0),
        dict(timeout=1.5),
        dict(concurrency=0),
        dict(output_len=None),
        dict(ttft_p95_max_ms=float("nan")),
        dict(tpot_p95_max_ms=float("-inf")),
        dict(ttft_p95_max_ms=0),
        dict(ttft_p95_max_ms="fast"),
        dict(num_prompts="many"),
    ],
)
def test_settings_problems_refuse_what_would_pass_unchecked(kw):
    args = dict(num_prompts=32, input_len=256, output_len=64, concurrency=None, timeout=900)
    args.update(kw)
    problems = L.settings_problems(**args)
    assert len(problems) == 1 and list(kw)[0] in problems[0], problems


def test_settings_problems_accept_the_defaults():
    assert L.settings_problems(32, 256, 64) == []
    assert L.settings_problems(1, 1, 1, concurrency=1, timeout=1, ttft_p95_max_ms=0.5, tpot_p95_max_ms="20") == []


def test_a_nan_threshold_or_zero_prompts_never_passes_summarize():
    with pytest.raises(L.LoadCheckError):
        L.summarize(result(), 4, 32, ttft_p95_max_ms=float("nan"))
    with pytest.raises(L.LoadCheckError):
        L.summarize(result(completed=0, failed=0), 4, 0)


def test_timed_wraps_the_bench_in_coreutils_timeout():
    assert L.timed(["vllm", "bench"], 900) == ["timeout", "--kill-after=30", "900", "vllm", "bench"]
