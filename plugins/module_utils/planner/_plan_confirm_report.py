# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine confirms the plan, part three: the deployment report (report.json, report.md, memory.svg)
and the summary at the end of a playbook, from _plan_confirm's comparison.

Pure functions, stdlib only, Python 3.7-clean. The report never contradicts itself: it carries the one
verdict _plan_verdict.verdict decided (``verdict``, ``verdict_text``, ``verdict_evidence``) and report.md and
the summary print that, never a verdict of their own. Tables say "planned" for what was computed and
"measured" only for what the engine reported.
"""

from __future__ import absolute_import, division, print_function

import json

from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_common import (
    fmt_gib,
    fmt_tokens,
    release_rules,
)
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_confirm_picture import render_svg as picture_svg

__metaclass__ = type


def engine_release(plan_result):
    """The vLLM release the plan was made for (the image's, vllm_launch_plan's ``vllm_version`` kept in its
    ``inputs``): {"version", "known", "rules", "relation", "text"}, or None when the plan was made without one."""
    version = ((plan_result or {}).get("inputs") or {}).get("vllm_version")
    if not version or not str(version).strip():
        return None
    try:
        r = release_rules(str(version))
    except ValueError:
        return {
            "version": str(version),
            "known": False,
            "rules": None,
            "relation": "unreadable",
            "text": "vLLM %r (UNKNOWN: not a version)" % str(version),
        }
    rules = r["rules"]["release"]
    text = "vLLM %s" % r["version"]
    if not r["known"]:
        text += " (UNKNOWN release, %s: planned with the rules of vLLM %s)" % (r["relation"], rules)
    elif r["rules"].get("planner", rules) != rules:
        text += " (known; sizing rules of vLLM %s)" % r["rules"]["planner"]
    return {"version": r["version"], "known": r["known"], "rules": rules, "relation": r["relation"], "text": text}


def render_summary(result):
    """One screen for the end of a playbook."""
    p, m, r = result["planned"], result["measured"], result.get("replan")
    engine = result.get("engine")
    lines = [
        "vLLM plan %s%s" % (stated_verdict(result), " -> restart once with the re-plan" if result["restart"] else ""),
        "  KV pool   planned %s, measured %s (%s)"
        % (
            fmt_gib(p["kv_cache_memory_bytes"]),
            fmt_gib(m["budget_bytes"]) if m.get("budget_bytes") is not None else "-",
            m.get("budget_how") or "-",
        ),
        "  blocks    planned %s, measured %s" % (p["num_gpu_blocks"], m.get("num_gpu_blocks")),
        "  context   %s x %s requests planned (%.2f full-length fit)"
        % (p["max_model_len"], p["concurrency"], p["max_concurrency"] or 0),
    ]
    if r and r.get("feasible"):
        lines.append(
            "  re-plan   --max-model-len %d --kv-cache-memory-bytes %d: %.2f full-length "
            "requests, %s tokens"
            % (
                r["max_model_len"],
                r["kv_cache_memory_bytes"],
                r["max_concurrency_at_len"],
                "{:,}".format(r["gpu_kv_cache_tokens"]),
            )
        )
    elif r:
        lines.append("  re-plan   not feasible: %s" % r["reason"])
    if share_line(result.get("share")):
        lines.append("  card      " + share_line(result.get("share")))
    lines += ["  note      " + n for n in result.get("notes", [])]
    if engine:
        lines.insert(0, "vLLM release: %s" % engine["text"][len("vLLM ") :])
    return "\n".join(lines)


def component_bytes(ledger, name):
    """Bytes of the ledger's component ``name`` (0 when the ledger has none)."""
    for c in ledger.get("components", []):
        if c["name"] == name:
            return c["bytes"]
    return 0


# --- report ----------------------------------------------------------------------------------


