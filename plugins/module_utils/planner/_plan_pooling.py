# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pooling models (embedding models, rerankers) for the launch planner: what vLLM 0.27.1 runs them as, and their
memory.

Pure, stdlib only, Python 3.7-clean. Paths cited are inside the vLLM 0.27.1 wheel's ``vllm/``.

- files_pooling_task(): whether the model's files alone make it a pooling model (the import's rule: no chat
  template needed).
- pooling_decision(): from the model's own files (config.json ``architectures``, sentence-transformers'
  ``modules.json`` and its Pooling module's ``config.json``) and the operator's ``pooling_task``, the runner and
  convert vLLM resolves (config/model.py _get_runner_type, _get_convert_type, _SUFFIX_TO_DEFAULTS; registry.py
  _EMBEDDING_MODELS, _SEQUENCE_CLASSIFICATION_MODELS, _normalize_arch), whether the model is encoder-only (no KV
  cache at all) and the batch of tokens vLLM then needs.
- describe_encoder() / encoder_weight_bytes(): BERT / RoBERTa / XLM-RoBERTa shapes, which _plan_model does not
  know (no decoder, no KV).
- size_encoder(): the ledger of an encoder-only model: weights, activation at the planned batch of tokens, no KV
  pool (v1/engine/core.py:281: a model whose layers need no KV cache skips the memory profile and allocates no
  pool) and so no decode-KV promise.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import os

from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_common import (
    ModelConfigError,
    TargetsError,
    dtype_bytes,
    fmt_gib,
)
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_memory import (
    ACTIVATION_TOKEN_SCALE,
    NON_TORCH_BYTES,
    TP_COMM_BYTES,
    cudagraph_bytes,
    cudagraph_capture_sizes,
    default_batched_tokens,
    lm_token_transient_bytes,
)

POOLING_TASKS = ("embed", "classify")
# vLLM 0.27.1 registry.py: encoder-only architectures it registers as pooling models (no adapter: it resolves
# `--convert none`), with the task their head serves. _EMBEDDING_MODELS: BertModel, RobertaModel, XLMRobertaModel
# (RobertaEmbeddingModel); _SEQUENCE_CLASSIFICATION_MODELS: the three *ForSequenceClassification (cross-encoders).
ENCODER_ARCHITECTURES = {
    "BertModel": "embed",
    "RobertaModel": "embed",
    "XLMRobertaModel": "embed",
    "BertForSequenceClassification": "classify",
    "RobertaForSequenceClassification": "classify",
    "XLMRobertaForSequenceClassification": "classify",
}
# model_type of the RoBERTa family: absolute positions start at pad_token_id + 1 (models/roberta.py:80-86), so
# max_position_embeddings - (pad_token_id + 1) positions are usable.
ROBERTA_TYPES = ("roberta", "xlm-roberta")
# sentence-transformers' Pooling module config keys -> vLLM's seq_pooling_type (config/pooler.py; vLLM reads them
# through transformers_utils/config.py get_pooling_config).
ST_POOLING_MODES = (
    ("pooling_mode_cls_token", "CLS"),
    ("pooling_mode_mean_tokens", "MEAN"),
    ("pooling_mode_lasttoken", "LAST"),
)
ST_POOLING_MODULE = "sentence_transformers.models.Pooling"
# vLLM's own example for the original Qwen3 reranker (a Qwen3ForCausalLM checkpoint whose score is the
# "yes" / "no" logits: models/config.py:773 Qwen3ForSequenceClassificationConfig): the architecture and the two
# tokens are given as --hf-overrides; no classifier head is in the checkpoint.
QWEN3_RERANKER_OVERRIDES = {
    "architectures": ["Qwen3ForSequenceClassification"],
    "classifier_from_token": ["no", "yes"],
    "is_original_qwen3_reranker": True,
}


def _load(path, what):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (IOError, OSError) as exc:
        raise ModelConfigError("%s: cannot read %s (%s)" % (path, what, exc))
    except ValueError as exc:
        raise ModelConfigError("%s: %s is not JSON (%s)" % (path, what, exc))


