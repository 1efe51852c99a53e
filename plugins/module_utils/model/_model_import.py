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
  and every shard it names, tokenizer, chat template (not for a pooling model: _plan_pooling.files_pooling_task),
  processor config), naming the missing file.
- Hostile sources: a directory source never has a symlink followed out of it, a device, FIFO or socket
  is refused, and a file that is not world-readable in the source is imported 0640, never 0644.
  The given sha256 is checked against the source (the archive's bytes; for a directory the bundle's
  digest of its files' "sha256  path" lines) before anything is swapped in.
- Never losing the only good copy: the swap is rename(dest -> .replaced), rename(.importing -> dest).
  A run killed between the two leaves no model under its name: the next run first puts
  `.replaced` back. A model directory that is itself a symlink is imported at the link's target.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import shutil
import stat
import tarfile
import zlib

from ansible_collections.airgap.vllm.plugins.module_utils.common import _disk_space, _files
from ansible_collections.airgap.vllm.plugins.module_utils.model import _model_dir
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_pooling

STAMP = ".airgap-vllm-model.json"
INDEX = _model_dir.INDEX
# Headroom on top of the model's own size: filesystem metadata, the stamp, a margin for rounding.
SPACE_MARGIN = 64 * 1024 * 1024


# One reader of the model directory for import and planner (config.json, index, safetensors headers).
ModelError = _model_dir.ModelDirError
_load_json = _model_dir.load_json


def validate_model_dir(path, language_model_only=False):
    """Return {'warnings': [...], 'shards': n, 'total_size': bytes or None, 'model_type', 'architectures'};
    raise ModelError naming the missing piece. The weights are read by _model_dir (the planner's reader too);
    this adds what an offline start needs besides them."""
    model = _model_dir.read_model_dir(path, verify_shards=True)
    config = model["config"]
    if not model["shards"]:
        raise ModelError("%s: neither %s nor any .safetensors file found" % (path, INDEX))
    warnings = []
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if not os.path.isfile(os.path.join(path, name)):
            raise ModelError("%s: %s missing (needed for an offline start)" % (path, name))
    tok_cfg = _load_json(os.path.join(path, "tokenizer_config.json"), "tokenizer_config.json")
    # An embedding model or a cross-encoder (by its own files: _plan_pooling) answers embeddings and scores, never
    # a chat: it has no chat template (bge-m3, bge-reranker-v2-m3 ship none) and no generation settings.
    try:
        pooling = _plan_pooling.files_pooling_task(config, _plan_pooling.read_sentence_transformers(path))
    except _plan_pooling.ModelConfigError as exc:
        raise ModelError("%s: %s" % (path, exc))
    if (
        pooling is None
        and not os.path.isfile(os.path.join(path, "chat_template.jinja"))
        and not (isinstance(tok_cfg, dict) and tok_cfg.get("chat_template"))
    ):
        raise ModelError(
            "%s: no chat template (chat_template.jinja or tokenizer_config.json chat_template): "
            "every chat request would fail" % path
        )
    # Only a multimodal checkpoint (a vision tower in config.json) needs the image processor's config.
    archs = config.get("architectures") or []
    if not isinstance(archs, list):
        archs = [archs]
    multimodal = any(k in config for k in ("vision_config", "visual", "vision_tower")) or any(
        str(a).endswith("ForConditionalGeneration") for a in archs
    )
    if multimodal and not language_model_only and not os.path.isfile(os.path.join(path, "preprocessor_config.json")):
        raise ModelError(
            "%s: preprocessor_config.json missing; vLLM fails 'Can't load image processor' "
            "unless started with --language-model-only" % path
        )
    # An FP8 block checkpoint whose skip list names unquantised layers by short names: vLLM quantises them and
    # fails at start (issue 43, _model_fp8).
    problem = _model_dir.fp8_skip_list_problem(path, config, model["index"], model["shards"], language_model_only)
    if problem:
        raise ModelError("%s: %s" % (path, problem))
    if pooling is None and not os.path.isfile(os.path.join(path, "generation_config.json")):
        warnings.append("%s: generation_config.json missing: vLLM's sampling defaults replace the model's" % path)
    total = model["index"]["total_size"] if model["index"] is not None else None
    return {
        "warnings": warnings,
        "shards": len(model["shards"]),
        "total_size": total,
        "model_type": config.get("model_type"),
        "architectures": [str(a) for a in archs],
        "pooling_task": pooling,
    }


def read_stamp(dest):
    try:
        with open(os.path.join(dest, STAMP), "rb") as f:
            data = json.loads(f.read().decode("utf-8"))
    except (IOError, OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None  # a stamp of another shape: import again


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
            raise ModelError(
                "%s: member %r is a link or device; only files and directories are accepted" % (src, m.name)
            )
        m.name = norm
        tops.add(norm.split("/", 1)[0])
        members.append(m)
        total += m.size if m.isfile() else 0
    # tarfile stops quietly at a truncated header or member: a complete archive ends with two zero blocks.
    tar.fileobj.seek(tar.offset)
    if tar.fileobj.read(1024) != b"\0" * 1024:
        raise ModelError(
            "%s: not a readable tar archive (it ends before its end-of-archive marker, after %d "
            "members): it is truncated or corrupt; stage the bundle again (bundle_verify names a "
            "damaged file)" % (src, len(members))
        )
    strip = None
    if len(tops) == 1:
        top = tops.pop()
        if any(m.name == top and m.isdir() for m in members) or all(m.name.startswith(top + "/") for m in members):
            if not any(m.name == top and m.isfile() for m in members):
                strip = top + "/"
    return members, strip, total


_BAD_ARCHIVE = (tarfile.TarError, EOFError, zlib.error, OSError, ValueError)


def _bad_archive(src, exc):
    return ModelError(
        "%s: not a readable tar archive (%s: %s): it is truncated or corrupt; stage the bundle "
        "again (bundle_verify names a damaged file)" % (src, type(exc).__name__, " ".join(str(exc).split()))
    )


def _inside(real_root, real):
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def scan_dir(src):
    """Every file of a directory source: list of (rel, path to read, size, private).

    Symlinks are followed only when they stay inside the source; a link out of it, a link to a
    directory, a device, FIFO or socket raises ModelError naming it.
    """
    real_root = os.path.realpath(src)
    out = []
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        for name in list(dirnames):
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                raise ModelError(
                    "%s is a symlink to a directory (%s); copy the model into a plain directory "
                    "first (cp -rL) or import its tar" % (path, os.readlink(path))
                )
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, src)
            read = path
            if os.path.islink(path):
                real = os.path.realpath(path)
                if not _inside(real_root, real):
                    raise ModelError(
                        "%s is a symlink to %s, outside the model source %s: refusing to follow "
                        "it; copy the model into a plain directory first (cp -rL) or import its "
                        "tar" % (path, real, src)
                    )
                read = real
            try:
                st = os.stat(read)
            except OSError:
                raise ModelError("%s is a dangling symlink; fix or remove it in the model source" % path)
            if stat.S_ISDIR(st.st_mode):
                raise ModelError(
                    "%s is a symlink to a directory; copy the model into a plain directory first (cp -rL)" % path
                )
            if not stat.S_ISREG(st.st_mode):
                raise ModelError(
                    "%s is a device, FIFO or socket, not a regular file: only files and directories "
                    "are imported; remove it from the model source" % path
                )
            out.append((rel, read, st.st_size, not st.st_mode & stat.S_IROTH))
    return out


def source_size(src):
    if os.path.isdir(src):
        return sum(item[2] for item in scan_dir(src))
    try:
        with tarfile.open(src, "r:*") as tar:
            return _safe_members(tar, src)[2]
    except ModelError:
        raise
    except _BAD_ARCHIVE as exc:
        raise _bad_archive(src, exc)


def file_sha256(path, bufsize=8 * 1024 * 1024):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            block = f.read(bufsize)
            if not block:
                break
            h.update(block)
    return h.hexdigest()


def directory_digests(src, lines):
    """The digests a directory source may carry: the bundle's (paths as staged, `<parent>/<dir>/<rel>`)
    and the plain one (paths relative to the directory). `lines` is [(rel, sha256)]."""
    prefix = "%s/%s/" % (
        os.path.basename(os.path.dirname(os.path.abspath(src))),
        os.path.basename(os.path.abspath(src)),
    )
    out = []
    for pre in (prefix, ""):
        body = ["%s  %s%s" % (sha, pre, rel.replace(os.sep, "/")) for rel, sha in lines]
        # Jinja's `sort` (the bundle role's) ignores case; Python's does not: they differ only for two
        # files with the same content whose names differ in case. Accept either order.
        for text in ("\n".join(sorted(body)), "\n".join(sorted(body, key=lambda x: x.lower()))):
            digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
            if digest not in out:
                out.append(digest)
    return out


def free_bytes(path):
    return _disk_space.free_bytes(path)


def _extract(src, tmp):
    """Extract; returns the set of relative paths that were private (not world-readable) in the archive."""
    try:
        return _extract_members(src, tmp)
    except ModelError:
        raise
    except (tarfile.TarError, EOFError, zlib.error) as exc:
        raise _bad_archive(src, exc)


def _extract_members(src, tmp):
    private = set()
    with tarfile.open(src, "r:*") as tar:
        members, strip = _safe_members(tar, src)[:2]
        for m in members:
            rel = m.name[len(strip) :] if strip and m.name.startswith(strip) else m.name
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
            if not m.mode & stat.S_IROTH:
                private.add(os.path.normpath(rel))
    return private


def _copy_tree(src, tmp):
    """Copy a directory source (see scan_dir); returns ([(rel, sha256)], set of private rels)."""
    lines, private = [], set()
    for rel, read, _size, is_private in scan_dir(src):
        out = os.path.join(tmp, rel)
        parent = os.path.dirname(out)
        if not os.path.isdir(parent):
            os.makedirs(parent)
        h = hashlib.sha256()
        # O_NOFOLLOW on the path we open: a link swapped in after the scan is not followed.
        fd = os.open(read, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as r, open(out, "wb") as w:
            if not stat.S_ISREG(os.fstat(r.fileno()).st_mode):
                raise ModelError("%s is not a regular file" % read)
            while True:
                block = r.read(8 * 1024 * 1024)
                if not block:
                    break
                h.update(block)
                w.write(block)
        lines.append((rel, h.hexdigest()))
        if is_private:
            private.add(os.path.normpath(rel))
    return lines, private


def _set_perms(root, uid, gid, private=()):
    """Directories 0755, files 0644 (the container user must read every file); a file that was private
    in the source (not world-readable) gets 0640: readable through the group, never by everyone."""
    for dirpath, dirnames, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        if uid is not None or gid is not None:
            os.chown(dirpath, -1 if uid is None else uid, -1 if gid is None else gid)
        for name in filenames:
            p = os.path.join(dirpath, name)
            os.chmod(p, 0o640 if os.path.relpath(p, root) in private else 0o644)
            if uid is not None or gid is not None:
                os.chown(p, -1 if uid is None else uid, -1 if gid is None else gid)


def recover(models_dir, name):
    """Finish or undo a swap a killed run left behind; returns a note, or None when nothing was pending.

    `.NAME.replaced` without NAME: the run died between its two renames; the previous model is put
    back. `.NAME.replaced` next to NAME: the run died after the swap; the old copy is dropped.
    `.NAME.importing`: an unfinished extraction; dropped.
    """
    dest = os.path.join(models_dir, name)
    tmp = os.path.join(models_dir, ".%s.importing" % name)
    old = os.path.join(models_dir, ".%s.replaced" % name)
    note = None
    if os.path.lexists(old):
        if not os.path.lexists(dest):
            os.rename(old, dest)
            note = "a run killed mid-swap left %s without its model; the previous model was put back" % dest
        else:
            _files.remove_tree(old)
    if os.path.lexists(tmp):
        _files.remove_tree(tmp)
    return note


def _resolve_dest(models_dir, name):
    """(directory holding the model, its name): a model directory that is a symlink is imported at its target."""
    dest = os.path.join(models_dir, name)
    if os.path.islink(dest):
        real = os.path.realpath(dest)
        return os.path.dirname(real), os.path.basename(real)
    return models_dir, name


def import_model(
    src, models_dir, name, sha256, uid=None, gid=None, language_model_only=False, check_mode=False, force=False
):
    """Put src (archive or directory) at models_dir/name unless the stamp says it is already there."""
    if "/" in name or name in ("", ".", "..") or name.startswith("."):
        raise ModelError("model name %r must be a plain directory name" % name)
    link = os.path.join(models_dir, name)
    result = {"changed": False, "path": link, "sha256": sha256, "warnings": []}
    if not check_mode and os.path.isdir(models_dir):
        note = recover(models_dir, name)
        if note:
            result["warnings"].append(note)
    models_dir, name = _resolve_dest(models_dir, name)
    dest = os.path.join(models_dir, name)
    if not check_mode and os.path.isdir(models_dir) and (models_dir, name) != os.path.split(link):
        note = recover(models_dir, name)
        if note:
            result["warnings"].append(note)
    stamp = read_stamp(dest)
    if stamp and stamp.get("sha256") == sha256 and not force:
        info = validate_model_dir(dest, language_model_only)
        notes = result["warnings"]
        result.update(info)
        result["warnings"] = notes + info["warnings"]
        result["imported"] = False
        return result
    if not os.path.exists(src):
        if check_mode:
            # A check run before the bundle is staged: the real run stages it first.
            result.update(
                changed=True, imported=True, warnings=["%s does not exist yet; a real run would import it" % src]
            )
            return result
        raise ModelError("model source %s not found" % src)
    needed = source_size(src)
    result.update(changed=True, imported=True, bytes=needed)
    if check_mode:
        return result
    if not os.path.isdir(models_dir):
        os.makedirs(models_dir, 0o755)
    kept = ("the model in %s is untouched" % dest) if os.path.lexists(dest) else ""
    short = _disk_space.shortfall(models_dir, free_bytes(models_dir), needed, SPACE_MARGIN, "the model", kept)
    if short:
        raise ModelError(short)
    is_dir = os.path.isdir(src)
    if not is_dir:
        got = file_sha256(src)
        if got != sha256:
            raise ModelError(
                "%s: sha256 is %s, expected %s: the source is not the model the bundle names "
                "(re-stage it, or pass the right sha256); nothing was changed" % (src, got, sha256)
            )
    tmp = os.path.join(models_dir, ".%s.importing" % name)
    old = os.path.join(models_dir, ".%s.replaced" % name)
    os.makedirs(tmp, 0o700)
    try:
        if is_dir:
            lines, private = _copy_tree(src, tmp)
            if sha256 not in directory_digests(src, lines):
                raise ModelError(
                    "%s: the digest of its files is %s, expected %s: the directory is not the model "
                    "the bundle names (re-stage it, or pass the right sha256); nothing was changed"
                    % (src, directory_digests(src, lines)[0], sha256)
                )
        else:
            private = _extract(src, tmp)
        info = validate_model_dir(tmp, language_model_only)
        with open(os.path.join(tmp, STAMP), "w") as f:
            json.dump({"sha256": sha256, "source": os.path.basename(src), "name": name}, f, sort_keys=True)
        _set_perms(tmp, uid, gid, private)
    except Exception as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if _disk_space.is_disk_full(exc):
            # The disk filled during the copy (another writer took the room the check saw): the same clear words.
            raise ModelError(
                "%s: the disk filled during the import (%s): the model needs %d bytes (%s) and %d are free now; "
                "the partial copy %s was removed%s"
                % (
                    models_dir,
                    exc,
                    needed + SPACE_MARGIN,
                    _disk_space.human(needed + SPACE_MARGIN),
                    free_bytes(models_dir),
                    tmp,
                    ", " + kept if kept else "",
                )
            )
        raise
    # The swap. Killed between the two renames, the next run's recover() puts `old` back.
    if os.path.lexists(dest):
        os.rename(dest, old)
    try:
        os.rename(tmp, dest)
    except OSError:
        if os.path.lexists(old):
            os.rename(old, dest)
        raise
    if os.path.lexists(old):
        _files.remove_tree(old)
    notes = result["warnings"]
    result.update(info)
    result["warnings"] = notes + info["warnings"]
    return result