def memory_bars(ledger, measured):
    """weights | other | KV pool | free, per GPU, planned and measured (bytes)."""
    total = int(ledger.get("gpu_total_bytes") or 0)
    budget = int(ledger["budget_bytes"])
    pw = component_bytes(ledger, "weights")
    planned = {
        "total": total,
        "weights": pw,
        "other": budget - pw - ledger["kv_pool_bytes"],
        "kv_pool": ledger["kv_pool_bytes"],
        "free": max(0, total - budget),
    }
    bars = {"planned": planned, "measured": None}
    if measured and measured.get("budget_bytes") is not None:
        mw = measured.get("weights_bytes")
        weights = mw if mw is not None else pw
        kv = measured["budget_bytes"]
        bars["measured"] = {
            "total": total,
            "weights": weights,
            "other": max(0, budget - weights - kv),
            "kv_pool": kv,
            "free": max(0, total - max(budget, weights + kv)),
            "weights_measured": mw is not None,
            # Only the KV pool (and the weights, from a journal) is the engine's number: the rest
            # of the bar is the plan's budget, not a measurement.
            "labels": {
                "weights": "weights" if mw is not None else "weights (planned)",
                "other": "not measured",
                "kv_pool": "KV pool",
                "free": "free (planned)",
            },
        }
    return bars


def deployment_report(plan_result, confirmation, tradeoff_rows=None):
    ledger = plan_result["ledger"]
    tradeoff = tradeoff_rows or plan_result.get("tradeoff")
    if tradeoff and tradeoff.get("skipped"):
        # A pooling model answers no context x concurrency question: vllm_launch_plan says why it has no table.
        tradeoff = None
    final = confirmation.get("replan") if confirmation.get("restart") else None
    final_ctx = final["max_model_len"] if final else ledger["max_model_len"]
    return {
        "engine": engine_release(plan_result),
        "verdict": confirmation["verdict"],
        "verdict_text": confirmation.get("verdict_text"),
        "verdict_evidence": confirmation.get("verdict_evidence"),
        "restart": confirmation["restart"],
        "is_replan": confirmation["is_replan"],
        "planned": confirmation["planned"],
        "measured": confirmation["measured"],
        "delta": confirmation["delta"],
        "parts": confirmation.get("parts") or [],
        "replan": confirmation.get("replan"),
        "final": {
            "max_model_len": final_ctx,
            "concurrency": ledger.get("concurrency"),
            "kv_cache_memory_bytes": final["kv_cache_memory_bytes"] if final else None,
            "max_concurrency_at_len": final["max_concurrency_at_len"]
            if final
            else (confirmation.get("measured_concurrency_at_len") or ledger["max_concurrency_at_len"]),
        },
        "memory": memory_bars(ledger, confirmation["measured"]),
        "tradeoff": tradeoff,
        "notes": confirmation.get("notes", []),
        "pool": confirmation.get("pool"),
        "plan_warnings": plan_result.get("plan_warnings") or [],
        "ledger": {
            "num_speculative_tokens": ledger.get("num_speculative_tokens"),
            "prefix_caching": ledger.get("prefix_caching"),
            "attention_backend": ledger.get("attention_backend"),
            "kv_dtype": ledger.get("kv_dtype"),
            "block_size": ledger.get("block_size"),
            "model_family": ledger.get("model_family"),
        },
        # A card shared with other services: this one's part of the split (_plan_share), None on a card of its own.
        "share": ledger.get("share"),
    }


def share_line(share):
    """This service's part of a shared card in one line ('' on a card of its own)."""
    if not isinstance(share, dict) or not share:
        return ""
    return "card share %.1f%%: --gpu-memory-utilization %.3f, budget %s, footprint %s; starts %d of %d (%s)" % (
        100 * share["share"],
        share["gpu_memory_utilization"],
        fmt_gib(share["budget_bytes"]),
        fmt_gib(share["footprint_bytes"]),
        share["order"],
        len(share["card_services"]),
        ", ".join(share["card_services"]),
    )


