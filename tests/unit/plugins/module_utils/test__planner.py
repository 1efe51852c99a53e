from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils import _planner as P

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "models", "qwen3.x-27b-fp8")
ADA_48 = 49140 * P.MIB


@pytest.fixture(scope="module")
def shape():
    with open(os.path.join(FIXTURE, "config.json")) as fh:
        return P.describe_model(json.load(fh))


def test_describe_nested_hybrid(shape):
    assert (shape["num_full_layers"], shape["num_linear_layers"]) == (16, 48)
    assert shape["mtp_layers"] == 1 and shape["mamba_ssm_dtype"] == "float32"
    assert shape["quant_method"] == "fp8" and shape["vision"]["depth"] == 27


def test_layer_types_list_equals_interval():
    text = {"architectures": ["Qwen3NextForCausalLM"],
            "hidden_size": 64, "num_hidden_layers": 8, "num_attention_heads": 4,
            "layer_types": ["linear_attention"] * 3 + ["full_attention"] + ["linear_attention"] * 3
            + ["full_attention"], "linear_num_key_heads": 2, "linear_num_value_heads": 4,
            "linear_key_head_dim": 8, "linear_value_head_dim": 8, "linear_conv_kernel_dim": 4}
    a = P.describe_model(text)
    b = P.describe_model(dict(text, layer_types=None, full_attention_interval=4))
    assert (a["num_full_layers"], a["num_linear_layers"]) == (2, 6)
    assert (b["num_full_layers"], b["num_linear_layers"]) == (2, 6)


def test_bad_config_is_typed_error(tmp_path):
    with pytest.raises(P.ModelConfigError):
        P.describe_model({"hidden_size": 1})
    with pytest.raises(P.ModelConfigError):
        P.read_model_dir(str(tmp_path))


@pytest.mark.parametrize("kv,expected", [(1, 2048), (2, 4096)])
def test_attn_bytes_per_token(shape, kv, expected):
    # 4 kv heads x (256 + 256) x dtype bytes
    assert P.attn_bytes_per_token(shape, kv) == expected
    assert P.attn_bytes_per_token(shape, kv, tp=8) == expected // 4  # max(1, 4 // 8) heads


def test_gdn_state(shape):
    s = P.gdn_state_bytes(shape, tp=1, num_spec=3, conv_bytes=2, ssm_bytes=4)
    assert s["conv"] == 10240 * 6 * 2  # conv_dim (128*16*2 + 128*48) x (4 - 1 + 3) x bf16
    assert s["temporal"] == 48 * 128 * 128 * 4
    assert P.gdn_state_bytes(shape, tp=2, num_spec=0)["total"] == 5120 * 3 * 2 + 24 * 128 * 128 * 4


@pytest.mark.parametrize("tok,expected", [(2048, 1600), (4096, 800)])
def test_hybrid_block_size(tok, expected):
    assert P.hybrid_block_size(tok, 3268608) == expected
    assert P.hybrid_block_size(tok, 0) == 16


def test_grouping():
    def g(size, full, lin, sw=0):
        return {"group_size": size, "full_groups": full, "linear_groups": lin,
                "sliding_groups": sw}
    assert P.group_layers(17, 48) == g(17, 1, 3)
    assert P.group_layers(13, 12) == g(13, 1, 1)
    assert P.group_layers(32, 0) == g(32, 1, 0)
    assert P.group_layers(10, 0, 52) == g(10, 1, 0, 6)  # Gemma 3 27B: 8 padding layers


def test_blocks_and_fit():
    g = P.group_layers(17, 48)
    assert P.blocks_per_request(204800, 1600, g, 3, False) == 128 + 12
    assert P.blocks_per_request(204800, 1600, g, 3, True) == 128 + 15
    assert P.num_gpu_blocks(int(11.1 * P.GIB), 3276800, 17) == 213
    assert P.longest_fitting_len(214, 800, g, 3, False) == 202 * 800


def test_parse_size():
    assert P.parse_size("200K") == 204800 and P.parse_size("200k") == 200000
    assert P.parse_size(131072) == 131072
    with pytest.raises(P.TargetsError):
        P.parse_size("lots")


def test_fixture_index_matches_architecture(shape):
    with open(os.path.join(FIXTURE, "model.safetensors.index.json")) as fh:
        total = json.load(fh)["metadata"]["total_size"]
    est = P.estimate_weight_bytes(shape)["total"]
    assert abs(est - total) / float(total) < 0.01  # two independent countings agree
    assert 29e9 < total < 31e9


def _field(kv, **kw):
    base = dict(model_dir=FIXTURE, gpu_total_bytes=ADA_48, compute_capability="8.9",
                gpu_memory_utilization=0.93, num_speculative_tokens=3, concurrency=4,
                context=204800, prefix_caching=True, kv_cache_dtype=kv,
                reasoning_parser="qwen3", tool_call_parser="qwen3_coder")
    base.update(kw)
    return P.plan(base)


