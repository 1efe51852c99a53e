# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The memory ledger of a launch plan: budget, non-KV estimate, KV pool, blocks, context.

Pure, stdlib only, Python 3.7-clean. size() lays the KV cache out the way vLLM 0.27.1 does
(_plan_kv), takes the non-KV estimate (_plan_memory), and chooses (or checks) the context against
the pool; render_ledger() prints it for a human.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_common import (
    GIB,
    VLLM_VERSION,
    InfeasibleError,
    TargetsError,
    dtype_bytes,
    fmt_gib,
    fmt_tokens,
    rule_holds,
)
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_kv import (
    attn_bytes_per_token,
    blocks_per_request,
    gdn_blocks_per_request,
    gdn_state_bytes,
    group_layers,
    hybrid_block_size,
    longest_fitting_len,
    max_in_flight_tokens,
    num_gpu_blocks,
)
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_memory import (
    attention_backend,
    cuda_graphs_before_pool,
    estimate_non_kv,
    flashinfer_workspace,
    model_runner,
)
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_targets import resolve_kv_dtype

CLEAN_LEN_MULTIPLE = 1024  # "max" context lengths are rounded down to whole K (binary)
# Observed error of the non-KV estimate (docs/launch-planning.md, "Remaining error"): the largest gap each way
# between the estimate and the engine's own non-KV memory over every start we have numbers of. Not a correction:
# the band is reported, a plan at "max" context keeps its concurrency within the low end (_choose_context), and
# the confirm step replaces the estimate with the engine's numbers.
# Low: the field's bf16 start (Qwen3.5-27B-FP8 family, MTP 3, 48 GB SM 8.9 card) was 1.71 GiB above the estimate;
# 1.95 GiB since non-torch memory is planned 0.24 GiB smaller (_plan_memory.NON_TORCH_BYTES, issue 43).
ESTIMATE_ERROR_LOW = int(1.95 * GIB)  # non-KV may be this much larger -> smaller pool
# High: vLLM 0.26.0 on an H100 (issue 43), Qwen3-8B shape bf16 at 256 users: estimate 17.15 GiB (weights 15.26 +
# non-torch 0.26 + activation 1.63), engine 16.77 GiB (budget 72.84 - pool 56.07); was 0.13 GiB (qevos.ai).
ESTIMATE_ERROR_HIGH = int(0.38 * GIB)  # or this much smaller -> larger pool
# The stated margin: an estimated pool is the budget less the estimated non-KV memory less this, so that the plan's
# promise (its full-length requests at once) holds where the calibrated parts still count low. After calibration
# (issue 43, docs/fidelity.md) the largest under-count on the H100 is the Qwen3.5-27B FP8 shape's weights: the engine
# loaded 28.09 GiB where the index's total_size less the vision tower gives 27.89 (0.18-0.21 GiB over six starts,
# unexplained); + 0.05 GiB for the engine's two-decimal GiB figures. Without it the 27B plan at 50 x 32,768 promised
# 23.94 full-length requests (790 blocks) where the engine's pool held 23.88 (788). A measured pool takes no margin.
KV_POOL_MARGIN = int(0.25 * GIB)


