"""An FP8 block checkpoint whose skip list names layers by short names (issue 43 item 5).

vLLM 0.26.0 on an H100 (../shared/reference/gpu-device-facts.md): the field fixture's
``modules_to_not_convert: [..., "model.visual", "linear_attn.in_proj_a", ...]`` left the vision tower quantised
(vLLM skips FP8 only for layers named in full: quant_utils.py:510 is_layer_skipped) and the multimodal start died
with "AssertionError: the last dimension of x 4304 must be divisible by group_size 128". The shipped fixture now
names every unquantised layer in full, as the weight map does, and the index it generates is unchanged.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os
import shutil

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.model import _model_dir as D
from ansible_collections.airgap.vllm.plugins.module_utils.model import _model_fp8 as F
from ansible_collections.airgap.vllm.plugins.module_utils.model import _model_import as I
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_common as CM
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _planner as P

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "models", "qwen3.x-27b-fp8")
FIELD_SKIP = [
    "lm_head",
    "model.language_model.embed_tokens",
    "model.visual",
    "linear_attn.in_proj_a",
    "linear_attn.in_proj_b",
    "mtp.fc",
]


def load(name):
    with open(os.path.join(FIXTURE, name)) as fh:
        return json.load(fh)


CONFIG = load("config.json")
NAMES = sorted(load("model.safetensors.index.json")["weight_map"])


def field_config():
    c = copy.deepcopy(CONFIG)
    c["quantization_config"]["modules_to_not_convert"] = list(FIELD_SKIP)
    return c


def test_the_shipped_fixture_names_its_skip_list_in_full():
    skip = CONFIG["quantization_config"]["modules_to_not_convert"]
    names = set(NAMES)
    assert all(s + ".weight" in names for s in skip)  # every entry is a module of the weight map
    assert "model.visual.blocks.26.mlp.linear_fc2" in skip and "mtp.fc" in skip
    assert F.skip_list_problem(CONFIG, NAMES) is None
    assert F.skip_list_problem(CONFIG, NAMES, language_model_only=True) is None


def test_the_field_skip_list_is_refused_with_the_layer_and_the_fix():
    msg = F.skip_list_problem(field_config(), NAMES)
    assert msg.startswith("the FP8 block-quantised checkpoint keeps model.visual.blocks.0.mlp.linear_fc2 (1152 x 4304)")
    assert "'model.visual' covers it only as a short name" in msg
    assert "4304 is no multiple of 128" in msg
    assert "the last dimension of x 4304 must be divisible by group_size 128" in msg
    assert "54 such layers in all" in msg  # 27 blocks x (linear_fc1, linear_fc2)
    assert 'Fix: list every unquantised layer by its full module name as the weight map names it' in msg
    assert "--language-model-only" in msg


def test_text_only_the_vision_tower_is_not_loaded():
    """The field's text-only starts ran with the same list (the vision tower is not built)."""
    assert F.skip_list_problem(field_config(), NAMES, language_model_only=True) is None


@pytest.mark.parametrize(
    "info, refused",
    [
        ({"shape": [1152, 4304], "dtype": "BF16"}, True),
        ({"shape": [4304, 1152], "dtype": "BF16"}, True),
        ({"shape": [1152, 4304], "dtype": "F8_E4M3"}, False),  # stored in FP8: quantised by the checkpoint
        ({"shape": [1152, 1152], "dtype": "BF16"}, False),  # multiples of the block
        ({"shape": [4304], "dtype": "BF16"}, False),  # a vector, no linear layer
    ],
)
def test_shapes_from_the_headers_decide(info, refused):
    cfg = {
        "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128], "modules_to_not_convert": []}
    }
    names = ["model.layers.0.mlp.odd.weight"]
    msg = F.skip_list_problem(cfg, names, {names[0]: info})
    assert (msg is not None) is refused
    if refused:
        assert "model.layers.0.mlp.odd" in msg
    cfg["quantization_config"]["modules_to_not_convert"] = ["model.layers.0.mlp.odd"]
    assert F.skip_list_problem(cfg, names, {names[0]: info}) is None


@pytest.mark.parametrize(
    "quant",
    [
        None,
        {"quant_method": "fp8"},  # per-tensor FP8: no blocks
        {"quant_method": "compressed-tensors", "weight_block_size": [128, 128]},
        {"quant_method": "fp8", "weight_block_size": "128"},
    ],
)
def test_only_block_fp8_checkpoints_are_checked(quant):
    cfg = field_config()
    if quant is None:
        del cfg["quantization_config"]
    else:
        cfg["quantization_config"] = dict(quant, modules_to_not_convert=FIELD_SKIP)
    assert F.skip_list_problem(cfg, NAMES) is None


def copy_fixture(tmp_path, config):
    d = tmp_path / "model"
    d.mkdir()
    shutil.copy(os.path.join(FIXTURE, "model.safetensors.index.json"), str(d))
    (d / "config.json").write_text(json.dumps(config))
    return str(d)


def test_the_planner_refuses_before_any_host_changes(tmp_path):
    path = copy_fixture(tmp_path, field_config())
    params = dict(
        model_dir=path, gpu_total_bytes=81559 * CM.MIB, compute_capability="9.0", concurrency=4, context=32768
    )
    with pytest.raises(CM.ModelConfigError) as exc:
        P.plan(params)
    assert "model.visual.blocks.0.mlp.linear_fc2" in str(exc.value)
    assert P.plan(dict(params, language_model_only=True))["argv"]  # text only: it starts (measured)


def test_the_model_import_refuses_it(tiny_model_dir, tmp_path):
    """The tiny checkpoint with a vision MLP weight in its index and the field's short names."""
    path = str(tmp_path / "tiny")
    shutil.copytree(tiny_model_dir, path)
    with open(os.path.join(path, "config.json")) as fh:
        cfg = json.load(fh)
    cfg["quantization_config"]["modules_to_not_convert"] = list(FIELD_SKIP)
    with open(os.path.join(path, "config.json"), "w") as fh:
        json.dump(cfg, fh)
    index_path = os.path.join(path, "model.safetensors.index.json")
    with open(index_path) as fh:
        index = json.load(fh)
    shard = sorted(set(index["weight_map"].values()))[0]
    index["weight_map"]["model.visual.blocks.0.mlp.linear_fc2.weight"] = shard  # not in its header: config widths
    with open(index_path, "w") as fh:
        json.dump(index, fh)
    with pytest.raises(I.ModelError, match="model.visual.blocks.0.mlp.linear_fc2"):
        I.validate_model_dir(path)
    assert I.validate_model_dir(path, language_model_only=True)["shards"] == 2


def test_the_tiny_checkpoint_passes_as_it_is(tiny_model_dir):
    index = D.read_index(tiny_model_dir)
    assert D.fp8_skip_list_problem(tiny_model_dir, D.read_config(tiny_model_dir), index, index["shards"]) is None
