# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Model reading for the launch planner: config.json -> the numbers vLLM 0.27.1 sizes memory from.

Pure, stdlib only, Python 3.7-clean. Paths cited are inside the vLLM 0.27.1 wheel's ``vllm/``.
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.airgap.vllm.plugins.module_utils.model import _model_dir
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_pooling
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_common import (
    VLLM_VERSION,
    ModelConfigError,
    TargetsError,
    cdiv,
    dtype_bytes,
    fmt_gib,
)

__metaclass__ = type

# Architectures whose KV layout and weights the planner models (docs/launch-planning.md,
# "Supported model families"). Anything else needs ``layer_layout`` declared by the user.
FAMILIES = {
    # hybrid: Gated-DeltaNet (linear attention, MambaSpec state) + full attention, MTP head
    "Qwen3_5ForConditionalGeneration": "qwen3.5 hybrid (GDN + full attention)",
    "Qwen3_5ForCausalLM": "qwen3.5 hybrid (GDN + full attention)",
    "Qwen3NextForCausalLM": "qwen3-next hybrid (GDN + full attention)",
    # dense full attention (one KV-cache group)
    "LlamaForCausalLM": "dense full attention",
    "MistralForCausalLM": "dense full attention",
    "Qwen2ForCausalLM": "dense full attention",
    "Qwen3ForCausalLM": "dense full attention",
    "Qwen3VLForConditionalGeneration": "dense full attention + Qwen vision tower",
    # mixture of experts, full attention (one KV-cache group); vLLM 0.26.0 runs it on the V1 model runner
    "Qwen3MoeForCausalLM": "MoE + full attention",
    # interleaved sliding-window + full attention (SlidingWindowSpec groups)
    "Gemma2ForCausalLM": "sliding window + full attention",
    "Gemma3ForCausalLM": "sliding window + full attention",
    "Gemma3ForConditionalGeneration": "sliding window + full attention + SigLIP vision",
}

# transformers_utils/model_arch_config_convertor.py:260 is_deepseek_mla: these model types use
# multi-head latent attention (MLAAttentionSpec, one latent per token) when kv_lora_rank is set.
MLA_MODEL_TYPES = frozenset(
    (
        "axk1",
        "deepseek_v2",
        "deepseek_v3",
        "deepseek_v32",
        "deepseek_v4",
        "deepseek_mtp",
        "k3_dspark",
        "glm_moe_dsa",
        "glm4_moe_lite",
        "glm4_moe_lite_mtp",
        "kimi_k2",
        "kimi_linear",
        "longcat_flash",
        "longcat_flash_ngram",
        "pangu_ultra_moe",
        "pangu_ultra_moe_mtp",
        "bailing_hybrid",
        "bailing_hybrid_mtp",
    )
)

# Vision-tower defaults vLLM fills in when config.json omits a key: the config class vLLM
# registers for the model type (transformers_utils/configs/qwen3_5.py Qwen3_5VisionConfig
# __init__; the Qwen3.5-MoE class in qwen3_5_moe.py carries the same defaults).
VISION_DEFAULTS = {
    "qwen3_5": {
        "depth": 27,
        "hidden_size": 1152,
        "intermediate_size": 4304,
        "num_heads": 16,
        "in_channels": 3,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "out_hidden_size": 3584,
        "num_position_embeddings": 2304,
    },
}
VISION_DEFAULTS["qwen3_5_moe"] = VISION_DEFAULTS["qwen3_5"]

# transformers' own layer_types defaults, used by vLLM's model code through the HF config when
# config.json does not list them (Gemma2Config: every other layer sliding, first one sliding;
# Gemma3TextConfig: sliding_window_pattern 6 -> layer (i+1) % 6 == 0 is full attention).
SLIDING_PATTERNS = {"gemma2": 2, "gemma3_text": 6, "gemma3": 6}

LAYER_KINDS = ("full_attention", "linear_attention", "sliding_attention")