def _kv_layout(shape, t):
    """KV dtype, backend, block size, page and groups as vLLM 0.27.1 lays them out: the layout ``lay``
    that size() returns. Reads the targets ``t``, never writes them: the attention backend, the
    attention sinks and whether the KV dtype came from the checkpoint's scheme travel in the layout
    (``attention_backend``, ``has_sinks``, ``kv_from_scheme``) to the ledger, the flags and the env."""
    kv_dtype = resolve_kv_dtype(t["kv_cache_dtype"], shape["model_dtype"], shape["kv_cache_scheme_dtype"])
    kv_from_scheme = t["kv_cache_dtype"] == "auto" and bool(shape["kv_cache_scheme_dtype"])
    kv_b = dtype_bytes(kv_dtype)
    has_sinks = bool(shape.get("attention_sinks"))
    backend = attention_backend(t["cc"], kv_dtype, shape["head_dim"], has_sinks)
    # MTP adds one full-attention layer per mtp_num_hidden_layers, with its own KV.
    n_full = shape["num_full_layers"] + (shape["mtp_layers"] if t["num_spec"] else 0)
    n_lin, n_sw = shape["num_linear_layers"], shape["num_sliding_layers"]
    tok_bytes = attn_bytes_per_token(shape, kv_b, t["tp"])
    ssm_dtype = shape["mamba_ssm_dtype"] or shape["model_dtype"]
    state = gdn_state_bytes(shape, t["tp"], t["num_spec"], dtype_bytes(shape["model_dtype"]), dtype_bytes(ssm_dtype))
    block = hybrid_block_size(tok_bytes, state["total"])
    groups = group_layers(n_full, n_lin, n_sw)
    # engine/arg_utils.py:2603 prefix caching defaults to on, except for hybrid (GDN) models.
    prefix = t["prefix_caching_asked"]
    if prefix is None:
        prefix = not n_lin
    sliding = None
    if n_sw:
        sliding = (shape["sliding_window"], max_in_flight_tokens(t["max_num_batched_tokens"]))
    return {
        "kv_dtype": kv_dtype,
        "kv_from_scheme": kv_from_scheme,
        "has_sinks": has_sinks,
        "attention_backend": backend,
        "tok_bytes": tok_bytes,
        "state": state,
        "block": block,
        "page": block * tok_bytes,
        "groups": groups,
        "n_full": n_full,
        "n_lin": n_lin,
        "n_sw": n_sw,
        "prefix": prefix,
        "sliding": sliding,
        "attn_groups": groups["full_groups"] + groups["sliding_groups"],
    }


def _memory(shape, weights, t, lay):
    """(requested, overhead, non_kv, kv_pool, kv_how, outside): the budget is gpu_memory_utilization x CUDA's total
    (_plan_targets: NVML's total less its reserved memory); ``outside`` the estimated parts vLLM's model runner
    allocates after sizing the pool (the V2 runner's CUDA graphs before 0.29.0: cuda_graphs_before_pool)."""
    requested = int(math.ceil(t["cuda_total_bytes"] * t["gpu_memory_utilization"]))
    items = estimate_non_kv(shape, weights, t, lay["attention_backend"], lay["attn_groups"])
    release = t.get("vllm_version") or VLLM_VERSION
    if cuda_graphs_before_pool(shape, release):
        overhead, outside = items, []
    else:
        overhead = [i for i in items if i[0] != "cuda_graphs"]
        late = "; captured after the KV pool (vLLM %s's %s model runner)" % (release, model_runner(shape, release))
        outside = [(n, b, h + late) for n, b, h in items if n == "cuda_graphs"]
    non_kv = sum(b for _name, b, _how in overhead)
    if t["measured_kv_cache_bytes"]:
        kv_pool = int(t["measured_kv_cache_bytes"])
        kv_how = "measured (given): vLLM's 'Available KV cache memory'"
    else:
        kv_pool = requested - non_kv - KV_POOL_MARGIN
        kv_how = "budget - estimated non-KV - margin %s (left unused: the parts' largest under-count)" % fmt_gib(
            KV_POOL_MARGIN
        )
    if kv_pool <= 0:
        raise InfeasibleError(
            "No memory left for the KV cache: budget %s, non-KV estimate %s. Raise "
            "gpu_memory_utilization, add GPUs (tensor parallel) or use --language-model-only."
            % (fmt_gib(requested), fmt_gib(non_kv))
        )
    return requested, overhead, non_kv, kv_pool, kv_how, outside


