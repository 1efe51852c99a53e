# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Attention backend choice and the non-KV memory estimate of the launch planner (vLLM 0.27.1).

Pure, stdlib only, Python 3.7-clean. Anything vLLM measures at start-up instead of computing
(activation peak, CUDA graphs, non-torch memory) is an *estimate* built from named components;
a measured KV budget replaces it (see docs/launch-planning.md).
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_common import (
    GIB,
    MIB,
    cdiv,
    fmt_gib,
    parse_compute_capability,
    rule_holds,
)

__metaclass__ = type

# Non-torch memory. vLLM takes its baseline snapshot AFTER the CUDA context and NCCL exist
# (v1/worker/gpu_worker.py:371-396), so only the growth after it (cuBLAS/cuBLASLt workspaces,
# lazily loaded kernel images) is counted; see docs/launch-planning.md for the error bars.
# Calibrated on a real H100 80GB HBM3 (vLLM 0.26.0, issue 43, ../shared/reference/gpu-device-facts.md): the engine's
# "... GiB for non-torch memory" was 0.22-0.26 GiB over six starts (Qwen3-8B shape bf16 and Qwen3.5-27B FP8 shape,
# text and images); the top of that range. Was 512 MiB, which the engine never reached.
NON_TORCH_BYTES = int(0.26 * GIB)
# Extra non-torch memory per rank when TP > 1 (NCCL channels + custom all-reduce buffers).
TP_COMM_BYTES = 256 * MIB
# FlashInfer workspace per metadata builder: max(VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE = 394 MiB
# (envs.py:205), batched tokens x q heads x head_dim x 16) (v1/attention/backends/flashinfer.py:
# 938-960). One builder per attention group, i.e. per KV-cache group using FlashInfer
# (v1/worker/gpu_model_runner.py:7135 initialize_metadata_builders). Allocated when metadata is
# first built: in profile_cudagraph_memory's captures (gpu_model_runner.py:6647), so vLLM
# counts it through its CUDA-graph estimate, before the KV pool.
FLASHINFER_WORKSPACE_BYTES = 394 * MIB
FLASHINFER_PREFILL_BYTES_PER_ELEM = 16  # flashinfer.py:86
# CUDA graphs, calibrated on a real H100 80GB HBM3 (vLLM 0.26.0, issue 43, docs/fidelity.md): the memory a capture
# takes grows with the graphs captured (cudagraph_counts: PIECEWISE per capture size, FULL per decode size) times the
# decoder layers each graph replays. Qwen3-8B shape (36 layers, V2 runner): 7 PIECEWISE + 5 FULL graphs took 0.15 GiB
# ("Graph capturing finished in 1 secs, took 0.15 GiB", 16 sequences), 51 + 35 took 0.60 GiB (256 sequences): 0.45 GiB
# over 74 graphs = 6.23 MiB a graph = 0.173 MiB a graph and layer, and 0.077 GiB besides (the graph pool's buffers).
# Checked on the Qwen3.5-27B FP8 shape (64 layers, V1 runner, MTP 3, 50 sequences): 42 + 26 graphs, 0.81 GiB by this
# rule, 0.79 GiB taken ("CUDA graph pool memory: 0.79 GiB (actual), 0.68 GiB (estimated)"). Was 2 x 4 MiB a capture
# size (0.06 and 0.46 GiB on the dense cases, 0.40 on the hybrid).
CUDAGRAPH_BYTES_PER_GRAPH_LAYER = int(0.173 * MIB)
CUDAGRAPH_BASE_BYTES = int(0.077 * GIB)
# Activation peak, calibrated on the same H100 (issue 43, docs/fidelity.md), max_num_batched_tokens 8192: the Qwen3-8B
# shape (bf16, V2 runner) peaked at 1.29 GiB with 16 and with 256 sequences alike, so the profile's sampler (after the
# forward pass has freed its transients) does not add to the forward pass's peak: the peak is the larger of the two
# (estimate_non_kv). 1.29 GiB / 8192 tokens = 165 KiB a token where lm_token_transient_bytes counts 116 KiB
# (7 I + 8 H): x 1.42. Was the sum of the two, with the token term unscaled (0.95 GiB planned at 16 sequences,
# 1.63 at 256).
ACTIVATION_TOKEN_SCALE = 1.42
# Gated DeltaNet layers (Qwen3.5): the Qwen3.5-27B FP8 shape (V1 runner, MTP 3, 50 sequences) peaked at 2.92 GiB:
# 8192 x 159 KiB x 1.42 = 1.76 GiB + GDN chunk states 0.38 GiB leaves 0.78 GiB = 16.7 bytes a token per linear-
# attention value element (48 value heads x 128): four fp32 copies of [tokens, value heads, value dim] in the gated
# delta rule (16 bytes: 2.89 GiB planned). One measured hybrid: the rule is fitted, not derived. It holds where the
# profile feeds the language model token ids (text-only, as fitted; 4 users at 262,144 on 2026-12-07: 2.92 GiB again,
# 2.89 planned); started with its vision tower (the profile feeds input embeddings, gpu_model_runner.py _dummy_run
# supports_mm_inputs) the same model peaked at 1.92 GiB on two starts (2026-12-07, one on a fresh machine), which is
# the dense term alone + the encoder cache (1.77 + 0.16 GiB). vLLM's profile never runs the GDN core
# (qwen_gdn_linear_attn.py _warmup_prefill_kernels: "_forward_core returns early because attn_metadata is None"), so
# the 1.13 GiB is not the delta rule's; what it is on the token-id path is not identified (docs/fidelity.md).
GDN_TOKEN_BYTES_PER_VALUE = 16
# Fused MoE (vLLM 0.26.0 fused_moe/experts/triton_moe.py workspace_shapes, bf16 TritonExperts): two workspaces of
# [tokens, experts a token, max(moe_intermediate(_x2 for gate-up), hidden)] in the activation dtype take the place of
# the dense MLP's transients. Measured on the H100 (issue 43, 2026-12-07): the Qwen3-30B-A3B shape (48 layers, 128
# experts of 768, 8 a token, hidden 2048) peaked at 0.87 GiB; this rule, with ACTIVATION_TOKEN_SCALE as for the dense
# models, gives 0.89 GiB (the dense rule on its config's unused intermediate_size 6144 gave 0.64).
# The profile's sampler (_dummy_sampler_run): fp32 logits of one row per request and the sampler's probabilities, sort
# keys and int64 indices beside them, ~20 bytes an entry; with speculative decoding the rejection sampler adds one
# draft row per request (gpu_model_runner.py _dummy_sampler_run: draft_token_ids [[0]] per request).
SAMPLER_BYTES_PER_ENTRY = 20
# Default Qwen3-VL/Qwen3.5 image processor: longest_edge 16777216 pixels.
DEFAULT_MAX_IMAGE_PIXELS = 16777216
# GDN chunked prefill keeps one fp32 state per 64-token chunk (fla chunk_gated_delta_rule).
GDN_CHUNK = 64

