"""Model families of the launch planner (plugins/module_utils/planner/_plan_model.py): config.json read into the model
shape and its weights, and what each family's layout plans to, checked against vLLM 0.27.1's own code.

How the expected numbers were obtained: every KV figure below (block size, num_gpu_blocks, blocks per
request, "GPU KV cache size" tokens, the refusal and its "estimated maximum model length") was computed
by vLLM 0.27.1's own functions in the CPU venv (tests/vllm_parser/setup-venv.sh) through
tests/vllm_parser/kv_reference.py, which builds the real FullAttentionSpec / SlidingWindowSpec / MambaSpec
and calls vllm.v1.core.kv_cache_utils.get_kv_cache_configs + get_kv_cache_capacity; the
kv_cache_scheme results from CompressedTensorsConfig.from_config / get_kv_cache_quant_algo_string.
tests/vllm_parser/test_planner_vs_vllm.py recomputes all of them live and compares with the planner.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_common as CM
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_model as MD
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _planner as P

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "models", "qwen3.x-27b-fp8")
ADA_48 = 49140 * CM.MIB
PRO_96 = 97887 * CM.MIB
H200 = 143771 * CM.MIB

# Gemma 3 27B (google/gemma-3-27b-it config.json, trimmed to the keys vLLM's sizing reads).
GEMMA3 = {
    "architectures": ["Gemma3ForConditionalGeneration"],
    "model_type": "gemma3",
    "mm_tokens_per_image": 256,
    "text_config": {
        "model_type": "gemma3_text",
        "hidden_size": 5376,
        "intermediate_size": 21504,
        "num_attention_heads": 32,
        "num_key_value_heads": 16,
        "head_dim": 128,
        "num_hidden_layers": 62,
        "sliding_window": 1024,
        "vocab_size": 262208,
        "max_position_embeddings": 131072,
    },
    "vision_config": {
        "model_type": "siglip_vision_model",
        "hidden_size": 1152,
        "intermediate_size": 4304,
        "image_size": 896,
        "patch_size": 14,
        "num_hidden_layers": 27,
    },
    "torch_dtype": "bfloat16",
}
# A Qwen3-8B-shaped llm-compressor FP8 checkpoint that declares kv_cache_scheme.
QWEN3_SCHEME = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "num_hidden_layers": 36,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "torch_dtype": "bfloat16",
    "quantization_config": {
        "quant_method": "compressed-tensors",
        "format": "float-quantized",
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True, "dynamic": False},
            }
        },
        "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor", "symmetric": True, "dynamic": False},
    },
}


def fixture_config():
    with open(os.path.join(FIXTURE, "config.json")) as fh:
        return json.load(fh)


def bf16_qwen35():
    """The fixture without its FP8 quantization_config: a bf16 checkpoint of the same shape."""
    cfg = fixture_config()
    cfg.pop("quantization_config", None)
    return cfg


def plan(config, **kw):
    base = dict(model_dir="/models/m", gpu_total_bytes=PRO_96, compute_capability="12.0", gpu_memory_utilization=0.92)
    base.update(kw)
    return P.plan(base, config=config, weight_bytes=kw.pop("weight_bytes", 20 * CM.GIB), weight_source="test")


# --- 1. models ---------------------------------------------------------------------------------


def test_gemma3_sliding_window_groups_like_vllm():
    """vLLM (kv_reference.py case gemma3-96): 10 full + 52 sliding layers -> 7 groups of 10
    (6 sliding groups, 8 padding layers), 40 GiB -> 32768 blocks of 16, 14726 blocks per
    131072-token request (8192 full + 6 x 1090 sliding, in flight 2 x 8192), 291,658 tokens."""
    r = plan(GEMMA3, measured_kv_cache_bytes=40 * CM.GIB, context=131072, concurrency=2, kv_cache_dtype="auto")
    L = r["ledger"]
    assert (L["full_attention_layers"], L["sliding_attention_layers"]) == (10, 52)
    assert (L["group_size"], L["kv_cache_groups"], L["sliding_groups"]) == (10, 7, 6)
    assert (L["block_size"], L["num_gpu_blocks"]) == (16, 32768)
    assert L["blocks_per_full_request"] == 14726
    assert L["gpu_kv_cache_tokens"] == 291658
    assert L["max_concurrency_at_len"] == 2.23
    assert L["sliding_in_flight_tokens"] == 16384
    assert L["prefix_caching"] is True  # not a hybrid (GDN) model: vLLM's default is on


def test_gemma3_refusal_and_longest_length_like_vllm():
    """vLLM (case gemma3-48): 12 GiB, 2048 batched tokens (in flight 4096) refuses 131072
    and says "the estimated maximum model length is 126464". Sized as 62 full layers (the old
    planner) vLLM's own code gives 25360: the sliding groups are what makes Gemma 3 fit."""
    with pytest.raises(CM.InfeasibleError) as exc:
        plan(
            GEMMA3,
            gpu_total_bytes=ADA_48,
            compute_capability="8.9",
            measured_kv_cache_bytes=12 * CM.GIB,
            context=131072,
        )
    assert "Longest length that starts: 126464" in str(exc.value)
    r = plan(
        GEMMA3, gpu_total_bytes=ADA_48, compute_capability="8.9", measured_kv_cache_bytes=12 * CM.GIB, context="max"
    )
    assert r["ledger"]["longest_single_request"] == 126464