def _choose_context(t, shape, lay, blocks, kv_pool, low_blocks=None):
    """The context: the one asked for (checked), or at "max" the longest keeping ``concurrency`` full-length
    requests in the pool, and in ``low_blocks`` (the low end of the estimate band) where one is given: a plan at
    "max" never promises more than the low end of its own estimate holds (issue 43: the Qwen3-8B shape at 16 users
    on an H100 got 25,600 tokens = 16.07 requests in the estimated pool, and the engine's held 15.95)."""
    g, block, spec = lay["groups"], lay["block"], (t["num_spec"], lay["prefix"])
    model_max = shape["max_position_embeddings"] or None
    # What vLLM's start-up check measures one full-length request against: from 0.29 the pool less its null block.
    release = t.get("vllm_version") or VLLM_VERSION
    start_blocks = blocks - 1 if rule_holds("start_check_keeps_null_block", release) else blocks
    fit_one = longest_fitting_len(start_blocks, block, g, spec[0], spec[1], 1, lay["sliding"], model_max)
    fit_all = longest_fitting_len(blocks, block, g, spec[0], spec[1], t["concurrency"], lay["sliding"], model_max)

    def alts(ctx):
        return _alternatives(t, shape, lay, blocks, kv_pool, ctx)

    if t["context"] == "max":
        # One request of it must also pass the start-up check (fit_one: shorter than fit_all only from 0.29).
        fit = fit_all if fit_one is None else min(fit_all, fit_one)
        where = "%d blocks" % blocks
        fit_low = None
        if low_blocks is not None and low_blocks < blocks:
            fit_low = longest_fitting_len(
                low_blocks, block, g, spec[0], spec[1], t["concurrency"], lay["sliding"], model_max
            )
        if fit_low and fit_low >= block and fit_low < fit:
            fit = fit_low
            where = "the %d blocks of the estimate's low end (%d estimated)" % (low_blocks, blocks)
        ctx = fit - fit % CLEAN_LEN_MULTIPLE if fit >= CLEAN_LEN_MULTIPLE else fit
        if model_max:
            ctx = min(ctx, model_max)
        if ctx < block or ctx < 1:
            raise InfeasibleError(
                "%d concurrent requests leave no room for context (%d blocks)." % (t["concurrency"], blocks), alts(None)
            )
        how = "largest multiple of %d keeping %d full-length requests in %s" % (
            CLEAN_LEN_MULTIPLE,
            t["concurrency"],
            where,
        )
        return ctx, how, fit_one
    ctx = t["context"]
    if model_max and ctx > model_max:
        raise TargetsError("context %d exceeds the model's max_position_embeddings %d" % (ctx, model_max))
    need = blocks_per_request(ctx, block, g, spec[0], spec[1], lay["sliding"])
    if need > start_blocks:
        # kv_cache_utils.py:751 _check_enough_kv_cache_memory: vLLM refuses to start.
        raise InfeasibleError(
            "vLLM %s would refuse to start: one %d-token request needs %d blocks "
            "(%s of KV), the pool holds %d blocks (%s)%s. Longest length that starts: %d."
            % (
                release,
                ctx,
                need,
                fmt_gib(need * lay["page"] * g["group_size"]),
                blocks,
                fmt_gib(kv_pool),
                "" if start_blocks == blocks else ", 1 of them its null block",
                fit_one,
            ),
            alts(ctx),
        )
    if t["require_full_length_concurrency"] and t["concurrency"] * need > blocks:
        raise InfeasibleError(
            "%d x %d tokens needs %s of KV; the pool holds %s (%.2f full-length requests)."
            % (
                t["concurrency"],
                ctx,
                fmt_gib(t["concurrency"] * need * lay["page"] * g["group_size"]),
                fmt_gib(kv_pool),
                blocks / float(need),
            ),
            alts(ctx),
        )
    return ctx, "requested", fit_one


