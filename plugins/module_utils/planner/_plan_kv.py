# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""KV-cache formulas of vLLM 0.27.1: page sizes, block size, grouping, blocks per request.

Pure, stdlib only, Python 3.7-clean. Paths cited are inside the vLLM 0.27.1 wheel's ``vllm/``.
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_common import cdiv

__metaclass__ = type

# Smallest kernel block size of the CUDA attention backends (FlashAttention MultipleOf(16),
# FlashInfer [16, 32, 64]); platforms/interface.py:876 takes it as the hybrid alignment unit.
KERNEL_BLOCK_ALIGNMENT = 16
DEFAULT_BLOCK_SIZE = 16  # config/cache.py DEFAULT_BLOCK_SIZE


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


def hybrid_block_size(attn_token_bytes, gdn_page, base_block=DEFAULT_BLOCK_SIZE, alignment=KERNEL_BLOCK_ALIGNMENT):
    """platforms/interface.py:903 attn_block = align * cdiv(mamba_page, align * attn_1tok),
    raised only if larger than the current block size (interface.py:909)."""
    if not gdn_page:
        return base_block
    align = max(alignment, base_block)
    return max(base_block, align * cdiv(gdn_page, align * attn_token_bytes))


def group_layers(n_full, n_linear, n_sliding=0):
    """v1/core/kv_cache_utils.py:1140 _get_kv_cache_groups_uniform_page_size: one bucket per
    layer spec (full attention, each sliding window, Mamba/GDN); group size = smallest bucket
    (or the largest, when largest < 1.5 x smallest, :1243); each bucket is split into
    cdiv(n, group_size) groups, padding the last. A model with one layer kind is one group
    (_get_kv_cache_groups_uniform_spec, :1022)."""
    counts = [c for c in (n_full, n_linear, n_sliding) if c]
    group = min(counts)
    if max(counts) < group * 1.5:
        group = max(counts)
    return {
        "group_size": group,
        "full_groups": cdiv(n_full, group) if n_full else 0,
        "linear_groups": cdiv(n_linear, group) if n_linear else 0,
        "sliding_groups": cdiv(n_sliding, group) if n_sliding else 0,
    }


def gdn_blocks_per_request(num_spec, prefix_caching):
    """v1/kv_cache_interface.py:729 MambaSpec.max_memory_usage_bytes: (1 + num_spec) pages,
    (2 + num_spec) in 'align' mode, which prefix caching selects for Qwen3.5
    (model_executor/models/config.py:614)."""
    return (2 if prefix_caching else 1) + num_spec


def max_in_flight_tokens(max_num_batched_tokens, async_scheduling=True, pp=1):
    """config/vllm.py:553 max_in_flight_tokens = max_concurrent_batches x batched tokens;
    max_concurrent_batches (:540) is 2 with async scheduling at PP 1. Async scheduling is on by
    default (config/vllm.py:1095-1143), MTP included (EagleModelTypes, config/speculative.py:64)."""
    batches = 2 if async_scheduling and pp <= 1 else pp
    return batches * max_num_batched_tokens


def sliding_blocks_per_request(max_len, block, window, in_flight):
    """v1/kv_cache_interface.py:587 SlidingWindowSpec.max_admission_blocks_per_request:
    cdiv(min(window - 1 + in-flight tokens, max_model_len), block) + 1."""
    return cdiv(min(window - 1 + in_flight, max_len), block) + 1


def blocks_per_request(max_len, block, groups, num_spec, prefix_caching, sliding=None):
    """v1/core/kv_cache_utils.py:1890 _max_memory_usage_bytes_from_groups: sum over groups of
    cdiv(group max bytes, page). ``sliding`` = (window, in-flight tokens) for sliding groups."""
    n = groups["full_groups"] * cdiv(max_len, block) + groups["linear_groups"] * gdn_blocks_per_request(
        num_spec, prefix_caching
    )
    if groups.get("sliding_groups"):
        window, in_flight = sliding
        n += groups["sliding_groups"] * sliding_blocks_per_request(max_len, block, window, in_flight)
    return n


def num_gpu_blocks(kv_bytes, page_bytes, group_size):
    """kv_cache_utils.py:1008 available // page_size // num_layers (group size)."""
    return max(0, int(kv_bytes // page_bytes // group_size))


def longest_fitting_len(num_blocks, block, groups, num_spec, prefix_caching, concurrency=1, sliding=None, upper=None):
    """Largest max_model_len whose `concurrency` full-length requests fit in num_blocks.
    Same answer as kv_cache_utils.py:1953 _estimate_max_model_len_from_groups (binary search
    over lengths): closed form without sliding groups, a binary search with them."""
    if not groups["full_groups"] and not groups.get("sliding_groups"):
        return None
    if not groups.get("sliding_groups"):
        free = num_blocks // concurrency - groups["linear_groups"] * gdn_blocks_per_request(num_spec, prefix_caching)
        length = max(0, free // groups["full_groups"]) * block
        return min(length, upper) if upper else length

    def fits(length):
        return concurrency * blocks_per_request(length, block, groups, num_spec, prefix_caching, sliding) <= num_blocks

    lo, hi = 0, upper or (1 << 24)
    if fits(hi):
        return hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo
