# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ownership before every destructive step: what is ours on a host, decided in one place.

- Paths: ``owned_path_problem(path, roots)`` says why a path must not be removed, or None. A path we remove
  is resolved (the real path of its parent, plus its own name: a link itself goes, never what it points at)
  and must lie strictly below one of our roots (the configuration directory, airgap_vllm_root, the models
  directory ...), never be a root itself, and no root may be a directory of the system (``/``, ``/etc``,
  ``/var/lib`` ...). ``..`` and ``.`` are refused before anything is resolved.
- Units: a unit file is ours when it carries our marker line (``UNIT_MARKER``, written by
  roles/vllm_service/templates/vllm.service.j2) or, for units written before the marker, the description
  our template always had (``... (airgap.vllm)``). ``parse_unit`` reads the service name and configuration
  directory from it, so services can be found on the host when their state record is damaged.
- Containers: a container is ours when it carries ``CONTAINER_LABEL`` with the service's name; one that merely
  has the name is someone else's (``split_containers``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.airgap.vllm.plugins.module_utils.common._names import service_name_problem

# The label every container of a service carries (the unit's `docker run --label`), value = the service name.
CONTAINER_LABEL = "org.airgap.vllm.service"
# The marker line of our unit files: "# org.airgap.vllm.service=<name> config_dir=<dir>".
UNIT_MARKER = "# " + CONTAINER_LABEL + "="
_MARKER_RE = re.compile(r"^# org\.airgap\.vllm\.service=(\S+)(?: config_dir=(\S+))?[ \t]*$", re.M)
# Units written before the marker line: our template's description and its --env-file.
_LEGACY_DESC_RE = re.compile(r"^Description=vLLM OpenAI-compatible server .* \(airgap\.vllm\)[ \t]*$", re.M)
_ENV_FILE_RE = re.compile(r'"?--env-file"?[ \t\\\n]+"?([^"\s]+)/container\.env"?')
UNIT_DIRS = ("/etc/systemd/system",)

# Directories of the system itself: never a root of ours, whatever a setting says (a root is what we may
# remove things below; `/etc` as a root would let a name remove /etc/ssh).
SYSTEM_DIRS = frozenset(
    [
        "/",
        "/bin",
        "/boot",
        "/dev",
        "/etc",
        "/etc/systemd",
        "/home",
        "/lib",
        "/lib64",
        "/lib/systemd",
        "/media",
        "/mnt",
        "/opt",
        "/proc",
        "/root",
        "/run",
        "/run/systemd",
        "/sbin",
        "/snap",
        "/srv",
        "/sys",
        "/tmp",
        "/usr",
        "/usr/bin",
        "/usr/lib",
        "/usr/lib/systemd",
        "/usr/lib64",
        "/usr/local",
        "/usr/local/bin",
        "/usr/sbin",
        "/usr/share",
        "/var",
        "/var/cache",
        "/var/lib",
        "/var/lib/docker",
        "/var/log",
        "/var/run",
        "/var/tmp",
        "/var/spool",
        "/var/opt",
        "/var/lib/containerd",
    ]
)
_CONTROL_RE = re.compile("[\x00-\x1f\x7f]")


def _plain_path_problem(path, what):
    if not isinstance(path, str) or not path:
        return "%s %r is not a path" % (what, path)
    if _CONTROL_RE.search(path):
        return "%s %r holds a control character" % (what, path)
    if not path.startswith("/"):
        return "%s %r is not absolute" % (what, path)
    parts = [p for p in path.split("/") if p]
    if "." in parts or ".." in parts:
        return "%s %r holds '.' or '..'" % (what, path)
    return None


def resolve(path, realpath=os.path.realpath):
    """Where `path` really is: the real path of its parent plus its own name (a link is itself, not its target)."""
    path = path.rstrip("/") or "/"
    if path == "/":
        return "/"
    return os.path.join(realpath(os.path.dirname(path)), os.path.basename(path))


def root_problem(root, realpath=os.path.realpath):
    """None when `root` may be one of our roots, else why not."""
    problem = _plain_path_problem(root, "root")
    if problem:
        return problem
    real = realpath(root.rstrip("/") or "/")
    if real in SYSTEM_DIRS or root.rstrip("/") in SYSTEM_DIRS:
        return "root %s is a directory of the system, not one of ours" % root
    return None


def owned_path_problem(path, roots, realpath=os.path.realpath):
    """None when `path` may be removed (it resolves strictly below one of `roots`), else why not (one line).

    roots: our directories (settings, never a record read from the host); those that are system directories
    or not absolute do not count.
    """
    problem = _plain_path_problem(path, "path")
    if problem:
        return problem
    usable = []
    for root in roots or []:
        if root_problem(root, realpath) is None:
            usable.append(realpath(root.rstrip("/")))
    if not usable:
        return "%s: no usable root to check it against (given %s)" % (path, ", ".join(map(str, roots or [])) or "none")
    where = resolve(path, realpath)
    if where in SYSTEM_DIRS:
        return "%s is a directory of the system" % path
    if where in usable:
        return "%s is one of our roots itself, not something below it" % path
    for root in usable:
        if where.startswith(root + "/"):
            return None
    shown = where if where == path.rstrip("/") else "%s (really %s)" % (path, where)
    return "%s does not lie below any of our roots (%s)" % (shown, ", ".join(sorted(usable)))


