# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one reader of a Hugging Face model directory: config.json, the safetensors index and headers.

Used by the model import (_model_import.validate_model_dir, which adds the offline-start files) and
by the launch planner (_plan_model.read_model_dir, which needs the config and the weight bytes), so
that both accept and refuse the same directories for the same reasons:

- config.json must be a JSON object that names ``model_type`` or ``architectures`` (vLLM resolves
  the model class from either; an ``architectures``-only config is valid).
- Shards are the files ``model.safetensors.index.json``'s ``weight_map`` names (plain file names,
  all present); without an index, every ``*.safetensors`` in the directory (what vLLM globs).
- A safetensors header is the little-endian 8-byte length followed by that many bytes of JSON
  object; the length must be > 0, at most 100 MiB and fit the file.
- Weight bytes: the index's ``metadata.total_size`` when it has one, else the sum of the shard
  headers' ``data_offsets`` (no tensor data is read).

Pure stdlib, Python 3.7-clean.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import struct

from ansible_collections.airgap.vllm.plugins.module_utils.model import _model_fp8

CONFIG = "config.json"
INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
MAX_HEADER_BYTES = 100 * 1024 * 1024


class ModelDirError(Exception):
    """The model directory is unusable; the message names the file and what is wrong."""


def load_json(path, what):
    """The JSON document at path, or ModelDirError naming ``what`` (missing/unreadable, not JSON)."""
    try:
        with open(path, "rb") as f:
            return json.loads(f.read().decode("utf-8"))
    except (IOError, OSError):
        raise ModelDirError("%s: %s missing or unreadable" % (path, what))
    except ValueError as e:
        raise ModelDirError("%s: %s is not valid JSON: %s" % (path, what, e))


def config_problem(config):
    """Why a parsed config.json cannot name a model, or None. The one rule for import, verify and plan."""
    if not isinstance(config, dict):
        return "config.json is not a JSON object"
    if not (config.get("model_type") or config.get("architectures")):
        return "config.json names neither model_type nor architectures"
    return None


def read_config(path):
    """config.json of the model directory at path, checked with config_problem()."""
    config = load_json(os.path.join(path, CONFIG), CONFIG)
    problem = config_problem(config)
    if problem:
        raise ModelDirError("%s/%s" % (path, problem))
    return config


def safetensors_header(path):
    """The parsed JSON header of one .safetensors file (reads only the header)."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) != 8:
                raise ModelDirError("%s: truncated safetensors file" % path)
            (n,) = struct.unpack("<Q", head)
            if n <= 0 or 8 + n > size:
                raise ModelDirError("%s: safetensors header length %d does not fit the %d-byte file" % (path, n, size))
            if n > MAX_HEADER_BYTES:
                raise ModelDirError("%s: implausible safetensors header length %d" % (path, n))
            raw = f.read(n)
    except (IOError, OSError) as e:
        raise ModelDirError("%s: unreadable safetensors file (%s)" % (path, e))
    try:
        header = json.loads(raw.decode("utf-8"))
    except ValueError:
        raise ModelDirError("%s: safetensors header is not JSON" % path)
    if not isinstance(header, dict):
        raise ModelDirError("%s: safetensors header is not a JSON object" % path)
    return header


def safetensors_payload_bytes(path):
    """Tensor bytes in one .safetensors file, from its header's data_offsets."""
    total = 0
    for name, meta in safetensors_header(path).items():
        if name == "__metadata__":
            continue
        try:
            start, end = meta["data_offsets"]
            total += int(end) - int(start)
        except (KeyError, TypeError, ValueError) as e:
            raise ModelDirError("%s: tensor %r has no usable data_offsets (%s)" % (path, name, e))
    return total


