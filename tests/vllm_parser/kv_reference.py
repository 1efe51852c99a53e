"""Run inside the vLLM 0.27.1 CPU venv: size KV caches with vLLM's OWN code.

stdin: JSON list of cases; writes a JSON list of results to the file named by argv[1] (stdout carries
vLLM's log lines). Each case describes a model's attention layers the way vLLM's model code registers
them, and this script builds the real KV-cache specs and calls the real sizing functions:

  spec classes      vllm/v1/kv_cache_interface.py  FullAttentionSpec, SlidingWindowSpec, MambaSpec
  GDN state shapes  vllm/model_executor/layers/mamba/mamba_utils.py
                    MambaStateShapeCalculator.gated_delta_net_state_shape
  hybrid block size vllm/platforms/interface.py (same formula, inlined: it needs a full VllmConfig)
  grouping, blocks, capacity, refusal
                    vllm/v1/core/kv_cache_utils.py  get_kv_cache_configs, get_kv_cache_capacity,
                    _check_enough_kv_cache_memory (its ValueError text is returned verbatim)
  backend order     vllm/platforms/cuda.py _get_backend_priorities (libcuda stubbed, pure function)
  kv_cache_scheme   vllm/utils/torch_utils.py get_kv_cache_quant_algo_string (ModelOpt) and
                    CompressedTensorsConfig.from_config(...).kv_cache_scheme (attention.py:284 turns
                    a declared scheme + "auto" into "fp8")
  layer types       transformers' config classes (what vLLM's Gemma model code reads)

Case keys: id, kind ("kv" | "backend" | "scheme" | "layer_types"). For "kv": full, sliding, linear
(layer counts), window, kv_heads, head_dim, kv_dtype ("bfloat16"/"fp8"), max_model_len,
available (bytes), in_flight (tokens), gdn {k_heads, v_heads, k_dim, v_dim, conv_kernel},
num_spec, mamba_cache_mode ("none"/"align"), tp, mamba_ssm_dtype, model_dtype.
"""

import functools
import json
import sys
import types
from types import SimpleNamespace


def dtype(name):
    import torch

    return {
        "bfloat16": torch.bfloat16,
        "float16": torch.float16,
        "float32": torch.float32,
        "fp8": torch.float8_e4m3fn,
        "fp8_e4m3": torch.float8_e4m3fn,
        "fp8_e5m2": torch.float8_e5m2,
    }[name]


def borrow(namespace, cls, names):
    """Give a stand-in config the release's own methods of cls (those it has), bound to the stand-in."""
    for name in names:
        fn = getattr(cls, name, None)
        if fn is not None:
            setattr(namespace, name, functools.partial(fn, namespace))
    return namespace


def resolve_layout(vllm_config, specs):
    """From 0.30 the engine core resolves one physical KV cache layout before sizing (resolve_kv_cache_layout);
    the GPU attention backends of these cases (FlashAttention; FlashInfer off 10.x) declare none, so vLLM's
    default preference applies, narrowed to block-compact layouts for specs of mixed shapes. Earlier releases have
    no layouts: nothing to do."""
    try:
        from vllm.config.cache import CacheConfig
        from vllm.v1.attention.backends.utils import get_supported_kv_cache_layouts, resolve_kv_cache_layout
    except ImportError:
        return None
    borrow(vllm_config.cache_config, CacheConfig, ("get_resolved_kv_cache_layout",))
    names = [layout.name for layout in get_supported_kv_cache_layouts([])]
    return resolve_kv_cache_layout(vllm_config, [names], list(specs.values()))


