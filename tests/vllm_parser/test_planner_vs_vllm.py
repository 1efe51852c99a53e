"""The planner's KV numbers against vLLM 0.27.1's own sizing code, live (kv_reference.py in the venv).

Each case plans a model with a measured KV budget (so no estimate is involved) and asks vLLM's
get_kv_cache_configs / get_kv_cache_capacity the same question: block size, num_gpu_blocks, blocks per
max-length request, "GPU KV cache size" tokens, and, where vLLM refuses, its "estimated maximum model
length". The expected numbers hard-coded in tests/unit/plugins/module_utils/test__plan_models.py were
taken from this script's output.
"""
import json
import os
import subprocess

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils import _planner as P

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "models", "qwen3.x-27b-fp8")
GDN = {"k_heads": 16, "v_heads": 48, "k_dim": 128, "v_dim": 128, "conv_kernel": 4}

GEMMA3 = {
    "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 5376,
    "intermediate_size": 21504, "num_attention_heads": 32, "num_key_value_heads": 16,
    "head_dim": 128, "num_hidden_layers": 62, "sliding_window": 1024, "vocab_size": 262208,
    "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}
DENSE = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096,
         "intermediate_size": 12288, "num_attention_heads": 32, "num_key_value_heads": 8,
         "head_dim": 128, "num_hidden_layers": 36, "vocab_size": 151936,
         "max_position_embeddings": 40960, "torch_dtype": "bfloat16"}


def fixture_config(bf16=False):
    with open(os.path.join(FIXTURE, "config.json")) as fh:
        cfg = json.load(fh)
    if bf16:
        cfg.pop("quantization_config")
    return cfg


# (id, config, planner params, vLLM case)
CASES = [
    ("gemma3-96", GEMMA3, dict(gpu_total_bytes=97887 * P.MIB, context=131072, kv_cache_dtype="auto",
                               measured_kv_cache_bytes=40 * P.GIB),
     dict(full=10, sliding=52, window=1024, kv_heads=16, head_dim=128, kv_dtype="bfloat16",
          in_flight=16384)),
    ("gemma3-48", GEMMA3, dict(gpu_total_bytes=49140 * P.MIB, context=131072, kv_cache_dtype="auto",
                               measured_kv_cache_bytes=12 * P.GIB),
     dict(full=10, sliding=52, window=1024, kv_heads=16, head_dim=128, kv_dtype="bfloat16",
          in_flight=4096)),
    ("gemma3-fp8-tp2", GEMMA3, dict(gpu_total_bytes=97887 * P.MIB, gpu_count=2, context=65536,
                                    kv_cache_dtype="fp8_e4m3", measured_kv_cache_bytes=9 * P.GIB,
                                    max_num_batched_tokens=4096),
     dict(full=10, sliding=52, window=1024, kv_heads=16, head_dim=128, kv_dtype="fp8", tp=2,
          in_flight=8192)),
    ("dense-bf16", DENSE, dict(gpu_total_bytes=49140 * P.MIB, context=40960, kv_cache_dtype="auto",
                               measured_kv_cache_bytes=7 * P.GIB),
     dict(full=36, kv_heads=8, head_dim=128, kv_dtype="bfloat16")),
    ("qwen35-fp8-mtp3-prefix", fixture_config(), dict(
        gpu_total_bytes=49140 * P.MIB, context=204800, kv_cache_dtype="fp8_e4m3",
        num_speculative_tokens=3, prefix_caching=True, measured_kv_cache_bytes=int(11.1 * P.GIB)),
     dict(full=17, linear=48, kv_heads=4, head_dim=256, kv_dtype="fp8", gdn=GDN, num_spec=3,
          mamba_cache_mode="align")),
    ("qwen35-bf16-refused", fixture_config(), dict(
        gpu_total_bytes=49140 * P.MIB, context=204800, kv_cache_dtype="bfloat16",
        num_speculative_tokens=3, prefix_caching=False, measured_kv_cache_bytes=int(11.1 * P.GIB)),
     dict(full=17, linear=48, kv_heads=4, head_dim=256, kv_dtype="bfloat16", gdn=GDN, num_spec=3)),
    ("qwen35-tp2-nomtp", fixture_config(), dict(
        gpu_total_bytes=97887 * P.MIB, gpu_count=2, context=262144, kv_cache_dtype="fp8_e4m3",
        measured_kv_cache_bytes=30 * P.GIB),
     dict(full=16, linear=48, kv_heads=4, head_dim=256, kv_dtype="fp8", gdn=GDN, tp=2)),
    ("hopper-e5m2", fixture_config(bf16=True), dict(
        gpu_total_bytes=143771 * P.MIB, compute_capability="9.0", context=131072,
        kv_cache_dtype="fp8_e5m2", num_speculative_tokens=3, measured_kv_cache_bytes=20 * P.GIB),
     dict(full=17, linear=48, kv_heads=4, head_dim=256, kv_dtype="fp8_e5m2", gdn=GDN, num_spec=3)),
]


