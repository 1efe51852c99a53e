# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine confirms the plan: compare what vLLM 0.27.1 reports with the plan, decide, re-plan once.

Pure functions, stdlib only, Python 3.7-clean.

Inputs are the result of ``vllm_launch_plan`` (its ``ledger`` and ``argv``), the text of the
server's ``/metrics`` and/or the journal of a start, read by _plan_confirm_parse. The re-plan is computed
from the plan's ledger and the measured budget only (no model directory needed) and pins the pool with
``--kv-cache-memory-bytes`` so that vLLM reproduces exactly the measured number of blocks. A plan vLLM
refused is noted and not deployed again (_plan_refusal). The deployment report is _plan_confirm_report.
"""

from __future__ import absolute_import, division, print_function

import math

from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_common import (
    GIB,
    PlanError,
    dtype_bytes,
    fmt_gib,
)
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_confirm_parse import (
    parse_journal,
    parse_metrics,
    refusal_cause,
)
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_confirm_report import (
    component_bytes,
    deployment_report,
    render_markdown,
    render_summary,
    render_svg,
)
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_kv import (
    blocks_per_request,
    longest_fitting_len,
    num_gpu_blocks,
)
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_verdict import encoder_verdict, holds, verdict

__metaclass__ = type


class ConfirmError(PlanError):
    """The inputs cannot be compared (no plan ledger, nothing measured)."""


def _gib_floor(gib):
    """Bytes that surely fit under a figure vLLM printed rounded to 0.01 GiB."""
    return max(0, int(math.floor((gib - 0.005) * GIB)))


# --- comparison -------------------------------------------------------------------------------


def _kv_bytes(name):
    try:
        return dtype_bytes(name)
    except PlanError:
        return None


def _layout(ledger, block=None, cache_dtype=None):
    tok = ledger["attn_bytes_per_token_per_layer"]
    measured_b, planned_b = _kv_bytes(cache_dtype), _kv_bytes(ledger.get("kv_dtype"))
    if cache_dtype not in (None, "auto") and measured_b and planned_b and measured_b != planned_b:
        tok = tok * measured_b // planned_b  # the engine runs another KV dtype than planned
    block = int(block or ledger["block_size"])
    groups = {
        "group_size": ledger["group_size"],
        "full_groups": ledger.get("full_groups", 1),
        "linear_groups": ledger.get("linear_groups", 0),
        "sliding_groups": ledger.get("sliding_groups", 0),
    }
    sliding = None
    if groups["sliding_groups"]:
        sliding = (ledger["sliding_window"], ledger["sliding_in_flight_tokens"])
    return {
        "block": block,
        "page": block * tok,
        "groups": groups,
        "sliding": sliding,
        "spec": ledger.get("num_speculative_tokens", 0),
        "prefix": bool(ledger.get("prefix_caching")),
    }


def _capacity(ledger, lay, blocks, ctx):
    need = blocks_per_request(ctx, lay["block"], lay["groups"], lay["spec"], lay["prefix"], lay["sliding"])
    conc = blocks / float(need) if need else 0.0
    return need, conc, int(conc * ctx)


def encoder_only(ledger):
    """An encoder-only pooling model (an embedder or a cross-encoder reranker): no KV cache, nothing decoded."""
    return bool(((ledger or {}).get("pooling") or {}).get("encoder_only"))


def measured_from(ledger, metrics, journal):
    """What the engine reported, and the KV budget it implies (bytes that surely fit)."""
    info = (metrics or {}).get("cache_config_info") or {}
    j = journal or {}
    m = {
        "source": [],
        "num_gpu_blocks": None,
        "block_size": None,
        "kv_cache_size_tokens": None,
        "kv_cache_memory_bytes": None,
        "max_concurrency": None,
        "cache_dtype": None,
        "enable_prefix_caching": None,
        "weights_bytes": None,
        "budget_bytes": None,
        "budget_how": None,
        "max_model_len": None,
        "memory_summary": j.get("memory_summary"),
        "computed": [],
    }
    if info:
        m["source"].append("metrics: vllm:cache_config_info")
        m["num_gpu_blocks"] = info.get("num_gpu_blocks")
        m["block_size"] = info.get("block_size")
        m["kv_cache_size_tokens"] = info.get("kv_cache_size_tokens")
        m["max_concurrency"] = info.get("kv_cache_max_concurrency")
        m["cache_dtype"] = info.get("cache_dtype")
        m["enable_prefix_caching"] = info.get("enable_prefix_caching")
        if isinstance(info.get("kv_cache_memory_bytes"), int):
            m["kv_cache_memory_bytes"] = info["kv_cache_memory_bytes"]
    if j.get("model_loading_gib") is not None:
        m["weights_bytes"] = int(j["model_loading_gib"] * GIB)
        m["source"].append("journal: Model loading took")
    if j.get("kv_cache_tokens") is not None and m["kv_cache_size_tokens"] is None:
        m["kv_cache_size_tokens"] = j["kv_cache_tokens"]
    if j.get("max_concurrency") is not None and m["max_concurrency"] is None:
        m["max_concurrency"] = j["max_concurrency"]
    if j.get("max_concurrency_len"):
        m["max_model_len"] = j["max_concurrency_len"]
    if encoder_only(ledger):
        # No KV layers: no pool to size from the engine's blocks, nor a budget it implies.
        return m
    lay = _layout(ledger, m["block_size"], m["cache_dtype"])
    gs = lay["groups"]["group_size"]
    if m["kv_cache_memory_bytes"]:
        m["budget_bytes"] = m["kv_cache_memory_bytes"]
        m["budget_how"] = "kv_cache_memory_bytes label (pinned pool)"
    elif isinstance(m["num_gpu_blocks"], int):
        gpu_blocks = int(m["num_gpu_blocks"])  # an int here; int() also tells pylint it is not None
        m["budget_bytes"] = gpu_blocks * lay["page"] * gs
        m["budget_how"] = "num_gpu_blocks %d x page %d B x %d layers per group" % (gpu_blocks, lay["page"], gs)
    elif j.get("refusal"):
        m["budget_bytes"] = _gib_floor(j["refusal"]["available_gib"])
        m["budget_how"] = "refusal: available KV cache memory %.2f GiB (rounded down)" % (j["refusal"]["available_gib"])
        m["source"].append("journal: refusal")
    elif j.get("available_kv_gib") is not None:
        m["budget_bytes"] = _gib_floor(j["available_kv_gib"])
        m["budget_how"] = "Available KV cache memory %.2f GiB (rounded down)" % j["available_kv_gib"]
        m["source"].append("journal: Available KV cache memory")
    if m["budget_bytes"] is not None and m["num_gpu_blocks"] is None:
        m["num_gpu_blocks"] = num_gpu_blocks(m["budget_bytes"], lay["page"], gs)
        m["computed"] = ["num_gpu_blocks"]  # from the engine's budget and the plan's page: not the engine's figure
    return m


def replan(plan_result, budget, block=None, cache_dtype=None):
    """Re-plan from a measured KV budget: pin it, and keep the stated context x concurrency when
    it fits, else the largest context at which that concurrency fits, else the longest single
    request. Returns the new argv and the numbers vLLM will report with it."""
    ledger = plan_result["ledger"]
    lay = _layout(ledger, block, cache_dtype)
    gs = lay["groups"]["group_size"]
    blocks = num_gpu_blocks(budget, lay["page"], gs)
    pinned = blocks * lay["page"] * gs  # exactly what vLLM turns into `blocks` blocks again
    conc = int(ledger.get("concurrency") or 1)
    ctx = int(ledger["max_model_len"])
    upper = ledger.get("max_position_embeddings") or None
    args = [lay["block"], lay["groups"], lay["spec"], lay["prefix"]]
    need, max_conc, tokens = _capacity(ledger, lay, blocks, ctx) if blocks else (0, 0.0, 0)
    promise = min(float(conc), float(ledger.get("max_concurrency_at_len") or conc))
    keep_partial = ledger.get("context_requested") and not ledger.get("require_full_length_concurrency")
    one = longest_fitting_len(blocks, *(args + [1, lay["sliding"], upper])) if blocks else 0
    if blocks and need <= blocks and (keep_partial or max_conc + 1e-9 >= promise):
        how = (
            ("stated context %d kept: %.2f full-length requests fit (planned %.2f)" % (ctx, max_conc, promise))
            if max_conc + 1e-9 < promise
            else ("stated context %d x %.2f requests still fit" % (ctx, promise))
        )
    else:
        fit = longest_fitting_len(blocks, *(args + [conc, lay["sliding"], upper]))
        if fit and fit >= 1024:
            fit -= fit % 1024
        if fit and fit >= lay["block"] and not keep_partial:
            ctx = fit
            how = "largest multiple of 1024 keeping %d full-length requests in %d blocks" % (conc, blocks)
        elif one:
            ctx = one
            how = "longest single request in %d blocks (what vLLM itself estimates)" % blocks
        else:
            return {
                "feasible": False,
                "kv_cache_memory_bytes": pinned,
                "num_gpu_blocks": blocks,
                "reason": "the measured budget %s holds %d blocks: not one request" % (fmt_gib(budget), blocks),
            }
        need, max_conc, tokens = _capacity(ledger, lay, blocks, ctx)
    argv = _pinned_argv(plan_result["argv"], ctx, pinned)
    return {
        "feasible": True,
        "kv_cache_memory_bytes": pinned,
        "num_gpu_blocks": blocks,
        "block_size": lay["block"],
        "max_model_len": ctx,
        "max_model_len_how": how,
        "blocks_per_full_request": need,
        "max_concurrency_at_len": round(max_conc, 2),
        "gpu_kv_cache_tokens": tokens,
        "concurrency": conc,
        "argv": argv,
    }


def _pinned_argv(argv, ctx, pinned):
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("--max-model-len", "--kv-cache-memory-bytes"):
            skip = True
            continue
        if a.startswith("--max-model-len=") or a.startswith("--kv-cache-memory-bytes="):
            continue
        out.append(a)
    pos = 1 if out and not out[0].startswith("-") else 0
    return out[:pos] + ["--max-model-len", str(ctx), "--kv-cache-memory-bytes", str(pinned)] + out[pos:]


def replanned_plan(plan_result, replan_result):
    """The plan as the re-plan changed it (pinned pool, its context): what the engine must confirm after
    the one restart, instead of the first plan it could not hold."""
    ledger = dict(plan_result["ledger"])
    ledger.update(
        {
            "kv_pool_bytes": replan_result["kv_cache_memory_bytes"],
            "kv_pool_measured": True,
            "num_gpu_blocks": replan_result["num_gpu_blocks"],
            "block_size": replan_result["block_size"],
            "gpu_kv_cache_tokens": replan_result["gpu_kv_cache_tokens"],
            "max_model_len": replan_result["max_model_len"],
            "max_concurrency_at_len": replan_result["max_concurrency_at_len"],
        }
    )
    return dict(plan_result, ledger=ledger, argv=replan_result["argv"])


def confirm(
    plan_result,
    metrics_text=None,
    journal_text=None,
    is_replan=False,
    tradeoff_rows=None,
    replanned=None,
    engine_env=None,
):
    """Planned vs measured, the verdict, at most one re-plan, and the deployment report.

    The verdict is _plan_verdict.verdict's, decided here once (``verdict``, ``verdict_text``,
    ``verdict_evidence``) and only printed by the report, its markdown and the summary. A re-plan is made
    when the measured pool does not hold what the plan promised (context x concurrency, or the warned
    fraction of it) or the engine refused the plan. ``restart`` is true only when a feasible re-plan exists
    and ``is_replan`` is false: the caller restarts once with ``replan.argv`` and calls this again with
    is_replan=true, which never asks for another restart.
    """
    if not isinstance(plan_result, dict) or not isinstance(plan_result.get("ledger"), dict):
        raise ConfirmError("plan must be the result of airgap.vllm.vllm_launch_plan (with its ledger and argv)")
    if replanned and replanned.get("feasible"):
        plan_result = replanned_plan(plan_result, replanned)
    ledger = plan_result["ledger"]
    metrics = parse_metrics(metrics_text) if metrics_text else None
    journal = parse_journal(journal_text) if journal_text else None
    if not (metrics and metrics["cache_config_info"]) and not journal:
        raise ConfirmError(
            "nothing measured: give the /metrics text (vllm:cache_config_info) and/or the journal of the start"
        )
    m = measured_from(ledger, metrics, journal)
    refused = bool(
        journal
        and (journal["refusal"] or journal["no_memory"] or journal["not_free"])
        and not (metrics and metrics["cache_config_info"])
    )
    planned = {
        "kv_cache_memory_bytes": ledger["kv_pool_bytes"],
        "kv_pool_measured": ledger.get("kv_pool_measured", False),
        "num_gpu_blocks": ledger["num_gpu_blocks"],
        "block_size": ledger.get("block_size"),
        "kv_cache_size_tokens": ledger["gpu_kv_cache_tokens"],
        "max_model_len": ledger["max_model_len"],
        "concurrency": ledger.get("concurrency"),
        # An encoder-only model: its --max-num-seqs, no KV pool limits it.
        "max_concurrency": ledger["max_concurrency_at_len"]
        if ledger.get("max_concurrency_at_len") is not None
        else ledger.get("concurrency"),
        "weights_bytes": component_bytes(ledger, "weights"),
        "non_kv_bytes": ledger["non_kv_bytes"],
        "budget_bytes": ledger["budget_bytes"],
        "attention_backend": ledger.get("attention_backend"),
        "kv_dtype": ledger.get("kv_dtype"),
    }
    encoder = encoder_only(ledger)
    # An encoder-only model promises its concurrency (no KV pool caps it: its ledger has no max_concurrency_at_len).
    promise = min(
        float(ledger.get("concurrency") or 1),
        float(ledger["max_concurrency_at_len"] if not encoder else ledger.get("concurrency") or 1),
    )
    measured_conc = None
    if encoder:
        # Nothing decoded, no pool to hold requests: a started engine holds what it was planned for, unless it
        # allocated a pool the plan did not count (_plan_verdict.encoder_verdict says which).
        measured_conc = None if refused else promise
    elif m["num_gpu_blocks"] is not None and not refused:
        lay = _layout(ledger, m["block_size"], m["cache_dtype"])
        _need, measured_conc, _tok = _capacity(ledger, lay, m["num_gpu_blocks"], ledger["max_model_len"])
    held = holds(measured_conc, promise) and not refused
    new = None
    if not held and m["budget_bytes"] is not None and not encoder:
        new = replan(plan_result, m["budget_bytes"], m["block_size"], m["cache_dtype"])
    restart = bool(new and new.get("feasible") and not is_replan and not held)
    notes = []
    if is_replan and not held:
        notes.append(
            "already a re-plan: not restarting again (no loop); fix the inputs or pin a smaller context by hand"
        )
    if journal and journal["refusal"] and journal["refusal"]["estimated_max_model_len"] and new and new.get("feasible"):
        est = journal["refusal"]["estimated_max_model_len"]
        notes.append(
            "vLLM's own estimate of the longest length: %d; re-plan: %d (%s)"
            % (est, new["max_model_len"], new["max_model_len_how"])
        )
    if journal and journal["not_free"]:
        notes.append(
            "the card was not free enough for gpu_memory_utilization %.2f (%.2f of "
            "%.2f GiB free): another process holds GPU memory"
            % (journal["not_free"]["utilization"], journal["not_free"]["free_gib"], journal["not_free"]["total_gib"])
        )
    delta = {}
    for key in ("kv_cache_memory_bytes", "num_gpu_blocks", "kv_cache_size_tokens"):
        mv = m["budget_bytes"] if key == "kv_cache_memory_bytes" else m.get(key)
        pv = planned[key]
        if mv is not None and pv:
            delta[key] = {
                "planned": pv,
                "measured": mv,
                "error_percent": round(100.0 * (pv - mv) / float(mv), 2) if mv else None,
            }
    pool = pool_check(planned, m, ledger.get("estimate_band"), engine_env, held=held)
    refusal = (
        (refusal_cause(journal) or ("another process holds GPU memory" if journal["not_free"] else None))
        if refused
        else None
    )
    if encoder:
        decided = encoder_verdict(planned, m, ledger, refused=refused, refusal=refusal)
    else:
        decided = verdict(planned, m, pool, measured_conc, promise, refused=refused, refusal=refusal)
    result = {
        "verdict": decided["status"],
        "verdict_text": decided["text"],
        "verdict_evidence": decided["evidence"],
        "restart": restart,
        "is_replan": bool(is_replan),
        "planned": planned,
        "measured": m,
        "delta": delta,
        "replan": new,
        "notes": notes,
        "measured_concurrency_at_len": round(measured_conc, 2) if measured_conc is not None else None,
        "promised_concurrency_at_len": round(promise, 2),
    }
    result["parts"] = part_deltas(ledger, m.get("memory_summary"))
    result["pool"] = pool
    if pool["note"]:
        notes.append(pool["note"])
    # A pool a test setting fixed (the CPU engine's) says nothing of the planned card: the plan's own table stays.
    if tradeoff_rows is None and m["budget_bytes"] and plan_result.get("inputs") and not pool["explained_by"]:
        tradeoff_rows = measured_tradeoff(plan_result, m["budget_bytes"])
    result["report"] = deployment_report(plan_result, result, tradeoff_rows)
    result["report_markdown"] = render_markdown(result["report"])
    result["report_svg"] = render_svg(result["report"])
    result["summary"] = render_summary(dict(result, engine=result["report"]["engine"], share=result["report"]["share"]))
    return result


# The ledger's parts against the engine's one-line memory summary (_plan_confirm_parse.RE_SUMMARY): (part, the
# summary's key). "budget" is gpu_memory_utilization x the total CUDA reports, "kv_pool" the pool it sized.
PARTS = (
    ("budget", "requested_gib"),
    ("weights", "weights_gib"),
    ("activation_peak", "activation_gib"),
    ("non_torch", "non_torch_gib"),
    ("cuda_graphs", "cudagraph_gib"),
    ("kv_pool", "kv_cache_gib"),
)


def part_deltas(ledger, summary):
    """Planned vs engine, part by part, from the engine's memory summary: [{part, planned_bytes, measured_bytes,
    error_percent ((planned - engine) / engine)}] for each part the summary names ([] without one). A part the
    ledger keeps outside the pool (``outside_pool``: the CUDA graphs of a model runner that sizes the pool first)
    is compared all the same."""
    if not summary:
        return []
    planned = {
        "budget": ledger.get("budget_bytes"),
        "kv_pool": ledger.get("kv_pool_bytes"),
    }
    for c in ledger.get("components", []):
        planned[c["name"]] = c["bytes"]
    for c in ledger.get("outside_pool", []) or []:
        planned[c["name"]] = c["bytes"]
    out = []
    for part, key in PARTS:
        gib = summary.get(key)
        if gib is None:
            continue
        mv = int(round(gib * GIB))
        pv = planned.get(part)
        out.append(
            {
                "part": part,
                "planned_bytes": pv,
                "measured_bytes": mv,
                "error_percent": round(100.0 * (pv - mv) / float(mv), 1) if (pv is not None and mv) else None,
            }
        )
    return out


def measured_tradeoff(plan_result, budget):
    """The trade-off table again, planned at the engine's measured budget (needs the plan's ``inputs`` and
    its model directory); None when it cannot be recomputed (the plan's own table is kept). Its figures are
    computed, not measured: its ``basis`` says from what."""
    from ansible_collections.airgap.vllm.plugins.module_utils.planner import _planner
    from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_tradeoff import tradeoff

    inputs = dict(plan_result["inputs"])
    inputs["measured_kv_cache_bytes"] = int(budget)
    inputs["pin_kv_cache_memory"] = False
    old = plan_result.get("tradeoff") or {}
    if old.get("skipped"):
        return None  # a pooling model: no trade-off table to recompute (vllm_launch_plan says why)
    try:
        table = tradeoff(_planner.plan, inputs, title=old.get("title") or "")
    except (PlanError, IOError, OSError, KeyError, TypeError, ValueError):
        return None
    table["basis"] = "planned from the engine's measured KV pool of %s" % fmt_gib(int(budget))
    return table


# --- is the pool the planned one (the report states it) ---------------------------------------------

POOL_TOLERANCE = 0.10  # outside the estimate's band and this far from the plan, the pool is "not as planned"


def pool_check(planned, measured, band=None, engine_env=None, held=False):
    """Is the measured KV pool the planned one? {status: as_planned|smaller|larger|not_measured, ratio,
    explained_by, set_by, note}. The plan's estimate band (ledger estimate_band) counts as planned; a pool fixed by
    a test setting (the CPU engine's VLLM_CPU_KVCACHE_SPACE, GiB of host memory: vllm/v1/worker/cpu_worker.py
    "Explicitly set ... GiB for KV cache") is said to be one. ``held``: the pool holds the planned requests, so
    no re-plan is made and the note does not point at one."""
    p = (planned or {}).get("kv_cache_memory_bytes")
    m = (measured or {}).get("budget_bytes")
    out = {
        "status": "not_measured",
        "ratio": None,
        "planned_bytes": p,
        "measured_bytes": m,
        "explained_by": None,
        "set_by": None,
        "note": None,
    }
    if not p or m is None:
        return out
    out["ratio"] = round(float(m) / p, 4) if p else None
    band = band or {}
    low = min(band.get("kv_pool_low_bytes") or p, p * (1 - POOL_TOLERANCE))
    high = max(band.get("kv_pool_high_bytes") or p, p * (1 + POOL_TOLERANCE))
    if low <= m <= high:
        out["status"] = "as_planned"
        return out
    out["status"] = "smaller" if m < p else "larger"
    factor = (float(p) / m if m else float("inf")) if m < p else float(m) / p
    space = (engine_env or {}).get("VLLM_CPU_KVCACHE_SPACE")
    try:
        space_bytes = int(float(space) * GIB) if space not in (None, "") else None
    except (TypeError, ValueError):
        space_bytes = None
    if space_bytes and abs(m - space_bytes) <= max(GIB // 100, space_bytes // 100):
        out["set_by"] = "VLLM_CPU_KVCACHE_SPACE=%s" % space
        out["explained_by"] = (
            "the CPU engine's VLLM_CPU_KVCACHE_SPACE=%s fixes its KV pool at %s GiB of host memory "
            "(a test setting): the planned pool is the GPU's and was not measured here" % (space, space)
        )
    out["note"] = "the KV pool is %s than planned: %s measured against %s planned (%.1fx)%s" % (
        out["status"],
        fmt_gib(m),
        fmt_gib(p),
        factor,
        ("; " + out["explained_by"])
        if out["explained_by"]
        else "; the engine did not get the memory the plan counted on (another process on the card, a different "
        "gpu_memory_utilization, or an estimate off by more than its band): %s"
        % (
            "the planned requests still fit, so no re-plan was made; give the measured pool to the planner "
            "(vllm_plan_measured_kv_cache_bytes) to plan from it"
            if held
            else "see the re-plan"
        ),
    )
    return out
