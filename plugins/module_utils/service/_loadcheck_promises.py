# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The load check's promises: what a good deployment of this model gives, each a row MET / MISSED / not witnessed /
not measured against the plan and the profiles' records, and the report's lines (pure functions)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible_collections.airgap.vllm.plugins.module_utils.service._loadcheck_metrics import (
    finite,
    whole,
)
from ansible_collections.airgap.vllm.plugins.module_utils.common._version import parse_vllm


def needle_row(figures, ctx):
    """The needle promise: the fact recalled at every depth. MET only with the engine's own evidence - every request
    answered and counted by the engine (usage.prompt_tokens) - else "not witnessed"; MISSED when an answered depth
    lost the fact. None when the profile did not run (it runs when asked for)."""
    if not figures:
        return None
    n, got = figures.get("requests") or 0, figures.get("recalled") or 0
    expected = "recalled at every depth (%d of %d)" % (n, n)
    where = ", ".join("%.0f %%" % (100.0 * d["depth"]) for d in figures.get("depths") or [])
    counted = [d for d in figures.get("depths") or [] if d.get("prompt_tokens") and not d.get("error")]
    source = "field notes: fp8 KV recalled 3 of 3 at 31K and 54K tokens"
    if not n or figures.get("failed") or len(counted) < n:
        why = [d["error"] for d in figures.get("depths") or [] if d.get("error")][:1]
        return _row(
            "needle_recall",
            "a fact anywhere in the context is recalled",
            expected,
            "%d of %d answered with the engine's prompt count" % (len(counted), n),
            "not witnessed",
            "the engine did not answer every needle request%s: run the needle profile again"
            % ((" (%s)" % why[0]) if why else ""),
            source,
        )
    measured = "%d of %d at depths %s of %d prompt tokens (the engine's count; planned context %s)" % (
        got,
        n,
        where,
        figures.get("min_prompt_tokens") or 0,
        ctx if ctx else "-",
    )
    ok = got == n
    return _row(
        "needle_recall",
        "a fact anywhere in the context is recalled",
        expected,
        measured,
        "MET" if ok else "MISSED",
        ""
        if ok
        else "the model lost a fact its context held: compare with --kv-cache-dtype auto (fp8 KV without calibrated "
        "scales can lose it) and keep the context within what the model was trained for",
        source,
    )


# --- promises ---------------------------------------------------------------------------------------
# What a good deployment of this model gives, from the field notes (Kylin V10 SP3, RTX 6000 Ada 48 GB,
# Qwen3.x-27B-FP8, vLLM 0.27.1, fp8 KV + MTP 3): prefix cache 80-90 % in steady agent traffic, MTP pays
# while its mean accepted length stays >= 2.5 (acceptance 56-70 %, length 2.7-3.1), single-stream decode
# 40-48 tok/s, four streams ~36 tok/s each, prefill 2400+ tok/s, no preemption. Every one is a variable.
DEFAULT_THRESHOLDS = {
    "prefix_cache_hit_rate": 0.80,
    "mtp_accepted_length": 2.5,
    "tool_call_parse_rate": 1.0,
    "single_stream_decode_tok_s": 40.0,
    "per_stream_decode_tok_s": 36.0,
    "prefill_tok_s": 2400.0,
    "context_fill": 0.95,
}
STATUSES = ("MET", "MISSED", "not witnessed", "not measured")
# The profiles that run the planned concurrency, whose /metrics samples may witness it.
CONCURRENCY_PROFILES = ("random", "shared-prefix", "tools")
# The sampler must have read vllm:num_requests_running at least this often (seconds between two reads, the start
# and the end of the profile included) for its peak to count: then a run of 1 s at the planned concurrency cannot
# fall between two reads, and a peak below it is the engine's own "no". Sparser, the promise is "not witnessed".
WITNESS_GAP_S = 0.5