# v1/attention/backends/flash_attn.py:74 / flashinfer.py:345 supported_kv_cache_dtypes
FLASH_ATTN_KV_DTYPES = ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3")
FLASHINFER_KV_DTYPES = ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2")
FLASHINFER_HEAD_SIZES = (64, 128, 256, 512)  # flashinfer.py get_supported_head_sizes


def _flash_attn_ok(cc, kv_dtype, head_dim):
    """flash_attn.py:171-230: cc >= 8.0; head size % 8 == 0 and <= 256 (512 needs FA4);
    quantized KV only with FA3 on SM90 or FA4 on SM100 (fa_utils.py:296
    flash_attn_supports_kv_cache_dtype; fp8_e5m2 never)."""
    if cc < (8, 0) or head_dim % 8 or head_dim > 256:
        return False
    if kv_dtype not in FLASH_ATTN_KV_DTYPES:
        return False
    if kv_dtype.startswith("fp8"):
        return cc[0] in (9, 10)
    return True


def _flashinfer_ok(cc, kv_dtype, head_dim):
    """flashinfer.py:442-470: 8.0 <= cc <= 12.1, head size in (64, 128, 256, 512)."""
    return (8, 0) <= cc <= (12, 1) and kv_dtype in FLASHINFER_KV_DTYPES and head_dim in FLASHINFER_HEAD_SIZES