def render_markdown(report):
    p, m = report["planned"], report["measured"]

    def g(b):
        return fmt_gib(b) if isinstance(b, int) else "-"

    def n(v):
        return "{:,}".format(v) if isinstance(v, int) else ("-" if v is None else str(v))

    rows = (
        [
            "# vLLM deployment report",
            "",
            "**Verdict: %s**%s" % (stated_verdict(report), " (restart with the re-plan)" if report["restart"] else ""),
            "",
        ]
        + _evidence_lines(report.get("verdict_evidence"))
        + (["Engine: %s." % report["engine"]["text"], ""] if report.get("engine") else [])
        + (["GPU shared: %s." % share_line(report.get("share")), ""] if report.get("share") else [])
        + [
            "| | planned | measured |",
            "|---|---|---|",
            "| KV pool | %s | %s |" % (g(p["kv_cache_memory_bytes"]), g(m.get("budget_bytes"))),
            "| num_gpu_blocks | %s | %s |"
            % (
                n(p["num_gpu_blocks"]),
                n(m.get("num_gpu_blocks"))
                + (" (computed from it)" if "num_gpu_blocks" in (m.get("computed") or []) else ""),
            ),
            "| block size | %s | %s |" % (n(p["block_size"]), n(m.get("block_size"))),
            "| GPU KV cache size (tokens) | %s | %s |"
            % (n(p["kv_cache_size_tokens"]), n(m.get("kv_cache_size_tokens"))),
            "| weights | %s | %s |" % (g(p["weights_bytes"]), g(m.get("weights_bytes"))),
            "| max_model_len | %s | %s |" % (n(p["max_model_len"]), n(m.get("max_model_len"))),
            "| full-length requests at once | %s | %s |"
            % (p["max_concurrency"], m.get("max_concurrency") if m.get("max_concurrency") is not None else "-"),
            "",
            "Measured from: %s; budget: %s." % (", ".join(m.get("source") or ["-"]), m.get("budget_how") or "-"),
            "",
        ]
    )
    if report.get("parts"):
        rows += ["## The ledger part by part (the engine's memory summary)", "", "| part | planned | engine | error |"]
        rows.append("|---|---|---|---|")
        for part in report["parts"]:
            err = part.get("error_percent")
            rows.append(
                "| %s | %s | %s | %s |"
                % (
                    part["part"],
                    g(part["planned_bytes"]),
                    g(part["measured_bytes"]),
                    "-" if err is None else "%+.1f %%" % err,
                )
            )
        rows.append("")
    r = report.get("replan")
    if r and r.get("feasible"):
        rows += [
            "## Re-plan from the measured budget",
            "",
            "`--kv-cache-memory-bytes %d` (%s), `--max-model-len %d` (%s): %s blocks, "
            "%.2f full-length requests, %s tokens."
            % (
                r["kv_cache_memory_bytes"],
                fmt_gib(r["kv_cache_memory_bytes"]),
                r["max_model_len"],
                r["max_model_len_how"],
                n(r["num_gpu_blocks"]),
                r["max_concurrency_at_len"],
                n(r["gpu_kv_cache_tokens"]),
            ),
            "",
        ]
    elif r:
        rows += ["## Re-plan", "", "Not feasible: %s." % r["reason"], ""]
    f = report["final"]
    rows += [
        "Final: context %s x %s requests (%.2f full-length requests fit)."
        % (n(f["max_model_len"]), n(f["concurrency"]), f["max_concurrency_at_len"] or 0),
        "",
    ]
    t = report.get("tradeoff")
    if t:
        rows += render_tradeoff_markdown(t) + [""]
    if report.get("promises"):
        rows += render_promises_markdown(report["promises"]) + [""]
    if report.get("plan_warnings"):
        rows += ["## Planner warnings", ""]
        for w in report["plan_warnings"]:
            rows.append("- **%s**: %s (%s)" % (w.get("id"), w.get("message"), w.get("source")))
        rows.append("")
    for note in report.get("notes", []):
        rows.append("- " + note)
    rows += ["", "![memory](memory.svg)"]
    return "\n".join(rows) + "\n"


def _tokens_or_none(n):
    return fmt_tokens(n) if n else "none"