def size(t, shape, weights):
    """The memory ledger of the targets ``t`` for this model: KV layout, budget, pool, blocks and the
    context chosen. Returns (ledger, warnings, lay, kv_pool); ``t`` is left as it was (the KV
    layout ``lay`` carries what the flags and the container environment read: _kv_layout)."""
    lay = _kv_layout(shape, t)
    requested, overhead, non_kv, kv_pool, kv_how, outside = _memory(shape, weights, t, lay)
    g = lay["groups"]
    blocks = num_gpu_blocks(kv_pool, lay["page"], g["group_size"])
    low_blocks = None
    # The band is about the estimate (budget - non-KV), the margin inside it: KV_POOL_MARGIN is part of the low end.
    margin = 0 if t["measured_kv_cache_bytes"] else KV_POOL_MARGIN
    if not t["measured_kv_cache_bytes"]:
        low_blocks = num_gpu_blocks(max(0, kv_pool + margin - ESTIMATE_ERROR_LOW), lay["page"], g["group_size"])
    state_blocks = g["linear_groups"] * gdn_blocks_per_request(t["num_spec"], lay["prefix"])
    if blocks < t["concurrency"] * (state_blocks + g["full_groups"] + g["sliding_groups"]):
        raise InfeasibleError(
            "%d blocks cannot hold even the per-request state of %d requests (%d blocks each "
            "before any token)." % (blocks, t["concurrency"], state_blocks),
            [{"concurrency": max(1, blocks // (state_blocks + g["full_groups"] + g["sliding_groups"]))}],
        )
    ctx, ctx_how, fit_one = _choose_context(t, shape, lay, blocks, kv_pool, low_blocks)
    need = blocks_per_request(ctx, lay["block"], g, t["num_spec"], lay["prefix"], lay["sliding"])
    max_conc = blocks / float(need)
    kv_tokens = int(max_conc * ctx)  # kv_cache_utils.py:1877 get_kv_cache_capacity
    warnings = []
    late_ws = 0
    if lay["attention_backend"] == "FLASHINFER" and not any(n == "attention_workspace" for n, _b, _h in overhead):
        late_ws = flashinfer_workspace(shape, t, lay["attn_groups"])[0]
    if max_conc < t["concurrency"]:
        warnings.append(
            "only %.2f requests of the full %d tokens fit at once; beyond that vLLM preempts "
            "(or offloads, with kv_offloading_gib) while all %d sessions are long" % (max_conc, ctx, t["concurrency"])
        )
    if late_ws:
        ws = late_ws
        headroom = t["cuda_total_bytes"] - requested
        if headroom < ws + GIB:
            warnings.append(
                "FlashInfer's workspace (%s) is allocated at the first request, outside the KV "
                "budget (speculative decoding or enforce_eager: no FULL graphs are profiled); "
                "only %s of the card lies outside gpu_memory_utilization %.2f"
                % (fmt_gib(ws), fmt_gib(headroom), t["gpu_memory_utilization"])
            )
    late = sum(b for _n, b, _h in outside)
    if late and t["cuda_total_bytes"] - requested < late + GIB // 4:
        warnings.append(
            "the CUDA graphs (%s) are captured after the KV pool, from the %s of the card outside "
            "gpu_memory_utilization %.2f: lower it or plan with enforce_eager"
            % (fmt_gib(late), fmt_gib(t["cuda_total_bytes"] - requested), t["gpu_memory_utilization"])
        )
    band = None
    if not t["measured_kv_cache_bytes"]:
        low_pool = max(0, kv_pool + margin - ESTIMATE_ERROR_LOW)
        band = {
            "kv_pool_low_bytes": low_pool,
            "kv_pool_high_bytes": kv_pool + margin + ESTIMATE_ERROR_HIGH,
            "num_gpu_blocks_low": low_blocks,
            "num_gpu_blocks_high": num_gpu_blocks(kv_pool + margin + ESTIMATE_ERROR_HIGH, lay["page"], g["group_size"]),
            "longest_single_request_low": longest_fitting_len(
                low_blocks,
                lay["block"],
                g,
                t["num_spec"],
                lay["prefix"],
                1,
                lay["sliding"],
                shape["max_position_embeddings"] or None,
            )
            or 0,
        }
        if t["context"] == "max" and need <= low_blocks < t["concurrency"] * need:
            # _choose_context found no length that the low end holds for every request (too few blocks).
            warnings.append(
                "context max: at the low end of the estimate (%s less pool) only %.2f of the %d requests of %d "
                "tokens fit at once; the confirm step (vllm_plan_confirm) re-plans from the engine's numbers"
                % (fmt_gib(ESTIMATE_ERROR_LOW), low_blocks / float(need), t["concurrency"], ctx)
            )
        if need > low_blocks:
            warnings.append(
                "estimated budget: if the non-KV memory is %s larger than estimated (the largest "
                "error observed, docs/launch-planning.md), vLLM refuses %d tokens and starts at "
                "most %d; the confirm step (vllm_plan_confirm) re-plans from the engine's numbers, "
                "or give measured_kv_cache_bytes"
                % (fmt_gib(ESTIMATE_ERROR_LOW), ctx, band["longest_single_request_low"])
            )
    if shape["vision"] and shape["vision"].get("_defaulted"):
        warnings.append(
            "config.json vision_config omits %s: sized with vLLM's defaults" % ", ".join(shape["vision"]["_defaulted"])
        )
    ledger = {
        "budget_bytes": requested,
        "budget_how": (
            "ceil((%d - %d NVML reserved) x %s)"
            % (t["gpu_total_bytes"], t["gpu_reserved_bytes"], fmt_utilization(t["gpu_memory_utilization"]))
            if t["gpu_reserved_bytes"] is not None
            else "ceil(%d x %s) (NVML's reserved memory not known: taken as 0)"
            % (t["gpu_total_bytes"], fmt_utilization(t["gpu_memory_utilization"]))
        ),
        "components": [{"name": n, "bytes": b, "how": h} for n, b, h in overhead],
        "outside_pool": [{"name": n, "bytes": b, "how": h} for n, b, h in outside],
        # FlashInfer's workspace when no profiled graph allocates it: taken at the first request, outside the budget
        # (a card shared by several services must leave room for it: _plan_share.need_of).
        "late_workspace_bytes": late_ws,
        "non_kv_bytes": non_kv,
        "kv_pool_margin_bytes": 0 if t["measured_kv_cache_bytes"] else KV_POOL_MARGIN,
        "kv_pool_bytes": kv_pool,
        "kv_pool_how": kv_how,
        "kv_pool_measured": bool(t["measured_kv_cache_bytes"]),
        "estimate_band": band,
        "kv_dtype": lay["kv_dtype"],
        "kv_dtype_how": ("checkpoint kv_cache_scheme (auto -> %s)" % lay["kv_dtype"])
        if lay["kv_from_scheme"]
        else ("model dtype" if t["kv_cache_dtype"] == "auto" else "asked"),
        "attention_backend": lay["attention_backend"],
        "compute_capability": "%d.%d" % t["cc"],
        "model_family": shape["family"],
        "prefix_caching": lay["prefix"],
        "attn_bytes_per_token_per_layer": lay["tok_bytes"],
        "full_attention_layers": lay["n_full"],
        "linear_attention_layers": lay["n_lin"],
        "sliding_attention_layers": lay["n_sw"],
        "sliding_window": shape["sliding_window"],
        "sliding_in_flight_tokens": lay["sliding"][1] if lay["sliding"] else None,
        "gdn_state_bytes_per_layer": lay["state"]["total"],
        "gdn_state_conv_bytes": lay["state"]["conv"],
        "gdn_state_temporal_bytes": lay["state"]["temporal"],
        "per_request_state_bytes": lay["n_lin"]
        * lay["state"]["total"]
        * gdn_blocks_per_request(t["num_spec"], lay["prefix"])
        if lay["n_lin"]
        else 0,
        "block_size": lay["block"],
        "page_bytes": lay["page"],
        "group_size": g["group_size"],
        "kv_cache_groups": g["full_groups"] + g["linear_groups"] + g["sliding_groups"],
        "full_groups": g["full_groups"],
        "linear_groups": g["linear_groups"],
        "sliding_groups": g["sliding_groups"],
        "num_gpu_blocks": blocks,
        "blocks_per_full_request": need,
        "max_model_len": ctx,
        "max_model_len_how": ctx_how,
        "max_position_embeddings": shape["max_position_embeddings"] or None,
        "context_requested": t["context"] != "max",
        "require_full_length_concurrency": bool(t["require_full_length_concurrency"]),
        "longest_single_request": fit_one,
        "gpu_kv_cache_tokens": kv_tokens,
        "max_concurrency_at_len": round(max_conc, 2),
        "concurrency": t["concurrency"],
        "num_speculative_tokens": t["num_spec"],
        "max_num_batched_tokens": t["max_num_batched_tokens"],
        "gpu_total_bytes": t["gpu_total_bytes"],
        "gpu_reserved_bytes": t["gpu_reserved_bytes"],
        "cuda_total_bytes": t["cuda_total_bytes"],
        "gpu_memory_utilization": t["gpu_memory_utilization"],
        "kv_bytes_per_full_request": need * lay["page"] * g["group_size"],
    }
    return ledger, warnings, lay, kv_pool


def fmt_utilization(u):
    """A utilization as the ledger prints it: two decimals, three where it has them (a shared card's split)."""
    text = "%.3f" % u
    return text[:-1] if text.endswith("0") else text


def _alternatives(t, shape, lay, blocks, kv_pool, ctx):
    """Concrete plans that fit: shorter context at this concurrency, fewer requests at this
    context, fp8 KV if not chosen, and the KV offload that would hold the idle remainder."""
    g, block = lay["groups"], lay["block"]
    spec = (t["num_spec"], lay["prefix"])
    out = []
    n_len = longest_fitting_len(
        blocks, block, g, spec[0], spec[1], t["concurrency"], lay["sliding"], shape["max_position_embeddings"] or None
    )
    if n_len and n_len >= CLEAN_LEN_MULTIPLE:
        n_len -= n_len % CLEAN_LEN_MULTIPLE
    if n_len and n_len >= block:
        out.append(
            {
                "concurrency": t["concurrency"],
                "context": n_len,
                "text": "%d x %s" % (t["concurrency"], fmt_tokens(n_len)),
            }
        )
    if ctx:
        need = blocks_per_request(ctx, block, g, spec[0], spec[1], lay["sliding"])
        m = blocks // need
        if m >= 1:
            out.append({"concurrency": m, "context": ctx, "text": "%d x %s" % (m, fmt_tokens(ctx))})
        short = t["concurrency"] * need - blocks
        if short > 0:
            gib = int(math.ceil(short * lay["page"] * g["group_size"] * t["tp"] / float(GIB)))
            out.append(
                {
                    "kv_offloading_gib": gib,
                    "text": "--kv-offloading-size %d (GiB, holds the idle part of %d x %s;"
                    " running requests still need GPU blocks)" % (gib, t["concurrency"], fmt_tokens(ctx)),
                }
            )
    if not lay["kv_dtype"].startswith("fp8"):
        out.append(
            {
                "kv_cache_dtype": "fp8_e4m3",
                "text": "--kv-cache-dtype fp8_e4m3 (1 byte per element instead of %d)" % dtype_bytes(lay["kv_dtype"]),
            }
        )
    return out


def render_ledger(result):
    """Human-readable ledger (CLI / playbook)."""
    L = result["ledger"]
    rows = ["budget              %10s  %s" % (fmt_gib(L["budget_bytes"]), L["budget_how"])]
    share = L.get("share")
    if share:
        rows.append(
            "card share          %9.1f%%  footprint %s (CUDA context + %s%s); starts %d of %d (%s), finding %s free"
            % (
                100 * share["share"],
                fmt_gib(share["footprint_bytes"]),
                "budget" if share["fills_budget"] else "its memory: no KV pool",
                " + %s outside the budget" % fmt_gib(share["outside_bytes"]) if share["outside_bytes"] else "",
                share["order"],
                len(share["card_services"]),
                ", ".join(share["card_services"]),
                fmt_gib(share["start_free_bytes"]),
            )
        )
    for c in L["components"]:
        rows.append("  - %-17s %10s  %s" % (c["name"], fmt_gib(c["bytes"]), c["how"]))
    rows += [
        "non-KV total        %10s" % fmt_gib(L["non_kv_bytes"]),
    ]
    if L.get("kv_pool_margin_bytes"):
        rows.append(
            "margin (unused)     %10s  kept out of the pool (_plan_ledger.KV_POOL_MARGIN)"
            % fmt_gib(L["kv_pool_margin_bytes"])
        )
    for c in L.get("outside_pool") or []:
        rows.append("outside the budget: %-9s %s  %s" % (c["name"], fmt_gib(c["bytes"]), c["how"]))
    pooling = L.get("pooling")
    if pooling:
        rows.append(
            "pooling model       %10s  --runner pooling --convert %s, %s pooling; %s"
            % (pooling["task"], pooling["convert"], pooling["pooling_type"], pooling["how"])
        )
    if pooling and pooling["encoder_only"]:
        rows += [
            "KV pool             %10s  %s" % (fmt_gib(0), L["kv_pool_how"]),
            "max_model_len       %10d  %s" % (L["max_model_len"], L["max_model_len_how"]),
            "batched tokens      %10d  one batch's activation is planned (no chunked prefill: >= max_model_len)"
            % L["max_num_batched_tokens"],
        ]
        rows += ["WARNING: " + w for w in result["warnings"]]
        rows.append(
            "vllm serve " + " ".join(a if re.match(r"^[\w./:=+-]+$", a) else "'%s'" % a for a in result["argv"])
        )
        return "\n".join(rows)
    rows += [
        "KV pool             %10s  %s" % (fmt_gib(L["kv_pool_bytes"]), L["kv_pool_how"]),
        "KV dtype            %10s  backend %s (SM %s), %s"
        % (L["kv_dtype"], L["attention_backend"], L["compute_capability"], L["kv_dtype_how"]),
        "bytes/token/layer   %10d  x %d full-attention layers"
        % (L["attn_bytes_per_token_per_layer"], L["full_attention_layers"]),
    ]
    if L["linear_attention_layers"]:
        rows.append(
            "GDN state/layer     %10d  x %d linear layers (conv %d + temporal %d)"
            % (
                L["gdn_state_bytes_per_layer"],
                L["linear_attention_layers"],
                L["gdn_state_conv_bytes"],
                L["gdn_state_temporal_bytes"],
            )
        )
    if L["sliding_attention_layers"]:
        rows.append(
            "sliding layers      %10d  window %d, %d tokens in flight"
            % (L["sliding_attention_layers"], L["sliding_window"], L["sliding_in_flight_tokens"])
        )
    rows += [
        "block size          %10d  page %d B, %d groups of %d layers"
        % (L["block_size"], L["page_bytes"], L["kv_cache_groups"], L["group_size"]),
        "num_gpu_blocks      %10d" % L["num_gpu_blocks"],
        "max_model_len       %10d  %s" % (L["max_model_len"], L["max_model_len_how"]),
        "blocks/full request %10d" % L["blocks_per_full_request"],
        "GPU KV cache size   %10s  tokens" % "{:,}".format(L["gpu_kv_cache_tokens"]),
        "max concurrency     %10.2f  at %d tokens" % (L["max_concurrency_at_len"], L["max_model_len"]),
        "longest 1 request   %10d" % L["longest_single_request"],
    ]
    rows += ["WARNING: " + w for w in result["warnings"]]
    rows.append("vllm serve " + " ".join(a if re.match(r"^[\w./:=+-]+$", a) else "'%s'" % a for a in result["argv"]))
    return "\n".join(rows)