def threshold_problems(thresholds):
    """Thresholds that cannot be compared with (one sentence each): finite numbers >= 0, rates <= 1."""
    problems = []
    for key, value in (thresholds or {}).items():
        if key not in DEFAULT_THRESHOLDS:
            problems.append("unknown promise threshold %s (known: %s)" % (key, ", ".join(sorted(DEFAULT_THRESHOLDS))))
            continue
        number = finite(value)
        if number is None or number < 0 or (key.endswith(("_rate", "_fill")) and number > 1):
            problems.append(
                "promise threshold %s must be a finite number >= 0%s, not %r"
                % (key, " and <= 1" if key.endswith(("_rate", "_fill")) else "", value)
            )
    return problems


def _row(key, promise, expected, measured, status, advice="", source=""):
    return {
        "key": key,
        "promise": promise,
        "expected": expected,
        "measured": measured,
        "status": status,
        "advice": advice,
        "source": source,
    }


def _promise(key, promise, expected, source):
    """The row maker of one promise: (measured, status, advice="", expected=..., source=...) -> its row."""

    def row(measured, status, advice="", **override):
        fields = dict(expected=expected, source=source)
        fields.update(override)
        return _row(key, promise, fields["expected"], measured, status, advice, fields["source"])

    return row


def _judged(promise, measured, ok, advice, **override):
    """A measured promise's row: MET when ok, else MISSED with the advice."""
    return promise(measured, "MET" if ok else "MISSED", "" if ok else advice, **override)


def _pct(x):
    return "-" if x is None else "%.0f %%" % (100.0 * x)


def _mtp_zero(tradeoff):
    for row in (tradeoff or {}).get("speculative") or []:
        if row.get("num_speculative_tokens") == 0:
            return row
    return None


def _witnessed(record):
    """Could this profile's /metrics samples have seen the planned requests running at once? (bool, why not)."""
    sampling = record.get("sampling") or {}
    gap, reads = finite(sampling.get("max_gap_s")), whole(sampling.get("samples")) or 0
    if record.get("peak_running") is None or not reads:
        return False, "no /metrics read"
    if gap is None or gap > WITNESS_GAP_S:
        return False, "/metrics read only every %s s (at most %g s sees a run of 1 s)" % (
            "?" if gap is None else "%.2f" % gap,
            WITNESS_GAP_S,
        )
    span = finite((record.get("figures") or {}).get("streaming_at_once_s"))
    if span is not None and span <= gap:
        return False, "the streams overlapped for %.2f s, under the %.2f s between two reads" % (span, gap)
    return True, ""