def _int_field(cfg, key, where, minimum=1, default=None):
    """An integer field of config.json, >= minimum, or a ModelConfigError naming it and the fix."""
    value = cfg.get(key, default)
    if value is None:
        raise ModelConfigError("%s lacks %r: the planner cannot size this model" % (where, key))
    number = None
    if not isinstance(value, bool):
        try:
            number = int(value)
        except (TypeError, ValueError):
            number = None
        if number is not None and isinstance(value, float) and number != value:
            number = None
    if number is None or number < minimum:
        raise ModelConfigError(
            "%s: %r is %r; it must be an integer >= %d (fix config.json, or "
            "declare the layout with layer_layout)" % (where, key, value, minimum)
        )
    return number


def _layout_int(layout, key, minimum):
    """A number of layer_layout (an operator input): an integer >= minimum, or None when not given."""
    value = layout.get(key)
    if value is None:
        return None
    return _int_field(layout, key, "layer_layout", minimum=minimum)


def _layer_types(text, n_layers, layout):
    if layout:
        counts = dict((k, _layout_int(layout, k, 0) or 0) for k in LAYER_KINDS)
        if sum(counts.values()) != n_layers:
            raise ModelConfigError(
                "layer_layout declares %d layers (%s) but config.json has num_hidden_layers %d"
                % (sum(counts.values()), counts, n_layers)
            )
        return (
            ["full_attention"] * counts["full_attention"]
            + ["linear_attention"] * counts["linear_attention"]
            + ["sliding_attention"] * counts["sliding_attention"]
        )
    layer_types = text.get("layer_types")
    interval = text.get("full_attention_interval")
    if layer_types:
        if not isinstance(layer_types, list) or len(layer_types) != n_layers:
            raise ModelConfigError(
                "layer_types has %s entries for %d layers"
                % (len(layer_types) if isinstance(layer_types, list) else "no list of", n_layers)
            )
        return list(layer_types)
    if interval:
        # Qwen3-Next convention: every interval-th layer (1-based) is full attention.
        return ["full_attention" if (i + 1) % int(interval) == 0 else "linear_attention" for i in range(n_layers)]
    pattern = SLIDING_PATTERNS.get(str(text.get("model_type")))
    if pattern and text.get("sliding_window"):
        pattern = int(text.get("sliding_window_pattern") or pattern)
        return ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n_layers)]
    return ["full_attention"] * n_layers


def kv_cache_scheme_dtype(quant):
    """What ``--kv-cache-dtype auto`` becomes for a checkpoint that declares its KV quantization:
    compressed-tensors ``kv_cache_scheme`` -> "fp8" (model_executor/layers/attention/attention.py:
    284-290); ModelOpt ``kv_cache_quant_algo``/``kv_cache_scheme`` FP8 -> "fp8_e4m3"
    (utils/torch_utils.py get_kv_cache_quant_algo_string, resolve_kv_cache_dtype_string)."""
    if not isinstance(quant, dict):
        return None
    method = str(quant.get("quant_method") or "")
    if method.startswith("modelopt"):
        inner = quant.get("quantization", quant)
        algo = (
            inner.get("kv_cache_scheme")
            or quant.get("kv_cache_scheme")
            or inner.get("kv_cache_quant_algo")
            or quant.get("kv_cache_quant_algo")
        )
        if isinstance(algo, dict):
            if algo.get("dynamic") is False and algo.get("num_bits") == 8 and algo.get("type") == "float":
                return "fp8_e4m3"
            return None
        if isinstance(algo, str) and algo.lower() == "fp8":
            return "fp8_e4m3"
        return None
    if quant.get("kv_cache_scheme") is not None:
        scheme = quant["kv_cache_scheme"]
        if not isinstance(scheme, dict) or scheme.get("type") != "float" or scheme.get("num_bits") != 8:
            # compressed_tensors.py:1034 validate_kv_cache_scheme refuses anything else.
            raise ModelConfigError(
                "quantization_config.kv_cache_scheme %r: vLLM %s accepts only num_bits 8, type "
                "float (compressed_tensors.py validate_kv_cache_scheme)" % (scheme, "0.27.1")
            )
        return "fp8"
    return None


def describe_model(config, layer_layout=None):
    """Reduce a HF config.json dict to the planner's model shape (see _describe_model); any field
    of the wrong type becomes a ModelConfigError naming it, never a traceback."""
    try:
        return _describe_model(config, layer_layout)
    except (TypeError, ValueError, AttributeError) as exc:
        raise ModelConfigError(
            "config.json (or layer_layout) has a field of the wrong type: %s; "
            "fix the file or declare the layout with layer_layout" % exc
        )


