# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Planner warnings: what a plan that vLLM will start can still get wrong, each with its reason and source.

Pure, stdlib only, Python 3.7-clean. ``plan_warnings(ledger, shape)`` reads the memory ledger (_plan_ledger.size)
and the model shape (_plan_model); _planner.plan puts the result under ``plan_warnings`` and each message into
``warnings``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_common import (
    KNOWN_RELEASES,
    VLLM_VERSION,
    fmt_gib,
    release_rules,
)

# A plan whose context x concurrency leaves this many KV blocks or fewer of its pool runs at its edge.
EDGE_BLOCKS = 3
# Field notes (RTX 6000 Ada 48 GB, vLLM 0.27.1): "--gpu-memory-utilization 0.93, 不建议大于0.95".
MAX_UTILIZATION = 0.95
KNOWN_BAD_SM = (8, 9)


def _cc(ledger):
    try:
        major, minor = str(ledger.get("compute_capability") or "").split(".")
        return int(major), int(minor)
    except ValueError:
        return None


def fp8_checkpoint(shape):
    """Are the checkpoint's weights FP8 (quantization_config quant_method fp8, or a method that builds an FP8
    KV-cache method: _plan_model._has_kv_cache_method)?"""
    shape = shape or {}
    method = str(shape.get("quant_method") or "").lower()
    return method == "fp8" or "fp8" in method or bool(shape.get("fp8_checkpoint"))


def plan_warnings(ledger, shape=None, edge_blocks=EDGE_BLOCKS, max_utilization=MAX_UTILIZATION):
    """[{id, message, reason, source}] for a plan: at the edge of its pool, utilisation above the field's
    advice, the known-bad SM 8.9 + FP8 checkpoint + fp8 KV + MTP combination."""
    out = []
    blocks, need = ledger.get("num_gpu_blocks"), ledger.get("blocks_per_full_request")
    conc = int(ledger.get("concurrency") or 1)
    if blocks and need and conc * need <= blocks:
        spare = blocks - conc * need
        if spare <= edge_blocks:
            page = int(ledger.get("page_bytes") or 0) * int(ledger.get("group_size") or 1)
            out.append(
                {
                    "id": "plan_at_edge",
                    "message": "the plan runs %d block%s from its edge: %d requests of %d tokens take %d of the pool's %d "
                    "blocks, leaving %d tokens (%s)"
                    % (
                        spare,
                        "" if spare == 1 else "s",
                        conc,
                        ledger.get("max_model_len") or 0,
                        conc * need,
                        blocks,
                        spare * int(ledger.get("block_size") or 0),
                        fmt_gib(spare * page),
                    ),
                    "reason": "when every session is at full length, one more block needed (a larger prompt template, "
                    "speculative tokens in flight) or a pool %s smaller than estimated (non-KV memory grows: a "
                    "driver, a batch size) and vLLM preempts a running request; the confirm step re-plans from "
                    "the engine's own numbers, and a shorter context or one request fewer gives room"
                    % fmt_gib((spare + 1) * page),
                    "source": "vLLM 0.27.1 v1/core/kv_cache_utils.py (blocks per request); the plan's ledger",
                }
            )
    util = ledger.get("gpu_memory_utilization")
    if util is not None and float(util) > max_utilization:
        out.append(
            {
                "id": "utilization_high",
                "message": "gpu_memory_utilization %.2f is above %.2f" % (float(util), max_utilization),
                "reason": "the card's remainder holds the CUDA context, FlashInfer's workspace (allocated at the first "
                "request, outside the budget) and other processes: above %.2f an out-of-memory at the first "
                "long request is likely; 0.93 is the field's working value" % max_utilization,
                "source": "field notes (RTX 6000 Ada 48 GB, vLLM 0.27.1): 0.93, not above 0.95",
            }
        )
    if (
        _cc(ledger) == KNOWN_BAD_SM
        and fp8_checkpoint(shape)
        and str(ledger.get("kv_dtype") or "").startswith("fp8")
        and int(ledger.get("num_speculative_tokens") or 0) > 0
    ):
        out.append(
            {
                "id": "vllm_issue_44879",
                "message": "SM 8.9 with an FP8 checkpoint, fp8 KV cache (%s) and MTP (%d speculative tokens) is the "
                "combination of vLLM issue 44879"
                % (ledger.get("kv_dtype"), int(ledger.get("num_speculative_tokens") or 0)),
                "reason": "upstream reports the engine crashing with exactly these four together; the field notes did "
                "not reproduce it on 0.27.1. If the engine dies at the first requests: vllm_plan_kv_cache_dtype "
                "auto (bf16 KV: a shorter context) or vllm_plan_num_speculative_tokens 0 (slower single stream)",
                "source": "vLLM issue 44879; field notes (Kylin V10 SP3, RTX 6000 Ada, 0.27.1: not reproduced)",
            }
        )
    return out


def release_warnings(version, known=KNOWN_RELEASES):
    """[{id, message, reason, source}] for the vLLM release the image says it is (None: not read, nothing said).

    A release the collection does not list (newer, between two known ones, older, a pre-release) is planned
    with the nearest known release's rules, and says so loudly; a known release whose planner rules are another
    release's (only VLLM_VERSION's are proven against a real engine) says that more quietly."""
    if version is None or str(version).strip() == "":
        return []
    known_names = ", ".join(e["release"] for e in known)
    source = "_plan_common.KNOWN_RELEASES (%s); docs/launch-planning.md, Known releases" % known_names
    try:
        r = release_rules(version, known)
    except ValueError:
        return [
            {
                "id": "release_unreadable",
                "message": "UNKNOWN vLLM RELEASE: the image's version %r is not a version; planned with vLLM %s's "
                "rules" % (str(version)[-80:], VLLM_VERSION),
                "reason": "the plan's flags, defaults and sizing are %s's; the argv check against the image's own "
                "parser and the engine confirmation are what make it safe" % VLLM_VERSION,
                "source": source,
            }
        ]
    rules = r["rules"]["release"]
    if r["known"]:
        if r["rules"].get("planner", rules) == VLLM_VERSION and rules != VLLM_VERSION:
            return [
                {
                    "id": "release_planner_rules",
                    "message": "vLLM %s is a known release, planned with vLLM %s's sizing rules"
                    % (r["release"], VLLM_VERSION),
                    "reason": "only %s's sizing rules, defaults and parser names are proven against a real engine; "
                    "the engine confirmation re-plans once from the engine's own numbers" % VLLM_VERSION,
                    "source": source,
                }
            ]
        return []
    what = {
        "newer": "newer than any release the collection knows",
        "between": "between the releases the collection knows",
        "older": "older than any release the collection knows",
        "prerelease": "a pre-release the collection does not know",
    }[r["relation"]]
    return [
        {
            "id": "release_unknown",
            "message": "UNKNOWN vLLM RELEASE %s (%s: %s): planned with the rules of vLLM %s, the nearest known "
            "release" % (r["release"], what, known_names, rules),
            "reason": "flags, defaults (block size, batched tokens, backends, runner), parser names and the KV "
            "layout may differ from %s's: the argv check against the image's own parser catches refused "
            "flags before the restart, and the engine confirmation re-plans once from the engine's own "
            "numbers; add the release to KNOWN_RELEASES once a site has run it" % rules,
            "source": source,
        }
    ]