def test_gemma_layer_types_follow_transformers_defaults():
    """transformers Gemma3TextConfig(num_hidden_layers=62, sliding_window=1024).layer_types and
    Gemma2Config(num_hidden_layers=46).layer_types, read in the vLLM venv."""
    g3 = MD.describe_model(GEMMA3)
    assert (g3["num_full_layers"], g3["num_sliding_layers"], g3["sliding_window"]) == (10, 52, 1024)
    g2 = {
        "architectures": ["Gemma2ForCausalLM"],
        "model_type": "gemma2",
        "hidden_size": 4608,
        "intermediate_size": 36864,
        "num_attention_heads": 32,
        "num_key_value_heads": 16,
        "head_dim": 128,
        "num_hidden_layers": 46,
        "sliding_window": 4096,
    }
    d = MD.describe_model(g2)
    assert (d["num_full_layers"], d["num_sliding_layers"]) == (23, 23)


def test_kv_cache_scheme_auto_becomes_fp8():
    """CompressedTensorsConfig.from_config(...).kv_cache_scheme is set, so attention.py:284 turns
    auto into fp8; vLLM (case qwen3-scheme): 36 layers x 8 kv heads x 256 x 1 B, 10 GiB ->
    9102 blocks, 2048 per 32768-token request, 145,632 tokens (bf16 would give half)."""
    r = plan(QWEN3_SCHEME, measured_kv_cache_bytes=10 * CM.GIB, context=32768, compute_capability="9.0")
    L = r["ledger"]
    assert L["kv_dtype"] == "fp8" and "kv_cache_scheme" in L["kv_dtype_how"]
    assert (L["num_gpu_blocks"], L["blocks_per_full_request"]) == (9102, 2048)
    assert L["gpu_kv_cache_tokens"] == 145632
    assert L["attention_backend"] == "FLASH_ATTN"  # FA3 takes fp8 on Hopper
    argv = r["argv"]
    assert argv[argv.index("--kv-cache-dtype") + 1] == "auto"


def test_modelopt_kv_algo_becomes_fp8_e4m3():
    """get_kv_cache_quant_algo_string({"quant_method": "modelopt", ... "FP8"}) == "fp8_e4m3"."""
    cfg = copy.deepcopy(QWEN3_SCHEME)
    cfg["quantization_config"] = {
        "quant_method": "modelopt",
        "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"},
    }
    assert MD.describe_model(cfg)["kv_cache_scheme_dtype"] == "fp8_e4m3"