def _describe_model(config, layer_layout=None):
    """Reduce a HF config.json dict to the numbers the planner needs.

    Handles multimodal nesting (``text_config``), ``layer_types`` or ``full_attention_interval``,
    sliding windows, Gated-DeltaNet fields, MTP, quantization_config and kv_cache_scheme.
    Refuses MLA models and architectures it does not model unless ``layer_layout`` declares the
    layers ({full_attention, sliding_attention, linear_attention, sliding_window,
    num_kv_heads, head_dim}).
    """
    if not isinstance(config, dict):
        raise ModelConfigError("config.json is not a JSON object")
    text = config.get("text_config") or config
    if not isinstance(text, dict):
        raise ModelConfigError("config.json text_config is not a JSON object")
    if layer_layout is not None and not isinstance(layer_layout, dict):
        raise ModelConfigError(
            "layer_layout must be a mapping such as {full_attention: 10, sliding_attention: 52, sliding_window: 1024}"
        )
    layout = layer_layout or {}
    archs = config.get("architectures") or text.get("architectures") or []
    if not isinstance(archs, list):
        archs = [archs]
    model_type = str(text.get("model_type") or config.get("model_type") or "")
    if model_type in MLA_MODEL_TYPES and text.get("kv_lora_rank") is not None:
        raise ModelConfigError(
            "%s (model_type %s) uses multi-head latent attention (kv_lora_rank %s): vLLM 0.27.1 "
            "sizes it with MLAAttentionSpec (one compressed latent per token, "
            "v1/kv_cache_interface.py) and MLA backends, which this planner does not model. "
            "Start it once with --max-model-len set by hand and read 'Available KV cache "
            "memory' / 'GPU KV cache size' from the log instead."
            % (", ".join(archs) or "this model", model_type, text.get("kv_lora_rank"))
        )
    family = next((FAMILIES[a] for a in archs if a in FAMILIES), None)
    if family is None and not layout:
        raise ModelConfigError(
            "architecture %s (model_type %r) is not one the planner models (supported: %s). "
            "Declare the layers with layer_layout, e.g. {full_attention: 32} for a dense model or "
            "{full_attention: 10, sliding_attention: 52, sliding_window: 1024}, to plan it anyway."
            % (", ".join(archs) or "(none given)", model_type, ", ".join(sorted(FAMILIES)))
        )
    if family is None:
        family = "declared by layer_layout"

    hidden = _int_field(text, "hidden_size", "config.json")
    n_layers = _int_field(text, "num_hidden_layers", "config.json")
    n_heads = _int_field(text, "num_attention_heads", "config.json")
    kv_heads = _layout_int(layout, "num_kv_heads", 1) or _int_field(
        text, "num_key_value_heads", "config.json", default=n_heads
    )
    head_dim = _layout_int(layout, "head_dim", 1) or _int_field(
        text, "head_dim", "config.json", default=hidden // n_heads
    )
    unknown_keys = sorted(set(layout) - set(LAYER_KINDS) - {"sliding_window", "num_kv_heads", "head_dim"})
    if unknown_keys:
        raise ModelConfigError(
            "layer_layout: unknown key(s) %s; use %s"
            % (
                ", ".join(map(str, unknown_keys)),
                ", ".join(LAYER_KINDS + ("sliding_window", "num_kv_heads", "head_dim")),
            )
        )

    layer_types = _layer_types(text, n_layers, layout)
    unknown = set(layer_types) - set(LAYER_KINDS)
    if unknown:
        raise ModelConfigError(
            "unsupported layer types %s (the planner sizes full attention, "
            "sliding-window attention and Gated-DeltaNet layers)" % sorted(unknown)
        )
    n_linear = layer_types.count("linear_attention")
    n_sliding = layer_types.count("sliding_attention")
    window = None
    if n_sliding:
        window = _layout_int(layout, "sliding_window", 1) or text.get("sliding_window")
        if not window or int(window) < 1:
            raise ModelConfigError(
                "sliding-attention layers but no sliding_window in config.json (declare it in layer_layout)"
            )
        window = int(window)

    gdn = None
    if n_linear:
        try:
            gdn = {
                "k_heads": int(text["linear_num_key_heads"]),
                "v_heads": int(text["linear_num_value_heads"]),
                "k_dim": int(text["linear_key_head_dim"]),
                "v_dim": int(text["linear_value_head_dim"]),
                "conv_kernel": int(text["linear_conv_kernel_dim"]),
            }
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelConfigError("linear-attention layers but config.json lacks %s" % exc)

    model_dtype = str(
        text.get("dtype") or text.get("torch_dtype") or config.get("dtype") or config.get("torch_dtype") or "bfloat16"
    )
    quant = config.get("quantization_config") or text.get("quantization_config") or {}
    if not isinstance(quant, dict):
        quant = {}
    vision = config.get("vision_config")
    if isinstance(vision, dict):
        vtype = str(vision.get("model_type") or model_type)
        defaults = VISION_DEFAULTS.get(vtype) or VISION_DEFAULTS.get(model_type) or {}
        filled = dict(defaults)
        filled.update(dict((k, v) for k, v in vision.items() if v is not None))
        filled["_defaulted"] = sorted(k for k in defaults if vision.get(k) is None)
        vision = filled
    else:
        vision = None
    return {
        "model_type": config.get("model_type") or text.get("model_type"),
        "architectures": archs,
        "family": family,
        "hidden_size": hidden,
        "intermediate_size": int(text.get("intermediate_size") or 4 * hidden),
        "vocab_size": int(text.get("vocab_size") or config.get("vocab_size") or 0),
        "num_layers": n_layers,
        "num_full_layers": n_layers - n_linear - n_sliding,
        "num_linear_layers": n_linear,
        "num_sliding_layers": n_sliding,
        "sliding_window": window,
        "num_heads": n_heads,
        "num_kv_heads": kv_heads,
        "head_dim": head_dim,
        "attn_output_gate": bool(text.get("attn_output_gate", False)),
        "attention_sinks": attention_sinks(archs, text, n_sliding),
        "gdn": gdn,
        "mtp_layers": int(text.get("mtp_num_hidden_layers") or 0),
        "model_dtype": model_dtype,
        "mamba_ssm_dtype": text.get("mamba_ssm_dtype"),
        "max_position_embeddings": int(text.get("max_position_embeddings") or 0),
        "tie_word_embeddings": bool(config.get("tie_word_embeddings", text.get("tie_word_embeddings", False))),
        "quant_method": quant.get("quant_method"),
        "weight_block_size": quant.get("weight_block_size"),
        "kv_cache_scheme_dtype": kv_cache_scheme_dtype(quant),
        "fp8_checkpoint": _has_kv_cache_method(quant),
        "vision": vision,
        # vLLM's ModelConfig.is_moe: any of these in the text config > 0 (transformers_utils/
        # model_arch_config_convertor.py get_num_experts).
        "num_experts": num_experts(text),
        # The routed experts' width and how many a token takes (Qwen3-MoE, Qwen3-Next): the fused-MoE workspace
        # (_plan_memory.lm_token_transient_bytes).
        "moe_intermediate_size": int(text.get("moe_intermediate_size") or 0),
        "experts_per_token": int(text.get("num_experts_per_tok") or 0),
    }