def concurrency_row(conc, records):
    """The concurrency promise: MET only when the engine's own vllm:num_requests_running, sampled over a profile's
    run, reached the planned concurrency and no request failed. MISSED when requests failed, or when the samples
    were close enough to see it (_witnessed) and the gauge stayed below. "not witnessed" when the samples could not
    have seen it; the client's overlapping streams are reported beside, never as the proof. records: profile name ->
    {"figures", "peak_running", "sampling": {"samples", "max_gap_s"}}."""
    promise = "the planned requests run at once"
    peaks = dict((n, r["peak_running"]) for n, r in records.items() if r.get("peak_running") is not None)
    streams = [
        (r.get("figures") or {}).get("streaming_at_once")
        for r in records.values()
        if (r.get("figures") or {}).get("streaming_at_once") is not None
    ]
    failed = sum(int((r.get("figures") or {}).get("failed") or 0) for r in records.values())
    ran = [n for n, r in records.items() if r.get("figures")]
    if not conc or not ran:
        return _row(
            "concurrency", promise, conc, None, "not measured", "run the random or shared-prefix profile", "plan"
        )
    gaps = [
        finite((r.get("sampling") or {}).get("max_gap_s"))
        for r in records.values()
        if finite((r.get("sampling") or {}).get("max_gap_s")) is not None
    ]
    seen = []
    if peaks:
        seen.append(
            "engine: peak %g running in /metrics (%s%s)"
            % (
                max(peaks.values()),
                ", ".join("%s %g" % (n, peaks[n]) for n in sorted(peaks)),
                "; read at least every %.2f s" % max(gaps) if gaps else "",
            )
        )
    else:
        seen.append("engine: /metrics not read")
    if streams:
        best = max(streams)
        spans = [
            finite((r.get("figures") or {}).get("streaming_at_once_s"))
            for r in records.values()
            if (r.get("figures") or {}).get("streaming_at_once") == best
        ]
        spans = [x for x in spans if x is not None]
        seen.append(
            "client: %d streaming at once%s (not the engine's evidence)"
            % (best, " for %.2f s" % max(spans) if spans else "")
        )
    seen.append("%d failed" % failed)
    measured = "; ".join(seen)

    def verdict(status, advice=""):
        return _row("concurrency", promise, "%d" % conc, measured, status, advice, "plan")

    if failed:
        return verdict("MISSED", "requests failed: see the load check's errors")
    if peaks and max(peaks.values()) >= conc:
        return verdict("MET")
    if not peaks:
        return verdict(
            "not measured", "give the load check metrics_url: only the engine's vllm:num_requests_running proves it"
        )
    why = dict((n, _witnessed(r)) for n, r in records.items() if r.get("figures"))
    if any(ok for ok, _why in why.values()):
        return verdict(
            "MISSED",
            "requests queued: not enough KV cache for all at once at that length, or the profile was too short to "
            "fill the slots (raise its num_prompts)",
        )
    return verdict(
        "not witnessed",
        "the engine's /metrics could not see it: %s; run a longer profile (more num_prompts, a longer output_len)"
        % "; ".join("%s: %s" % (n, w) for n, (_ok, w) in sorted(why.items())),
    )


def cpu_build(release):
    """Is ``release`` (the engine's vLLM version, "0.27.1+cpu") vLLM's CPU build? False when unknown."""
    try:
        return parse_vllm(release)["local"] == "cpu" if release else False
    except ValueError:
        return False


