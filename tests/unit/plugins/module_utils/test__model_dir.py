"""Unit tests for _model_dir: the one model-directory reader of the import, the verify step and the planner."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import struct

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.model import _model_dir as md
from ansible_collections.airgap.vllm.plugins.module_utils.model import _model_import as mi
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_common as CM
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_model as MD

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "models", "qwen3.x-27b-fp8")


def shard(path, tensors):
    """A valid safetensors file: {name: nbytes} laid out back to back."""
    header, off = {}, 0
    for name, n in tensors.items():
        header[name] = {"dtype": "BF16", "shape": [n // 2], "data_offsets": [off, off + n]}
        off += n
    raw = json.dumps(header).encode("utf-8")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + b"\0" * off)


def model(tmp_path, config, files=None, index=None):
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config))
    for name, tensors in (files or {}).items():
        shard(str(d / name), tensors)
    if index is not None:
        (d / md.INDEX).write_text(json.dumps(index))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (d / name).write_text(json.dumps({"chat_template": "x"}))
    (d / "generation_config.json").write_text("{}")
    return str(d)


@pytest.mark.parametrize(
    "config,ok",
    [
        ({"model_type": "qwen3"}, True),
        ({"architectures": ["Qwen3ForCausalLM"]}, True),  # architectures alone is enough for vLLM
        ({"hidden_size": 8}, False),
        ({"model_type": "", "architectures": []}, False),
        (["not", "a", "dict"], False),
    ],
)
def test_one_config_rule(config, ok):
    assert (md.config_problem(config) is None) is ok


def test_import_and_planner_read_the_same_weights(tmp_path):
    d = model(
        tmp_path,
        {"architectures": ["Qwen3ForCausalLM"]},
        files={"a.safetensors": {"w1": 64, "w2": 32}, "b.safetensors": {"w3": 16}},
    )
    got = md.read_model_dir(d)
    assert got["shards"] == ["a.safetensors", "b.safetensors"]
    assert got["weight_bytes"] == 112 and got["weight_source"] == "sum of 2 safetensors headers"
    config, weight, how = MD.read_model_dir(d)
    assert (config, weight, how) == (got["config"], 112, got["weight_source"])
    # The import accepts an architectures-only config and a directory without model.safetensors,
    # like the planner (and vLLM, which globs *.safetensors).
    info = mi.validate_model_dir(d)
    assert info["shards"] == 2 and info["model_type"] is None
    assert info["architectures"] == ["Qwen3ForCausalLM"]


def test_both_refuse_a_config_without_model_type_or_architectures(tmp_path):
    d = model(tmp_path, {"hidden_size": 8}, files={"model.safetensors": {"w": 8}})
    with pytest.raises(md.ModelDirError, match="neither model_type nor architectures"):
        mi.validate_model_dir(d)
    with pytest.raises(CM.ModelConfigError, match="neither model_type nor architectures"):
        MD.read_model_dir(d)


def test_both_refuse_a_bad_header(tmp_path):
    d = model(tmp_path, {"model_type": "qwen3"}, files={"model.safetensors": {"w": 8}})
    with open(os.path.join(d, "model.safetensors"), "r+b") as f:
        f.write(struct.pack("<Q", 10**6))  # longer than the file
    with pytest.raises(md.ModelDirError, match="does not fit"):
        mi.validate_model_dir(d)
    with pytest.raises(CM.ModelConfigError, match="does not fit"):
        MD.read_model_dir(d)
    with open(os.path.join(d, "model.safetensors"), "r+b") as f:
        f.write(struct.pack("<Q", 4) + b"[1] ")  # JSON, but not an object
    with pytest.raises(md.ModelDirError, match="not a JSON object"):
        md.safetensors_header(os.path.join(d, "model.safetensors"))


def test_index_total_size_wins_and_the_planner_needs_no_shards(tmp_path):
    # The planner plans from config.json + the index alone (a controller-side copy); the import
    # insists on every shard the index names.
    index = {"metadata": {"total_size": 12345}, "weight_map": {"w": "model-1.safetensors"}}
    d = model(tmp_path, {"model_type": "qwen3"}, index=index)
    assert MD.read_model_dir(d)[1:] == (12345, "model.safetensors.index.json metadata.total_size")
    with pytest.raises(md.ModelDirError, match="shard model-1.safetensors named in the index is missing"):
        mi.validate_model_dir(d)
    shard(os.path.join(d, "model-1.safetensors"), {"w": 8})
    assert mi.validate_model_dir(d)["total_size"] == 12345


def test_index_without_total_size_sums_the_shards(tmp_path):
    index = {"weight_map": {"w": "model-1.safetensors"}}
    d = model(tmp_path, {"model_type": "qwen3"}, files={"model-1.safetensors": {"w": 40}}, index=index)
    assert MD.read_model_dir(d)[1:] == (40, "sum of 1 safetensors headers")
    assert mi.validate_model_dir(d)["total_size"] is None


@pytest.mark.parametrize(
    "index,match",
    [
        ({"weight_map": {}}, "no weight_map"),
        ({"weight_map": {"w": 3}}, "not a file name string"),
        ({"weight_map": {"w": "../x.safetensors"}}, "not a plain file name"),
        ({"weight_map": {"w": "a.safetensors"}, "metadata": {"total_size": "lots"}}, "not a number of bytes"),
    ],
)
def test_bad_index_is_refused_by_both(tmp_path, index, match):
    d = model(tmp_path, {"model_type": "qwen3"}, index=index)
    with pytest.raises(md.ModelDirError, match=match):
        mi.validate_model_dir(d)
    with pytest.raises(CM.ModelConfigError, match=match):
        MD.read_model_dir(d)


def test_no_weights_at_all(tmp_path):
    d = model(tmp_path, {"model_type": "qwen3"})
    assert MD.read_model_dir(d)[1:] == (None, None)  # the planner estimates from the architecture
    with pytest.raises(md.ModelDirError, match="nor any .safetensors file"):
        mi.validate_model_dir(d)


def test_repository_fixture_plans_from_its_index():
    config, weight, how = MD.read_model_dir(FIXTURE)
    assert config["architectures"] and weight > 20 * 1024**3 and "total_size" in how