def num_experts(text):
    """The experts vLLM counts for is_moe (model_arch_config_convertor.py:148 get_num_experts; a list counts by its
    first entry); 0 for a dense model."""
    for key in ("num_experts", "moe_num_experts", "n_routed_experts", "num_local_experts"):
        value = text.get(key)
        if isinstance(value, list):
            value = value[0] if value else 0
        if value:
            try:
                return int(value)
            except (TypeError, ValueError):
                return 0
    return 0


# Architectures whose attention layers carry sinks (Attention(..., sinks=...)), always or as their
# config says: model_executor/models/gpt_oss.py:168 OAIAttention (every layer),
# openai_privacy_filter.py:50, mimo_v2.py:386 (add_swa_attention_sink_bias), laguna.py:483
# (swa_attention_sink_enabled, sliding-window layers only).
SINK_ARCHITECTURES = ("GptOssForCausalLM", "OpenAIPrivacyFilterForTokenClassification")
SINK_FLAGS = {
    "MiMoV2FlashForCausalLM": "add_swa_attention_sink_bias",
    "MiMoV2ForCausalLM": "add_swa_attention_sink_bias",
    "LagunaForCausalLM": "swa_attention_sink_enabled",
}


def attention_sinks(archs, text, n_sliding=0):
    """Does vLLM build this model's attention with sinks (it narrows the backends, _plan_memory)?"""
    for arch in archs:
        if arch in SINK_ARCHITECTURES:
            return True
        flag = SINK_FLAGS.get(arch)
        if flag and bool(text.get(flag, False)) and (arch != "LagunaForCausalLM" or n_sliding):
            return True
    return False


