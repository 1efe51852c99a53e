# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Model versions side by side under one stable name.

Layout in the models directory:
    <name>            -> symlink to <name>@<version> (the stable path the plan and the unit use)
    <name>@<version>  one directory per imported version (airgap.vllm.model_import)
    .<name>.history.json  activation order, oldest first
The service mounts <name>; Docker resolves the link when the container starts, so a running container
keeps its version until the restart that brings the next one, and a rollback switches the link back.
A models directory of the older layout (<name> a real directory) is migrated by renaming it to a
version directory: no copy, and a running container keeps reading it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shutil

from ansible_collections.airgap.vllm.plugins.module_utils.common._files import write_atomic
from ansible_collections.airgap.vllm.plugins.module_utils.common._ownership import owned_path_problem
from ansible_collections.airgap.vllm.plugins.module_utils.common._versions import prunable, record_activation

STAMP = ".airgap-vllm-model.json"  # written by model_import
VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")


class ModelVersionError(Exception):
    pass


def version_id(version, sha256):
    """Directory version of a model: the bundle's version plus a checksum prefix (two different models
    shipped under one version string never share a directory), or the checksum prefix alone."""
    sha = (sha256 or "").lower()
    if not re.match(r"^[0-9a-f]{64}$", sha):
        raise ModelVersionError("sha256 %r is not a 64-hex-digit checksum" % (sha256,))
    version = (version or "").strip()
    vid = "%s-%s" % (version, sha[:8]) if version else sha[:12]
    if not VERSION_RE.match(vid):
        raise ModelVersionError(
            "model version %r: use letters, digits and . _ + - (at most 55 characters)" % (version,)
        )
    return vid


def _check_name(name):
    if not NAME_RE.match(name or "") or "@" in name:
        raise ModelVersionError("model name %r: use letters, digits and . _ + - only" % (name,))


def version_dir(models_dir, name, vid):
    return os.path.join(models_dir, "%s@%s" % (name, vid))


def history_path(models_dir, name):
    return os.path.join(models_dir, ".%s.history.json" % name)


def read_history_report(models_dir, name):
    """(history, problem): the activation order, oldest first, and None; or ([], why it cannot be used) when
    the history file is damaged (unreadable, not JSON, not a list of version names). A missing file is an
    empty history, not a problem (nothing was activated yet)."""
    path = history_path(models_dir, name)
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read().decode("utf-8"))
    except (IOError, OSError) as exc:
        if getattr(exc, "errno", None) == 2:
            return [], None
        return [], "cannot read %s: %s" % (path, exc)
    except (ValueError, UnicodeDecodeError) as exc:
        return [], "%s is damaged (%s)" % (path, exc)
    if not isinstance(data, list) or not all(isinstance(v, str) for v in data):
        return [], "%s is damaged: not a list of version names" % path
    return data, None


def present_versions(models_dir, name):
    prefix = name + "@"
    try:
        entries = os.listdir(models_dir)
    except (IOError, OSError):
        return []
    return sorted(
        e[len(prefix) :]
        for e in entries
        if e.startswith(prefix)
        and os.path.isdir(os.path.join(models_dir, e))
        and not os.path.islink(os.path.join(models_dir, e))
    )


def current_version(models_dir, name):
    """The version the stable name points at (None: no link yet; "" : a directory of the older layout)."""
    link = os.path.join(models_dir, name)
    if os.path.islink(link):
        target = os.readlink(link)
        base = os.path.basename(target.rstrip("/"))
        return base[len(name) + 1 :] if base.startswith(name + "@") else None
    return "" if os.path.isdir(link) else None


def _stamp_sha(path):
    try:
        with open(os.path.join(path, STAMP)) as f:
            return (json.load(f) or {}).get("sha256") or ""
    except (IOError, OSError, ValueError, AttributeError):
        return ""


def _point(models_dir, name, vid):
    link = os.path.join(models_dir, name)
    tmp = os.path.join(models_dir, ".%s.link-tmp" % name)
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink("%s@%s" % (name, vid), tmp)  # relative: the models directory may be moved or mounted elsewhere
    os.rename(tmp, link)  # atomic replacement of the old link