def _sinks_ok(name, cc):
    """Attention sinks (gpt-oss, MiMo-V2, Laguna SWA layers): backend.py:357 validate_configuration
    refuses a backend whose supports_sink() is false.
    - FLASH_ATTN (flash_attn.py:195 supports_sink -> fa_utils.py:323 flash_attn_supports_sinks):
      only FlashAttention 3 or 4; fa_utils.py:140 get_flash_attn_version picks FA3 on 9.x, FA4 on
      10.x (the wheel ships vllm_flash_attn/cute, so FA4 is available), FA2 everywhere else.
    - FLASHINFER (flashinfer.py:473 supports_sink): only the SM100 TRT-LLM path, which needs
      use_trtllm_attention not false and utils/flashinfer.py:374 supports_trtllm_attention, i.e. NVIDIA's
      artifact server for its cubins (has_nvidia_artifactory): never on an air-gapped host, and the
      planner disables it (use_trtllm_attention false).
    - TRITON_ATTN (triton_attn.py:394 supports_sink): always."""
    if name == "FLASH_ATTN":
        return cc[0] in (9, 10)
    return name != "FLASHINFER"


def attention_backend(compute_capability, kv_dtype, head_dim=128, has_sinks=False):
    """The backend vLLM 0.27.1 picks for a non-MLA decoder: the first valid entry of
    platforms/cuda.py:83 _get_backend_priorities (SM 10.x: FlashInfer, FlashAttention, Triton;
    every other CUDA capability: FlashAttention, FlashInfer, Triton), validity as each backend's
    supports_* methods say (get_valid_backends, cuda.py:359). So: 10.x -> FlashInfer; fp8 KV on
    8.x and 12.x -> FlashInfer (FlashAttention takes fp8 only as FA3 on 9.x / FA4 on 10.x);
    fp8_e5m2 anywhere -> FlashInfer; otherwise FlashAttention. With attention sinks (``has_sinks``)
    FlashInfer is never valid and FlashAttention only on 9.x/10.x (_sinks_ok): Triton elsewhere."""
    cc = parse_compute_capability(compute_capability)
    kv = str(kv_dtype)
    if kv in ("bfloat16", "float16", "float32", "half", "bf16"):
        kv = "auto"  # an unquantized KV dtype is valid wherever "auto" is
    order = ["FLASHINFER", "FLASH_ATTN"] if cc[0] == 10 else ["FLASH_ATTN", "FLASHINFER"]
    for name in order:
        ok = _flash_attn_ok if name == "FLASH_ATTN" else _flashinfer_ok
        if ok(cc, kv, head_dim) and (not has_sinks or _sinks_ok(name, cc)):
            return name
    return "TRITON_ATTN"


# config/vllm.py DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES (0.26.0 :68, 0.27.1 :69): MoE architectures that run on the V2
# model runner all the same.
V2_MOE_ARCHITECTURES = frozenset(
    ("DeepseekV2ForCausalLM", "GraniteMoeForCausalLM", "LongcatFlashNgramForCausalLM", "Qwen2MoeForCausalLM")
)


def model_runner(shape, version=None):
    """Which model runner vLLM ``version`` starts this model on: "v2" or "v1". Before 0.29.0 (config/vllm.py
    use_v2_model_runner -> _is_default_v2_model_runner_model, 0.26.0 :550/:606, 0.27.1 :578/:637) the V2 runner is
    the default for generative models that are not hybrid (no Gated-DeltaNet / Mamba layers) and not MoE (or an MoE
    of V2_MOE_ARCHITECTURES), with no feature it lacks (the planner plans none: MTP is supported). From 0.29.0 V2 is
    the default for every model (0.29.0 config/vllm.py:645)."""
    if rule_holds("v2_runner_counts_cuda_graphs", version):
        return "v2"
    if shape.get("pooling"):
        # 0.27.1 config/vllm.py:637 _is_default_v2_model_runner_model: only runner "generate" takes the V2 runner.
        return "v1"
    if shape.get("num_linear_layers"):
        return "v1"
    if shape.get("num_experts") and not set(shape.get("architectures") or ()) & V2_MOE_ARCHITECTURES:
        return "v1"
    return "v2"