def _planner(config, params):
    base = dict(model_dir="/m", compute_capability="12.0")
    base.update(params)
    try:
        return P.plan(base, config=config, weight_bytes=20 * P.GIB, weight_source="test")["ledger"]
    except P.InfeasibleError as exc:
        return {"refused": str(exc)}


def test_planner_matches_vllm_sizing(venv_python, tmp_path):
    cases = []
    for cid, _cfg, params, vc in CASES:
        case = dict(vc, id=cid, kind="kv", max_model_len=params["context"],
                    available=params["measured_kv_cache_bytes"])
        cases.append(case)
    out = tmp_path / "kv.json"
    subprocess.run([venv_python, os.path.join(HERE, "kv_reference.py"), str(out)],
                   input=json.dumps(cases), universal_newlines=True, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
    got = {r["id"]: r for r in json.loads(out.read_text())}
    for cid, cfg, params, _vc in CASES:
        v, L = got[cid], _planner(cfg, params)
        if not v["ok"]:
            assert "estimated maximum model length is" in v["error"], v
            est = int(v["error"].split("estimated maximum model length is ")[1].split(".")[0])
            assert "refused" in L, (cid, L)
            assert "Longest length that starts: %d." % est in L["refused"], (cid, L, v["error"])
            continue
        assert "refused" not in L, (cid, L)
        assert L["block_size"] == v["block_size"], cid
        assert L["num_gpu_blocks"] == v["num_blocks"], cid
        assert L["blocks_per_full_request"] == v["blocks_per_request"], cid
        assert L["kv_cache_groups"] == v["num_groups"], cid
        assert L["gpu_kv_cache_tokens"] == v["kv_tokens"], cid


def test_backend_priorities_match_vllm(venv_python, tmp_path):
    """The planner's order (FlashInfer first only on 10.x) is vLLM's _get_backend_priorities."""
    ccs = [(8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (10, 3), (12, 0), (12, 1)]
    cases = [{"id": "%d.%d" % cc, "kind": "backend", "cc": list(cc)} for cc in ccs]
    cases.append({"id": "ct", "kind": "scheme", "quantization_config": {
        "quant_method": "compressed-tensors", "format": "float-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
            "num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True,
            "dynamic": False}}},
        "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor",
                            "symmetric": True, "dynamic": False}}})
    cases.append({"id": "mo", "kind": "scheme", "quantization_config": {
        "quant_method": "modelopt", "quantization": {"quant_algo": "FP8",
                                                     "kv_cache_quant_algo": "FP8"}}})
    cases.append({"id": "g3", "kind": "layer_types", "config_class": "Gemma3TextConfig",
                  "config": {"num_hidden_layers": 62, "sliding_window": 1024}})
    cases.append({"id": "g2", "kind": "layer_types", "config_class": "Gemma2Config",
                  "config": {"num_hidden_layers": 46, "sliding_window": 4096}})
    out = tmp_path / "be.json"
    subprocess.run([venv_python, os.path.join(HERE, "kv_reference.py"), str(out)],
                   input=json.dumps(cases), universal_newlines=True, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
    got = {r["id"]: r for r in json.loads(out.read_text())}
    for cc in ccs:
        prio = got["%d.%d" % cc]["priorities"]
        first = prio[0]
        # bf16 KV: the first priority is valid on every listed capability.
        assert P.attention_backend("%d.%d" % cc, "bfloat16", 256) == first, (cc, prio)
    assert P.describe_model(dict(DENSE, quantization_config=cases[len(ccs)][
        "quantization_config"]))["kv_cache_scheme_dtype"] == got["ct"]["auto_becomes"]
    assert P.describe_model(dict(DENSE, quantization_config=cases[len(ccs) + 1][
        "quantization_config"]))["kv_cache_scheme_dtype"] == got["mo"]["auto_becomes"]
    g3 = P.describe_model(GEMMA3)
    assert g3["num_full_layers"] == got["g3"]["layer_types"].count("full_attention")
    g2 = P.describe_model(dict(GEMMA3, architectures=["Gemma2ForCausalLM"], model_type="gemma2",
                               num_hidden_layers=46, sliding_window=4096))
    assert g2["num_full_layers"] == got["g2"]["layer_types"].count("full_attention")
    with pytest.raises(P.ModelConfigError):
        P.describe_model(dict(DENSE, architectures=["Unknown"]))