def read_index(path):
    """{'shards': [file names], 'total_size': int or None, 'names': [tensor names]} from the directory's index,
    or None without one."""
    index_path = os.path.join(path, INDEX)
    if not os.path.exists(index_path):
        return None
    index = load_json(index_path, INDEX)
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise ModelDirError("%s: no weight_map" % index_path)
    bad = [v for v in weight_map.values() if not isinstance(v, str)]
    if bad:
        raise ModelDirError(
            "%s: weight_map names shard %r, which is not a file name string; fix or re-export "
            "the index" % (index_path, bad[0])
        )
    shards = sorted(set(weight_map.values()))
    for shard in shards:
        if "/" in shard or shard.startswith("."):
            raise ModelDirError("%s: shard name %r is not a plain file name" % (index_path, shard))
    total = (index.get("metadata") or {}).get("total_size")
    if total is not None:
        try:
            total = int(total)
        except (TypeError, ValueError):
            raise ModelDirError("%s: metadata.total_size %r is not a number of bytes" % (index_path, total))
    return {"shards": shards, "total_size": total, "names": sorted(weight_map)}


def shard_files(path, index=None):
    """Shard file names: the index's, else every *.safetensors in the directory (sorted; may be empty)."""
    if index is None:
        index = read_index(path)
    if index is not None:
        return index["shards"]
    try:
        names = os.listdir(path)
    except (IOError, OSError) as e:
        raise ModelDirError("%s: cannot list the model directory (%s)" % (path, e))
    return sorted(n for n in names if n.endswith(".safetensors") and not n.startswith("."))


def check_shards(path, shards):
    """Every shard present and its header sane; returns {shard: payload bytes}."""
    out = {}
    for shard in shards:
        sp = os.path.join(path, shard)
        if not os.path.isfile(sp):
            raise ModelDirError("%s: shard %s named in the index is missing" % (path, shard))
        out[shard] = safetensors_payload_bytes(sp)
    return out


def tensor_shapes(path, shards):
    """{tensor name: {"shape", "dtype"}} from the headers of the shards present (a missing shard gives none)."""
    out = {}
    for shard in shards:
        sp = os.path.join(path, shard)
        if not os.path.isfile(sp):
            continue
        for name, meta in safetensors_header(sp).items():
            if name != "__metadata__" and isinstance(meta, dict) and isinstance(meta.get("shape"), list):
                out[name] = {"shape": meta["shape"], "dtype": meta.get("dtype")}
    return out


def fp8_skip_list_problem(path, config, index, shards, language_model_only=False):
    """_model_fp8.skip_list_problem for the model directory at ``path`` (tensor names from the index, else the
    shards' headers; shapes from the shards present), or None for a checkpoint that is no FP8 block one."""
    if _model_fp8.block_fp8_config(config)[0] is None:
        return None
    tensors = tensor_shapes(path, shards)
    names = index["names"] if index is not None else sorted(tensors)
    return _model_fp8.skip_list_problem(config, names, tensors, language_model_only)


def read_model_dir(path, verify_shards=True):
    """Everything both readers need, read once.

    ``verify_shards`` False (the planner on a directory that may hold only config.json and the
    index, e.g. on the controller) reads shard headers only when the index gives no total_size.
    Returns {'config', 'index' (or None), 'shards', 'shard_bytes' ({name: payload} of the shards
    read), 'weight_bytes' (int, or None without shards), 'weight_source' (how it was found)}.
    """
    config = read_config(path)
    index = read_index(path)
    total = index["total_size"] if index is not None else None
    shards = shard_files(path, index)
    shard_bytes = check_shards(path, shards) if verify_shards or total is None else {}
    if total is not None:
        weight, how = total, "%s metadata.total_size" % INDEX
    elif shards:
        weight, how = sum(shard_bytes.values()), "sum of %d safetensors headers" % len(shards)
    else:
        weight, how = None, None
    return {
        "config": config,
        "index": index,
        "shards": shards,
        "shard_bytes": shard_bytes,
        "weight_bytes": weight,
        "weight_source": how,
    }