def _has_kv_cache_method(quant):
    """True when vLLM builds a BaseKVCacheMethod for the attention layers (fp8.py:849
    Fp8KVCacheMethod, modelopt.py:119, quark.py:755, or compressed-tensors with a
    kv_cache_scheme): such checkpoints refuse fp8_e5m2 KV (attention.py:198-213)."""
    method = str(quant.get("quant_method") or "")
    if method in ("fp8", "quark") or method.startswith("modelopt"):
        return True
    return method == "compressed-tensors" and quant.get("kv_cache_scheme") is not None


def _linear_bytes(rows, cols, quantized, block, wbytes):
    """A Linear weight; block-FP8 adds one fp32 scale per block x block tile."""
    if not quantized:
        return rows * cols * wbytes
    return rows * cols + cdiv(rows, block) * cdiv(cols, block) * 4


def _decoder_layer_bytes(shape, full, quantized, block, wbytes):
    h, inter = shape["hidden_size"], shape["intermediate_size"]

    def lin(r, c):
        return _linear_bytes(r, c, quantized, block, wbytes)

    total = 2 * h * wbytes  # input / post-attention norms
    if full:
        q_out = shape["num_heads"] * shape["head_dim"] * (2 if shape["attn_output_gate"] else 1)
        kv_out = shape["num_kv_heads"] * shape["head_dim"]
        total += lin(q_out, h) + 2 * lin(kv_out, h)
        total += lin(h, shape["num_heads"] * shape["head_dim"])
        total += 2 * shape["head_dim"] * wbytes  # q_norm, k_norm
    else:
        g = shape["gdn"]
        key_dim, value_dim = g["k_heads"] * g["k_dim"], g["v_heads"] * g["v_dim"]
        conv_dim = 2 * key_dim + value_dim
        total += lin(conv_dim, h) + lin(value_dim, h)  # in_proj_qkv, in_proj_z
        total += 2 * g["v_heads"] * h * wbytes  # in_proj_b, in_proj_a (kept in bf16)
        total += conv_dim * g["conv_kernel"] * wbytes  # conv1d
        total += 2 * g["v_heads"] * 4 + g["v_dim"] * wbytes  # A_log, dt_bias (fp32), norm
        total += lin(h, value_dim)  # out_proj
    total += 2 * lin(inter, h) + lin(h, inter)  # gate, up, down
    return total


def vision_tower_bytes(vision, wbytes=2):
    """Bytes of a Qwen-VL style vision tower (kept unquantized in FP8 checkpoints)."""
    if not vision:
        return 0
    h = int(vision.get("hidden_size", 0))
    inter = int(vision.get("intermediate_size", 0))
    depth = int(vision.get("depth", vision.get("num_hidden_layers", 0)))
    patch = int(vision.get("patch_size", 14))
    tpatch = int(vision.get("temporal_patch_size", 2))
    chans = int(vision.get("in_channels", vision.get("num_channels", 3)))
    out = int(vision.get("out_hidden_size", h))
    merge = int(vision.get("spatial_merge_size", 2)) ** 2
    n_pos = int(vision.get("num_position_embeddings", 0))
    params = chans * tpatch * patch * patch * h + h + n_pos * h
    params += depth * (3 * h * h + 3 * h + h * h + h + 2 * h * inter + inter + h + 4 * h)
    mergers = 1 + len(vision.get("deepstack_visual_indexes") or [])
    params += mergers * (2 * h * merge + (h * merge) ** 2 + h * merge + h * merge * out + out)
    return params * wbytes


