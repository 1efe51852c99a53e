# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The deployment's one verdict: what the engine reported against the plan, decided once.

Pure functions, stdlib only, Python 3.7-clean. _plan_confirm.confirm calls ``verdict`` once; its result is
written into report.json (``verdict``, ``verdict_text``, ``verdict_evidence``) and report.md, the summary and
the load check's rewrite of report.md only print what it decided. Nothing else names a verdict.

- ``confirmed``: the engine's KV pool is the planned one (within the estimate's band), its context is the planned
  one and the pool holds the planned requests at that context. Nothing less is ever "confirmed".
- ``not_measured``: the engine holds the planned requests, but in a pool a test setting fixed (the CPU engine's
  ``VLLM_CPU_KVCACHE_SPACE``): the planned pool was not measured on this engine.
- ``not_as_planned``: the engine holds the planned requests, but its pool or its context is not the planned one.
- ``replan_needed``: the engine started, its pool does not hold the planned requests at the planned context.
- ``refused``: the engine did not start with this plan.
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_common import fmt_gib

__metaclass__ = type

VERDICTS = ("confirmed", "not_measured", "not_as_planned", "replan_needed", "refused")
# Within this many requests the measured pool holds what the plan promised (the figures are rounded to 0.01).
HELD_SLACK = 0.005


def holds(measured_concurrency, promised_concurrency):
    """Does the measured pool hold the promised full-length requests? False when nothing was measured."""
    return measured_concurrency is not None and measured_concurrency + HELD_SLACK >= promised_concurrency


def _n(value):
    return "{:,}".format(value) if isinstance(value, int) else ("?" if value is None else str(value))


def verdict(planned, measured, pool, measured_concurrency, promised_concurrency, refused=False, refusal=None):
    """The verdict of one start of the engine: {status (one of VERDICTS), text (one sentence a person reads at a
    glance), evidence: {measured: [what the engine reported], not_measured: [what it did not]}}.

    planned: the plan's kv_cache_memory_bytes, max_model_len, concurrency. measured: what the engine reported
    (_plan_confirm.measured_from: budget_bytes, budget_how, num_gpu_blocks, block_size, max_model_len, weights_bytes,
    source). pool: _plan_confirm.pool_check's result. measured_concurrency: full-length requests of the planned
    context the measured pool holds (None without a pool); promised_concurrency: what the plan promised.
    refused: the engine did not start; refusal: vLLM's reason in one sentence, when it gave one."""
    planned, measured, pool = planned or {}, measured or {}, pool or {}
    ctx, conc = planned.get("max_model_len"), planned.get("concurrency") or 1
    planned_pool, measured_pool = planned.get("kv_cache_memory_bytes"), measured.get("budget_bytes")
    got, missing = [], []
    if measured_pool is not None:
        got.append("KV pool %s: %s" % (fmt_gib(measured_pool), measured.get("budget_how") or "the engine's own figure"))
    if (
        isinstance(measured.get("num_gpu_blocks"), int)
        and measured.get("block_size")
        and "num_gpu_blocks" not in (measured.get("computed") or [])
    ):
        got.append("%s blocks of %s tokens" % (_n(measured["num_gpu_blocks"]), measured["block_size"]))
    if measured.get("max_model_len"):
        got.append("context %s tokens (journal)" % _n(measured["max_model_len"]))
    if measured.get("weights_bytes") is not None:
        got.append("weights %s (journal)" % fmt_gib(measured["weights_bytes"]))
    else:
        missing.append("the weights' memory (only the journal of a start reports it)")
    what = "context %s x %s requests" % (_n(ctx), conc)
    fit = (
        "room for %.2f full-length, %.2f planned" % (measured_concurrency, promised_concurrency)
        if measured_concurrency is not None
        else None
    )
    if refused:
        text = "refused: vLLM did not start with this plan%s" % (": %s" % refusal if refusal else "")
        missing.append("everything a running engine reports (it did not start)")
        return _out("refused", text, got, missing)
    if not holds(measured_concurrency, promised_concurrency):
        if measured_concurrency is None:
            missing.append("the KV pool (the engine reported no blocks)")
            text = "re-plan needed: the engine reported no KV pool to hold %s" % what
        else:
            text = "re-plan needed: the engine's KV pool of %s does not hold %s: %s" % (
                fmt_gib(measured_pool) if measured_pool is not None else "?",
                what,
                fit,
            )
        return _out("replan_needed", text, got, missing)
    context_differs = bool(ctx and measured.get("max_model_len") and measured["max_model_len"] != ctx)
    status = pool.get("status")
    if status == "as_planned" and not context_differs:
        text = "confirmed: the engine's KV pool of %s is the planned one (%s planned) and holds %s: %s" % (
            fmt_gib(measured_pool),
            fmt_gib(planned_pool),
            what,
            fit,
        )
        return _out("confirmed", text, got, missing)
    if status in ("smaller", "larger") and pool.get("explained_by") and not context_differs:
        missing.insert(
            0,
            "the planned %s KV pool (%s)"
            % (
                fmt_gib(planned_pool),
                "%s fixes this engine's pool" % pool["set_by"] if pool.get("set_by") else pool["explained_by"],
            ),
        )
        text = (
            "NOT CONFIRMED on this engine: measured: its KV pool of %s (%s, a test setting) holds %s (%s); "
            "not measured: the planned %s KV pool"
            % (
                fmt_gib(measured_pool),
                pool.get("set_by") or "fixed by the engine",
                what,
                fit,
                fmt_gib(planned_pool),
            )
        )
        return _out("not_measured", text, got, missing)
    if status == "not_measured" and not context_differs:
        missing.insert(0, "the planned KV pool (nothing to compare with)")
        text = "NOT CONFIRMED: %s fit (%s), but the KV pool was not compared with a planned one" % (what, fit)
        return _out("not_measured", text, got, missing)
    wrong = []
    if status in ("smaller", "larger"):
        wrong.append(
            "KV pool %s, %s planned (%s)" % (fmt_gib(measured_pool), fmt_gib(planned_pool), status)
            + (" by a test setting" if pool.get("explained_by") else "")
        )
    if context_differs:
        wrong.append("context %s tokens, %s planned" % (_n(measured["max_model_len"]), _n(ctx)))
    text = "NOT as planned: %s; %s still fit (%s)" % ("; ".join(wrong), what, fit)
    return _out("not_as_planned", text, got, missing)


