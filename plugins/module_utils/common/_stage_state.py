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
import time

from ansible_collections.airgap.vllm.plugins.module_utils.common._files import write_atomic
from ansible_collections.airgap.vllm.plugins.module_utils.common._names import SERVICE_NAME_RE, service_name_problem

DEFAULT_DIR = "/var/lib/airgap-vllm/state"
STAGE_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
# A service name is a systemd unit and a container name: the collection's one rule (_names); INSTANCE_RE is
# its pattern (kept for the readers that import it), service_name_problem also refuses the host's own units.
INSTANCE_RE = SERVICE_NAME_RE
DEFAULT_INSTANCE = "vllm"
# instance="*" with state=absent: every service's record of a stage (uninstall needs no service name).
EVERY_INSTANCE = "*"
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
    problem = service_name_problem(instance)
    if problem:
        raise StageStateError("service name: %s" % problem)
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


# A damaged record set aside by remove_stage: <stage>[@<service>].json.damaged-<UTC time>.
SET_ASIDE_RE = re.compile(r"^(.+)\.json\.damaged-[0-9TZ]+$")


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
        raise StageStateError(
            "%s holds %s, not a mapping: remove it and run that stage again" % (path, type(data).__name__)
        )
    return data


def _list(directory):
    """Sorted names in directory, [] when it does not exist."""
    try:
        return sorted(os.listdir(directory))
    except (IOError, OSError) as exc:
        if getattr(exc, "errno", None) == 2:
            return []
        raise StageStateError("cannot list %s: %s" % (directory, exc))


def read_each(directory):
    """(stages, damaged): every record read on its own, so one damaged file hides nothing else.

    stages: {key: data} of the records that read well (the key is the stage, or <stage>@<service> for a
    service other than the default one). damaged: [{'path', 'stage', 'instance', 'reason'}] of each record
    that cannot be used - unreadable, not JSON, not a mapping, or named for a service name the collection
    refuses (e.g. a host unit such as docker) - and of each one set aside earlier (remove_stage), its
    'set_aside' true. stage and instance come from the file name: a damaged service record still says which
    service it was for. Nothing is changed here.
    """
    stages, damaged = {}, []
    for name in _list(directory):
        path = os.path.join(directory, name)
        aside = SET_ASIDE_RE.match(name)
        key, ext = (aside.group(1), ".json") if aside else os.path.splitext(name)
        if ext != ".json":
            continue
        parsed = split_key(key)
        if parsed is None:
            stage, sep, instance = key.partition("@")
            if sep and STAGE_RE.match(stage) and SERVICE_NAME_RE.match(instance) and instance != DEFAULT_INSTANCE:
                damaged.append(
                    dict(
                        path=path,
                        stage=stage,
                        instance=None,
                        set_aside=bool(aside),
                        reason="%s: recorded for %s" % (path, service_name_problem(instance)),
                    )
                )
            continue
        if aside:
            damaged.append(
                dict(
                    path=path,
                    stage=parsed[0],
                    instance=parsed[1],
                    set_aside=True,
                    reason="%s was set aside as damaged by an earlier run" % path,
                )
            )
            continue
        problem = service_name_problem(parsed[1])
        if problem:
            damaged.append(
                dict(
                    path=path,
                    stage=parsed[0],
                    instance=None,
                    set_aside=False,
                    reason="%s: recorded for %s" % (path, problem),
                )
            )
            continue
        try:
            stages[key] = read_stage(directory, *parsed)
        except StageStateError as exc:
            damaged.append(dict(path=path, stage=parsed[0], instance=parsed[1], set_aside=False, reason=str(exc)))
    return stages, damaged


def read_all(directory):
    """{key: data} for every state file in directory ({} when the directory does not exist); the key is the
    stage, or <stage>@<service> for a service other than the default one. A damaged record is an error
    naming every damaged one (read_each reads the others anyway)."""
    stages, damaged = read_each(directory)
    if damaged:
        raise StageStateError("; ".join(d["reason"] for d in damaged))
    return stages


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


def set_aside_name(path, now=None):
    """Where remove_stage moves a damaged record: <file>.damaged-<UTC time>."""
    return "%s.damaged-%s" % (path, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now)))


def remove_stage(directory, stage, check_mode=False, instance=None):
    """Forget the stage's state (uninstall). Returns (changed, before_text, set_aside).

    A damaged record is not deleted: it is renamed to <file>.damaged-<UTC time> (set_aside: that path; in
    check mode the path it would get), so what it may still say is kept for the operator and read_each names
    it on every later read until the operator removes it.
    """
    path = os.path.join(directory, stage_key(stage, instance) + ".json")
    if not os.path.lexists(path):
        return False, "", None
    with open(path, "rb") as f:
        raw = f.read()
    before = raw.decode("utf-8", "replace")
    try:
        intact = isinstance(json.loads(raw.decode("utf-8")), dict)
    except (ValueError, UnicodeDecodeError):
        intact = False
    aside = None if intact else set_aside_name(path)
    if not check_mode:
        if aside:
            os.rename(path, aside)
        else:
            os.unlink(path)
    return True, before, aside


def remove_every_instance(directory, stage, check_mode=False):
    """Forget every service's record of the stage: <stage>.json and each <stage>@<service>.json (uninstall).
    Returns (changed, {path: before_text}, {path: set_aside path}) of the files removed (or that would be, in
    check mode); a damaged record is set aside, not deleted (remove_stage). Records named for a service name
    the collection refuses are left alone (read_each names them)."""
    check_stage(stage)
    removed, aside = {}, {}
    for name in _list(directory):
        key, ext = os.path.splitext(name)
        parsed = split_key(key) if ext == ".json" else None
        if parsed and parsed[0] == stage and service_name_problem(parsed[1]) is None:
            changed, before, moved = remove_stage(directory, stage, check_mode, instance=parsed[1])
            if changed:
                removed[os.path.join(directory, name)] = before
                if moved:
                    aside[os.path.join(directory, name)] = moved
    return bool(removed), removed, aside