def test_facts_pool_reproduces_vllm_numbers():
    """Given vLLM's own ~11.1 GiB KV memory (facts file), the formulas give its numbers."""
    pool = int(11.1 * P.GIB)
    r = _field("fp8_e4m3", measured_kv_cache_bytes=pool, prefix_caching=False)
    L = r["ledger"]
    assert (L["block_size"], L["num_gpu_blocks"]) == (1600, 213)
    assert abs(L["gpu_kv_cache_tokens"] - 313000) / 313000.0 < 0.01
    with pytest.raises(P.InfeasibleError) as exc:
        _field("bfloat16", measured_kv_cache_bytes=pool, prefix_caching=False)
    assert "refuse to start" in str(exc.value) and "160800" in str(exc.value)
    assert any(a.get("kv_cache_dtype") == "fp8_e4m3" for a in exc.value.alternatives)


def test_block_formulas_match_a_published_refusal(shape):
    """qevos.ai, RTX 4090 48 GB, Qwen3.6-27B-FP8, fp8 KV, no MTP, prefix caching: vLLM started
    at 261,856 and refused 262,144 with "need 8.33 GiB, only 8.29 GiB". The block size, the
    grouping and the prefix-caching "align" pages reproduce both sides of that measurement."""
    gdn = P.gdn_state_bytes(shape, num_spec=0)["total"]
    block = P.hybrid_block_size(P.attn_bytes_per_token(shape, 1), gdn)
    assert block == 1568  # "Setting attention block size to 1568 tokens" in the same logs
    g = P.group_layers(16, 48)
    per_block = block * P.attn_bytes_per_token(shape, 1) * g["group_size"]
    need = P.blocks_per_request(262144, block, g, 0, True) * per_block
    assert round(need / float(P.GIB), 2) == 8.33
    blocks = P.num_gpu_blocks(int(8.29 * P.GIB), per_block // g["group_size"], g["group_size"])
    assert P.blocks_per_request(262144, block, g, 0, True) > blocks  # refused
    assert P.blocks_per_request(261856, block, g, 0, True) <= blocks  # started


def test_flashinfer_workspace_scales_with_prefill_chunk():
    """flashinfer.py:938-960: max(394 MiB, batched tokens x q heads x head_dim x 16). It is in
    vLLM's pre-KV measurement only when FULL decode graphs are profiled: not with MTP
    (FlashInfer without TRT-LLM is UNIFORM_SINGLE_TOKEN_DECODE, flashinfer.py:895-936, so spec
    decode falls back to PIECEWISE, config/compilation.py:1442-1458) and not with enforce_eager."""
    def ws(**kw):
        pool = int(11.1 * P.GIB)
        comps = _field("fp8_e4m3", measured_kv_cache_bytes=pool, **kw)["ledger"]["components"]
        return [c["bytes"] for c in comps if c["name"] == "attention_workspace"]
    assert ws(num_speculative_tokens=0) == [394 * P.MIB]  # 2048 x 24 x 256 x 16 = 192 MiB
    assert ws(num_speculative_tokens=0, max_num_batched_tokens=8192) == [8192 * 24 * 256 * 16]
    assert ws() == []  # MTP 3: PIECEWISE graphs build no attention metadata before KV sizing
    assert ws(num_speculative_tokens=0, enforce_eager=True) == []
    assert ws(num_speculative_tokens=0, compute_capability="9.0") == []  # FA3 takes fp8


@pytest.mark.xfail(strict=True, reason=(
    "non-KV estimate is ~1.5 (fp8) / ~1.7 (bf16) GiB below what the field run implies "
    "(fp8 355K vs 315K, bf16 186K vs 161K, both with MTP) and 0.13 GiB above a published 48 GB run "
    "without MTP; no "
    "source-backed component closes it and vLLM 0.27.1 cannot run on the device to measure it; "
    "see docs/launch-planning.md"))
def test_field_48gb_estimate_within_tolerance():
    """Field measurement: fp8 pool ~315K tokens; bf16 refuses 200K, ~161K fits."""
    fp8 = _field("fp8_e4m3")["ledger"]
    assert fp8["block_size"] == 1600
    assert abs(fp8["gpu_kv_cache_tokens"] - 315000) / 315000.0 <= 0.05, fp8
    with pytest.raises(P.InfeasibleError) as exc:
        _field("bfloat16")
    bf16 = _field("bfloat16", context="max", concurrency=1)["ledger"]
    assert bf16["block_size"] == 800
    assert abs(bf16["longest_single_request"] - 161000) / 161000.0 <= 0.05, bf16


def test_docker_and_env_decisions():
    r = _field("fp8_e4m3", kv_offloading_gib=64, kernel="4.19.90-52.22.v2207.ky10.x86_64",
               docker_version="20.10.7")
    assert r["docker_options"][-2:] == ["--shm-size", "72g"]
    assert "seccomp=unconfined" in r["docker_options"] and r["needs_madvise_patch"]
    assert r["env"]["HF_HUB_OFFLINE"] == "1" and r["env"]["VLLM_NO_USAGE_STATS"] == "1"
    new = _field("fp8_e4m3", kernel="5.15.0", docker_version="24.0.7")
    assert "seccomp=unconfined" not in new["docker_options"] and not new["needs_madvise_patch"]
    assert new["docker_options"][:2] == ["--gpus", "all"]
    assert "--swap-space" not in r["argv"]


def test_shm_is_always_sized():
    # The field manual: 4g without KV offload (Docker's 64 MiB default is too small), offload + 8g with it.
    plain = _field("fp8_e4m3", kernel="5.15.0", docker_version="24.0.7")
    assert plain["docker_options"][-2:] == ["--shm-size", "4g"]
    offload = _field("fp8_e4m3", kv_offloading_gib=2.5, kernel="5.15.0", docker_version="24.0.7")
    assert offload["docker_options"][-2:] == ["--shm-size", "11g"]


def test_argv_shape():
    r = _field("fp8_e4m3", api_keys_config_path="/etc/vllm/keys.yaml")
    argv = r["argv"]
    assert argv[argv.index("--speculative-config") + 1] == '{"method":"mtp","num_speculative_tokens":3}'
    assert "--enable-prefix-caching" in argv and "--config" in argv
    assert not any("sk-" in a for a in argv)
    assert all(f["reason"] for f in r["flags"])


def test_bad_parser_rejected():
    with pytest.raises(P.TargetsError):
        _field("fp8_e4m3", tool_call_parser="qwen3-coder")


def test_max_context_and_infeasible_alternatives():
    r = P.plan(dict(model_dir=FIXTURE, gpu_total_bytes=97887 * P.MIB, compute_capability="12.0",
                    gpu_memory_utilization=0.95, concurrency=50, context="max",
                    kv_cache_dtype="fp8_e4m3", num_speculative_tokens=3))
    L = r["ledger"]
    assert L["max_model_len"] % 1024 == 0
    assert L["max_concurrency_at_len"] >= 50
    # One more K would no longer hold 50 full-length requests.
    g = P.group_layers(17, 48)
    assert 50 * P.blocks_per_request(L["max_model_len"] + 1024, 1600, g, 3, False) > \
        L["num_gpu_blocks"]
    with pytest.raises(P.InfeasibleError) as exc:
        P.plan(dict(model_dir=FIXTURE, gpu_total_bytes=97887 * P.MIB, compute_capability="12.0",
                    gpu_memory_utilization=0.95, concurrency=50, context="128K",
                    kv_cache_dtype="bfloat16", num_speculative_tokens=3,
                    require_full_length_concurrency=True))
    texts = [a["text"] for a in exc.value.alternatives]
    assert any(t.startswith("50 x ") for t in texts) and any("128K" in t for t in texts)
    assert any("--kv-offloading-size" in t for t in texts)


@pytest.mark.parametrize("spelling", ["max", "MAX", " Max "])
def test_max_context_in_any_case(spelling):
    r = P.plan(dict(model_dir=FIXTURE, gpu_total_bytes=97887 * P.MIB, compute_capability="12.0",
                    gpu_memory_utilization=0.95, concurrency=50, context=spelling,
                    kv_cache_dtype="fp8_e4m3", num_speculative_tokens=3))
    assert r["ledger"]["max_model_len"] % 1024 == 0


def test_estimate_band_brackets_the_field_measurements():
    """The reported band (non-KV up to 1.71 GiB more / 1.25 GiB less than estimated, from the three
    published starts in docs/launch-planning.md) contains the field's fp8 pool (~220 blocks = 315K
    tokens with prefix caching) and its bf16 longest length (~161K); a measured plan has no band."""
    fp8 = _field("fp8_e4m3")["ledger"]["estimate_band"]
    assert fp8["num_gpu_blocks_low"] <= 220 <= fp8["num_gpu_blocks_high"]
    bf16 = _field("bfloat16", context="max", concurrency=1)["ledger"]
    assert bf16["estimate_band"]["longest_single_request_low"] <= 161000 <= \
        bf16["longest_single_request"]
    assert _field("fp8_e4m3", measured_kv_cache_bytes=11 * P.GIB)["ledger"]["estimate_band"] is None
    warn = _field("bfloat16", context=180000, concurrency=1)["warnings"]
    assert any("re-plans from the engine's numbers" in w for w in warn)
