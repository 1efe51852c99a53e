# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The load check's metrics reader: vLLM's own /metrics counters and gauges, the bench result's stream
intervals, and the figures a profile's record keeps (pure functions; _loadcheck.py runs the bench)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re


def whole(value):
    """`value` as an int when it is a whole number (bool is not), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value == int(value) else None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def finite(value):
    """`value` as a finite float (bool is not a number), else None."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


# --- vLLM's own counters ----------------------------------------------------------------------------
# vLLM 0.27.1 v1/metrics/loggers.py (prometheus_client text): every series carries model_name and engine
# labels; counters are written NAME_total (and NAME_created); per-position acceptance has a `position`
# label (spec_decode/metrics.py:253). Values are floats ("12.0").
COUNTERS = (
    "prefix_cache_queries",
    "prefix_cache_hits",
    "spec_decode_num_drafts",
    "spec_decode_num_draft_tokens",
    "spec_decode_num_accepted_tokens",
    "num_preemptions",
    "prompt_tokens",
    "generation_tokens",
)
GAUGES = ("kv_cache_usage_perc", "num_requests_running", "num_requests_waiting")
_SAMPLE = re.compile(r'^vllm:([a-z_]+?)(_total)?(\{[^}]*\})? ([0-9.eE+-]+|NaN|[+-]Inf)$')
_POSITION = re.compile(r'position="(\d+)"')


def parse_counters(metrics_text):
    """The counters and gauges the promises read, summed over engines (None where the scrape has none);
    ``accepted_per_pos`` maps position -> accepted tokens."""
    out = dict((k, None) for k in COUNTERS + GAUGES)
    out["accepted_per_pos"] = {}
    for line in (metrics_text or "").splitlines():
        m = _SAMPLE.match(line)
        if not m:
            continue
        name, total, labels, value = m.group(1), m.group(2), m.group(3) or "", m.group(4)
        value = finite(value)
        if value is None:
            continue
        if name == "spec_decode_num_accepted_tokens_per_pos" and total:
            pos = _POSITION.search(labels)
            if pos:
                key = int(pos.group(1))
                out["accepted_per_pos"][key] = out["accepted_per_pos"].get(key, 0.0) + value
            continue
        if (name in COUNTERS and total) or (name in GAUGES and not total):
            out[name] = (out[name] or 0.0) + value
    return out


def counter_delta(before, after):
    """What happened between two scrapes: counter differences and the rates vLLM's own dashboards
    compute from them (spec_decode/metrics.py: acceptance = accepted / draft tokens; mean acceptance
    length = 1 + accepted / drafts; per position = accepted at that position / drafts)."""
    before, after = before or {}, after or {}
    d = {}
    for key in COUNTERS:
        a, b = after.get(key), before.get(key)
        d[key] = None if a is None else a - (b or 0.0)
    pos_after, pos_before = after.get("accepted_per_pos") or {}, before.get("accepted_per_pos") or {}
    d["accepted_per_pos"] = dict((p, v - pos_before.get(p, 0.0)) for p, v in sorted(pos_after.items()))
    q, h = d["prefix_cache_queries"], d["prefix_cache_hits"]
    d["prefix_cache_hit_rate"] = (h / q) if q and h is not None else None
    drafts, tokens, acc = (
        d["spec_decode_num_drafts"],
        d["spec_decode_num_draft_tokens"],
        d["spec_decode_num_accepted_tokens"],
    )
    d["spec_acceptance_rate"] = (acc / tokens) if tokens and acc is not None else None
    d["spec_mean_accepted_length"] = (1.0 + acc / drafts) if drafts and acc is not None else None
    d["spec_acceptance_per_pos"] = (
        [round(v / drafts, 4) for _p, v in sorted(d["accepted_per_pos"].items())] if drafts else []
    )
    return d