def mtp_bytes(shape, quantized, block, wbytes):
    """MTP head weights: fc(2h->h) + norms + n decoder layers. The drafter builds its own
    embed_tokens/lm_head (model_executor/models/qwen3_5_mtp.py:82, :244) but vLLM replaces them
    with the target's before profiling (v1/spec_decode/llm_base_proposer.py:1406-1407, MTP
    branch :1474-1480, :1507-1510, :1577-1588), and the freed copies are returned by
    empty_cache before the measurement (utils/mem_utils.py:289-290): they cost nothing."""
    if not shape["mtp_layers"]:
        return 0
    h = shape["hidden_size"]
    per = _decoder_layer_bytes(shape, True, quantized, block, wbytes)
    return shape["mtp_layers"] * per + 2 * h * h * wbytes + 3 * h * wbytes


def estimate_weight_bytes(shape):
    """Checkpoint bytes from the architecture alone (used when no weight index is present,
    and to split vision / MTP shares out of metadata.total_size)."""
    wbytes = dtype_bytes(shape["model_dtype"])
    quantized = shape["quant_method"] == "fp8"
    block = int((shape["weight_block_size"] or [128])[0])
    total = 0
    attn_layers = shape["num_full_layers"] + shape.get("num_sliding_layers", 0)
    for full in [True] * attn_layers + [False] * shape["num_linear_layers"]:
        total += _decoder_layer_bytes(shape, full, quantized, block, wbytes)
    emb = shape["vocab_size"] * shape["hidden_size"] * wbytes
    total += emb * (1 if shape["tie_word_embeddings"] else 2) + shape["hidden_size"] * wbytes
    vis = vision_tower_bytes(shape["vision"], wbytes)
    mtp = mtp_bytes(shape, quantized, block, wbytes)
    return {"language_model": total, "vision": vis, "mtp": mtp, "total": total + vis + mtp}


def safetensors_payload_bytes(path):
    """Tensor bytes in one .safetensors file, from its header only (_model_dir's rules)."""
    try:
        return _model_dir.safetensors_payload_bytes(path)
    except _model_dir.ModelDirError as exc:
        raise ModelConfigError(str(exc))


def read_model_dir(path):
    """Return (config dict, weight bytes, where the weight figure came from), read by the same
    reader (and rules) as the model import: _model_dir.read_model_dir. Shards are read only when
    the index gives no total_size, so config.json + the index are enough to plan."""
    try:
        model = _model_dir.read_model_dir(path, verify_shards=False)
    except _model_dir.ModelDirError as exc:
        raise ModelConfigError(str(exc))
    return model["config"], model["weight_bytes"], model["weight_source"]


def fp8_skip_list_check(path, config, language_model_only=False):
    """Refuse (ModelConfigError) an FP8 block checkpoint whose skip list leaves a layer vLLM cannot quantise
    (_model_fp8.skip_list_problem), before the plan reaches a host."""
    try:
        index = _model_dir.read_index(path)
        shards = _model_dir.shard_files(path, index)
        problem = _model_dir.fp8_skip_list_problem(path, config, index, shards, language_model_only)
    except _model_dir.ModelDirError as exc:
        raise ModelConfigError(str(exc))
    if problem:
        raise ModelConfigError(problem)


def _encoder_weights(t, config, pooling, weight_bytes, weight_source):
    """(shape, weights) of an encoder-only pooling model (_plan_pooling): a checkpoint's bytes scaled to the dtype
    vLLM loads (float32 -> float16 for pooling models), or the architecture's estimate."""
    shape = _plan_pooling.describe_encoder(config)
    shape["pooling"] = pooling
    if t["tp"] > 1 and shape["num_heads"] % t["tp"]:
        raise TargetsError("tensor_parallel_size %d does not divide %d attention heads" % (t["tp"], shape["num_heads"]))
    if weight_bytes is None:
        loaded = _plan_pooling.encoder_weight_bytes(shape)
        how = "estimated from config.json architecture (%s)" % shape["model_dtype"]
        weight_bytes = loaded
    else:
        loaded = weight_bytes * dtype_bytes(shape["model_dtype"]) // dtype_bytes(shape["checkpoint_dtype"])
        how = weight_source or "weight index"
        if loaded != weight_bytes:
            how += " x %d/%d (%s checkpoint loaded as %s: config/model.py:2148)" % (
                dtype_bytes(shape["model_dtype"]),
                dtype_bytes(shape["checkpoint_dtype"]),
                shape["checkpoint_dtype"],
                shape["model_dtype"],
            )
    return shape, {"checkpoint": weight_bytes, "loaded": loaded, "how": how, "vision": 0, "mtp": 0}