def cuda_graphs_before_pool(shape, version=None):
    """Does vLLM ``version`` take its CUDA-graph estimate off the budget before sizing the KV pool
    (gpu_worker.py determine_available_memory)? The V1 runner does; the V2 runner only from 0.29.0
    (_plan_common.SIZING_RULES v2_runner_counts_cuda_graphs)."""
    return model_runner(shape, version) == "v1" or rule_holds("v2_runner_counts_cuda_graphs", version)


def default_batched_tokens(total_bytes):
    """engine/arg_utils.py:2544 API server defaults: >= 70 GiB cards 8192, else 2048."""
    return 8192 if total_bytes >= 70 * GIB else 2048


def cudagraph_capture_sizes(max_num_seqs, num_spec, max_batched):
    """config/vllm.py:1833 max = min(max_num_seqs * (1 + num_spec) * 2, 512, batched tokens);
    sizes 1, 2, 4, then multiples of 8 to 256, then multiples of 16. With speculative decoding each size is
    rounded up to a multiple of 1 + num_spec, keeping those within the max (config/compilation.py:1503
    adjust_cudagraph_sizes_for_spec_decode: 1, 2, 4 -> 4 with MTP 3)."""
    top = min(max_num_seqs * (1 + num_spec) * 2, 512, max_batched)
    sizes = [s for s in (1, 2, 4) if s <= top]
    sizes += list(range(8, min(top, 256) + 1, 8))
    sizes += list(range(272, top + 1, 16))
    q = 1 + num_spec
    if q > 1:
        sizes = sorted(set(cdiv(s, q) * q for s in sizes if cdiv(s, q) * q <= top)) or ([q] if q <= top else [])
    return sizes


def cudagraph_counts(t, backend):
    """(PIECEWISE graphs, FULL graphs) vLLM 0.26.0 captures: one PIECEWISE graph per capture size (mixed prefill-
    decode) and, in the default FULL_AND_PIECEWISE mode, one FULL graph per uniform-decode size up to max_num_seqs x
    (1 + num_spec). As logged on the H100 (issue 43): "Capturing CUDA graphs (PIECEWISE) 7, (FULL) 5" for 16
    sequences, 51 and 35 for 256, "PIECEWISE=42 (largest=400), FULL=26 (largest=200)" for 50 with MTP 3. FlashInfer
    without TRT-LLM kernels has FULL graphs for single-token decode only (flashinfer_workspace_profiled): none with
    speculative decoding. enforce_eager captures nothing."""
    if t["enforce_eager"]:
        return 0, 0
    q = 1 + t["num_spec"]
    sizes = cudagraph_capture_sizes(t["max_num_seqs"], t["num_spec"], t["max_num_batched_tokens"])
    full = [s for s in sizes if s <= t["max_num_seqs"] * q]
    if backend == "FLASHINFER" and t["num_spec"]:
        full = []
    return len(sizes), len(full)


def cudagraph_bytes(piecewise, full, layers):
    """CUDA-graph memory of ``piecewise`` + ``full`` graphs of a model of ``layers`` decoder layers (per GPU):
    CUDAGRAPH_BASE_BYTES + graphs x layers x CUDAGRAPH_BYTES_PER_GRAPH_LAYER; 0 when nothing is captured."""
    graphs = piecewise + full
    if not graphs:
        return 0
    return CUDAGRAPH_BASE_BYTES + graphs * layers * CUDAGRAPH_BYTES_PER_GRAPH_LAYER


def profile_feeds_embeddings(shape, t):
    """Does vLLM's profile feed the language model input embeddings rather than token ids? It does for a model
    started with its multimodal encoder (gpu_model_runner.py _dummy_run: supports_mm_inputs -> _prepare_mm_inputs),
    not for a text-only model or one started with --language-model-only."""
    return bool(shape.get("vision")) and not t["language_model_only"]