# The blocks vLLM 0.27.1 reports for a model without KV layers (its null block).
NULL_BLOCKS = 1


def encoder_verdict(planned, measured, ledger, refused=False, refusal=None):
    """The verdict of one start of an encoder-only pooling model (an embedder, a cross-encoder reranker), which has
    no KV cache (vllm/v1/engine/core.py:281): no pool to confirm, so never ``confirmed``. Refused when it did not
    start; ``not_as_planned`` when the engine allocated KV blocks the plan did not count; else ``not_measured``:
    it runs with no pool, as planned, but nothing the engine reports measures its memory (its share of a card
    stays the planner's estimate). planned/measured as for verdict(); ledger: the plan's."""
    planned, measured, ledger = planned or {}, measured or {}, ledger or {}
    got, missing = [], []
    blocks = measured.get("num_gpu_blocks")
    if isinstance(blocks, int):
        # vLLM 0.27.1 reports 1 block for a model without KV layers: the block pool's null block, with no KV tensor
        # behind it (v1/core/kv_cache_utils.py:1378, seen on the CPU engine serving a BERT embedder).
        got.append(
            "%s KV blocks (vllm:cache_config_info)%s"
            % (_n(blocks), ": the block pool's null block, no KV cache" if blocks == NULL_BLOCKS else "")
        )
    if measured.get("weights_bytes") is not None:
        got.append("weights %s (journal)" % fmt_gib(measured["weights_bytes"]))
    else:
        missing.append("the weights' memory (only the journal of a start reports it)")
    footprint = ledger.get("footprint_bytes")
    missing.append(
        "the encoder's memory on the card (%s planned: weights, activation of one batch, CUDA graphs): /metrics "
        "does not report it" % (fmt_gib(footprint) if footprint else "?")
    )
    what = "context %s x %s requests, no KV cache" % (_n(planned.get("max_model_len")), planned.get("concurrency") or 1)
    if refused:
        missing.append("everything a running engine reports (it did not start)")
        return _out(
            "refused",
            "refused: vLLM did not start with this plan%s" % (": %s" % refusal if refusal else ""),
            got,
            missing,
        )
    if isinstance(blocks, int) and blocks > NULL_BLOCKS and ledger.get("num_gpu_blocks") == 0:
        return _out(
            "not_as_planned",
            "NOT as planned: the engine allocated %s KV blocks for a model planned as encoder-only (%s)"
            % (_n(blocks), what),
            got,
            missing,
        )
    if not isinstance(blocks, int):
        missing.insert(0, "the engine's cache configuration (no vllm:cache_config_info)")
    return _out(
        "not_measured",
        "NOT CONFIRMED (encoder-only, nothing to measure): the engine serves %s, as planned; its memory is "
        "the planner's estimate" % what,
        got,
        missing,
    )


def _out(status, text, got, missing):
    return {"status": status, "text": text, "evidence": {"measured": got, "not_measured": missing}}