def stream_intervals(result):
    """[(first token, last token)] in seconds of each request that streamed, from a bench result saved with
    --save-detailed (start_times + ttfts + itls, errors empty) or from api_result ("stream_intervals")."""
    if not isinstance(result, dict):
        return []
    if isinstance(result.get("stream_intervals"), list):
        return [tuple(x) for x in result["stream_intervals"] if isinstance(x, (list, tuple)) and len(x) == 2]
    starts, ttfts, itls = result.get("start_times"), result.get("ttfts"), result.get("itls")
    if not (isinstance(starts, list) and isinstance(ttfts, list) and isinstance(itls, list)):
        return []
    errors = result.get("errors") if isinstance(result.get("errors"), list) else [None] * len(starts)
    out = []
    for start, ttft, gaps, error in zip(starts, ttfts, itls, errors + [None] * (len(starts) - len(errors))):
        start, ttft = finite(start), finite(ttft)
        if error or start is None or not ttft or not isinstance(gaps, list):
            continue
        first = start + ttft
        out.append((first, first + sum(finite(g) or 0.0 for g in gaps)))
    return out


def streaming_at_once(intervals):
    """The most requests that were streaming at one instant: the largest number of [first token, last token]
    intervals that share a point. The client's view: it says how long the sampled /metrics gauge had to see
    them (streaming_span), never that the engine ran them (the concurrency promise takes the engine's own
    vllm:num_requests_running for that). None without intervals."""
    spans = []
    for first, last in intervals or []:
        first, last = finite(first), finite(last)
        if first is not None and last is not None and last >= first:
            spans.append((first, last))
    if not spans:
        return None
    return max(sum(1 for a, b in spans if a <= t <= b) for t, _end in spans)


def streaming_span(intervals, count):
    """The longest time in seconds during which at least ``count`` of the intervals overlapped (0.0 when they never
    did, None without intervals or count): how long a state lasted that a sampled gauge had to catch."""
    spans = []
    for first, last in intervals or []:
        first, last = finite(first), finite(last)
        if first is not None and last is not None and last >= first:
            spans.append((first, last))
    if not spans or not count:
        return None
    # starts before ends at the same instant: streams that touch count as overlapping (as streaming_at_once)
    events = sorted([(a, 0) for a, _b in spans] + [(b, 1) for _a, b in spans])
    best, open_, since = 0.0, 0, None
    for t, kind in events:
        if kind == 0:
            open_ += 1
            if open_ == count:
                since = t
        else:
            if open_ == count and since is not None:
                best = max(best, t - since)
            open_ -= 1
    return best


def bench_figures(result):
    """Throughput figures of one bench result: decode tok/s one user sees (1000 / mean TPOT), prefill tok/s
    (prompt tokens / mean TTFT), the longest prompt sent (total_input_tokens / completed when all alike)."""
    if not isinstance(result, dict):
        return {}
    completed = whole(result.get("completed")) or 0
    tpot, ttft = finite(result.get("mean_tpot_ms")), finite(result.get("mean_ttft_ms"))
    inputs = finite(result.get("total_input_tokens"))
    outputs = finite(result.get("total_output_tokens"))
    prompt = inputs / completed if inputs is not None and completed else None
    intervals = stream_intervals(result)
    at_once = streaming_at_once(intervals)
    return {
        "completed": completed,
        "failed": whole(result.get("failed")) or 0,
        "duration_s": finite(result.get("duration")),
        "decode_tok_s": 1000.0 / tpot if tpot else None,
        "prefill_tok_s": prompt / (ttft / 1000.0) if prompt and ttft else None,
        "mean_prompt_tokens": prompt,
        "mean_output_tokens": outputs / completed if outputs is not None and completed else None,
        "output_tokens_per_s": finite(result.get("output_throughput")),
        "mean_ttft_ms": ttft,
        "mean_tpot_ms": tpot,
        "peak_concurrent_requests": whole(result.get("max_concurrent_requests")),
        "streaming_at_once": at_once,
        "streaming_at_once_s": streaming_span(intervals, at_once),
    }
