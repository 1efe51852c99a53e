# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The operator's real question, answered as a trade-off instead of one number.

"N concurrent users, tool calls, MTP, the longest context": the longest context at which N
requests of that length all fit at once; the longest single request (--max-model-len) and how
many requests of typical lengths then fit before vLLM must preempt; and what
--max-num-batched-tokens and MTP's speculative tokens cost in that pool.

Pure, stdlib only, Python 3.7-clean. Every row is a planner run (plugins/module_utils/planner/_planner.py);
with a measured budget the variants shift it by the *difference* of their non-KV estimates
(the part of the estimate that does not change cancels out).
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_common import PlanError
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_kv import blocks_per_request

__metaclass__ = type

TYPICAL_LENGTHS = (4096, 16384, 32768)
BATCHED_TOKENS = (2048, 4096, 8192, 16384)
SPECULATIVE_TOKENS = (0, 1, 3)
# What a sweep's row says of each variant: (row key, the variant's ledger key), after the option and before the note.
BATCHED_FIELDS = (
    ("all_fit_len", "max_model_len"),
    ("kv_tokens", "gpu_kv_cache_tokens"),
    ("kv_pool_bytes", "kv_pool_bytes"),
)
SPECULATIVE_FIELDS = (
    ("all_fit_len", "max_model_len"),
    ("blocks", "num_gpu_blocks"),
    ("block_size", "block_size"),
    ("kv_tokens", "gpu_kv_cache_tokens"),
)


def _layout_of(ledger):
    groups = {
        "group_size": ledger["group_size"],
        "full_groups": ledger["full_groups"],
        "linear_groups": ledger["linear_groups"],
        "sliding_groups": ledger["sliding_groups"],
    }
    sliding = None
    if groups["sliding_groups"]:
        sliding = (ledger["sliding_window"], ledger["sliding_in_flight_tokens"])
    return groups, sliding


def _run(plan_fn, params, model, **over):
    p = dict(params)
    p.update(over)
    p["context"] = over.get("context", "max")
    p["pin_kv_cache_memory"] = False
    p["require_full_length_concurrency"] = False
    try:
        return plan_fn(p, **model)["ledger"]
    except PlanError:
        return None


def sweep(variant, ref, option, values, fields):
    """One row per value of ``option`` (``values`` and the reference's own, ascending) whose variant plans:
    ``{option: value, <row key>: variant ledger's value for each of fields, "note": " (current)" or ""}``.

    variant(**{option: value}) is the variant's ledger or None; ref the reference ledger."""
    rows = []
    current = ref[option]
    for value in sorted(set(values) | {current}):
        led = variant(**{option: value})
        if led:
            row = {option: value}
            for key, ledger_key in fields:
                row[key] = led[ledger_key]
            row["note"] = " (current)" if value == current else ""
            rows.append(row)
    return rows


def tradeoff(plan_fn, params, model=None, lengths=TYPICAL_LENGTHS, title=None):
    """``plan_fn`` is _planner.plan; ``model`` = dict(config=..., weight_bytes=...,
    weight_source=...) or {} to read params['model_dir']."""
    model = model or {}
    conc = int(params.get("concurrency") or 1)
    base = _run(plan_fn, params, model)
    single = _run(plan_fn, params, model, concurrency=1)
    out = {
        "title": title or "",
        "concurrency": conc,
        "all_fit_len": None,
        "single_len": None,
        "typical": [],
        "batched_tokens": [],
        "speculative": [],
        "measured": bool(params.get("measured_kv_cache_bytes")),
    }
    ref = base or single
    if ref is None:
        return out
    out["all_fit_len"] = base["max_model_len"] if base else 0
    out["single_len"] = ref["longest_single_request"]
    groups, sliding = _layout_of(ref)
    for length in lengths:
        if out["single_len"] and length <= out["single_len"]:
            need = blocks_per_request(
                length, ref["block_size"], groups, ref["num_speculative_tokens"], ref["prefix_caching"], sliding
            )
            out["typical"].append({"length": length, "fit": ref["num_gpu_blocks"] // need, "blocks_each": need})
    measured = params.get("measured_kv_cache_bytes")
    est = dict(params)
    est.pop("measured_kv_cache_bytes", None)
    base_est = _run(plan_fn, est, model)

    def variant(**over):
        """Plan one variant. With a measured pool, the measurement is moved by the variant's own change in
        non-KV memory (estimated both ways); None when the variant does not plan or leaves no KV pool."""
        if measured and base_est:
            var = _run(plan_fn, est, model, **over)
            if var is None:
                return None
            over["measured_kv_cache_bytes"] = int(measured) - (var["non_kv_bytes"] - base_est["non_kv_bytes"])
            if over["measured_kv_cache_bytes"] <= 0:
                return None
        return _run(plan_fn, params, model, **over)

    out["batched_tokens"] = sweep(variant, ref, "max_num_batched_tokens", BATCHED_TOKENS, BATCHED_FIELDS)
    if ref["num_speculative_tokens"] or params.get("_mtp_capable"):
        out["speculative"] = sweep(variant, ref, "num_speculative_tokens", SPECULATIVE_TOKENS, SPECULATIVE_FIELDS)
    return out