def prepare(models_dir, name, vid, sha256, check_mode=False):
    """Migrate a models directory of the older layout. Returns (changed, message)."""
    _check_name(name)
    link = os.path.join(models_dir, name)
    if os.path.islink(link) or not os.path.lexists(link):
        return False, ""
    if not os.path.isdir(link):
        raise ModelVersionError("%s is neither a directory nor a link: move it away first" % link)
    old_sha = _stamp_sha(link)
    old_vid = (
        vid if old_sha and old_sha == (sha256 or "").lower() else ("legacy-" + old_sha[:12] if old_sha else "legacy")
    )
    dest = version_dir(models_dir, name, old_vid)
    if os.path.lexists(dest):
        raise ModelVersionError("cannot migrate %s: %s exists already" % (link, dest))
    if not check_mode:
        os.rename(link, dest)
        _point(models_dir, name, old_vid)
        history, problem = read_history_report(models_dir, name)
        if problem is None:  # a damaged history stays as it is (activate keeps every version while it is)
            _write_history(models_dir, name, record_activation(history, old_vid))
    return True, "moved %s to %s and made %s a link to it" % (link, dest, name)


def _write_history(models_dir, name, history):
    write_atomic(history_path(models_dir, name), json.dumps(history), mode=0o644)


def owned_versions(models_dir, name, present):
    """(ours, held): the versions retention may act on - a version directory that model_import stamped
    (STAMP), named by the version rule, lying below models_dir - and [why] each other one is kept."""
    ours, held = [], []
    for v in present:
        path = version_dir(models_dir, name, v)
        problem = None if VERSION_RE.match(v) else "version %r is not a version name" % v
        problem = problem or owned_path_problem(path, [models_dir])
        if problem is None and not os.path.isfile(os.path.join(path, STAMP)):
            problem = "%s carries no %s (not imported by airgap.vllm.model_import)" % (path, STAMP)
        if problem:
            held.append("kept %s: %s" % (path, problem))
        else:
            ours.append(v)
    return ours, held


def activate(models_dir, name, vid, keep, protect=(), check_mode=False):
    """Point <name> at <name>@<vid> and remove versions beyond the retention. Returns a result dict.

    Fails safe: with a damaged history nothing is removed (which versions were active before is unknown) and
    the history is left as it is for the operator; versions that are not ours (no stamp of model_import, a
    name that is not a version, a path outside models_dir) are never removed. RV 'held' says why.
    """
    _check_name(name)
    target = version_dir(models_dir, name, vid)
    if not os.path.isdir(target) and not check_mode:
        raise ModelVersionError("%s does not exist: import the model version first" % target)
    link = os.path.join(models_dir, name)
    if os.path.lexists(link) and not os.path.islink(link):
        raise ModelVersionError("%s is a directory of the older layout: prepare (migrate) it first" % link)
    replaced = current_version(models_dir, name)
    history, damaged = read_history_report(models_dir, name)
    new_history = history if damaged else record_activation(history, vid)
    present = present_versions(models_dir, name)
    if vid not in present:
        present.append(vid)
    if damaged:
        remove = []
        held = [
            "nothing removed: %s; which versions were active before is unknown, so every version is kept "
            "(fix or remove the file; the next activation then records a new history)" % damaged
        ]
    else:
        remove, held = owned_versions(
            models_dir, name, prunable(present, new_history, vid, keep, replaced=replaced, protect=protect)
        )
    switch = replaced != vid
    changed = switch or bool(remove) or new_history != history
    if not check_mode:
        if switch:
            _point(models_dir, name, vid)
        if new_history != history:
            _write_history(models_dir, name, new_history)
        for v in remove:
            shutil.rmtree(version_dir(models_dir, name, v))
    return dict(
        changed=changed,
        version=vid,
        previous=replaced or "",
        switched=switch,
        removed=remove,
        versions=sorted(set(present) - set(remove)),
        dir=link,
        version_dir=target,
        held=held,
    )


def in_place(models_dir, name, vid, sha256, keep):
    """Whether nothing is left to do for this version: it is imported (its stamp carries `sha256`), the name
    points at it, and activating it again would change nothing even with no version protected (protecting
    versions only keeps more, so the real activation with its protect list changes nothing either).
    A damaged history is never in place: the activation then runs and warns (held) on every run until the
    operator fixes it, instead of a converged run hiding that retention keeps every version."""
    _check_name(name)
    if current_version(models_dir, name) != vid:
        return False
    if read_history_report(models_dir, name)[1]:
        return False
    if _stamp_sha(version_dir(models_dir, name, vid)) != (sha256 or "").lower():
        return False
    return not activate(models_dir, name, vid, keep, (), check_mode=True)["changed"]