def kv_case(c):
    from vllm.utils.math_utils import cdiv
    from vllm.v1.core import kv_cache_utils as U
    from vllm.v1.kv_cache_interface import FullAttentionSpec, MambaSpec, SlidingWindowSpec
    from vllm.model_executor.layers.mamba.mamba_utils import MambaStateShapeCalculator

    tp = c.get("tp", 1)
    kv_heads = max(1, c["kv_heads"] // tp)
    head = c["head_dim"]
    kvd = dtype(c["kv_dtype"])
    block = 16
    mamba = None
    if c.get("linear"):
        g = c["gdn"]
        shapes = MambaStateShapeCalculator.gated_delta_net_state_shape(
            tp, g["k_heads"], g["v_heads"], g["k_dim"], g["v_dim"], g["conv_kernel"], c.get("num_spec", 0)
        )
        dtypes = (dtype(c.get("model_dtype", "bfloat16")), dtype(c.get("mamba_ssm_dtype", "float32")))
        mamba_page = MambaSpec(shapes=shapes, dtypes=dtypes, block_size=-1).page_size_bytes
        one_tok = FullAttentionSpec(block_size=1, num_kv_heads=kv_heads, head_size=head, dtype=kvd).page_size_bytes
        # platforms/interface.py: kernel alignment 16 (min kernel block of FA / FlashInfer)
        block = max(16, 16 * cdiv(mamba_page, 16 * one_tok))
        mamba = MambaSpec(
            shapes=shapes,
            dtypes=dtypes,
            block_size=block,
            page_size_padded=block * one_tok,
            mamba_cache_mode=c.get("mamba_cache_mode", "none"),
            num_speculative_blocks=c.get("num_spec", 0),
        )
    specs = {}
    for i in range(c.get("full", 0)):
        specs["full.%d" % i] = FullAttentionSpec(block_size=block, num_kv_heads=kv_heads, head_size=head, dtype=kvd)
    for i in range(c.get("sliding", 0)):
        specs["sw.%d" % i] = SlidingWindowSpec(
            block_size=block, num_kv_heads=kv_heads, head_size=head, dtype=kvd, sliding_window=c["window"]
        )
    for i in range(c.get("linear", 0)):
        specs["gdn.%d" % i] = mamba
    model_config = SimpleNamespace(max_model_len=c["max_model_len"], original_max_model_len=c["max_model_len"])
    # Read by the sizing code from 0.30 (EAGLE/MTP group annotation, sliding-window tokens kept for multi-module
    # MTP): MTP of num_spec tokens through one module (Qwen3.x's num_nextn_predict_layers), the release's own
    # SpeculativeConfig methods answering for it.
    spec_config = None
    if c.get("num_spec"):
        spec_config = SimpleNamespace(
            method="mtp",
            num_speculative_tokens=c["num_spec"],
            disable_eagle_block_drop=False,
            draft_model_config=SimpleNamespace(hf_config=SimpleNamespace(num_nextn_predict_layers=1)),
        )
        try:
            from vllm.config.speculative import SpeculativeConfig
        except ImportError:
            SpeculativeConfig = None
        borrow(
            spec_config,
            SpeculativeConfig,
            ("use_eagle", "use_eagle_block_drop", "use_multi_module_mtp", "use_dflash", "use_dspark"),
        )
    cache_config = SimpleNamespace(
        num_gpu_blocks_override=None,
        mamba_cache_mode=c.get("mamba_cache_mode", "none"),
        kv_cache_layout=None,
        prefix_cache_retention_interval=0,
        kv_cache_max_concurrency=None,
    )
    vllm_config = SimpleNamespace(
        model_config=model_config,
        scheduler_config=SimpleNamespace(disable_hybrid_kv_cache_manager=False),
        parallel_config=SimpleNamespace(decode_context_parallel_size=1),
        cache_config=cache_config,
        kv_transfer_config=None,
        speculative_config=spec_config,
        attention_config=SimpleNamespace(hisparse_config=None),
        device_config=SimpleNamespace(device_type="cuda"),
        max_in_flight_tokens=c.get("in_flight", 0),
    )
    resolve_layout(vllm_config, specs)
    try:
        cfgs = U.get_kv_cache_configs(vllm_config, [specs], [c["available"]])
    except ValueError as exc:
        return {"ok": False, "error": str(exc), "block_size": block}
    cfg = cfgs[0]
    tokens, conc = U.get_kv_cache_capacity(vllm_config, cfg)
    per_req = sum(
        cdiv(g.kv_cache_spec.max_memory_usage_bytes(vllm_config), g.kv_cache_spec.page_size_bytes)
        for g in cfg.kv_cache_groups
    )
    return {
        "ok": True,
        "block_size": block,
        "num_blocks": cfg.num_blocks,
        "groups": [len(g.layer_names) for g in cfg.kv_cache_groups],
        "num_groups": len(cfg.kv_cache_groups),
        "kv_tokens": tokens,
        "max_concurrency": conc,
        "blocks_per_request": per_req,
    }


def backend_case(c):
    sys.modules.setdefault("vllm._C_stable_libtorch", types.ModuleType("vllm._C_stable_libtorch"))
    from vllm.platforms import cuda
    from vllm.platforms.interface import DeviceCapability

    major, minor = c["cc"]
    return {
        "ok": True,
        "priorities": [b.name for b in cuda._get_backend_priorities(False, DeviceCapability(major, minor))],
    }


def scheme_case(c):
    q = c["quantization_config"]
    if str(q.get("quant_method", "")).startswith("modelopt"):
        from vllm.utils.torch_utils import get_kv_cache_quant_algo_string

        return {"ok": True, "auto_becomes": get_kv_cache_quant_algo_string(q)}
    from vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors import CompressedTensorsConfig

    cfg = CompressedTensorsConfig.from_config(q)
    # attention.py:284-290: a declared kv_cache_scheme turns "auto" into "fp8".
    return {"ok": True, "auto_becomes": "fp8" if cfg.kv_cache_scheme is not None else "auto"}


def layer_types_case(c):
    import transformers

    cls = getattr(transformers, c["config_class"])
    cfg = cls(**c["config"])
    return {"ok": True, "layer_types": list(cfg.layer_types), "sliding_window": getattr(cfg, "sliding_window", None)}


def main():
    cases = json.load(sys.stdin)
    out = []
    for c in cases:
        fn = {"kv": kv_case, "backend": backend_case, "scheme": scheme_case, "layer_types": layer_types_case}[c["kind"]]
        try:
            r = fn(c)
        except Exception as exc:  # report, never hide: the test fails on ok=False
            r = {"ok": False, "error": "%s: %s" % (type(exc).__name__, exc)}
        r["id"] = c["id"]
        out.append(r)
    with open(sys.argv[1], "w") as fh:
        json.dump(out, fh)


if __name__ == "__main__":
    main()