def read_sentence_transformers(model_dir):
    """sentence-transformers' files of a model directory: {'modules': [module types], 'pooling': the Pooling
    module's config.json or None}; None when the directory has no modules.json (not a sentence-transformers model).
    """
    path = os.path.join(str(model_dir), "modules.json")
    if not os.path.exists(path):
        return None
    modules = _load(path, "modules.json")
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise ModelConfigError("%s: modules.json is not a list of modules" % path)
    pooling = None
    for module in modules:
        if module.get("type") == ST_POOLING_MODULE:
            sub = str(module.get("path") or "")
            if sub.startswith("/") or ".." in sub.split("/"):
                raise ModelConfigError("%s: Pooling module path %r leaves the model directory" % (path, sub))
            pooling = _load(os.path.join(str(model_dir), sub, "config.json"), "the Pooling module's config.json")
            if not isinstance(pooling, dict):
                raise ModelConfigError("%s/%s/config.json is not a JSON object" % (model_dir, sub))
    return {"modules": [str(m.get("type")) for m in modules], "pooling": pooling}


def st_pooling_type(st):
    """vLLM's seq_pooling_type from sentence-transformers' Pooling config (None when it does not say)."""
    pooling = (st or {}).get("pooling") or {}
    for key, name in ST_POOLING_MODES:
        if pooling.get(key):
            return name
    return None


def architectures_of(config):
    """config.json's architectures as a list."""
    archs = config.get("architectures") or []
    return list(archs) if isinstance(archs, list) else [archs]


def files_pooling_task(config, st=None):
    """What the model's own files say it pools for ("embed" or "classify"), or None for a model they do not make a
    pooling model (a generative one; a decoder the operator asks to pool with ``pooling_task`` is still generative
    by its files). Never raises: the import's checks (_model_import) ask it which files the model needs - a pooling
    model generates no text, so it needs no chat template. config: config.json; st: read_sentence_transformers()."""
    archs = architectures_of(config) if isinstance(config, dict) else []
    arch = str(archs[0]) if archs else ""
    if arch in ENCODER_ARCHITECTURES:
        return ENCODER_ARCHITECTURES[arch]
    if arch.endswith("ForSequenceClassification"):
        return "classify"
    if st is not None:
        return "embed"
    return None


def pooling_decision(config, st=None, asked=None, generative_archs=()):
    """How vLLM 0.27.1 runs this model, or None for a generative model.

    config: config.json; st: read_sentence_transformers(); asked: the operator's pooling_task (None, "embed",
    "classify"); generative_archs: the decoder architectures the planner sizes (_plan_model.FAMILIES).
    Returns {'task', 'runner', 'convert', 'encoder_only', 'size_as' (the architecture sized: the base decoder of an
    adapted model), 'pooling_type', 'hf_overrides', 'chunked_prefill', 'how'}."""
    if asked is not None and asked not in POOLING_TASKS:
        raise TargetsError("pooling_task %r: give one of %s (or leave it unset)" % (asked, ", ".join(POOLING_TASKS)))
    archs = architectures_of(config)
    arch = archs[0] if archs else ""
    st_type = st_pooling_type(st)
    out = {"runner": "pooling", "hf_overrides": None, "pooling_type": st_type}
    if arch in ENCODER_ARCHITECTURES:
        task = ENCODER_ARCHITECTURES[arch]
        if asked and asked != task:
            raise TargetsError(
                "pooling_task %s: %s is a%s model (its head serves %s only); vLLM %s would refuse --convert %s on it"
                % (asked, arch, "n embedding" if task == "embed" else " cross-encoder", task, "0.27.1", asked)
            )
        how = "%s: vLLM registers it as a pooling model (registry.py), no adapter" % arch
        out.update(task=task, convert="none", encoder_only=True, size_as=arch, how=how)
    elif arch.endswith("ForSequenceClassification"):
        base = arch[: -len("ForSequenceClassification")] + "ForCausalLM"
        if base not in generative_archs:
            raise ModelConfigError(
                "%s: vLLM adapts it from %s (registry.py _normalize_arch), which the planner does not size"
                % (arch, base)
            )
        if asked and asked != "classify":
            raise TargetsError("pooling_task %s: %s is a cross-encoder (classify)" % (asked, arch))
        how = "%s: vLLM converts %s with a classification head (--convert classify)" % (arch, base)
        out.update(task="classify", convert="classify", encoder_only=False, size_as=base, how=how)
    elif st is not None or asked:
        if arch not in generative_archs:
            raise ModelConfigError(
                "%s as a pooling model: the planner sizes pooling models on %s or on a decoder it models (%s)"
                % (
                    arch or "(no architecture)",
                    ", ".join(sorted(ENCODER_ARCHITECTURES)),
                    ", ".join(sorted(generative_archs)),
                )
            )
        task = asked or "embed"
        if task == "embed":
            how = (
                "sentence-transformers' modules.json: vLLM runs %s as a pooling model (config/model.py "
                "_get_default_runner_type) and adapts it to embeddings (--convert embed)" % arch
                if st is not None
                else "pooling_task embed: %s adapted to embeddings (--convert embed, last-token pooling)" % arch
            )
            out.update(task="embed", convert="embed", encoder_only=False, size_as=arch, how=how)
        elif arch == "Qwen3ForCausalLM":
            how = (
                "pooling_task classify on Qwen3ForCausalLM: the original Qwen3 reranker, scored from its 'yes'/'no' "
                "logits (models/config.py:773, --hf-overrides as vLLM's qwen3_reranker example)"
            )
            out.update(
                task="classify",
                convert="classify",
                encoder_only=False,
                size_as=arch,
                hf_overrides=dict(QWEN3_RERANKER_OVERRIDES),
                pooling_type="LAST",
                how=how,
            )
        else:
            raise TargetsError(
                "pooling_task classify: %s carries no classification head and vLLM %s knows no token-logit "
                "reranker form of it (only Qwen3's); use a *ForSequenceClassification checkpoint" % (arch, "0.27.1")
            )
    else:
        return None
    if out["pooling_type"] is None:
        # The model's own default (registry _ModelInfo.default_seq_pooling_type): BERT-family heads read CLS,
        # decoders adapted by as_embedding_model / as_seq_cls_model the last token.
        out["pooling_type"] = "CLS" if out["encoder_only"] else "LAST"
    # config/model.py:1906 is_chunked_prefill_supported: not for bidirectional (encoder-only) attention, nor for
    # causal attention pooled by MEAN or CLS.
    out["chunked_prefill"] = not out["encoder_only"] and out["pooling_type"] not in ("MEAN", "CLS")
    return out


