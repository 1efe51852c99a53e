# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The load check: vLLM's own `vllm bench serve` at the planned concurrency, offline, from inside the
serving container, and what its result means (pure functions; the module airgap.vllm.vllm_load_check runs it).

Result keys are those vLLM 0.27.1 writes with --save-result (vllm/benchmarks/serve.py: completed,
failed, output_throughput, max_concurrent_requests, p<N>_<metric>_ms for --metric-percentiles)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.airgap.vllm.plugins.module_utils.service._loadcheck_metrics import (
    finite,
    stream_intervals,
    streaming_at_once,
    whole,
)


PERCENTILES = (50, 95)
METRICS = ("ttft", "tpot", "itl", "e2el")
# Per-request lists the result carries; the report keeps the figures, not every sample or text.
BULKY = ("input_lens", "output_lens", "ttfts", "itls", "start_times", "generated_texts", "errors", "stream_intervals")


class LoadCheckError(Exception):
    """The container's command line or the bench's result cannot be read."""


# Exit status of coreutils `timeout` when the command ran out of time.
TIMED_OUT = (124,)
KILL_AFTER = 30


def settings_problems(
    num_prompts, input_len, output_len, concurrency=None, timeout=900, ttft_p95_max_ms=None, tpot_p95_max_ms=None
):
    """What is wrong with the load check's settings (one sentence each; [] when it can run).

    At least one prompt (0 prompts would "pass" without a request), whole lengths and a timeout of at least 1,
    a concurrency of at least 1 when given, thresholds that are finite and above 0 when given (NaN compares
    false with every latency, so a NaN threshold would never warn)."""
    problems = []
    for name, value, low in (
        ("num_prompts", num_prompts, 1),
        ("input_len", input_len, 1),
        ("output_len", output_len, 1),
        ("timeout", timeout, 1),
    ):
        number = whole(value)
        if number is None or number < low:
            problems.append("%s must be a whole number of at least %d, not %r" % (name, low, value))
    if concurrency is not None:
        number = whole(concurrency)
        if number is None or number < 1:
            problems.append("concurrency must be a whole number of at least 1, not %r" % (concurrency,))
    for name, value in (("ttft_p95_max_ms", ttft_p95_max_ms), ("tpot_p95_max_ms", tpot_p95_max_ms)):
        if value is None:
            continue
        number = finite(value)
        if number is None or number <= 0:
            problems.append("%s must be a finite number of milliseconds above 0 (or unset), not %r" % (name, value))
    return problems


def timed(argv, timeout):
    """argv under coreutils `timeout` inside the container: the bench stops (TERM, then KILL after
    KILL_AFTER seconds) when `timeout` seconds pass, so no request keeps running after the check gave up."""
    return ["timeout", "--kill-after=%d" % KILL_AFTER, "%d" % int(timeout)] + list(argv)


def option_value(args, name):
    """Value of ``--name VALUE`` or ``--name=VALUE`` in an argv, else None."""
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def serving_facts(args):
    """What the bench needs from the running `vllm serve` argv (the container's Args)."""
    args = [str(a) for a in args or []]
    if args[:1] == ["serve"]:
        args = args[1:]
    if not args or args[0].startswith("-"):
        raise LoadCheckError("the container does not run `vllm serve MODEL_DIR ...`: %r" % args[:3])
    model = args[0]
    names = option_value(args, "--served-model-name")
    return {
        "model_dir": model,
        "served_model_name": names or model,
        "port": int(option_value(args, "--port") or 8000),
        "max_num_seqs": int(option_value(args, "--max-num-seqs") or 0) or None,
    }


def bench_argv(facts, concurrency, num_prompts, input_len, output_len, result_dir, result_file):
    """`vllm bench serve` against the server from inside its own container: random prompts, the model
    directory as tokenizer (offline), the planned concurrency, percentiles 50 and 95 saved as JSON."""
    return [
        "vllm",
        "bench",
        "serve",
        "--backend",
        "openai-chat",
        "--endpoint",
        "/v1/chat/completions",
        "--base-url",
        "http://127.0.0.1:%d" % facts["port"],
        "--model",
        facts["served_model_name"],
        "--tokenizer",
        facts["model_dir"],
        "--dataset-name",
        "random",
        "--random-input-len",
        str(int(input_len)),
        "--random-output-len",
        str(int(output_len)),
        "--num-prompts",
        str(int(num_prompts)),
        "--max-concurrency",
        str(int(concurrency)),
        "--ignore-eos",
        "--percentile-metrics",
        ",".join(METRICS),
        "--metric-percentiles",
        ",".join(str(p) for p in PERCENTILES),
        "--save-result",
        "--save-detailed",
        "--result-dir",
        result_dir,
        "--result-filename",
        result_file,
        "--disable-tqdm",
    ]


