"""The memory ledger of a launch plan (plugins/module_utils/planner/_plan_ledger.py): size() reads the targets and
returns the KV layout; what the flags and the container environment need of it travels in that layout,
not in the targets dict."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_common as CM
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_flags as F
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_kv as K
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_ledger as LG
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_memory as M
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _planner as P
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_common import GIB
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_model import model_weights
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_targets import targets

from .test__plan_model import FIXTURE, GPT_OSS, GPT_OSS_LAYOUT, PRO_96, fixture_config
from .test__planner import field


def sized(config, **kw):
    """targets -> model -> size(), as _planner.plan composes them; returns (t before, t after, size's result)."""
    params = dict(model_dir="/models/m", gpu_total_bytes=PRO_96, compute_capability="12.0", gpu_memory_utilization=0.92)
    params.update(kw)
    t = targets(params)
    shape, weights = model_weights(t, config, 20 * GIB, "test")
    before = copy.deepcopy(t)
    result = LG.size(t, shape, weights)
    return before, t, result


def test_size_leaves_the_targets_as_they_were_and_returns_the_backend_in_the_layout():
    # FlashInfer (fp8 KV on SM 12.0), KV dtype asked for.
    before, t, (ledger, _w, lay, _pool) = sized(fixture_config(), context=32768, kv_cache_dtype="fp8_e4m3")
    assert t == before
    assert lay["attention_backend"] == ledger["attention_backend"] == "FLASHINFER"
    assert lay["has_sinks"] is False and lay["kv_from_scheme"] is False
    # Attention sinks: Triton; no key of the layout leaks into the targets either.
    before, t, (ledger, _w, lay, _pool) = sized(
        GPT_OSS, context=32768, kv_cache_dtype="fp8_e4m3", layer_layout=GPT_OSS_LAYOUT
    )
    assert t == before and not {"attention_backend", "has_sinks", "kv_from_scheme"} & set(t)
    assert lay["attention_backend"] == ledger["attention_backend"] == "TRITON_ATTN" and lay["has_sinks"] is True


def test_a_kv_dtype_from_the_checkpoint_scheme_is_the_layouts_word():
    cfg = fixture_config()
    cfg["quantization_config"]["kv_cache_scheme"] = {
        "num_bits": 8,
        "type": "float",
        "strategy": "tensor",
        "symmetric": True,
        "dynamic": False,
    }
    before, t, (ledger, _w, lay, pool) = sized(cfg, context=32768)
    assert t == before and lay["kv_from_scheme"] is True
    assert ledger["kv_dtype_how"].startswith("checkpoint kv_cache_scheme")
    why = [
        f["reason"] for f in F.build_flags(t, ledger["max_model_len"], pool, lay) if f["args"][0] == "--kv-cache-dtype"
    ]
    assert why == ["KV dtype from the checkpoint's kv_cache_scheme"]


def test_the_flags_and_the_non_kv_estimate_read_the_backend_they_are_given():
    _before, t, (ledger, _w, lay, pool) = sized(fixture_config(), context=32768, kv_cache_dtype="fp8_e4m3")
    argv = [a for f in F.build_flags(t, ledger["max_model_len"], pool, lay) for a in f["args"]]
    assert argv[argv.index("--attention-config") + 1] == '{"use_trtllm_attention":false}'
    other = dict(lay, attention_backend="FLASH_ATTN")
    assert "--attention-config" not in [
        a for f in F.build_flags(t, ledger["max_model_len"], pool, other) for a in f["args"]
    ]
    shape, weights = model_weights(t, fixture_config(), 20 * GIB, "test")
    names = [n for n, _b, _h in M.estimate_non_kv(shape, weights, t, "FLASHINFER", lay["attn_groups"])]
    assert "attention_workspace" in names
    assert "attention_workspace" not in [n for n, _b, _h in M.estimate_non_kv(shape, weights, t, "FLASH_ATTN")]


def test_facts_pool_reproduces_vllm_numbers():
    """Given vLLM's own ~11.1 GiB KV memory (facts file), the formulas give its numbers."""
    pool = int(11.1 * CM.GIB)
    r = field("fp8_e4m3", measured_kv_cache_bytes=pool, prefix_caching=False)
    L = r["ledger"]
    assert (L["block_size"], L["num_gpu_blocks"]) == (1600, 213)
    assert abs(L["gpu_kv_cache_tokens"] - 313000) / 313000.0 < 0.01
    with pytest.raises(CM.InfeasibleError) as exc:
        field("bfloat16", measured_kv_cache_bytes=pool, prefix_caching=False)
    assert "refuse to start" in str(exc.value) and "160800" in str(exc.value)
    assert any(a.get("kv_cache_dtype") == "fp8_e4m3" for a in exc.value.alternatives)


def test_max_context_and_infeasible_alternatives():
    r = P.plan(
        dict(
            model_dir=FIXTURE,
            gpu_total_bytes=97887 * CM.MIB,
            compute_capability="12.0",
            gpu_memory_utilization=0.95,
            concurrency=50,
            context="max",
            kv_cache_dtype="fp8_e4m3",
            num_speculative_tokens=3,
        )
    )
    L = r["ledger"]
    assert L["max_model_len"] % 1024 == 0
    assert L["max_concurrency_at_len"] >= 50
    # One more K would no longer hold 50 full-length requests at the low end of the estimate (issue 43).
    g = K.group_layers(17, 48)
    low = L["estimate_band"]["num_gpu_blocks_low"]
    assert 50 * K.blocks_per_request(L["max_model_len"], 1600, g, 3, False) <= low
    assert 50 * K.blocks_per_request(L["max_model_len"] + 1024, 1600, g, 3, False) > low
    assert "low end" in L["max_model_len_how"]
    with pytest.raises(CM.InfeasibleError) as exc:
        P.plan(
            dict(
                model_dir=FIXTURE,
                gpu_total_bytes=97887 * CM.MIB,
                compute_capability="12.0",
                gpu_memory_utilization=0.95,
                concurrency=50,
                context="128K",
                kv_cache_dtype="bfloat16",
                num_speculative_tokens=3,
                require_full_length_concurrency=True,
            )
        )
    texts = [a["text"] for a in exc.value.alternatives]
    assert any(t.startswith("50 x ") for t in texts) and any("128K" in t for t in texts)
    assert any("--kv-offloading-size" in t for t in texts)


def test_estimate_band_brackets_the_field_measurements():
    """The reported band (non-KV up to 1.71 GiB more / 1.25 GiB less than estimated, from the three
    published starts in docs/launch-planning.md) contains the field's fp8 pool (~220 blocks = 315K
    tokens with prefix caching) and its bf16 longest length (~161K); a measured plan has no band."""
    fp8 = field("fp8_e4m3")["ledger"]["estimate_band"]
    assert fp8["num_gpu_blocks_low"] <= 220 <= fp8["num_gpu_blocks_high"]
    bf16 = field("bfloat16", context="max", concurrency=1)["ledger"]
    assert bf16["estimate_band"]["longest_single_request_low"] <= 161000 <= bf16["longest_single_request"]
    assert field("fp8_e4m3", measured_kv_cache_bytes=11 * CM.GIB)["ledger"]["estimate_band"] is None
    warn = field("bfloat16", context=180000, concurrency=1)["warnings"]
    assert any("re-plans from the engine's numbers" in w for w in warn)
