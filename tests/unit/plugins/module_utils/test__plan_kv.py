"""KV-cache layout of the launch planner (plugins/module_utils/planner/_plan_kv.py): bytes per token, GDN state, the
hybrid block size, layer groups, blocks per request and the longest length that fits, as vLLM 0.27.1 computes
them. ``shape`` is the fixture model's (conftest.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_common as CM
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_kv as K


@pytest.mark.parametrize("kv,expected", [(1, 2048), (2, 4096)])
def test_attn_bytes_per_token(shape, kv, expected):
    # 4 kv heads x (256 + 256) x dtype bytes
    assert K.attn_bytes_per_token(shape, kv) == expected
    assert K.attn_bytes_per_token(shape, kv, tp=8) == expected // 4  # max(1, 4 // 8) heads


def test_gdn_state(shape):
    s = K.gdn_state_bytes(shape, tp=1, num_spec=3, conv_bytes=2, ssm_bytes=4)
    assert s["conv"] == 10240 * 6 * 2  # conv_dim (128*16*2 + 128*48) x (4 - 1 + 3) x bf16
    assert s["temporal"] == 48 * 128 * 128 * 4
    assert K.gdn_state_bytes(shape, tp=2, num_spec=0)["total"] == 5120 * 3 * 2 + 24 * 128 * 128 * 4


@pytest.mark.parametrize("tok,expected", [(2048, 1600), (4096, 800)])
def test_hybrid_block_size(tok, expected):
    assert K.hybrid_block_size(tok, 3268608) == expected
    assert K.hybrid_block_size(tok, 0) == 16


def test_grouping():
    def g(size, full, lin, sw=0):
        return {"group_size": size, "full_groups": full, "linear_groups": lin, "sliding_groups": sw}

    assert K.group_layers(17, 48) == g(17, 1, 3)
    assert K.group_layers(13, 12) == g(13, 1, 1)
    assert K.group_layers(32, 0) == g(32, 1, 0)
    assert K.group_layers(10, 0, 52) == g(10, 1, 0, 6)  # Gemma 3 27B: 8 padding layers


def test_blocks_and_fit():
    g = K.group_layers(17, 48)
    assert K.blocks_per_request(204800, 1600, g, 3, False) == 128 + 12
    assert K.blocks_per_request(204800, 1600, g, 3, True) == 128 + 15
    assert K.num_gpu_blocks(int(11.1 * CM.GIB), 3276800, 17) == 213
    assert K.longest_fitting_len(214, 800, g, 3, False) == 202 * 800


def test_block_formulas_match_a_published_refusal(shape):
    """qevos.ai, RTX 4090 48 GB, Qwen3.6-27B-FP8, fp8 KV, no MTP, prefix caching: vLLM started
    at 261,856 and refused 262,144 with "need 8.33 GiB, only 8.29 GiB". The block size, the
    grouping and the prefix-caching "align" pages reproduce both sides of that measurement."""
    gdn = K.gdn_state_bytes(shape, num_spec=0)["total"]
    block = K.hybrid_block_size(K.attn_bytes_per_token(shape, 1), gdn)
    assert block == 1568  # "Setting attention block size to 1568 tokens" in the same logs
    g = K.group_layers(16, 48)
    per_block = block * K.attn_bytes_per_token(shape, 1) * g["group_size"]
    need = K.blocks_per_request(262144, block, g, 0, True) * per_block
    assert round(need / float(CM.GIB), 2) == 8.33
    blocks = K.num_gpu_blocks(int(8.29 * CM.GIB), per_block // g["group_size"], g["group_size"])
    assert K.blocks_per_request(262144, block, g, 0, True) > blocks  # refused
    assert K.blocks_per_request(261856, block, g, 0, True) <= blocks  # started