def test_mla_refused_with_the_reason():
    cfg = {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "hidden_size": 7168,
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
    }
    with pytest.raises(CM.ModelConfigError) as exc:
        plan(cfg, context=32768)
    assert "multi-head latent attention" in str(exc.value)
    # declaring a layout does not make MLA plannable: its page is a latent, not K and V
    with pytest.raises(CM.ModelConfigError):
        plan(cfg, context=32768, layer_layout={"full_attention": 61})


def test_unknown_architecture_refused_unless_layout_declared():
    cfg = {
        "architectures": ["FancyNewForCausalLM"],
        "model_type": "fancy",
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 32000,
    }
    with pytest.raises(CM.ModelConfigError) as exc:
        plan(cfg, context=8192)
    assert "FancyNewForCausalLM" in str(exc.value) and "layer_layout" in str(exc.value)
    r = plan(
        cfg,
        context=8192,
        layer_layout={"full_attention": 32},
        measured_kv_cache_bytes=10 * CM.GIB,
        compute_capability="9.0",
    )
    assert r["ledger"]["model_family"] == "declared by layer_layout"
    assert r["ledger"]["num_gpu_blocks"] == 10 * CM.GIB // (16 * 8 * 256 * 2) // 32
    with pytest.raises(CM.ModelConfigError):
        plan(cfg, context=8192, layer_layout={"full_attention": 30})  # 30 != 32 layers


def test_vision_defaults_from_vllm_config_class():
    """transformers_utils/configs/qwen3_5.py Qwen3_5VisionConfig: intermediate_size 4304."""
    cfg = fixture_config()
    del cfg["vision_config"]["intermediate_size"]
    shape = MD.describe_model(cfg)
    assert shape["vision"]["intermediate_size"] == 4304
    assert shape["vision"]["_defaulted"] == ["intermediate_size"]
    full = MD.describe_model(fixture_config())
    assert MD.vision_tower_bytes(shape["vision"]) == MD.vision_tower_bytes(full["vision"])


# --- 2. fp8_e5m2 KV and an fp8 checkpoint ---------------------------------------------------------


def test_fp8_e5m2_with_fp8_checkpoint_refused_as_vllm_does():
    """attention.py:198-213 raises 'fp8_e5m2 kv-cache is not supported with fp8 checkpoints.'"""
    with pytest.raises(CM.TargetsError) as exc:
        plan(fixture_config(), compute_capability="9.0", kv_cache_dtype="fp8_e5m2", context=8192)
    assert "fp8_e5m2 kv-cache is not supported with fp8 checkpoints" in str(exc.value)


# --- issue 12 item 9: clear errors, never a traceback or --max-model-len 0 ----------------------


@pytest.mark.parametrize(
    "config",
    [
        dict(QWEN3_SCHEME, num_attention_heads=0),
        dict(fixture_config(), text_config=dict(fixture_config()["text_config"], num_attention_heads=0)),
        dict(QWEN3_SCHEME, num_key_value_heads=0),
        dict(QWEN3_SCHEME, num_attention_heads="many"),
    ],
)
def test_zero_or_bad_attention_heads(config):
    with pytest.raises(CM.ModelConfigError) as exc:
        plan(config, context=8192)
    assert "num_attention_heads" in str(exc.value) or "num_key_value_heads" in str(exc.value)


# --- issue 24: which models carry attention sinks (the backend they get: test__plan_memory.py) ---------

# openai/gpt-oss-20b config.json (the keys the planner reads); not a family the planner knows, so its
# layers are declared with layer_layout. Its attention carries sinks (gpt_oss.py:168 OAIAttention).
GPT_OSS = {
    "architectures": ["GptOssForCausalLM"],
    "model_type": "gpt_oss",
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "num_hidden_layers": 24,
    "sliding_window": 128,
    "vocab_size": 201088,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
    "layer_types": ["sliding_attention", "full_attention"] * 12,
}
GPT_OSS_LAYOUT = {"full_attention": 12, "sliding_attention": 12, "sliding_window": 128}