def promises(plan, engine, profiles, thresholds=None, tradeoff=None, release=None):
    """The promises table: each planned or expected figure against what the load check measured.

    plan: planned figures (max_model_len, concurrency, num_speculative_tokens, prefix_caching) from the
    deployment report, else the engine's argv (engine_settings). profiles: name -> {"figures": bench_figures
    or tool_outcome, "delta": counter_delta, "peak_running": float, "peak_kv_usage": float, "sampling": {"samples",
    "max_gap_s"}}. Returns rows with status MET (by the engine's own counters or the requests' outcome), MISSED,
    "not witnessed" (the /metrics samples could not have seen it) or "not measured", and the advice that follows.
    release: the engine's vLLM version (the deployment report's engine.version); on vLLM's CPU build (a test
    engine) a speed expected at the field notes' figure is shown but "not measured": that figure is a GPU's, and a
    CPU's speed neither meets nor misses it (a threshold set to another figure is judged)."""
    t = dict(DEFAULT_THRESHOLDS)
    t.update(dict((k, float(v)) for k, v in (thresholds or {}).items() if v is not None))
    plan, engine, profiles = plan or {}, engine or {}, profiles or {}
    ctx = plan.get("max_model_len") or engine.get("max_model_len")
    conc = plan.get("concurrency") or engine.get("max_num_seqs")
    spec = plan.get("num_speculative_tokens")
    if spec is None:
        spec = engine.get("num_speculative_tokens") or 0
    rows = []

    def fig(name):
        return (profiles.get(name) or {}).get("figures") or {}

    def delta(name):
        return (profiles.get(name) or {}).get("delta") or {}

    # context: one request of the planned context is admitted and finishes without preemption
    lc = fig("long-context")
    context = _promise("context", "a request of the planned context is admitted and finishes", ctx, "plan")
    if not lc:
        rows.append(context(None, "not measured", "run the long-context profile"))
    else:
        used = (lc.get("mean_prompt_tokens") or 0) + (lc.get("mean_output_tokens") or 0)
        pre = delta("long-context").get("num_preemptions")
        finished = lc.get("completed") and not lc.get("failed")
        ok = finished and ctx and used >= t["context_fill"] * ctx and not pre
        measured = "%d of %s tokens, %s, %s preemption(s)" % (
            used,
            ctx or "?",
            "finished" if finished else "FAILED",
            "?" if pre is None else "%d" % pre,
        )
        advice = (
            "the planned context does not serve: vLLM preempted or refused the long request; the deployment "
            "report's re-plan and trade-off table give the longest context that fits (vllm_plan_context)"
            if lc.get("failed") or pre
            else "the prompt sent was shorter than %.0f %% of the context: raise the long-context input_len"
            % (100 * t["context_fill"])
        )
        rows.append(_judged(context, measured, ok, advice, expected="%s tokens" % ctx))
    # concurrency: the planned number of requests ran at once, none failed, by the engine's own gauge
    rows.append(concurrency_row(conc, dict((n, profiles.get(n) or {}) for n in CONCURRENCY_PROFILES)))
    # prefix-cache hit rate in the shared-prefix profile
    sp = delta("shared-prefix")
    rate = sp.get("prefix_cache_hit_rate")
    prefix = _promise(
        "prefix_cache_hit_rate",
        "shared prefixes hit the prefix cache",
        ">= %s" % _pct(t["prefix_cache_hit_rate"]),
        "field notes: 80-90 % in steady agent traffic",
    )
    if plan.get("prefix_caching") is False or engine.get("prefix_caching") is False:
        rows.append(
            prefix(
                "prefix caching is off",
                "MISSED",
                "agents share a long system prompt and tool definitions: turn prefix caching on "
                "(vllm_plan_enable_prefix_caching: true)",
            )
        )
    elif rate is None:
        rows.append(prefix(None, "not measured", "run the shared-prefix profile"))
    else:
        measured = "%s (%d of %d prompt tokens)" % (
            _pct(rate),
            sp.get("prefix_cache_hits") or 0,
            sp.get("prefix_cache_queries") or 0,
        )
        advice = (
            "keep the system prompt and tool definitions byte-identical and first; do not "
            "switch reasoning_effort/enable_thinking within a session (it rewrites the system prefix and "
            "the whole prompt is prefilled again); a shared prefix shorter than a few KV blocks cannot hit"
        )
        rows.append(_judged(prefix, measured, rate >= t["prefix_cache_hit_rate"], advice))
    # speculative decoding: mean accepted length over the whole check
    total = (profiles.get("_all") or {}).get("delta") or {}
    # Natural questions and answers (the tools profile) say more about real traffic than random tokens do: its
    # counters when it drafted, else the whole check's.
    spec_src, spec_where = total, "whole check, synthetic prompts"
    if delta("tools").get("spec_mean_accepted_length") is not None:
        spec_src, spec_where = delta("tools"), "tools profile"
    length, acc = spec_src.get("spec_mean_accepted_length"), spec_src.get("spec_acceptance_rate")
    mtp = _promise(
        "mtp_accepted_length",
        "speculative decoding pays (mean accepted length)",
        ">= %.1f" % t["mtp_accepted_length"],
        "field notes: AL >= 2.5 pays",
    )
    if not spec:
        rows.append(mtp("no speculative decoding planned", "not measured"))
    elif length is None:
        rows.append(mtp(None, "not measured", "no drafts counted: run a profile that decodes"))
    else:
        zero = _mtp_zero(tradeoff)
        advice = "speculation costs more than it gives on this traffic: set vllm_plan_num_speculative_tokens: 0"
        if zero:
            advice += " (the trade-off table's MTP 0 row: %s tokens x %s requests, %s blocks of %s)" % (
                zero.get("all_fit_len") or "none",
                (tradeoff or {}).get("concurrency"),
                zero.get("blocks"),
                zero.get("block_size"),
            )
        advice += "; the load check's prompts are synthetic: read the same counters over your own traffic"
        per_pos = ", ".join("%.0f %%" % (100 * p) for p in spec_src.get("spec_acceptance_per_pos") or [])
        measured = "%.2f (acceptance %s%s; %s)" % (
            length,
            _pct(acc),
            "; per position " + per_pos if per_pos else "",
            spec_where,
        )
        ok = length >= t["mtp_accepted_length"]
        rows.append(
            _judged(mtp, measured, ok, advice, source="field notes: acceptance 56-70 %, AL 2.7-3.1; AL >= 2.5 pays")
        )
    # tool calls
    tl = fig("tools")
    tools = _promise(
        "tool_call_parse_rate",
        "tool calls parse",
        ">= %s" % _pct(t["tool_call_parse_rate"]),
        "field notes: --tool-call-parser qwen3_coder",
    )
    if not tl:
        why = "run the tools profile"
        if engine.get("tools") is False:
            why = (
                "the server parses no tool calls (no --enable-auto-tool-choice): set vllm_plan_tool_call_parser "
                "for agents that call tools"
            )
        rows.append(tools(None, "not measured", why))
    else:
        rate = tl.get("parse_rate") or 0.0
        measured = "%s (%d of %d; %d with reasoning)" % (
            _pct(rate),
            tl.get("tool_calls_parsed") or 0,
            tl.get("requests") or 0,
            tl.get("with_reasoning") or 0,
        )
        advice = (
            "check --enable-auto-tool-choice and the tool-call parser for this model "
            "(qwen3_coder for Qwen3.x): the server returned text instead of tool_calls"
        )
        rows.append(_judged(tools, measured, rate >= t["tool_call_parse_rate"], advice))
    # a fact at several depths of the context (the needle profile, when it ran)
    needle = needle_row(fig("needle"), ctx)
    if needle:
        rows.append(needle)
    # decode and prefill speed
    ss, rnd = fig("single-stream"), fig("random")
    for key, promise, value, source, advice in (
        (
            "single_stream_decode_tok_s",
            "decode tok/s of one user",
            ss.get("decode_tok_s"),
            "field notes: 40-48 tok/s with MTP (20+ without)",
            "decode is bound by memory bandwidth: MTP (num_speculative_tokens 3) is the single-stream lever; "
            "a faster card or tensor parallelism the rest",
        ),
        (
            "per_stream_decode_tok_s",
            "decode tok/s of each user at the planned concurrency",
            rnd.get("decode_tok_s")
            if rnd.get("decode_tok_s") is not None
            else fig("shared-prefix").get("decode_tok_s"),
            "field notes: ~36 tok/s each at 4 streams",
            "fewer concurrent requests (vllm_plan_concurrency) make each faster; the aggregate grows with them",
        ),
        (
            "prefill_tok_s",
            "prefill tok/s of one user (prompt / time to first token)",
            ss.get("prefill_tok_s"),
            "field notes: 2400+ tok/s",
            "prefill is bound by compute: a larger --max-num-batched-tokens, prefix caching for shared prompts",
        ),
    ):
        speed = _promise(key, promise, ">= %g" % t[key], source)
        if value is None:
            where = "random or shared-prefix" if key.startswith("per_") else "single-stream"
            rows.append(speed(None, "not measured", "run the %s profile" % where))
        elif cpu_build(release) and t[key] == DEFAULT_THRESHOLDS[key]:
            rows.append(
                speed(
                    "%.1f on vLLM's CPU build (%s), not a GPU" % (value, release),
                    "not measured",
                    "the expected figure is the field notes' GPU's: measure on the card",
                )
            )
        else:
            rows.append(_judged(speed, "%.1f" % value, value >= t[key], advice))
    # preemptions over the whole check; the KV cache's peak use (a figure, no promise)
    pre = total.get("num_preemptions")
    preempted = _promise("preemptions", "no request is preempted", "0", "field notes")
    if pre is None:
        rows.append(preempted(None, "not measured"))
    else:
        advice = (
            "running requests outgrew the KV pool: a shorter context or fewer "
            "concurrent requests (trade-off table); KV offload holds only idle sessions"
        )
        rows.append(
            _judged(preempted, "%d" % pre, not pre, advice, source="field notes: 0 preemptions with 4 conversations")
        )
    return rows


