# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An FP8 block-quantised checkpoint whose skip list vLLM cannot read as its author meant (issue 43).

Pure, stdlib only, Python 3.7-clean. The model import (_model_import.validate_model_dir) and the launch planner
(_plan_model.model_weights) ask ``skip_list_problem`` before anything reaches a host.

What vLLM does (0.26.0 and 0.27.1, model_executor/layers/quantization/fp8.py Fp8Config.from_config and
get_quant_method; utils/quant_utils.py:510 is_layer_skipped): a layer stays unquantised only when its full module
name is in ``ignored_layers`` / ``modules_to_not_convert`` (``prefix in ignored_layers``; fused layers by all
their shards). A short name (``model.visual``, ``mtp.fc`` as a suffix of nothing) names no layer, so every layer
the checkpoint keeps in BF16 but does not list in full is built as an FP8 block layer. Where a width of such a
layer is no multiple of the block, the start dies: measured on an H100 with vLLM 0.26.0, the field fixture's
``model.visual`` left the vision tower's MLP (4,304 wide) quantised and the multimodal start failed with
"AssertionError: the last dimension of x 4304 must be divisible by group_size 128". Written in full, as the
weight map names them, the same plan started.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# Weights that are no LinearBase layer in vLLM (embeddings, the LM head): the FP8 skip list does not apply.
NOT_LINEAR = re.compile(r"(?:^|\.)(?:embed_tokens|lm_head|pos_embed|patch_embed|wte|wpe|embeddings?)(?:\.|$)")
SCALE_SUFFIXES = (".weight_scale_inv", ".weight_scale")


def block_fp8_config(config):
    """(quantization_config, (block_n, block_k)) of an FP8 block-quantised checkpoint, or (None, None)."""
    config = config if isinstance(config, dict) else {}
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    quant = config.get("quantization_config") or text.get("quantization_config")
    if not isinstance(quant, dict) or "fp8" not in str(quant.get("quant_method") or "").lower():
        return None, None
    block = quant.get("weight_block_size")
    try:
        bn, bk = (int(b) for b in block)
    except (TypeError, ValueError):
        return None, None
    if bn <= 0 or bk <= 0:
        return None, None
    return quant, (bn, bk)


def _vision_widths(config):
    """{module-name pattern: (out, in)} of the Qwen-VL / Qwen3.5 vision tower's linear layers from config.json
    (model_executor/models/qwen3_vl.py Qwen3_VisionMLP, attention qkv/proj, patch merger)."""
    v = config.get("vision_config") if isinstance(config.get("vision_config"), dict) else None
    if not v:
        return []
    try:
        vh, vi = int(v["hidden_size"]), int(v["intermediate_size"])
    except (KeyError, TypeError, ValueError):
        return []
    merged = vh * int(v.get("spatial_merge_size") or 2) ** 2
    out_hidden = int(v.get("out_hidden_size") or merged)
    tower = r"(?:^|\.)visual\."
    return [
        (re.compile(tower + r"blocks\.\d+\.mlp\.linear_fc1$"), (vi, vh)),
        (re.compile(tower + r"blocks\.\d+\.mlp\.linear_fc2$"), (vh, vi)),
        (re.compile(tower + r"blocks\.\d+\.attn\.qkv$"), (3 * vh, vh)),
        (re.compile(tower + r"blocks\.\d+\.attn\.proj$"), (vh, vh)),
        (re.compile(tower + r"(?:deepstack_)?merger(?:_list\.\d+)?\.linear_fc1$"), (merged, merged)),
        (re.compile(tower + r"(?:deepstack_)?merger(?:_list\.\d+)?\.linear_fc2$"), (out_hidden, merged)),
    ]


def _vision(module):
    return bool(re.search(r"(?:^|\.)visual\.", module))


def skip_list_problem(config, names, tensors=None, language_model_only=False):
    """Why vLLM would quantise a layer this FP8 block checkpoint keeps unquantised, and fail on it, or None.

    ``names``: the weight map's tensor names (model.safetensors.index.json); ``tensors``: {tensor name: {"shape",
    "dtype"}} from the shards' safetensors headers where they are at hand (else the widths come from config.json,
    for the vision tower); ``language_model_only``: the vision tower is not loaded (--language-model-only), so not checked.
    Refused: a layer stored without an FP8 scale (the checkpoint left it unconverted), not named in full in the
    skip list, with a width that is no multiple of the block. The message names the layer, the short names that
    did not cover it, and the fix."""
    quant, block = block_fp8_config(config)
    if not quant:
        return None
    names = set(names or ())
    skip = quant.get("ignored_layers") or quant.get("modules_to_not_convert") or []
    skip = [str(s) for s in skip] if isinstance(skip, list) else []
    listed = set(skip)
    widths = _vision_widths(config)
    bad = []
    for name in sorted(names):
        if not name.endswith(".weight"):
            continue
        module = name[: -len(".weight")]
        if any(module + s in names for s in SCALE_SUFFIXES) or NOT_LINEAR.search(module):
            continue  # quantised in the checkpoint, or no linear layer
        if module in listed or (language_model_only and _vision(module)):
            continue
        info = (tensors or {}).get(name)
        if info is not None:
            shape = info.get("shape") or []
            if str(info.get("dtype") or "").upper().startswith("F8") or len(shape) != 2:
                continue  # stored in FP8 (quantised), or a norm, a vector or a convolution: no BF16 linear layer
            out_f, in_f = int(shape[0]), int(shape[1])
        else:
            found = [w for pattern, w in widths if pattern.search(module)]
            if not found:
                continue  # width unknown: nothing to say
            out_f, in_f = found[0]
        if out_f % block[0] or in_f % block[1]:
            bad.append((module, out_f, in_f))
    if not bad:
        return None
    # The layer whose input is no multiple first: vLLM's block-FP8 GEMM asserts on its input's last dimension.
    bad.sort(key=lambda b: (not b[2] % block[1], b[0]))
    module, out_f, in_f = bad[0]
    width = in_f if in_f % block[1] else out_f
    unit = block[1] if in_f % block[1] else block[0]
    fails = (
        "the start fails: 'the last dimension of x %d must be divisible by group_size %d'" % (width, unit)
        if in_f % block[1]
        else "vLLM cannot build its FP8 weight scales"
    )
    short = [s for s in skip if s not in names and (module.startswith(s + ".") or ("." + s) in module)]
    key = "ignored_layers" if quant.get("ignored_layers") else "modules_to_not_convert"
    return (
        "the FP8 block-quantised checkpoint keeps %s (%d x %d) unquantised, but quantization_config.%s does not "
        "name it in full%s: vLLM skips FP8 only for layers named in full, so it quantises this layer in blocks of "
        "%d x %d, and %d is no multiple of %d (%s); %d such layer%s in all. Fix: list every unquantised layer by its full module name as the weight "
        "map names it (e.g. \"%s\") in config.json quantization_config.%s%s."
        % (
            module,
            out_f,
            in_f,
            key,
            (" (%s covers it only as a short name)" % ", ".join(repr(s) for s in short)) if short else "",
            block[0],
            block[1],
            width,
            unit,
            fails,
            len(bad),
            "" if len(bad) == 1 else "s",
            module,
            key,
            ", or serve it with --language-model-only (vllm_plan_language_model_only) if no images are needed"
            if _vision(module)
            else "",
        )
    )
