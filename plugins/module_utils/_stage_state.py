# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-stage state files on the host: what each stage did, for the stages that run without it.

Every role writes <dir>/<stage>.json at its end (what a later stage needs: the staged bundle, the model
pointer, the plan, the image ID the unit runs). A playbook that runs one stage by tag (`--tags service`)
reads them back instead of relying on facts of stages that did not run in this play.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

from ansible_collections.airgap.vllm.plugins.module_utils._files import write_atomic

DEFAULT_DIR = "/var/lib/airgap-vllm/state"
STAGE_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
# Written for root, read by root: the plan holds no secret, but nothing here is for other users.
FILE_MODE = 0o640
DIR_MODE = 0o750


class StageStateError(Exception):
    """A stage name, a directory or a state file that cannot be used."""


def check_stage(stage):
    if not isinstance(stage, str) or not STAGE_RE.match(stage):
        raise StageStateError("stage %r: use a lowercase name of letters, digits and _ (e.g. model, image)" % (stage,))
    return stage


def render(data):
    """The exact bytes a state file holds: sorted keys, so an unchanged state compares equal."""
    try:
        return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    except (TypeError, ValueError) as exc:
        raise StageStateError("state data cannot be stored as JSON: %s" % exc)


def read_stage(directory, stage):
    """The stage's data, or None when it never wrote any. A damaged file is an error naming it."""
    path = os.path.join(directory, check_stage(stage) + ".json")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except (IOError, OSError) as exc:
        if getattr(exc, "errno", None) == 2:
            return None
        raise StageStateError("cannot read %s: %s" % (path, exc))
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise StageStateError("%s is damaged (%s): remove it and run that stage again" % (path, exc))
    if not isinstance(data, dict):
        raise StageStateError("%s holds %s, not a mapping: remove it and run that stage again"
                              % (path, type(data).__name__))
    return data


def read_all(directory):
    """{stage: data} for every state file in directory ({} when the directory does not exist)."""
    try:
        names = sorted(os.listdir(directory))
    except (IOError, OSError) as exc:
        if getattr(exc, "errno", None) == 2:
            return {}
        raise StageStateError("cannot list %s: %s" % (directory, exc))
    out = {}
    for name in names:
        stage, ext = os.path.splitext(name)
        if ext == ".json" and STAGE_RE.match(stage):
            out[stage] = read_stage(directory, stage)
    return out


def published_facts(stages):
    """The facts the stages publish ({fact: value}), from each stage's "facts" mapping."""
    out = {}
    for stage in sorted(stages):
        facts = (stages[stage] or {}).get("facts") or {}
        if isinstance(facts, dict):
            out.update(facts)
    return out


def write_stage(directory, stage, data, check_mode=False):
    """Store data as the stage's state. Returns (changed, before_text, after_text)."""
    path = os.path.join(directory, check_stage(stage) + ".json")
    after = render(data)
    try:
        with open(path, "rb") as f:
            before = f.read().decode("utf-8", "replace")
    except (IOError, OSError):
        before = ""
    if before == after:
        return False, before, after
    if not check_mode:
        try:
            write_atomic(path, after, mode=FILE_MODE, makedirs=DIR_MODE)
        except (IOError, OSError) as exc:
            raise StageStateError("cannot write %s: %s" % (path, exc))
    return True, before, after


def remove_stage(directory, stage, check_mode=False):
    """Forget the stage's state (uninstall). Returns (changed, before_text)."""
    path = os.path.join(directory, check_stage(stage) + ".json")
    if not os.path.exists(path):
        return False, ""
    with open(path, "rb") as f:
        before = f.read().decode("utf-8", "replace")
    if not check_mode:
        os.unlink(path)
    return True, before