def peak_running(metrics_text):
    """Sum over engines of the vllm:num_requests_running gauge in one /metrics scrape."""
    total, seen = 0.0, False
    for line in (metrics_text or "").splitlines():
        m = re.match(r"^vllm:num_requests_running(?:\{[^}]*\})? ([0-9.eE+-]+)$", line)
        if m:
            total += float(m.group(1))
            seen = True
    return total if seen else None


def _num(result, key):
    v = result.get(key)
    return float(v) if isinstance(v, (int, float)) else None


def summarize(result, concurrency, num_prompts, ttft_p95_max_ms=None, tpot_p95_max_ms=None, peak_running_seen=None):
    """Figures, problems (requests that failed: the deployment fails) and warnings (latency over
    the operator's thresholds; with no thresholds there are none)."""
    if not isinstance(result, dict) or not isinstance(result.get("completed"), int):
        raise LoadCheckError("the bench result has no 'completed' count: not vllm bench serve output")
    wrong = settings_problems(num_prompts, 1, 1, concurrency, 1, ttft_p95_max_ms, tpot_p95_max_ms)
    if wrong:
        raise LoadCheckError("; ".join(wrong))
    failed = int(result.get("failed") or 0)
    figures = {
        "requests": int(num_prompts),
        "completed": result["completed"],
        "failed": failed,
        "concurrency": int(concurrency),
        "duration_s": _num(result, "duration"),
        "output_tokens_per_s": _num(result, "output_throughput"),
        "request_throughput": _num(result, "request_throughput"),
        "peak_concurrent_requests": result.get("max_concurrent_requests"),
        "peak_running_in_metrics": peak_running_seen,
        "streaming_at_once": streaming_at_once(stream_intervals(result)),
    }
    for metric in METRICS:
        for p in PERCENTILES:
            figures["p%d_%s_ms" % (p, metric)] = _num(result, "p%d_%s_ms" % (p, metric))
    problems, warnings = [], []
    errors = [e for e in result.get("errors") or [] if e]
    if failed or result["completed"] < int(num_prompts):
        problems.append(
            "%d of %d requests failed%s"
            % (
                max(failed, int(num_prompts) - result["completed"]),
                int(num_prompts),
                (": " + errors[0].strip().splitlines()[-1][:300]) if errors else "",
            )
        )
    for label, key, limit in (("TTFT", "p95_ttft_ms", ttft_p95_max_ms), ("TPOT", "p95_tpot_ms", tpot_p95_max_ms)):
        if limit is not None and figures[key] is not None and figures[key] > float(limit):
            warnings.append("%s p95 %.1f ms is over the threshold of %s ms" % (label, figures[key], limit))
    return {"figures": figures, "problems": problems, "warnings": warnings, "ok": not problems}


def compact(result):
    """The saved result without the per-request lists (what goes to the host's report directory)."""
    return dict((k, v) for k, v in result.items() if k not in BULKY)


def render(summary):
    f = summary["figures"]

    def ms(key):
        return "-" if f.get(key) is None else "%.0f" % f[key]

    lines = [
        "load check: %d requests at concurrency %d: %d ok, %d failed (peak %s running in /metrics, %s streaming "
        "at once at the client)"
        % (
            f["requests"],
            f["concurrency"],
            f["completed"],
            f["failed"],
            "?" if f["peak_running_in_metrics"] is None else "%g" % f["peak_running_in_metrics"],
            "?" if f.get("streaming_at_once") is None else "%d" % f["streaming_at_once"],
        ),
        "  TTFT p50/p95 %s/%s ms, TPOT p50/p95 %s/%s ms, output %s tokens/s"
        % (
            ms("p50_ttft_ms"),
            ms("p95_ttft_ms"),
            ms("p50_tpot_ms"),
            ms("p95_tpot_ms"),
            "-" if f["output_tokens_per_s"] is None else "%.1f" % f["output_tokens_per_s"],
        ),
    ]
    lines += ["  WARNING: " + w for w in summary["warnings"]]
    lines += ["  FAILED: " + p for p in summary["problems"]]
    return "\n".join(lines)


def token_ids(count, seed, vocab_size):
    """`count` pseudo-random token ids from the middle of the vocabulary (clear of special tokens at either end),
    the same for the same seed: a shared prefix is the same ids, other prompts differ from the first id."""
    vocab = max(64, int(vocab_size or 1024))
    low, span = vocab // 8, vocab // 2 - vocab // 8
    x = (int(seed) * 2654435761 + 97) % 2147483648
    out = []
    for _step in range(int(count)):
        x = (1103515245 * x + 12345) % 2147483648
        out.append(low + (x >> 8) % span)
    return out


def vocab_size_of(config_text):
    """vocab_size of a model's config.json text (top level or text_config), None when unreadable."""
    try:
        config = json.loads(config_text or "")
    except ValueError:
        return None
    if not isinstance(config, dict):
        return None
    size = config.get("vocab_size") or (config.get("text_config") or {}).get("vocab_size")
    return whole(size)
