# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-stage state files on the host: what each stage did, for the stages that run without it.

Every role writes <dir>/<stage>.json at its end (what a later stage needs: the staged bundle, the model
pointer, the plan, the image ID the unit runs). A playbook that runs one stage by tag (`--tags service`)
reads them back instead of relying on facts of stages that did not run in this play.

Stages that exist once per vLLM service of a host (plan, service) record one file per service:
<stage>@<service>.json; the default service (DEFAULT_INSTANCE, the vllm_service_name default) keeps the
plain <stage>.json it always had, so a host set up before several services existed reads the same.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

from ansible_collections.airgap.vllm.plugins.module_utils._files import write_atomic

DEFAULT_DIR = "/var/lib/airgap-vllm/state"
STAGE_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
# A service name is a systemd unit and a container name: letters, digits, '-', '_', '.'.
INSTANCE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
DEFAULT_INSTANCE = "vllm"
# Written for root, read by root: the plan holds no secret, but nothing here is for other users.
FILE_MODE = 0o640
DIR_MODE = 0o750


class StageStateError(Exception):
    """A stage name, a directory or a state file that cannot be used."""


def check_stage(stage):
    if not isinstance(stage, str) or not STAGE_RE.match(stage):
        raise StageStateError("stage %r: use a lowercase name of letters, digits and _ (e.g. model, image)" % (stage,))
    return stage


def check_instance(instance):
    if not isinstance(instance, str) or not INSTANCE_RE.match(instance):
        raise StageStateError("service name %r: use letters, digits, '-', '_' and '.', starting with a letter or "
                              "digit (at most 63 characters)" % (instance,))
    return instance


def stage_key(stage, instance=None):
    """The file name (without .json) a stage of a service records in."""
    check_stage(stage)
    if instance is None or instance == DEFAULT_INSTANCE:
        return stage
    return "%s@%s" % (stage, check_instance(instance))


def split_key(key):
    """(stage, instance) of a file name without .json; None when it is not a state file's name."""
    stage, sep, instance = key.partition("@")
    if not STAGE_RE.match(stage):
        return None
    if not sep:
        return stage, DEFAULT_INSTANCE
    if not INSTANCE_RE.match(instance) or instance == DEFAULT_INSTANCE:
        return None
    return stage, instance


def render(data):
    """The exact bytes a state file holds: sorted keys, so an unchanged state compares equal."""
    try:
        return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    except (TypeError, ValueError) as exc:
        raise StageStateError("state data cannot be stored as JSON: %s" % exc)


def read_stage(directory, stage, instance=None):
    """The stage's data, or None when it never wrote any. A damaged file is an error naming it."""
    path = os.path.join(directory, stage_key(stage, instance) + ".json")
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
    """{key: data} for every state file in directory ({} when the directory does not exist); the key is the
    stage, or <stage>@<service> for a service other than the default one."""
    try:
        names = sorted(os.listdir(directory))
    except (IOError, OSError) as exc:
        if getattr(exc, "errno", None) == 2:
            return {}
        raise StageStateError("cannot list %s: %s" % (directory, exc))
    out = {}
    for name in names:
        key, ext = os.path.splitext(name)
        parsed = split_key(key) if ext == ".json" else None
        if parsed:
            out[key] = read_stage(directory, *parsed)
    return out


def by_instance(stages):
    """{stage: {service: data}} of read_all's answer: every service's record of each stage."""
    out = {}
    for key in sorted(stages):
        parsed = split_key(key)
        if parsed:
            out.setdefault(parsed[0], {})[parsed[1]] = stages[key]
    return out


def published_facts(stages):
    """The facts the stages publish ({fact: value}), from each stage's "facts" mapping. Only the default
    service's records publish: another service's plan is its own (read through by_instance)."""
    out = {}
    for stage in sorted(stages):
        if "@" in stage:
            continue
        facts = (stages[stage] or {}).get("facts") or {}
        if isinstance(facts, dict):
            out.update(facts)
    return out


def write_stage(directory, stage, data, check_mode=False, instance=None):
    """Store data as the stage's state. Returns (changed, before_text, after_text)."""
    path = os.path.join(directory, stage_key(stage, instance) + ".json")
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


def remove_stage(directory, stage, check_mode=False, instance=None):
    """Forget the stage's state (uninstall). Returns (changed, before_text)."""
    path = os.path.join(directory, stage_key(stage, instance) + ".json")
    if not os.path.exists(path):
        return False, ""
    with open(path, "rb") as f:
        before = f.read().decode("utf-8", "replace")
    if not check_mode:
        os.unlink(path)
    return True, before
