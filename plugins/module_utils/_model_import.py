# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Import a model (tar archive or directory) into <models_dir>/<name>, atomically and only once.

- Free space is checked before anything is written (sizes from tar headers or a directory walk).
- Extraction goes to a hidden temporary sibling on the same filesystem and is renamed into place,
  so a half-extracted model is never visible under its real name.
- A stamp (.airgap-vllm-model.json) records the manifest sha256 of the source; an unchanged model
  is skipped without reading 24 GB again.
- The result is validated the way vLLM 0.27.1 needs it offline (config.json, the safetensors index
  and every shard it names, tokenizer, chat template, processor config), naming the missing file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import struct
import tarfile

STAMP = ".airgap-vllm-model.json"
INDEX = "model.safetensors.index.json"
# Headroom on top of the model's own size: filesystem metadata, the stamp, a margin for rounding.
SPACE_MARGIN = 64 * 1024 * 1024


class ModelError(Exception):
    """The model is unusable or cannot be imported."""


def _load_json(path, what):
    try:
        with open(path, "rb") as f:
            return json.loads(f.read().decode("utf-8"))
    except (IOError, OSError):
        raise ModelError("%s: %s missing or unreadable" % (path, what))
    except ValueError as e:
        raise ModelError("%s: %s is not valid JSON: %s" % (path, what, e))