def model_weights(t, config=None, weight_bytes=None, weight_source=None, st=None):
    """(shape, weights) for the targets ``t``: config.json read from t["model_dir"] unless given,
    checked against tensor parallelism, MTP and the KV dtype; weights as loaded (vision tower and
    MTP head left out when they are not). A pooling model (_plan_pooling.pooling_decision, from sentence-
    transformers' files ``st``, read from the directory unless config is given, and t["pooling_task"]) carries
    the decision in shape["pooling"] (None for a generative model)."""
    if config is None:
        if not t["model_dir"]:
            raise TargetsError("model_dir is required")
        config, weight_bytes, weight_source = read_model_dir(t["model_dir"])
        st = _plan_pooling.read_sentence_transformers(t["model_dir"])
        fp8_skip_list_check(t["model_dir"], config, t["language_model_only"])
    if not isinstance(config, dict):
        raise ModelConfigError("config.json is not a JSON object")
    pooling = _plan_pooling.pooling_decision(config, st, t.get("pooling_task"), FAMILIES)
    if pooling and pooling["encoder_only"]:
        return _encoder_weights(t, config, pooling, weight_bytes, weight_source)
    if pooling and pooling["size_as"] not in _plan_pooling.architectures_of(config):
        # An adapted decoder (Qwen3ForSequenceClassification): sized as the decoder it is converted from.
        config = dict(config, architectures=[pooling["size_as"]])
    shape = describe_model(config, t["layer_layout"])
    shape["pooling"] = pooling
    if pooling and t["num_spec"]:
        raise TargetsError("num_speculative_tokens: a pooling model generates no tokens to draft")
    if shape["num_full_layers"] + shape["num_sliding_layers"] == 0:
        raise ModelConfigError("no attention layers: pure state-space models are not sized")
    tp = t["tp"]
    if shape["num_kv_heads"] % tp and tp % shape["num_kv_heads"]:
        raise TargetsError("tensor_parallel_size %d does not divide %d KV heads" % (tp, shape["num_kv_heads"]))
    if t["num_spec"] and not shape["mtp_layers"]:
        raise TargetsError(
            "num_speculative_tokens set but config.json has no "
            "mtp_num_hidden_layers: this checkpoint carries no MTP head"
        )
    if t["kv_cache_dtype"] == "fp8_e5m2" and shape["fp8_checkpoint"]:
        # model_executor/layers/attention/attention.py:198-213 raises this at model load.
        raise TargetsError(
            "vLLM %s refuses this: 'fp8_e5m2 kv-cache is not supported with fp8 checkpoints.' "
            "(quantization %s). Use kv_cache_dtype fp8_e4m3 (or auto)." % (VLLM_VERSION, shape["quant_method"])
        )
    if weight_bytes is not None and (
        isinstance(weight_bytes, bool) or not isinstance(weight_bytes, int) or weight_bytes <= 0
    ):
        # A zero or negative metadata.total_size would plan a model that weighs nothing.
        raise ModelConfigError(
            "the model's weights measure %r bytes (%s): a checkpoint weighs more than 0 bytes. Fix "
            "metadata.total_size in model.safetensors.index.json (or remove it, and the planner sums "
            "the shards' headers)" % (weight_bytes, weight_source or "weight index")
        )
    arch = estimate_weight_bytes(shape)
    if weight_bytes is None:
        weight_bytes, weight_source = arch["total"], "estimated from config.json architecture"
    loaded, how = weight_bytes, weight_source
    if shape["vision"] and t["language_model_only"]:
        loaded -= arch["vision"]
        how += " - vision tower %s (--language-model-only)" % fmt_gib(arch["vision"])
    if shape["mtp_layers"] and not t["num_spec"]:
        loaded -= arch["mtp"]
        how += " - MTP head %s (not loaded without MTP)" % fmt_gib(arch["mtp"])
    weights = {"checkpoint": weight_bytes, "loaded": loaded, "how": how, "vision": arch["vision"], "mtp": arch["mtp"]}
    return shape, weights