def activation_lm_bytes(shape, t):
    """The language model's forward peak in vLLM's profile run (max_num_batched_tokens dummy tokens): tokens x
    lm_token_transient_bytes x ACTIVATION_TOKEN_SCALE, and for Gated DeltaNet layers, where the profile feeds token
    ids, tokens x value elements x GDN_TOKEN_BYTES_PER_VALUE + one fp32 state per GDN_CHUNK tokens (measured there,
    not seen with input embeddings: see GDN_TOKEN_BYTES_PER_VALUE). Returns (bytes, bytes a token)."""
    tokens, tp = t["max_num_batched_tokens"], t["tp"]
    per_tok = int(lm_token_transient_bytes(shape) * ACTIVATION_TOKEN_SCALE)
    g = shape["gdn"] if not profile_feeds_embeddings(shape, t) else None
    if g:
        per_tok += (g["v_heads"] // tp) * g["v_dim"] * GDN_TOKEN_BYTES_PER_VALUE
    lm = tokens * per_tok
    if g:
        lm += cdiv(tokens, GDN_CHUNK) * (g["v_heads"] // tp) * g["k_dim"] * g["v_dim"] * 4
    return lm, per_tok


def sampler_bytes(shape, t):
    """The profile's sampler run: (bytes, rows). One row per dummy request (min(max_num_seqs, tokens):
    _dummy_run's num_reqs), twice that with speculative decoding (the rejection sampler's draft rows), x vocab /
    tp x SAMPLER_BYTES_PER_ENTRY."""
    rows = min(t["max_num_seqs"], t["max_num_batched_tokens"]) * (2 if t["num_spec"] else 1)
    return rows * (shape["vocab_size"] // t["tp"]) * SAMPLER_BYTES_PER_ENTRY, rows


def lm_token_transient_bytes(shape, act_bytes=2):
    """Transient bytes per scheduled token inside one decoder layer at its peak: the MLP's
    gate_up output (2I) + activation output (I), each in the activation dtype, + the activation
    output's fp8-quantized copy (I bytes), plus hidden/residual buffers (4 x hidden) that live
    across layers: 7*I + 8*H bytes in bf16. A mixture of experts (num_experts and moe_intermediate_size
    set) has the fused-MoE workspaces instead of the MLP: experts a token x (max(I_moe, H) + max(2 I_moe, H))
    in the activation dtype (triton_moe.py workspace_shapes)."""
    h, inter = shape["hidden_size"], shape["intermediate_size"]
    moe_inter, topk = shape.get("moe_intermediate_size") or 0, shape.get("experts_per_token") or 0
    if shape.get("num_experts") and moe_inter and topk:
        mlp = topk * (max(moe_inter, h) + max(2 * moe_inter, h)) * act_bytes
    else:
        mlp = (2 * inter + inter) * act_bytes + inter
    return mlp + 4 * h * act_bytes


def flashinfer_workspace(shape, t, n_groups):
    per = max(
        FLASHINFER_WORKSPACE_BYTES,
        t["max_num_batched_tokens"]
        * (shape["num_heads"] // t["tp"])
        * shape["head_dim"]
        * FLASHINFER_PREFILL_BYTES_PER_ELEM,
    )
    return per * n_groups, per


def flashinfer_workspace_profiled(t):
    """Is FlashInfer's workspace allocated before vLLM sizes the KV pool?

    Only attention metadata builds allocate it, and before KV sizing only FULL CUDA-graph captures
    build metadata (profile_run builds none: gpu_model_runner.py:6010-6015). FlashInfer without
    TRT-LLM kernels (the planner emits use_trtllm_attention false) supports FULL graphs only for
    single-token decode (flashinfer.py:895-936 UNIFORM_SINGLE_TOKEN_DECODE), so with speculative
    decoding vLLM falls back to PIECEWISE (config/compilation.py:1442-1458), and enforce_eager
    captures nothing: then the workspace is allocated at the first request, outside the pool."""
    return not t["enforce_eager"] and not t["num_spec"]


def _encoder_peak(shape, t):
    v = shape["vision"]
    if not v or t["language_model_only"]:
        return 0, None, 0
    vh, vi = int(v.get("hidden_size", 0)), int(v.get("intermediate_size", 0))
    patch = int(v.get("patch_size", 14))
    merge = int(v.get("spatial_merge_size", 2)) ** 2
    if "image_size" in v and "depth" not in v:
        # SigLIP (Gemma 3): one fixed-size image, (image_size / patch)^2 patches, 256 tokens.
        patches = (int(v["image_size"]) // patch) ** 2
        out_tokens = int(shape.get("mm_tokens_per_image") or 256)
        pix_bytes = 3 * patch * patch * 4
    else:
        pixels = int(t.get("max_image_pixels") or DEFAULT_MAX_IMAGE_PIXELS)
        patches = pixels // (patch * patch)
        out_tokens = patches // merge
        pix_bytes = int(v.get("in_channels", 3)) * int(v.get("temporal_patch_size", 2)) * patch * patch * 4
    # One ViT block at its peak: qkv (3h) + attention out (h) + fc1/act (2i) + 2h residual.
    per_patch = (3 * vh + vh + 2 * vi + 2 * vh) * 2 + pix_bytes
    enc_cache = out_tokens * shape["hidden_size"] * 2
    enc_peak = patches // t["tp"] * per_patch + enc_cache
    how = "encoder profile: 1 image of %d patches (%d tokens) x %.0f KiB/patch" % (
        patches,
        out_tokens,
        per_patch / 1024.0,
    )
    if v.get("_defaulted"):
        how += " (vision %s from vLLM's config defaults)" % ", ".join(v["_defaulted"])
    return enc_peak, how, enc_cache


def estimate_non_kv(shape, weights, t, backend, attn_groups=1):
    """Named components of what vLLM profiles as non-KV memory (gpu_worker.py:541):
    weights + non-torch + torch peak transient + CUDA-graph estimate, with the attention
    ``backend`` vLLM picks (attention_backend). Returns a list of (key, bytes, how) tuples, per GPU."""
    tp = t["tp"]
    items = [("weights", weights["loaded"] // tp, weights["how"])]
    non_torch = NON_TORCH_BYTES + (TP_COMM_BYTES if tp > 1 else 0)
    items.append(
        (
            "non_torch",
            non_torch,
            "cuBLAS workspaces and kernel images after vLLM's baseline %s%s"
            % (fmt_gib(NON_TORCH_BYTES), (" + NCCL/all-reduce %s" % fmt_gib(TP_COMM_BYTES)) if tp > 1 else ""),
        )
    )
    if backend == "FLASHINFER" and flashinfer_workspace_profiled(t):
        ws, per = flashinfer_workspace(shape, t, attn_groups)
        items.append(
            (
                "attention_workspace",
                ws,
                "FlashInfer workspace max(394 MiB, tokens x heads x head_dim x 16) = %s "
                "(flashinfer.py:938) x %d attention group(s) (gpu_model_runner.py:7135), "
                "allocated by the FULL decode graphs vLLM profiles" % (fmt_gib(per), attn_groups),
            )
        )

    tokens = t["max_num_batched_tokens"]
    lm, per_tok = activation_lm_bytes(shape, t)
    sampler, rows = sampler_bytes(shape, t)
    if shape.get("pooling"):
        sampler, rows = 0, 0  # a pooling model's profile runs its pooler, not a sampler (_dummy_pooler_run)
    # The forward pass's transients are freed before the sampler runs: the peak is the larger (issue 43: 1.29 GiB
    # at 16 and at 256 sequences alike).
    lm_peak = max(lm, sampler)
    lm_how = "max(%d batched tokens x %s/token%s, sampler %d rows x vocab x %d B)" % (
        tokens,
        "%.0f KiB" % (per_tok / 1024.0),
        " + GDN chunk states" if shape["gdn"] and not profile_feeds_embeddings(shape, t) else "",
        rows,
        SAMPLER_BYTES_PER_ENTRY,
    )

    enc_peak, enc_how, enc_cache = _encoder_peak(shape, t)
    lm_peak += enc_cache  # the encoder outputs stay cached through the LM dummy run
    if enc_peak > lm_peak:
        items.append(("activation_peak", enc_peak, enc_how + " (exceeds LM peak %s)" % fmt_gib(lm_peak)))
    else:
        items.append(("activation_peak", lm_peak, lm_how))

    piecewise, full = cudagraph_counts(t, backend)
    if piecewise + full:
        layers = shape["num_layers"]
        cg = cudagraph_bytes(piecewise, full, layers)
        items.append(
            (
                "cuda_graphs",
                cg,
                "%d PIECEWISE + %d FULL graphs x %d layers x %.3f MiB + %s"
                % (
                    piecewise,
                    full,
                    layers,
                    CUDAGRAPH_BYTES_PER_GRAPH_LAYER / float(MIB),
                    fmt_gib(CUDAGRAPH_BASE_BYTES),
                ),
            )
        )
    return items