def test_which_models_carry_sinks():
    from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_model import attention_sinks

    assert attention_sinks(["GptOssForCausalLM"], {})
    assert attention_sinks(["MiMoV2FlashForCausalLM"], {"add_swa_attention_sink_bias": True})
    assert not attention_sinks(["MiMoV2FlashForCausalLM"], {})
    assert attention_sinks(["LagunaForCausalLM"], {"swa_attention_sink_enabled": True}, 10)
    assert not attention_sinks(["LagunaForCausalLM"], {"swa_attention_sink_enabled": True}, 0)
    assert not attention_sinks(["Qwen3ForCausalLM"], {})


# --- issue 24: planner inputs that used to be accepted ---------------------------------------------

QWEN3 = dict(QWEN3_SCHEME)
QWEN3.pop("quantization_config")


@pytest.mark.parametrize("weight_bytes", [0, -5])
def test_zero_or_negative_total_size_is_refused(weight_bytes):
    with pytest.raises(CM.PlanError) as exc:
        plan(QWEN3, context=8192, weight_bytes=weight_bytes)
    assert "total_size" in str(exc.value)


def test_zero_or_negative_total_size_in_the_index_is_refused(tmp_path):
    cfg = dict(QWEN3)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    for total in (0, -1):
        (tmp_path / "model.safetensors.index.json").write_text(
            json.dumps({"metadata": {"total_size": total}, "weight_map": {"a": "model-00001.safetensors"}})
        )
        with pytest.raises(CM.PlanError) as exc:
            P.plan(dict(model_dir=str(tmp_path), gpu_total_bytes=PRO_96, compute_capability="12.0", context=8192))
        assert "total_size" in str(exc.value)


@pytest.mark.parametrize(
    "layout",
    [
        {"full_attention": 40, "sliding_attention": -4, "sliding_window": 1024},
        {"full_attention": 36, "num_kv_heads": -8},
        {"full_attention": 36, "head_dim": -128},
        {"full_attention": 28, "sliding_attention": 8, "sliding_window": -1},
        {"full_attention": "many"},
        {"full_attention": 36, "full_atention": 1},
    ],
)
def test_bad_layer_layout_is_refused(layout):
    """Negative counts used to balance the sum (40 + -4 = 36 layers) and plan a model of -4 layers."""
    with pytest.raises(CM.PlanError) as exc:
        plan(dict(QWEN3, architectures=["FancyNewForCausalLM"]), context=8192, layer_layout=layout)
    assert "layer_layout" in str(exc.value)


# --- reading config.json: the model shape and its weights ----------------------------------------


def test_describe_nested_hybrid(shape):
    assert (shape["num_full_layers"], shape["num_linear_layers"]) == (16, 48)
    assert shape["mtp_layers"] == 1 and shape["mamba_ssm_dtype"] == "float32"
    assert shape["quant_method"] == "fp8" and shape["vision"]["depth"] == 27


def test_layer_types_list_equals_interval():
    text = {
        "architectures": ["Qwen3NextForCausalLM"],
        "hidden_size": 64,
        "num_hidden_layers": 8,
        "num_attention_heads": 4,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"] + ["linear_attention"] * 3 + ["full_attention"],
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 8,
        "linear_value_head_dim": 8,
        "linear_conv_kernel_dim": 4,
    }
    a = MD.describe_model(text)
    b = MD.describe_model(dict(text, layer_types=None, full_attention_interval=4))
    assert (a["num_full_layers"], a["num_linear_layers"]) == (2, 6)
    assert (b["num_full_layers"], b["num_linear_layers"]) == (2, 6)


def test_bad_config_is_typed_error(tmp_path):
    with pytest.raises(CM.ModelConfigError):
        MD.describe_model({"hidden_size": 1})
    with pytest.raises(CM.ModelConfigError):
        MD.read_model_dir(str(tmp_path))


def test_fixture_index_matches_architecture(shape):
    with open(os.path.join(FIXTURE, "model.safetensors.index.json")) as fh:
        total = json.load(fh)["metadata"]["total_size"]
    est = MD.estimate_weight_bytes(shape)["total"]
    assert abs(est - total) / float(total) < 0.01  # two independent countings agree
    assert 29e9 < total < 31e9
