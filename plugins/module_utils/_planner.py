# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Launch planner for vLLM 0.27.1: flags plus a memory ledger sized the way vLLM sizes memory.

Pure functions, stdlib only, Python 3.7-clean. Formulas cite the vLLM 0.27.1 wheel
(paths inside the ``vllm/`` package). Anything that vLLM measures at start-up instead of
computing (activation peak, CUDA graphs, non-torch memory) is an *estimate* built from named
components; ``measured_kv_cache_bytes`` replaces the estimate with a measured value.
"""

from __future__ import absolute_import, division, print_function

import json
import math
import os
import re
import struct

__metaclass__ = type

GIB = 1 << 30
MIB = 1 << 20

VLLM_VERSION = "0.27.1"

# Bytes per element. fp8*/int8 kinds are 1 byte (v1/kv_cache_interface.py get_dtype_size).
DTYPE_BYTES = {
    "float32": 4, "float": 4, "fp32": 4,
    "bfloat16": 2, "bf16": 2, "float16": 2, "half": 2, "fp16": 2,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1, "float8_e4m3fn": 1,
    "int8": 1, "uint8": 1,
}
# --kv-cache-dtype choices this planner sizes (config/cache.py CacheDType). The quantized
# per-token-head / nvfp4 / turboquant layouts carry extra scale bytes we do not model.
KV_CACHE_DTYPES = ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2")

# Registered names in vLLM 0.27.1: reasoning/__init__.py _REASONING_PARSERS_TO_REGISTER and
# tool_parsers/__init__.py _TOOL_PARSERS_TO_REGISTER. An unknown name makes vLLM exit at start.
REASONING_PARSERS = frozenset((
    "cohere_command3", "cohere_command4", "deepseek_r1", "deepseek_v3", "deepseek_v4",
    "ernie45", "gemma4", "glm45", "glm47", "granite", "holo2", "hunyuan_a13b", "hy_v3",
    "inkling", "kimi_k2", "kimi_k3", "mimo", "minimax_m2", "minimax_m2_append_think",
    "minimax_m3", "mistral", "nemotron_v3", "olmo3", "openai_gptoss", "poolside_v1",
    "qwen3", "seed_oss", "step3", "step3p5",
))
TOOL_CALL_PARSERS = frozenset((
    "apertus", "cohere_command3", "cohere_command4", "deepseek_v3", "deepseek_v31",
    "deepseek_v32", "deepseek_v4", "ernie45", "functiongemma", "gemma4", "gigachat3",
    "glm45", "glm47", "granite", "granite-20b-fc", "granite4", "hermes", "hunyuan_a13b",
    "hy_v3", "inkling", "internlm", "jamba", "kimi_k2", "kimi_k3", "lfm2", "llama3_json",
    "llama4_json", "llama4_pythonic", "longcat", "mimo", "minicpm5", "minimax_m2",
    "minimax_m3", "mistral", "olmo3", "openai", "phi4_mini_json", "poolside_v1",
    "pythonic", "qwen3_coder", "qwen3_xml", "seed_oss", "step3", "step3p5", "xlam",
))

# Smallest kernel block size of the CUDA attention backends (FlashAttention MultipleOf(16),
# FlashInfer [16, 32, 64]); platforms/interface.py:876 takes it as the hybrid alignment unit.
KERNEL_BLOCK_ALIGNMENT = 16
DEFAULT_BLOCK_SIZE = 16  # config/cache.py DEFAULT_BLOCK_SIZE
CLEAN_LEN_MULTIPLE = 1024  # "max" context lengths are rounded down to whole K (binary)

# --- estimate constants (non-KV memory vLLM measures at start-up; see docs/launch-planning.md) --
# Non-torch memory. Caveat (open, see docs/launch-planning.md): vLLM takes its baseline snapshot
# AFTER the CUDA context and NCCL exist (v1/worker/gpu_worker.py:371-396), so only the growth after
# it (cuBLAS/cuBLASLt workspaces, lazily loaded kernel images) is counted; this unmeasured guess
# may over-count that part, which would make the known under-estimate larger, not smaller.
CUDA_CONTEXT_BYTES = 512 * MIB
# Extra non-torch memory per rank when TP > 1 (NCCL channels + custom all-reduce buffers).
TP_COMM_BYTES = 256 * MIB
# FlashInfer workspace per metadata builder: max(VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE = 394 MiB
# (envs.py:205), batched tokens x q heads x head_dim x 16) (v1/attention/backends/flashinfer.py:
# 938-960). Allocated when metadata is first built: not in profile_run (no attention metadata,
# gpu_model_runner.py:6010-6015) but in profile_cudagraph_memory's captures (:6647), so vLLM
# counts it through its CUDA-graph estimate.
FLASHINFER_WORKSPACE_BYTES = 394 * MIB
FLASHINFER_PREFILL_BYTES_PER_ELEM = 16  # flashinfer.py:86
# Per captured CUDA graph (executable graph + its node parameters), FULL and PIECEWISE each.
CUDAGRAPH_PER_GRAPH_BYTES = 4 * MIB
# Default Qwen3-VL/Qwen3.5 image processor: longest_edge 16777216 pixels.
DEFAULT_MAX_IMAGE_PIXELS = 16777216
# GDN chunked prefill keeps one fp32 state per 64-token chunk (fla chunk_gated_delta_rule).
GDN_CHUNK = 64


class PlanError(Exception):
    """Base class: the planner cannot produce a plan."""


class ModelConfigError(PlanError):
    """config.json / weight index missing, unreadable or of an unsupported shape."""


class TargetsError(PlanError):
    """A target is invalid (unknown parser, bad dtype, ...)."""


class InfeasibleError(PlanError):
    """The targets do not fit; ``alternatives`` lists plans that do."""

    def __init__(self, message, alternatives=None):
        super(InfeasibleError, self).__init__(message)
        self.alternatives = list(alternatives or [])


def cdiv(a, b):
    return -(-a // b)


def dtype_bytes(name):
    key = str(name).replace("torch.", "").lower()
    if key not in DTYPE_BYTES:
        raise TargetsError("unknown dtype %r" % (name,))
    return DTYPE_BYTES[key]


def parse_size(value):
    """vLLM-style integer with suffix: lower case decimal (200k), upper case binary (200K)."""
    if isinstance(value, int):
        return value
    text = str(value).strip()
    m = re.match(r"^(\d+(?:\.\d+)?)([kmgKMG]?)$", text)
    if not m:
        raise TargetsError("cannot read %r as a token count" % (value,))
    num, suffix = float(m.group(1)), m.group(2)
    mult = {"": 1, "k": 10 ** 3, "m": 10 ** 6, "g": 10 ** 9,
            "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[suffix]
    return int(num * mult)


def fmt_gib(n):
    return "%.2f GiB" % (n / GIB)


def fmt_tokens(n):
    return "%dK" % (n // 1024) if n % 1024 == 0 else "{:,}".format(n)


# --------------------------------------------------------------------------------------------
# Model description
# --------------------------------------------------------------------------------------------

def describe_model(config):
    """Reduce a HF config.json dict to the numbers the planner needs.

    Handles multimodal nesting (``text_config``), ``layer_types`` or ``full_attention_interval``,
    Gated-DeltaNet fields, MTP and quantization_config.
    """
    if not isinstance(config, dict):
        raise ModelConfigError("config.json is not a JSON object")
    text = config.get("text_config") or config
    try:
        hidden = int(text["hidden_size"])
        n_layers = int(text["num_hidden_layers"])
        n_heads = int(text["num_attention_heads"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelConfigError("config.json lacks %s" % exc)
    kv_heads = int(text.get("num_key_value_heads") or n_heads)
    head_dim = int(text.get("head_dim") or hidden // n_heads)

    layer_types = text.get("layer_types")
    interval = text.get("full_attention_interval")
    if layer_types:
        if len(layer_types) != n_layers:
            raise ModelConfigError("layer_types has %d entries for %d layers"
                                   % (len(layer_types), n_layers))
    elif interval:
        # Qwen3-Next convention: every interval-th layer (1-based) is full attention.
        layer_types = ["full_attention" if (i + 1) % int(interval) == 0 else "linear_attention"
                       for i in range(n_layers)]
    else:
        layer_types = ["full_attention"] * n_layers
    unknown = set(layer_types) - {"full_attention", "linear_attention"}
    if unknown:
        raise ModelConfigError("unsupported layer types %s (the planner sizes full attention "
                               "and Gated-DeltaNet layers)" % sorted(unknown))
    n_linear = layer_types.count("linear_attention")

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

    model_dtype = str(text.get("dtype") or text.get("torch_dtype")
                      or config.get("dtype") or config.get("torch_dtype") or "bfloat16")
    quant = config.get("quantization_config") or text.get("quantization_config") or {}
    vision = config.get("vision_config")
    return {
        "model_type": config.get("model_type") or text.get("model_type"),
        "architectures": config.get("architectures") or [],
        "hidden_size": hidden,
        "intermediate_size": int(text.get("intermediate_size") or 4 * hidden),
        "vocab_size": int(text.get("vocab_size") or config.get("vocab_size") or 0),
        "num_layers": n_layers,
        "num_full_layers": n_layers - n_linear,
        "num_linear_layers": n_linear,
        "num_heads": n_heads,
        "num_kv_heads": kv_heads,
        "head_dim": head_dim,
        "attn_output_gate": bool(text.get("attn_output_gate", False)),
        "gdn": gdn,
        "mtp_layers": int(text.get("mtp_num_hidden_layers") or 0),
        "model_dtype": model_dtype,
        "mamba_ssm_dtype": text.get("mamba_ssm_dtype"),
        "max_position_embeddings": int(text.get("max_position_embeddings") or 0),
        "tie_word_embeddings": bool(config.get("tie_word_embeddings",
                                               text.get("tie_word_embeddings", False))),
        "quant_method": quant.get("quant_method"),
        "weight_block_size": quant.get("weight_block_size"),
        "vision": vision if isinstance(vision, dict) else None,
    }


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
    depth = int(vision.get("depth", 0))
    patch = int(vision.get("patch_size", 14))
    tpatch = int(vision.get("temporal_patch_size", 2))
    chans = int(vision.get("in_channels", 3))
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
    for full in [True] * shape["num_full_layers"] + [False] * shape["num_linear_layers"]:
        total += _decoder_layer_bytes(shape, full, quantized, block, wbytes)
    emb = shape["vocab_size"] * shape["hidden_size"] * wbytes
    total += emb * (1 if shape["tie_word_embeddings"] else 2) + shape["hidden_size"] * wbytes
    vis = vision_tower_bytes(shape["vision"], wbytes)
    mtp = mtp_bytes(shape, quantized, block, wbytes)
    return {"language_model": total, "vision": vis, "mtp": mtp, "total": total + vis + mtp}


# --------------------------------------------------------------------------------------------
# Reading the model directory
# --------------------------------------------------------------------------------------------

def safetensors_payload_bytes(path):
    """Tensor bytes in one .safetensors file, from its header only (8-byte length + JSON)."""
    with open(path, "rb") as fh:
        raw = fh.read(8)
        if len(raw) != 8:
            raise ModelConfigError("%s: truncated safetensors header" % path)
        (hlen,) = struct.unpack("<Q", raw)
        if hlen > 100 * MIB:
            raise ModelConfigError("%s: implausible safetensors header length" % path)
        header = json.loads(fh.read(hlen).decode("utf-8"))
    total = 0
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        total += end - start
    return total


def read_model_dir(path):
    """Return (config dict, weight bytes, where the weight figure came from)."""
    cfg_path = os.path.join(path, "config.json")
    try:
        with open(cfg_path) as fh:
            config = json.load(fh)
    except (IOError, OSError, ValueError) as exc:
        raise ModelConfigError("cannot read %s: %s" % (cfg_path, exc))
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.exists(index):
        try:
            with open(index) as fh:
                total = int(json.load(fh)["metadata"]["total_size"])
            return config, total, "model.safetensors.index.json metadata.total_size"
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelConfigError("%s has no usable metadata.total_size (%s)" % (index, exc))
    files = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
    if files:
        total = sum(safetensors_payload_bytes(os.path.join(path, f)) for f in files)
        return config, total, "sum of %d safetensors headers" % len(files)
    return config, None, None


# --------------------------------------------------------------------------------------------
# KV cache formulas (vLLM 0.27.1)
# --------------------------------------------------------------------------------------------

def attn_bytes_per_token(shape, kv_dtype_bytes, tp=1):
    """One token in one full-attention layer, per rank.
    v1/kv_cache_interface.py:349 block_size * num_kv_heads * (head_k + head_v) * dtype_size;
    kv heads per rank = max(1, kv_heads // tp) (config/model.py get_num_kv_heads)."""
    heads = max(1, shape["num_kv_heads"] // tp)
    return heads * 2 * shape["head_dim"] * kv_dtype_bytes


def gdn_state_bytes(shape, tp=1, num_spec=0, conv_bytes=2, ssm_bytes=4):
    """Per-request Gated-DeltaNet state of one layer, per rank:
    model_executor/layers/mamba/mamba_utils.py:257 conv (conv_dim/tp, kernel-1+num_spec) in the
    model dtype; temporal (v_heads/tp, v_dim, k_dim) in mamba_ssm_dtype (mamba_utils.py:103)."""
    g = shape["gdn"]
    if not g:
        return {"conv": 0, "temporal": 0, "total": 0}
    conv_dim = g["k_dim"] * g["k_heads"] * 2 + g["v_dim"] * g["v_heads"]
    conv = (conv_dim // tp) * (g["conv_kernel"] - 1 + num_spec) * conv_bytes
    temporal = (g["v_heads"] // tp) * g["v_dim"] * g["k_dim"] * ssm_bytes
    return {"conv": conv, "temporal": temporal, "total": conv + temporal}


def hybrid_block_size(attn_token_bytes, gdn_page, base_block=DEFAULT_BLOCK_SIZE,
                      alignment=KERNEL_BLOCK_ALIGNMENT):
    """platforms/interface.py:903 attn_block = align * cdiv(mamba_page, align * attn_1tok),
    raised only if larger than the current block size (interface.py:909)."""
    if not gdn_page:
        return base_block
    align = max(alignment, base_block)
    return max(base_block, align * cdiv(gdn_page, align * attn_token_bytes))


def group_layers(n_full, n_linear):
    """v1/core/kv_cache_utils.py:1246 group size = smallest layer-type count (or the largest,
    when largest < 1.5 x smallest); each type is split into cdiv(n, group_size) groups."""
    counts = [c for c in (n_full, n_linear) if c]
    group = min(counts)
    if max(counts) < group * 1.5:
        group = max(counts)
    return {"group_size": group,
            "full_groups": cdiv(n_full, group) if n_full else 0,
            "linear_groups": cdiv(n_linear, group) if n_linear else 0}


def gdn_blocks_per_request(num_spec, prefix_caching):
    """v1/kv_cache_interface.py:729 MambaSpec.max_memory_usage_bytes: (1 + num_spec) pages,
    (2 + num_spec) in 'align' mode, which prefix caching selects for Qwen3.5
    (model_executor/models/config.py:614)."""
    return (2 if prefix_caching else 1) + num_spec


def blocks_per_request(max_len, block, groups, num_spec, prefix_caching):
    """kv_cache_utils.py:937 sum over groups of cdiv(group max bytes, page)."""
    return (groups["full_groups"] * cdiv(max_len, block)
            + groups["linear_groups"] * gdn_blocks_per_request(num_spec, prefix_caching))


def num_gpu_blocks(kv_bytes, page_bytes, group_size):
    """kv_cache_utils.py:1008 available // page_size // num_layers (group size)."""
    return max(0, int(kv_bytes // page_bytes // group_size))


def longest_fitting_len(num_blocks, block, groups, num_spec, prefix_caching, concurrency=1):
    """Largest max_model_len whose `concurrency` full-length requests fit in num_blocks.
    Closed form of kv_cache_utils.py:1953 _estimate_max_model_len_from_groups."""
    if not groups["full_groups"]:
        return None
    free = num_blocks // concurrency - groups["linear_groups"] * gdn_blocks_per_request(
        num_spec, prefix_caching)
    return max(0, free // groups["full_groups"]) * block


# --------------------------------------------------------------------------------------------
# Non-KV memory estimate
# --------------------------------------------------------------------------------------------

def default_batched_tokens(total_bytes):
    """engine/arg_utils.py:2544 API server defaults: >= 70 GiB cards 8192, else 2048."""
    return 8192 if total_bytes >= 70 * GIB else 2048


def attention_backend(compute_capability, kv_dtype):
    """FlashAttention refuses fp8 KV on SM89 (Ada); vLLM then selects FlashInfer."""
    fp8 = kv_dtype.startswith("fp8")
    cc = tuple(int(x) for x in str(compute_capability).split("."))
    if fp8 and cc < (9, 0):
        return "FLASHINFER"
    return "FLASH_ATTN"


def cudagraph_capture_sizes(max_num_seqs, num_spec, max_batched):
    """config/vllm.py:1833 max = min(max_num_seqs * (1 + num_spec) * 2, 512, batched tokens);
    sizes 1, 2, 4, then multiples of 8 to 256, then multiples of 16."""
    top = min(max_num_seqs * (1 + num_spec) * 2, 512, max_batched)
    sizes = [s for s in (1, 2, 4) if s <= top]
    sizes += list(range(8, min(top, 256) + 1, 8))
    sizes += list(range(272, top + 1, 16))
    return sizes


def lm_token_transient_bytes(shape, act_bytes=2):
    """Transient bytes per scheduled token inside one decoder layer at its peak: the MLP's
    gate_up output (2I) + activation output (I) + its fp8-quantized copy (I bytes), plus
    hidden/residual buffers (4 x hidden) that live across layers."""
    h, inter = shape["hidden_size"], shape["intermediate_size"]
    mlp = (2 * inter + inter) * act_bytes + inter
    return mlp + 4 * h * act_bytes


def estimate_non_kv(shape, weights, t):
    """Named components of what vLLM profiles as non-KV memory (gpu_worker.py:541):
    weights + non-torch + torch peak transient + CUDA-graph estimate. Returns a list of
    (key, bytes, how) tuples, per GPU."""
    tp = t["tp"]
    items = [("weights", weights["loaded"] // tp, weights["how"])]
    non_torch = CUDA_CONTEXT_BYTES + (TP_COMM_BYTES if tp > 1 else 0)
    items.append(("non_torch", non_torch, "CUDA context + cuBLAS workspaces %s%s" % (
        fmt_gib(CUDA_CONTEXT_BYTES), (" + NCCL/all-reduce %s" % fmt_gib(TP_COMM_BYTES))
        if tp > 1 else "")))
    if t["attention_backend"] == "FLASHINFER":
        ws = max(FLASHINFER_WORKSPACE_BYTES,
                 t["max_num_batched_tokens"] * (shape["num_heads"] // tp) * shape["head_dim"]
                 * FLASHINFER_PREFILL_BYTES_PER_ELEM)
        items.append(("attention_workspace", ws,
                      "FlashInfer workspace max(394 MiB, tokens x heads x head_dim x 16) "
                      "(flashinfer.py:938), selected for fp8 KV on SM<9.0"))

    tokens = t["max_num_batched_tokens"]
    per_tok = lm_token_transient_bytes(shape)
    lm = tokens * per_tok
    if shape["gdn"]:
        g = shape["gdn"]
        lm += cdiv(tokens, GDN_CHUNK) * (g["v_heads"] // tp) * g["k_dim"] * g["v_dim"] * 4
    # Profile sampler: one fp32 logits row per request (gpu_model_runner.py:5923, 6257), the
    # sampler's probs and top-k/top-p sort keys and int64 indices beside it: ~20 bytes/entry;
    # with spec decode the rejection sampler scores (1 + num_spec) rows per request.
    rows = min(t["max_num_seqs"], tokens) * (1 + t["num_spec"])
    sampler = rows * (shape["vocab_size"] // tp) * 20
    lm_peak = lm + sampler
    lm_how = "%d batched tokens x %s/token + GDN chunk states + sampler %d rows x vocab" % (
        tokens, "%.0f KiB" % (per_tok / 1024.0), rows)

    enc_peak, enc_how = 0, None
    if shape["vision"] and not t["language_model_only"]:
        v = shape["vision"]
        vh, vi = int(v.get("hidden_size", 0)), int(v.get("intermediate_size", 0))
        patch = int(v.get("patch_size", 14))
        merge = int(v.get("spatial_merge_size", 2)) ** 2
        pixels = int(t.get("max_image_pixels") or DEFAULT_MAX_IMAGE_PIXELS)
        patches = pixels // (patch * patch)
        out_tokens = patches // merge
        pix_bytes = int(v.get("in_channels", 3)) * int(v.get("temporal_patch_size", 2)) \
            * patch * patch * 4
        # One ViT block at its peak: qkv (3h) + attention out (h) + fc1/act (2i) + 2h residual.
        per_patch = (3 * vh + vh + 2 * vi + 2 * vh) * 2 + pix_bytes
        enc_cache = out_tokens * shape["hidden_size"] * 2
        enc_peak = patches // tp * per_patch + enc_cache
        enc_how = "encoder profile: 1 image of %d patches (%d tokens) x %.0f KiB/patch" % (
            patches, out_tokens, per_patch / 1024.0)
        lm_peak += enc_cache  # the encoder outputs stay cached through the LM dummy run
    if enc_peak > lm_peak:
        items.append(("activation_peak", enc_peak, enc_how + " (exceeds LM peak %s)"
                      % fmt_gib(lm_peak)))
    else:
        items.append(("activation_peak", lm_peak, lm_how))

    sizes = [] if t["enforce_eager"] else cudagraph_capture_sizes(
        t["max_num_seqs"], t["num_spec"], tokens)
    if sizes:
        cg = len(sizes) * 2 * CUDAGRAPH_PER_GRAPH_BYTES + max(sizes) * per_tok
        items.append(("cuda_graphs", cg, "%d capture sizes (max %d) x FULL+PIECEWISE x %s"
                      % (len(sizes), max(sizes), fmt_gib(CUDAGRAPH_PER_GRAPH_BYTES))))
    return items


# --------------------------------------------------------------------------------------------
# Host-side decisions: docker options, env, madvise patch
# --------------------------------------------------------------------------------------------

def _version_tuple(text):
    nums = re.findall(r"\d+", str(text or ""))
    return tuple(int(n) for n in nums[:3]) if nums else None


def docker_decisions(kernel, docker_version, offload_gib):
    """Container options with a reason each, plus whether the madvise patch is needed."""
    opts, reasons = [], {}
    kv = _version_tuple(kernel)
    dv = _version_tuple(docker_version)
    if dv is not None and dv < (19, 3):
        opts += ["--runtime", "nvidia"]
        reasons["--runtime nvidia"] = "Docker %s predates --gpus (19.03)" % docker_version
    else:
        opts += ["--gpus", "all"]
        reasons["--gpus all"] = "Docker >= 19.03 passes GPUs through nvidia-container-toolkit"
    # Docker's default seccomp profile allows clone3 (returns ENOSYS) from 20.10.10; older
    # profiles answer EPERM and glibc >= 2.34 in the image then fails pthread_create.
    if kv is not None and dv is not None and kv < (5, 3) and dv < (20, 10, 10):
        opts += ["--security-opt", "seccomp=unconfined"]
        reasons["--security-opt seccomp=unconfined"] = (
            "kernel %s lacks clone3 and Docker %s's seccomp profile answers it with EPERM, so "
            "pthread_create fails in the image (fixed profile from Docker 20.10.10)"
            % (kernel, docker_version))
    if offload_gib:
        shm = int(math.ceil(offload_gib)) + 8
        opts += ["--shm-size", "%dg" % shm]
        reasons["--shm-size %dg" % shm] = (
            "native KV offload maps /dev/shm/vllm_offload_*.mmap of %s GiB; tmpfs must exceed "
            "it or writes SIGBUS (offload + 8g)" % offload_gib)
    needs_patch = bool(offload_gib) and kv is not None and kv < (5, 14)
    return opts, reasons, needs_patch


OFFLINE_ENV = (
    ("HF_HUB_OFFLINE", "1", "use the local snapshot, never call the Hub"),
    ("TRANSFORMERS_OFFLINE", "1", "transformers never reaches the network"),
    ("HF_HUB_DISABLE_TELEMETRY", "1", "no Hub telemetry"),
    ("VLLM_NO_USAGE_STATS", "1", "usage stats POST would hang on a black-holed network"),
    ("VLLM_DO_NOT_TRACK", "1", "same, vLLM's own switch"),
    ("DO_NOT_TRACK", "1", "same, the generic switch"),
    ("FLASHINFER_NO_DOWNLOAD", "1", "cubin downloads fail fast instead of retrying"),
    ("VLLM_HOST_IP", "127.0.0.1", "get_ip() would probe a public address"),
    ("VLLM_MEDIA_FETCH_MAX_RETRIES", "1", "remote media URLs fail fast"),
)


# --------------------------------------------------------------------------------------------
# The planner
# --------------------------------------------------------------------------------------------

DEFAULTS = {
    "model_dir": None,
    "model_path": None,          # path vLLM sees (inside the container); defaults to model_dir
    "served_model_name": None,
    "gpu_total_bytes": None,
    "gpu_count": 1,
    "tensor_parallel_size": None,
    "compute_capability": "9.0",
    "concurrency": 1,
    "context": "max",
    "kv_cache_dtype": "auto",
    "gpu_memory_utilization": 0.92,
    "num_speculative_tokens": 0,
    "prefix_caching": False,
    "kv_offloading_gib": 0,
    "host_ram_bytes": None,
    "kernel": None,
    "docker_version": None,
    "reasoning_parser": None,
    "tool_call_parser": None,
    "chat_template_kwargs": None,
    "language_model_only": False,
    "max_num_batched_tokens": None,
    "enforce_eager": False,
    "max_image_pixels": None,
    "measured_kv_cache_bytes": None,
    "pin_kv_cache_memory": False,
    "require_full_length_concurrency": False,
    "api_keys_config_path": None,
    "host": None,
    "port": None,
}


def _targets(params):
    t = dict(DEFAULTS)
    t.update({k: v for k, v in params.items() if v is not None})
    if not t["gpu_total_bytes"] or int(t["gpu_total_bytes"]) <= 0:
        raise TargetsError("gpu_total_bytes is required (from airgap.vllm.nvml_info or given)")
    t["gpu_total_bytes"] = int(t["gpu_total_bytes"])
    t["tp"] = int(t["tensor_parallel_size"] or t["gpu_count"] or 1)
    if t["tp"] < 1 or t["tp"] > int(t["gpu_count"] or 1):
        raise TargetsError("tensor_parallel_size %d exceeds gpu_count %s"
                           % (t["tp"], t["gpu_count"]))
    u = float(t["gpu_memory_utilization"])
    if not 0.0 < u <= 1.0:
        raise TargetsError("gpu_memory_utilization must be in (0, 1], got %s" % u)
    t["gpu_memory_utilization"] = u
    if t["kv_cache_dtype"] not in KV_CACHE_DTYPES:
        raise TargetsError("kv_cache_dtype %r is not one the planner can size; use one of %s"
                           % (t["kv_cache_dtype"], ", ".join(KV_CACHE_DTYPES)))
    for key, valid in (("reasoning_parser", REASONING_PARSERS),
                       ("tool_call_parser", TOOL_CALL_PARSERS)):
        if t[key] and t[key] not in valid:
            raise TargetsError("%s %r is not registered in vLLM %s; valid: %s"
                               % (key, t[key], VLLM_VERSION, ", ".join(sorted(valid))))
    t["concurrency"] = int(t["concurrency"])
    t["num_spec"] = int(t["num_speculative_tokens"] or 0)
    if t["concurrency"] < 1 or t["num_spec"] < 0:
        raise TargetsError("concurrency must be >= 1 and num_speculative_tokens >= 0")
    if str(t["context"]).strip().lower() == "max":
        t["context"] = "max"
    else:
        t["context"] = parse_size(t["context"])
    t["max_num_batched_tokens"] = int(t["max_num_batched_tokens"]
                                      or default_batched_tokens(t["gpu_total_bytes"]))
    t["max_num_seqs"] = t["concurrency"]
    off = float(t["kv_offloading_gib"] or 0)
    t["kv_offloading_gib"] = int(off) if off.is_integer() else off
    return t


def _resolve_kv_dtype(kv_cache_dtype, model_dtype):
    return model_dtype if kv_cache_dtype == "auto" else kv_cache_dtype


def plan(params, config=None, weight_bytes=None, weight_source=None):
    """Build a launch plan. ``config``/``weight_bytes`` may be given directly (tests);
    otherwise they are read from params['model_dir']."""
    t = _targets(params)
    if config is None:
        if not t["model_dir"]:
            raise TargetsError("model_dir is required")
        config, weight_bytes, weight_source = read_model_dir(t["model_dir"])
    shape = describe_model(config)
    if shape["num_full_layers"] == 0:
        raise ModelConfigError("no full-attention layers: pure state-space models are not sized")
    tp = t["tp"]
    if shape["num_kv_heads"] % tp and tp % shape["num_kv_heads"]:
        raise TargetsError("tensor_parallel_size %d does not divide %d KV heads"
                           % (tp, shape["num_kv_heads"]))
    if t["num_spec"] and not shape["mtp_layers"]:
        raise TargetsError("num_speculative_tokens set but config.json has no "
                           "mtp_num_hidden_layers: this checkpoint carries no MTP head")

    # --- weights ----------------------------------------------------------------------------
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
    weights = {"checkpoint": weight_bytes, "loaded": loaded, "how": how,
               "vision": arch["vision"], "mtp": arch["mtp"]}

    # --- KV layout ---------------------------------------------------------------------------
    kv_dtype = _resolve_kv_dtype(t["kv_cache_dtype"], shape["model_dtype"])
    kv_b = dtype_bytes(kv_dtype)
    t["attention_backend"] = attention_backend(t["compute_capability"], kv_dtype)
    # MTP adds one full-attention layer per mtp_num_hidden_layers, with its own KV.
    n_full = shape["num_full_layers"] + (shape["mtp_layers"] if t["num_spec"] else 0)
    n_lin = shape["num_linear_layers"]
    tok_bytes = attn_bytes_per_token(shape, kv_b, tp)
    ssm_dtype = shape["mamba_ssm_dtype"] or shape["model_dtype"]
    state = gdn_state_bytes(shape, tp, t["num_spec"], dtype_bytes(shape["model_dtype"]),
                            dtype_bytes(ssm_dtype))
    block = hybrid_block_size(tok_bytes, state["total"])
    page = block * tok_bytes
    groups = group_layers(n_full, n_lin)

    # --- memory -----------------------------------------------------------------------------
    total = int(t["gpu_total_bytes"])  # _targets() checked it
    requested = int(math.ceil(total * t["gpu_memory_utilization"]))  # utils/mem_utils.py
    overhead = estimate_non_kv(shape, weights, t)
    non_kv = sum(b for _name, b, _how in overhead)
    if t["measured_kv_cache_bytes"]:
        kv_pool = int(t["measured_kv_cache_bytes"])
        kv_how = "measured (given): vLLM's 'Available KV cache memory'"
    else:
        kv_pool = requested - non_kv
        kv_how = "budget - estimated non-KV"
    if kv_pool <= 0:
        raise InfeasibleError(
            "No memory left for the KV cache: budget %s, non-KV estimate %s. Raise "
            "gpu_memory_utilization, add GPUs (tensor parallel) or use --language-model-only."
            % (fmt_gib(requested), fmt_gib(non_kv)))
    blocks = num_gpu_blocks(kv_pool, page, groups["group_size"])
    spec_prefix = (t["num_spec"], t["prefix_caching"])
    state_blocks = groups["linear_groups"] * gdn_blocks_per_request(*spec_prefix)
    if blocks < t["concurrency"] * (state_blocks + groups["full_groups"]):
        raise InfeasibleError(
            "%d blocks cannot hold even the per-request state of %d requests (%d blocks each "
            "before any token)." % (blocks, t["concurrency"], state_blocks),
            [{"concurrency": max(1, blocks // (state_blocks + groups["full_groups"]))}])

    model_max = shape["max_position_embeddings"] or None
    fit_one = longest_fitting_len(blocks, block, groups, *spec_prefix)
    fit_all = longest_fitting_len(blocks, block, groups, t["num_spec"], t["prefix_caching"],
                                  t["concurrency"])
    if t["context"] == "max":
        ctx = fit_all - fit_all % CLEAN_LEN_MULTIPLE if fit_all >= CLEAN_LEN_MULTIPLE else fit_all
        if model_max:
            ctx = min(ctx, model_max)
        if ctx < block:
            raise InfeasibleError(
                "%d concurrent requests leave no room for context (%d blocks)."
                % (t["concurrency"], blocks),
                _alternatives(t, shape, blocks, block, groups, kv_pool, page, None))
        ctx_how = "largest multiple of %d keeping %d full-length requests in %d blocks" % (
            CLEAN_LEN_MULTIPLE, t["concurrency"], blocks)
    else:
        ctx = int(t["context"])  # _targets() parsed it
        if model_max and ctx > model_max:
            raise TargetsError("context %d exceeds the model's max_position_embeddings %d"
                               % (ctx, model_max))
        ctx_how = "requested"
        need = blocks_per_request(ctx, block, groups, *spec_prefix)
        if need > blocks:
            # kv_cache_utils.py:751 _check_enough_kv_cache_memory: vLLM refuses to start.
            raise InfeasibleError(
                "vLLM %s would refuse to start: one %d-token request needs %d blocks "
                "(%s of KV), the pool holds %d blocks (%s). Longest length that starts: %d."
                % (VLLM_VERSION, ctx, need, fmt_gib(need * page * groups["group_size"]),
                   blocks, fmt_gib(kv_pool), fit_one),
                _alternatives(t, shape, blocks, block, groups, kv_pool, page, ctx))
        if t["require_full_length_concurrency"] and t["concurrency"] * need > blocks:
            raise InfeasibleError(
                "%d x %d tokens needs %s of KV; the pool holds %s (%.2f full-length requests)."
                % (t["concurrency"], ctx, fmt_gib(t["concurrency"] * need * page
                                                  * groups["group_size"]),
                   fmt_gib(kv_pool), blocks / float(need)),
                _alternatives(t, shape, blocks, block, groups, kv_pool, page, ctx))

    need = blocks_per_request(ctx, block, groups, *spec_prefix)
    max_conc = blocks / float(need)
    kv_tokens = int(max_conc * ctx)  # kv_cache_utils.py:1887 "GPU KV cache size"
    warnings = []
    if max_conc < t["concurrency"]:
        warnings.append(
            "only %.2f requests of the full %d tokens fit at once; beyond that vLLM preempts "
            "(or offloads, with kv_offloading_gib) while all %d sessions are long"
            % (max_conc, ctx, t["concurrency"]))

    ledger = {
        "budget_bytes": requested,
        "budget_how": "ceil(%d x %.2f)" % (total, t["gpu_memory_utilization"]),
        "components": [{"name": n, "bytes": b, "how": h} for n, b, h in overhead],
        "non_kv_bytes": non_kv,
        "kv_pool_bytes": kv_pool,
        "kv_pool_how": kv_how,
        "kv_dtype": kv_dtype,
        "attention_backend": t["attention_backend"],
        "attn_bytes_per_token_per_layer": tok_bytes,
        "full_attention_layers": n_full,
        "linear_attention_layers": n_lin,
        "gdn_state_bytes_per_layer": state["total"],
        "gdn_state_conv_bytes": state["conv"],
        "gdn_state_temporal_bytes": state["temporal"],
        "per_request_state_bytes": n_lin * state["total"] * gdn_blocks_per_request(
            *spec_prefix) if n_lin else 0,
        "block_size": block,
        "page_bytes": page,
        "group_size": groups["group_size"],
        "kv_cache_groups": groups["full_groups"] + groups["linear_groups"],
        "num_gpu_blocks": blocks,
        "blocks_per_full_request": need,
        "max_model_len": ctx,
        "max_model_len_how": ctx_how,
        "longest_single_request": fit_one,
        "gpu_kv_cache_tokens": kv_tokens,
        "max_concurrency_at_len": round(max_conc, 2),
        "kv_bytes_per_full_request": need * page * groups["group_size"],
    }
    flags = _flags(t, ctx, kv_pool)
    opts, opt_reasons, patch = docker_decisions(t["kernel"], t["docker_version"],
                                                t["kv_offloading_gib"])
    env = dict((k, v) for k, v, _why in OFFLINE_ENV)
    return {
        "argv": [a for f in flags for a in f["args"]],
        "flags": flags,
        "docker_options": opts,
        "docker_option_reasons": opt_reasons,
        "env": env,
        "env_reasons": dict((k, why) for k, _value, why in OFFLINE_ENV),
        "needs_madvise_patch": patch,
        "ledger": ledger,
        "warnings": warnings,
        "api_key_config": api_key_config_yaml(t["api_keys_config_path"]) if t[
            "api_keys_config_path"] else None,
    }


def _alternatives(t, shape, blocks, block, groups, kv_pool, page, ctx):
    """Concrete plans that fit: shorter context at this concurrency, fewer requests at this
    context, fp8 KV if not chosen, and the KV offload that would hold the idle remainder."""
    spec = (t["num_spec"], t["prefix_caching"])
    out = []
    n_len = longest_fitting_len(blocks, block, groups, spec[0], spec[1], t["concurrency"])
    if n_len and n_len >= CLEAN_LEN_MULTIPLE:
        n_len -= n_len % CLEAN_LEN_MULTIPLE
    if n_len and n_len >= block:
        out.append({"concurrency": t["concurrency"], "context": n_len,
                    "text": "%d x %s" % (t["concurrency"], fmt_tokens(n_len))})
    if ctx:
        need = blocks_per_request(ctx, block, groups, *spec)
        m = blocks // need
        if m >= 1:
            out.append({"concurrency": m, "context": ctx,
                        "text": "%d x %s" % (m, fmt_tokens(ctx))})
        short = t["concurrency"] * need - blocks
        if short > 0:
            gib = int(math.ceil(short * page * groups["group_size"] * t["tp"] / float(GIB)))
            out.append({"kv_offloading_gib": gib,
                        "text": "--kv-offloading-size %d (GiB, holds the idle part of %d x %s;"
                                " running requests still need GPU blocks)"
                                % (gib, t["concurrency"], fmt_tokens(ctx))})
    kv_dtype = _resolve_kv_dtype(t["kv_cache_dtype"], shape["model_dtype"])
    if not kv_dtype.startswith("fp8"):
        out.append({"kv_cache_dtype": "fp8_e4m3",
                    "text": "--kv-cache-dtype fp8_e4m3 (1 byte per element instead of %d)"
                            % dtype_bytes(kv_dtype)})
    return out


def _flag(args, why):
    return {"args": [str(a) for a in args], "reason": why}


def _compact(obj):
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)


def _flags(t, ctx, kv_pool):
    f = [_flag([t.get("model_path") or t["model_dir"]],
               "absolute local model directory: no Hub lookup")]
    name = t["served_model_name"] or os.path.basename(
        str(t.get("model_path") or t["model_dir"]).rstrip("/"))
    f.append(_flag(["--served-model-name", name], "stable name for clients and metric labels"))
    if t["host"]:
        f.append(_flag(["--host", t["host"]], "bind address"))
    if t["port"]:
        f.append(_flag(["--port", t["port"]], "listen port"))
    if t["api_keys_config_path"]:
        f.append(_flag(["--config", t["api_keys_config_path"]],
                       "API keys from a YAML file (api-key list): never in argv or ps"))
    f.append(_flag(["--tensor-parallel-size", t["tp"]], "GPUs the model is split across"))
    f.append(_flag(["--max-model-len", ctx], "context length; see ledger max_model_len_how"))
    f.append(_flag(["--max-num-seqs", t["concurrency"]], "target concurrency"))
    f.append(_flag(["--gpu-memory-utilization", t["gpu_memory_utilization"]],
                   "fraction of total GPU memory this instance may take"))
    if t["pin_kv_cache_memory"]:
        f.append(_flag(["--kv-cache-memory-bytes", kv_pool],
                       "fix the KV pool to the planned size (skips profiling-based sizing)"))
    f.append(_flag(["--kv-cache-dtype", t["kv_cache_dtype"]],
                   "fp8 KV halves bytes per token" if t["kv_cache_dtype"].startswith("fp8")
                   else "KV in the model dtype"))
    if t["attention_backend"] == "FLASHINFER":
        f.append(_flag(["--attention-config", _compact({"use_trtllm_attention": False})],
                       "FlashInfer on SM<9.0 would probe NVIDIA's artifact server for TRT-LLM "
                       "kernels that do not exist there"))
    if t["max_num_batched_tokens"] != default_batched_tokens(t["gpu_total_bytes"]):
        f.append(_flag(["--max-num-batched-tokens", t["max_num_batched_tokens"]],
                       "prefill chunk size (sizes the activation peak)"))
    f.append(_flag(["--enable-prefix-caching" if t["prefix_caching"]
                    else "--no-enable-prefix-caching"],
                   "prefix caching chosen explicitly (hybrid models default to off)"))
    if t["num_spec"]:
        f.append(_flag(["--speculative-config", _compact(
            {"method": "mtp", "num_speculative_tokens": t["num_spec"]})],
            "MTP head drafts %d tokens per step" % t["num_spec"]))
    if t["kv_offloading_gib"]:
        f.append(_flag(["--kv-offloading-size", t["kv_offloading_gib"],
                        "--kv-offloading-backend", "native"],
                       "idle sessions' KV goes to host RAM (GiB, total across ranks)"))
    if t["language_model_only"]:
        f.append(_flag(["--language-model-only"], "vision tower not loaded: more KV memory"))
    if t["reasoning_parser"]:
        f.append(_flag(["--reasoning-parser", t["reasoning_parser"]],
                       "thinking goes to the reasoning field"))
    if t["tool_call_parser"]:
        f.append(_flag(["--enable-auto-tool-choice", "--tool-call-parser",
                        t["tool_call_parser"]], "tool calls parsed into tool_calls"))
    if t["chat_template_kwargs"]:
        f.append(_flag(["--default-chat-template-kwargs", _compact(t["chat_template_kwargs"])],
                       "server-side chat template defaults"))
    return f


def api_key_config_yaml(path):
    """Content of the --config YAML: keys are referenced by a Jinja lookup the caller fills
    with no_log; the planner never sees or echoes a key."""
    return {"path": path,
            "template": "api-key:\n{% for k in vllm_api_keys %}  - {{ k | to_json }}\n"
                        "{% endfor %}",
            "mode": "0600"}


def render_ledger(result):
    """Human-readable ledger (CLI / playbook)."""
    L = result["ledger"]
    rows = ["budget              %10s  %s" % (fmt_gib(L["budget_bytes"]), L["budget_how"])]
    for c in L["components"]:
        rows.append("  - %-17s %10s  %s" % (c["name"], fmt_gib(c["bytes"]), c["how"]))
    rows += [
        "non-KV total        %10s" % fmt_gib(L["non_kv_bytes"]),
        "KV pool             %10s  %s" % (fmt_gib(L["kv_pool_bytes"]), L["kv_pool_how"]),
        "KV dtype            %10s  backend %s" % (L["kv_dtype"], L["attention_backend"]),
        "bytes/token/layer   %10d  x %d full-attention layers"
        % (L["attn_bytes_per_token_per_layer"], L["full_attention_layers"]),
        "GDN state/layer     %10d  x %d linear layers (conv %d + temporal %d)"
        % (L["gdn_state_bytes_per_layer"], L["linear_attention_layers"],
           L["gdn_state_conv_bytes"], L["gdn_state_temporal_bytes"]),
        "block size          %10d  page %d B, %d groups of %d layers"
        % (L["block_size"], L["page_bytes"], L["kv_cache_groups"], L["group_size"]),
        "num_gpu_blocks      %10d" % L["num_gpu_blocks"],
        "max_model_len       %10d  %s" % (L["max_model_len"], L["max_model_len_how"]),
        "blocks/full request %10d" % L["blocks_per_full_request"],
        "GPU KV cache size   %10s  tokens" % "{:,}".format(L["gpu_kv_cache_tokens"]),
        "max concurrency     %10.2f  at %d tokens"
        % (L["max_concurrency_at_len"], L["max_model_len"]),
        "longest 1 request   %10d" % L["longest_single_request"],
    ]
    rows += ["WARNING: " + w for w in result["warnings"]]
    rows.append("vllm serve " + " ".join(
        a if re.match(r"^[\w./:=+-]+$", a) else "'%s'" % a for a in result["argv"]))
    return "\n".join(rows)