def describe_encoder(config):
    """The planner's shape of a BERT-family encoder (config.json); dtype as vLLM loads it: a float32 checkpoint
    is downcast to float16 for pooling models (config/model.py:2142 _resolve_auto_dtype)."""
    try:
        h = int(config["hidden_size"])
        layers = int(config["num_hidden_layers"])
        heads = int(config["num_attention_heads"])
        inter = int(config.get("intermediate_size") or 4 * h)
        vocab = int(config["vocab_size"])
        positions = int(config["max_position_embeddings"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelConfigError("config.json of an encoder model: %s is missing or not a number" % exc)
    if min(h, layers, heads, vocab, positions) < 1:
        raise ModelConfigError("config.json of an encoder model: sizes must be positive integers")
    checkpoint_dtype = str(config.get("torch_dtype") or config.get("dtype") or "float32")
    loaded = "float16" if checkpoint_dtype in ("float32", "float") else checkpoint_dtype
    model_type = str(config.get("model_type") or "")
    offset = int(config.get("pad_token_id") or 0) + 1 if model_type in ROBERTA_TYPES else 0
    labels = config.get("id2label")
    num_labels = len(labels) if isinstance(labels, dict) and labels else int(config.get("num_labels") or 1)
    arch = architectures_of(config)[0] if architectures_of(config) else ""
    return {
        "model_type": model_type,
        "architectures": architectures_of(config),
        "family": "encoder-only (%s)" % (model_type or arch),
        "hidden_size": h,
        "intermediate_size": inter,
        "vocab_size": vocab,
        "num_layers": layers,
        "num_heads": heads,
        "head_dim": h // heads,
        "type_vocab_size": int(config.get("type_vocab_size") or 0),
        "max_position_embeddings": positions,
        "position_offset": offset,
        "max_len": positions - offset,
        "checkpoint_dtype": checkpoint_dtype,
        "model_dtype": loaded,
        "classifier": arch.endswith("ForSequenceClassification"),
        "num_labels": num_labels,
    }


def encoder_weight_bytes(shape):
    """Parameters of a BERT-family encoder x the loaded dtype: embeddings (words, positions, token types, norm),
    each layer (q/k/v/o, the two MLP matrices, two norms, biases), and the head: BertModel's pooler or the
    classifier (dense + out_proj, RobertaClassificationHead)."""
    h, inter = shape["hidden_size"], shape["intermediate_size"]
    params = (shape["vocab_size"] + shape["max_position_embeddings"] + shape["type_vocab_size"]) * h + 2 * h
    per_layer = 4 * (h * h + h) + 2 * h + (h * inter + inter) + (inter * h + h) + 2 * h
    params += shape["num_layers"] * per_layer
    if shape["classifier"]:
        params += h * h + h + h * shape["num_labels"] + shape["num_labels"]
    else:
        params += h * h + h
    return params * dtype_bytes(shape["model_dtype"])


def pooling_checks(t):
    """The settings a pooling model cannot take, refused by name (vLLM would fail or ignore them)."""
    bad = [
        (key, why)
        for key, why in (
            ("num_speculative_tokens", "speculative decoding drafts generated tokens"),
            ("kv_offloading_gib", "KV offload keeps idle decode sessions"),
            ("reasoning_parser", "it parses generated text"),
            ("tool_call_parser", "it parses generated text"),
            ("chat_template_kwargs", "it formats chat prompts"),
        )
        if t.get(key)
    ]
    if bad:
        raise TargetsError(
            "a pooling model (embeddings, scores) generates no text: %s"
            % "; ".join("%s is for generation (%s)" % (k, w) for k, w in bad)
        )


def batched_tokens(t, pooling, ctx, card_default):
    """--max-num-batched-tokens of a pooling model: what was asked (refused below the context when vLLM cannot
    chunk the prefill: config/scheduler.py verify_max_model_len), else vLLM's own default, max(context, the card's
    default) without chunked prefill (engine/arg_utils.py:2755), the card's default with it."""
    asked = t["max_num_batched_tokens"] if t.get("max_num_batched_tokens_asked") is not None else None
    if asked:
        if not pooling["chunked_prefill"] and asked < ctx:
            raise TargetsError(
                "max_num_batched_tokens %d is smaller than the context %d: vLLM %s refuses it for this pooling "
                "model (no chunked prefill for %s pooling%s): raise it to %d or shorten the context"
                % (
                    asked,
                    ctx,
                    "0.27.1",
                    pooling["pooling_type"],
                    ", bidirectional attention" if pooling["encoder_only"] else "",
                    ctx,
                )
            )
        return asked
    return card_default if pooling["chunked_prefill"] else max(ctx, card_default)


def encoder_context(t, shape):
    """The context of an encoder: the one asked for (at most the positions the model has), else all of them."""
    top = shape["max_len"]
    if t["context"] == "max":
        return top, "the model's %d positions (max_position_embeddings %d less the offset %d)" % (
            top,
            shape["max_position_embeddings"],
            shape["position_offset"],
        )
    if t["context"] > top:
        raise TargetsError(
            "context %d exceeds the %d positions of this encoder (max_position_embeddings %d less the RoBERTa offset "
            "%d)" % (t["context"], top, shape["max_position_embeddings"], shape["position_offset"])
        )
    return t["context"], "requested"


def encoder_non_kv(shape, weights, t):
    """What an encoder-only model holds, per GPU: weights, non-torch memory, the activation of one batch of
    max_num_batched_tokens tokens (the LM's per-token rule: an estimate, not calibrated on an encoder) and the
    PIECEWISE CUDA graphs (no decode: no FULL graphs). [(name, bytes, how)]."""
    tp = t["tp"]
    items = [("weights", weights["loaded"] // tp, weights["how"])]
    items.append(
        (
            "non_torch",
            NON_TORCH_BYTES + (TP_COMM_BYTES if tp > 1 else 0),
            "cuBLAS workspaces and kernel images (the decoders' calibrated figure)",
        )
    )
    per_tok = int(
        lm_token_transient_bytes(dict(shape, intermediate_size=shape["intermediate_size"] // tp))
        * ACTIVATION_TOKEN_SCALE
    )
    tokens = t["max_num_batched_tokens"]
    items.append(
        (
            "activation_peak",
            tokens * per_tok,
            "%d batched tokens x %.0f KiB/token (the decoders' rule x %.2f; not calibrated on an encoder)"
            % (tokens, per_tok / 1024.0, ACTIVATION_TOKEN_SCALE),
        )
    )
    if not t["enforce_eager"]:
        sizes = cudagraph_capture_sizes(t["concurrency"], 0, tokens)
        cg = cudagraph_bytes(len(sizes), 0, shape["num_layers"])
        items.append(
            (
                "cuda_graphs",
                cg,
                "%d PIECEWISE graphs x %d layers (no decode graphs)" % (len(sizes), shape["num_layers"]),
            )
        )
    return items


def size_encoder(t, shape, weights, pooling):
    """(ledger, warnings) of an encoder-only pooling model. No KV pool: vLLM allocates none and skips its memory
    profile (v1/engine/core.py:281), so gpu_memory_utilization only sets the free memory its start-up check asks
    for (v1/worker/utils.py:409 request_memory): the footprint is the non-KV memory alone."""
    ctx, ctx_how = encoder_context(t, shape)
    items = encoder_non_kv(shape, weights, t)
    non_kv = sum(b for _n, b, _h in items)
    requested = int(math.ceil(t["cuda_total_bytes"] * t["gpu_memory_utilization"]))
    warnings = []
    if non_kv > requested:
        warnings.append(
            "the encoder's estimated memory %s is above its budget %s (gpu_memory_utilization %.3f): vLLM does not "
            "hold an encoder-only model to its budget, but a card shared with other services is split by it"
            % (fmt_gib(non_kv), fmt_gib(requested), t["gpu_memory_utilization"])
        )
    ledger = {
        "pooling": dict(pooling),
        "budget_bytes": requested,
        "budget_how": "ceil(%d x %s): the free memory vLLM's start-up check asks for; an encoder-only model "
        "allocates no KV pool" % (t["cuda_total_bytes"], "%g" % t["gpu_memory_utilization"]),
        "components": [{"name": n, "bytes": b, "how": h} for n, b, h in items],
        "outside_pool": [],
        "non_kv_bytes": non_kv,
        "footprint_bytes": non_kv,
        "kv_pool_margin_bytes": 0,
        "kv_pool_bytes": 0,
        "kv_pool_how": "none: encoder-only (bidirectional attention, no KV cache: v1/engine/core.py:281)",
        "kv_pool_measured": False,
        "estimate_band": None,
        "kv_dtype": None,
        "attention_backend": None,
        "compute_capability": "%d.%d" % t["cc"],
        "model_family": shape["family"],
        "prefix_caching": False,
        "num_gpu_blocks": 0,
        "blocks_per_full_request": 0,
        "max_model_len": ctx,
        "max_model_len_how": ctx_how,
        "max_position_embeddings": shape["max_position_embeddings"],
        "context_requested": t["context"] != "max",
        "require_full_length_concurrency": False,
        "longest_single_request": ctx,
        "gpu_kv_cache_tokens": 0,
        "max_concurrency_at_len": None,
        "concurrency": t["concurrency"],
        "num_speculative_tokens": 0,
        "max_num_batched_tokens": t["max_num_batched_tokens"],
        "gpu_total_bytes": t["gpu_total_bytes"],
        "gpu_reserved_bytes": t["gpu_reserved_bytes"],
        "cuda_total_bytes": t["cuda_total_bytes"],
        "gpu_memory_utilization": t["gpu_memory_utilization"],
        "kv_bytes_per_full_request": 0,
    }
    return ledger, warnings


# The KV layout of a model with no KV cache, for the flags and the container environment (_plan_ledger._kv_layout's
# keys they read).
NO_KV_LAYOUT = {"kv_dtype": None, "kv_from_scheme": False, "has_sinks": False, "attention_backend": None, "no_kv": True}


def pooling_targets(t, shape):
    """The targets of a pooling model: its settings checked (pooling_checks) and the batch of tokens vLLM will run
    (batched_tokens); ``t`` itself is returned for a generative model, a copy otherwise."""
    pooling = shape.get("pooling")
    if not pooling:
        return t
    pooling_checks(t)
    t = dict(t)
    card = default_batched_tokens(t["gpu_total_bytes"])
    if pooling["encoder_only"]:
        ctx = encoder_context(t, shape)[0]
        # No KV cache, no prefix to cache: vLLM switches prefix caching off for non-causal attention itself
        # (v1/engine/core.py:276, "Disabling prefix caching: model has non-causal attention layers"), so a
        # host-wide vllm_plan_prefix_caching (a chat model's setting) puts no flag on an encoder's argv.
        t["prefix_caching_asked"] = None
    else:
        ctx = t["context"] if t["context"] != "max" else (shape["max_position_embeddings"] or card)
    t["max_num_batched_tokens"] = batched_tokens(t, pooling, ctx, card)
    return t


def pooling_flags(pooling, compact_json):
    """The flags that make vLLM run the model as planned: --runner pooling, --convert as vLLM resolves it (said
    explicitly: no 'Resolved --runner auto' guess at start-up), and --hf-overrides where the checkpoint needs them."""
    f = [
        {
            "args": ["--runner", "pooling", "--convert", pooling["convert"]],
            "reason": "%s model: %s" % (pooling["task"], pooling["how"]),
        }
    ]
    if pooling["hf_overrides"]:
        f.append(
            {
                "args": ["--hf-overrides", compact_json(pooling["hf_overrides"])],
                "reason": "the original Qwen3 reranker scores from its 'no'/'yes' token logits",
            }
        )
    return f