def _check_safetensors(path):
    """The first 8 bytes are the little-endian header length; the header is JSON. Cheap, catches truncation."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise ModelError("%s: truncated safetensors file" % path)
        (n,) = struct.unpack("<Q", head)
        if n <= 0 or 8 + n > size:
            raise ModelError("%s: safetensors header length %d does not fit the %d-byte file" % (path, n, size))
        try:
            json.loads(f.read(n).decode("utf-8"))
        except ValueError:
            raise ModelError("%s: safetensors header is not JSON" % path)


def validate_model_dir(path, language_model_only=False):
    """Return {'warnings': [...], 'shards': n, 'total_size': bytes}; raise ModelError naming the missing piece."""
    config = _load_json(os.path.join(path, "config.json"), "config.json")
    if not isinstance(config, dict) or not (config.get("model_type") or config.get("architectures")):
        raise ModelError("%s/config.json names neither model_type nor architectures" % path)
    warnings = []
    index_path = os.path.join(path, INDEX)
    total = None
    if os.path.exists(index_path):
        index = _load_json(index_path, INDEX)
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(weight_map, dict) or not weight_map:
            raise ModelError("%s: no weight_map" % index_path)
        shards = sorted(set(weight_map.values()))
        total = (index.get("metadata") or {}).get("total_size")
    elif os.path.exists(os.path.join(path, "model.safetensors")):
        shards = ["model.safetensors"]
    else:
        raise ModelError("%s: neither %s nor model.safetensors found" % (path, INDEX))
    for shard in shards:
        if "/" in shard or shard.startswith("."):
            raise ModelError("%s: shard name %r is not a plain file name" % (index_path, shard))
        sp = os.path.join(path, shard)
        if not os.path.isfile(sp):
            raise ModelError("%s: shard %s named in the index is missing" % (path, shard))
        _check_safetensors(sp)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if not os.path.isfile(os.path.join(path, name)):
            raise ModelError("%s: %s missing (needed for an offline start)" % (path, name))
    tok_cfg = _load_json(os.path.join(path, "tokenizer_config.json"), "tokenizer_config.json")
    if not os.path.isfile(os.path.join(path, "chat_template.jinja")) and not (
            isinstance(tok_cfg, dict) and tok_cfg.get("chat_template")):
        raise ModelError("%s: no chat template (chat_template.jinja or tokenizer_config.json chat_template): "
                         "every chat request would fail" % path)
    if not language_model_only and not os.path.isfile(os.path.join(path, "preprocessor_config.json")):
        raise ModelError("%s: preprocessor_config.json missing; vLLM fails 'Can't load image processor' "
                         "unless started with --language-model-only" % path)
    if not os.path.isfile(os.path.join(path, "generation_config.json")):
        warnings.append("%s: generation_config.json missing: vLLM's sampling defaults replace the model's" % path)
    return {"warnings": warnings, "shards": len(shards), "total_size": total}


def read_stamp(dest):
    try:
        with open(os.path.join(dest, STAMP)) as f:
            return json.load(f)
    except (IOError, OSError, ValueError):
        return None


def _safe_members(tar, src):
    """Regular files and directories only, inside the archive root; returns (members, strip_prefix, bytes)."""
    members = []
    total = 0
    tops = set()
    for m in tar:
        name = m.name
        while name.startswith("./"):
            name = name[2:]
        if not name or name == ".":
            continue
        norm = os.path.normpath(name)
        if norm.startswith("/") or norm == ".." or norm.startswith("../"):
            raise ModelError("%s: member %r escapes the extraction directory" % (src, m.name))
        if not (m.isfile() or m.isdir()):
            raise ModelError("%s: member %r is a link or device; only files and directories are accepted" % (src, m.name))
        m.name = norm
        tops.add(norm.split("/", 1)[0])
        members.append(m)
        total += m.size if m.isfile() else 0
    strip = None
    if len(tops) == 1:
        top = tops.pop()
        if any(m.name == top and m.isdir() for m in members) or all(m.name.startswith(top + "/") for m in members):
            if not any(m.name == top and m.isfile() for m in members):
                strip = top + "/"
    return members, strip, total


def source_size(src):
    if os.path.isdir(src):
        total = 0
        for dirpath, _dirs, filenames in os.walk(src):
            for name in filenames:
                total += os.path.getsize(os.path.join(dirpath, name))
        return total
    with tarfile.open(src, "r:*") as tar:
        return _safe_members(tar, src)[2]


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _extract(src, tmp):
    with tarfile.open(src, "r:*") as tar:
        members, strip = _safe_members(tar, src)[:2]
        for m in members:
            rel = m.name[len(strip):] if strip and m.name.startswith(strip) else m.name
            if strip and m.name + "/" == strip:
                continue
            out = os.path.join(tmp, rel)
            if m.isdir():
                if not os.path.isdir(out):
                    os.makedirs(out)
                continue
            parent = os.path.dirname(out)
            if not os.path.isdir(parent):
                os.makedirs(parent)
            f = tar.extractfile(m)
            with open(out, "wb") as w:
                shutil.copyfileobj(f, w, 8 * 1024 * 1024)


def _copy_tree(src, tmp):
    for dirpath, dirnames, filenames in os.walk(src):
        rel = os.path.relpath(dirpath, src)
        target = os.path.join(tmp, rel) if rel != "." else tmp
        if not os.path.isdir(target):
            os.makedirs(target)
        for name in filenames:
            shutil.copyfile(os.path.join(dirpath, name), os.path.join(target, name))


def _set_perms(root, uid, gid):
    """Directories 0755, files 0644: the container user must read every file."""
    for dirpath, dirnames, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        if uid is not None or gid is not None:
            os.chown(dirpath, -1 if uid is None else uid, -1 if gid is None else gid)
        for name in filenames:
            p = os.path.join(dirpath, name)
            os.chmod(p, 0o644)
            if uid is not None or gid is not None:
                os.chown(p, -1 if uid is None else uid, -1 if gid is None else gid)


def import_model(src, models_dir, name, sha256, uid=None, gid=None, language_model_only=False,
                 check_mode=False, force=False):
    """Put src (archive or directory) at models_dir/name unless the stamp says it is already there."""
    if "/" in name or name in ("", ".", "..") or name.startswith("."):
        raise ModelError("model name %r must be a plain directory name" % name)
    dest = os.path.join(models_dir, name)
    result = {"changed": False, "path": dest, "sha256": sha256, "warnings": []}
    stamp = read_stamp(dest)
    if stamp and stamp.get("sha256") == sha256 and not force:
        info = validate_model_dir(dest, language_model_only)
        result.update(info)
        result["imported"] = False
        return result
    if not os.path.exists(src):
        if check_mode:
            # A check run before the bundle is staged: the real run stages it first.
            result.update(changed=True, imported=True,
                          warnings=["%s does not exist yet; a real run would import it" % src])
            return result
        raise ModelError("model source %s not found" % src)
    needed = source_size(src)
    result.update(changed=True, imported=True, bytes=needed)
    if check_mode:
        return result
    if not os.path.isdir(models_dir):
        os.makedirs(models_dir, 0o755)
    avail = free_bytes(models_dir)
    if avail < needed + SPACE_MARGIN:
        raise ModelError("%s: %d bytes free, the model needs %d (+%d headroom); nothing was written" % (
            models_dir, avail, needed, SPACE_MARGIN))
    tmp = os.path.join(models_dir, ".%s.importing" % name)
    old = os.path.join(models_dir, ".%s.replaced" % name)
    for leftover in (tmp, old):
        if os.path.exists(leftover):
            shutil.rmtree(leftover)
    os.makedirs(tmp, 0o700)
    try:
        if os.path.isdir(src):
            _copy_tree(src, tmp)
        else:
            _extract(src, tmp)
        info = validate_model_dir(tmp, language_model_only)
        with open(os.path.join(tmp, STAMP), "w") as f:
            json.dump({"sha256": sha256, "source": os.path.basename(src), "name": name}, f, sort_keys=True)
        _set_perms(tmp, uid, gid)
    except Exception:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if os.path.exists(dest):
        os.rename(dest, old)
    os.rename(tmp, dest)
    if os.path.exists(old):
        shutil.rmtree(old, ignore_errors=True)
    result.update(info)
    result["warnings"] = info["warnings"]
    return result