def parse_unit(text):
    """{'service', 'config_dir', 'marked'} of a unit file of ours, None when the file is not ours.

    marked: the file carries our marker line (else it is a unit of ours written before the marker; its
    service name is then unknown here and config_dir comes from its --env-file, or None).
    """
    if not isinstance(text, str):
        return None
    m = _MARKER_RE.search(text)
    if m:
        return {"service": m.group(1), "config_dir": m.group(2), "marked": True}
    if _LEGACY_DESC_RE.search(text):
        env = _ENV_FILE_RE.search(text)
        return {"service": None, "config_dir": env.group(1) if env else None, "marked": False}
    return None


def split_containers(rows, name):
    """(ours, foreign) container IDs among `rows` ({'id', 'names', 'label'}: `docker ps -a` lines) that carry the
    name `name`: ours carry CONTAINER_LABEL=name; foreign ones merely have the name."""
    ours, foreign = [], []
    for row in rows:
        names = [n.lstrip("/") for n in (row.get("names") or "").split(",")]
        if name not in names:
            continue
        (ours if row.get("label") == name else foreign).append(row["id"])
    return ours, foreign


def parse_docker_ps(text):
    """Rows of `docker ps -a --no-trunc --format '{{.ID}}\\t{{.Names}}\\t{{.Label "org.airgap.vllm.service"}}'`."""
    rows = []
    for line in (text or "").splitlines():
        parts = line.split("\t")
        if len(parts) < 2 or not parts[0].strip():
            continue
        rows.append(
            {"id": parts[0].strip(), "names": parts[1].strip(), "label": parts[2].strip() if len(parts) > 2 else ""}
        )
    return rows


def survey(names, unit_texts, container_rows):
    """What of each service is ours on a host, and which services are found there by our marks.

    names: services to look at (state records, inventory); unit_texts: {unit path: text} of the unit files
    read; container_rows: parse_docker_ps rows, or None when Docker could not be asked.
    Returns {'services': {name: {'unit', 'unit_ours', 'unit_foreign', 'config_dir', 'containers',
    'foreign_containers'}}, 'discovered': [names found by marks], 'problems': [lines], 'notes': [lines]}.
    """
    problems, warnings, discovered = [], [], []
    units = {}
    for path in sorted(unit_texts):
        parsed = parse_unit(unit_texts[path])
        if parsed is None:
            continue
        stem = os.path.basename(path)[: -len(".service")] if path.endswith(".service") else None
        service = parsed["service"] or stem
        if service != stem:
            warnings.append("%s carries our marker for service %s, not for its own name: left alone" % (path, service))
            continue
        if service_name_problem(service):
            warnings.append("%s carries our marker but %s" % (path, service_name_problem(service)))
            continue
        units[service] = dict(parsed, unit=path)
        discovered.append(service)
    for row in container_rows or []:
        label = row.get("label") or ""
        if label and service_name_problem(label) is None and label not in discovered:
            if label in [n.lstrip("/") for n in row.get("names", "").split(",")]:
                discovered.append(label)
    wanted = []
    for name in list(names or []) + discovered:
        if name in wanted:
            continue
        problem = service_name_problem(name)
        if problem:
            problems.append(problem)
            continue
        wanted.append(name)
    services = {}
    for name in wanted:
        unit = units.get(name)
        if unit is None:
            default = os.path.join(UNIT_DIRS[0], name + ".service")
            foreign = default in unit_texts
            if foreign:
                warnings.append("%s has our service's name but not our marker: left alone (not ours)" % default)
            entry = {"unit": default, "unit_ours": False, "unit_foreign": foreign, "config_dir": None}
        else:
            entry = {"unit": unit["unit"], "unit_ours": True, "unit_foreign": False, "config_dir": unit["config_dir"]}
        if container_rows is None:
            entry.update(containers=[], foreign_containers=[])
        else:
            ours, foreign = split_containers(container_rows, name)
            entry.update(containers=ours, foreign_containers=foreign)
            for cid in foreign:
                warnings.append(
                    "container %s (%s) has our service's name but not our label %s=%s: left alone "
                    "(remove it yourself if it is a leftover of ours)" % (name, cid[:12], CONTAINER_LABEL, name)
                )
        services[name] = entry
    return {"services": services, "discovered": sorted(set(discovered)), "problems": problems, "notes": warnings}