def promise_counts(rows):
    out = dict((s, 0) for s in STATUSES)
    for r in rows or []:
        out[r["status"]] = out.get(r["status"], 0) + 1
    return out


def planned_from_report(report):
    """The planned figures the promises compare with, from the deployment report (report.json the confirm
    step wrote): the final context (a re-plan's, when it restarted), concurrency, speculative tokens,
    prefix caching, the measured block size. {} without a report."""
    if not isinstance(report, dict):
        return {}
    planned, measured, final = (
        (report.get("planned") or {}),
        (report.get("measured") or {}),
        (report.get("final") or {}),
    )
    return {
        "max_model_len": final.get("max_model_len") or planned.get("max_model_len"),
        "concurrency": final.get("concurrency") or planned.get("concurrency"),
        "num_speculative_tokens": (report.get("ledger") or {}).get("num_speculative_tokens"),
        "prefix_caching": measured.get("enable_prefix_caching"),
        "block_size": measured.get("block_size") or planned.get("block_size"),
    }


def profile_line(name, record):
    """One line per profile for people."""
    f = record.get("figures") or {}
    d = record.get("delta") or {}
    took = record.get("wall_s")
    head = "  %-13s %s" % (name, "%.0f s" % took if took is not None else "")
    if name == "needle":
        return "%s: the fact recalled at %d of %d depths (%s)" % (
            head,
            f.get("recalled") or 0,
            f.get("requests") or 0,
            ", ".join(
                "%.0f %%: %s" % (100.0 * d["depth"], "recalled" if d["recalled"] else (d["error"] or "lost"))
                for d in f.get("depths") or []
            ),
        )
    if name == "tools":
        return "%s: %d of %d answers with a parsed tool call, %d with reasoning" % (
            head,
            f.get("tool_calls_parsed") or 0,
            f.get("requests") or 0,
            f.get("with_reasoning") or 0,
        )
    parts = ["%d ok, %d failed" % (f.get("completed") or 0, f.get("failed") or 0)]
    if name == "long-context" and f.get("mean_prompt_tokens"):
        parts.append("prompt %d tokens, prefill %.0f tok/s" % (f["mean_prompt_tokens"], f.get("prefill_tok_s") or 0))
    if name == "single-stream":
        parts.append(
            "decode %s tok/s, prefill %s tok/s"
            % (
                "-" if f.get("decode_tok_s") is None else "%.1f" % f["decode_tok_s"],
                "-" if f.get("prefill_tok_s") is None else "%.0f" % f["prefill_tok_s"],
            )
        )
    if name in ("random", "shared-prefix") and f.get("decode_tok_s"):
        parts.append("decode %.1f tok/s each" % f["decode_tok_s"])
    if d.get("prefix_cache_hit_rate") is not None and name == "shared-prefix":
        parts.append("prefix cache hit %s" % _pct(d["prefix_cache_hit_rate"]))
    if d.get("num_preemptions"):
        parts.append("%d preemption(s)" % d["num_preemptions"])
    if record.get("peak_kv_usage") is not None:
        parts.append("KV cache peak %s" % _pct(record["peak_kv_usage"]))
    return "%s: %s" % (head, ", ".join(parts))


def render_promises(rows):
    """The promises as lines for the end of a playbook."""
    lines = ["promises:"]
    for r in rows or []:
        lines.append(
            "  %-12s %-28s expected %s, measured %s"
            % (
                r["status"],
                r["key"],
                r["expected"] if r["expected"] is not None else "-",
                r["measured"] if r["measured"] is not None else "-",
            )
        )
        if r["advice"] and r["status"] in ("MISSED", "not witnessed"):
            lines.append("               -> " + r["advice"])
    return "\n".join(lines)