# The trade-off's sweeps (_plan_tradeoff.sweep): (rows' key, a row's question, what its answer says after
# "<all-fit length> x <concurrency> requests, ").
TRADEOFF_SWEEPS = (
    (
        "batched_tokens",
        lambda row: "`--max-num-batched-tokens %d`" % row["max_num_batched_tokens"],
        lambda row: "KV pool %s" % fmt_gib(row["kv_pool_bytes"]),
    ),
    (
        "speculative",
        lambda row: "MTP %d speculative tokens" % row["num_speculative_tokens"],
        lambda row: "%s blocks of %d" % ("{:,}".format(row["blocks"]), row["block_size"]),
    ),
)


def render_tradeoff_markdown(t):
    rows = [
        "## Trade-off (%s, %s)"
        % (
            t.get("title") or "this card",
            t.get("basis") or ("planned from a measured KV pool" if t.get("measured") else "planned"),
        ),
        "",
        "| question | answer |",
        "|---|---|",
        "| longest context where %d requests all fit | %s |" % (t["concurrency"], _tokens_or_none(t["all_fit_len"])),
        "| longest single request (`--max-model-len`) | %s |" % _tokens_or_none(t["single_len"]),
    ]
    for row in t["typical"]:
        rows.append(
            "| requests of %s that fit at once (then vLLM preempts) | %d |" % (fmt_tokens(row["length"]), row["fit"])
        )
    for key, question, detail in TRADEOFF_SWEEPS:
        for row in t.get(key, []):
            rows.append(
                "| %s | %s x %d requests, %s%s |"
                % (
                    question(row),
                    _tokens_or_none(row["all_fit_len"]),
                    t["concurrency"],
                    detail(row),
                    row.get("note", ""),
                )
            )
    return rows


def render_svg(report):
    """memory.svg: two stacked bars, planned and measured (_plan_confirm_picture lays out every box)."""
    return picture_svg(report)


# --- the report never contradicts itself ------------------------------------------------------------


def stated_verdict(report):
    """The verdict as _plan_verdict.verdict worded it (``verdict_text``); a report written before it had words
    states its status alone. Never decides anything."""
    return report.get("verdict_text") or report.get("verdict") or "-"


def _evidence_lines(evidence):
    """What the engine reported and what it did not, under the verdict of report.md."""
    evidence = evidence or {}
    out = []
    for key, head in (("measured", "Measured by the engine"), ("not_measured", "Not measured")):
        if evidence.get(key):
            out.append("- %s: %s." % (head, "; ".join(evidence[key])))
    return out + ([""] if out else [])


def render_promises_markdown(rows):
    """The promises table of report.md."""
    out = [
        "## Promises",
        "",
        "| promise | expected | measured | status | advice | source |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            "| %s | %s | %s | %s | %s | %s |"
            % tuple(
                ("-" if v in (None, "") else str(v)).replace("|", "\\|")
                for v in (
                    r.get("promise"),
                    r.get("expected"),
                    r.get("measured"),
                    "**%s**" % r.get("status") if r.get("status") == "MISSED" else r.get("status"),
                    r.get("advice"),
                    r.get("source"),
                )
            )
        )
    return out


CARRIED = ("promises", "loadcheck")


def carry_promises(old_report, new_report):
    """The new report with the load check's promises of the old one (report.json on the host) when both describe
    the same deployment (planned and final equal): a converged re-run that confirms again keeps them, and so
    leaves report.md unchanged; a changed plan drops them (its load check writes new ones). Returns the report
    (a copy when something was carried) and whether it was."""
    if not isinstance(old_report, dict) or not isinstance(new_report, dict):
        return new_report, False
    if not any(old_report.get(k) for k in CARRIED):
        return new_report, False
    same = all(
        json.dumps(old_report.get(k), sort_keys=True, default=str)
        == json.dumps(new_report.get(k), sort_keys=True, default=str)
        for k in ("planned", "final")
    )
    if not same:
        return new_report, False
    out = dict(new_report)
    for key in CARRIED:
        if old_report.get(key):
            out[key] = old_report[key]
    return out, True
