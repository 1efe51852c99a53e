# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The value checks of the `docker run` options a service may be given: each option's decision from
_container_allowlist.py's table (allow, check, expose, role, refuse), and for a checked option the rule its value
must meet (GPUs, devices, binds and mounts under the service's own directories, networks, labels, logging, security
options, ulimits), with the opt-ins of a Context."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import posixpath
import re

from ansible_collections.airgap.vllm.plugins.module_utils.service._container_allowlist import (
    ALLOW,
    control_char,
    DOCKER_ALIASES,
    DOCKER_RUN_OPTIONS,
    DOCKER_SHORT,
    DOCKER_VAR,
    env_name_problems,
    EXPOSE,
    EXPOSE_VAR,
    EXTRA_ENV_VAR,
    OPTIONS_VAR,
    REFUSE,
    ROLE,
)


_GPU_KEYS = ("device", "count", "capabilities", "driver")
_NVIDIA_DEVICE = re.compile(r"/dev/nvidia([0-9]+|ctl|-uvm|-uvm-tools|-modeset|-caps/nvidia-cap[0-9]+)\Z")
_LOG_DRIVERS = ("json-file", "local", "journald", "syslog", "none")
_LOG_OPTS = (
    "max-size",
    "max-file",
    "compress",
    "mode",
    "max-buffer-size",
    "tag",
    "labels",
    "labels-regex",
    "syslog-facility",
    "syslog-format",
    "cache-disabled",
    "cache-max-size",
    "cache-max-file",
    "cache-compress",
)
_VOLUME_MODES = ("ro", "z", "Z", "private", "rprivate", "consistent", "cached", "delegated")
OUR_LABEL_PREFIX = "org.airgap.vllm."


class Context(object):
    """What the value checks compare with: the opt-ins and the directories a bind mount may show."""

    def __init__(self, expose=False, allow=(), mount_roots=()):
        self.expose = bool(expose)
        self.allow = set(allow or ())
        roots = mount_roots if isinstance(mount_roots, (list, tuple)) else ()
        self.mount_roots = [r for r in roots if isinstance(r, str) and r.startswith("/") and not control_char(r)]


# ---------------------------------------------------------------- docker run options


def parse_docker(options):
    """[(index, name, value, spelling)] of docker run words, read the way Docker's pflag reads them.

    ``name`` is the long name (shorthands and aliases resolved; an unknown one kept as written), ``value``
    None for a boolean given without ``=``. A word that is no option gets the name None.
    """
    out = []
    i = 0
    while i < len(options):
        word = options[i]
        if word.startswith("--") and len(word) > 2:
            spelled, eq, value = word.partition("=")
            name = DOCKER_ALIASES.get(spelled, spelled)
            spec = DOCKER_RUN_OPTIONS.get(name)
            takes_value = spec[1] if spec else not eq and i + 1 < len(options) and not options[i + 1].startswith("-")
            if not eq and takes_value:
                value = options[i + 1] if i + 1 < len(options) else None
                out.append((i, name, value, spelled))
                i += 2
                continue
            out.append((i, name, value if eq else None, spelled))
        elif word.startswith("-") and len(word) > 1 and word[1] != "-":
            start, letters = i, word[1:]
            k = 0
            while k < len(letters):
                short = "-" + letters[k]
                name = DOCKER_SHORT.get(short, short)
                spec = DOCKER_RUN_OPTIONS.get(name)
                rest = letters[k + 1 :]
                if spec is None or spec[1]:
                    if rest.startswith("="):
                        rest = rest[1:]
                    if not rest:
                        rest = options[i + 1] if i + 1 < len(options) else None
                        i += 1
                    out.append((start, name, rest, short))
                    break
                if rest.startswith("="):
                    out.append((start, name, rest[1:], short))
                    break
                out.append((start, name, None, short))
                k += 1
        else:
            out.append((i, None, word, word))
        i += 1
    return out


def _truthy(value):
    return value is None or str(value).strip().lower() in ("true", "1", "yes", "t")


def _check_cgroupns(value, _ctx):
    return None if value in ("private", "") else "%s: host shares the host's cgroup namespace" % value


def _check_device(value, _ctx):
    parts = value.split(":")
    host = parts[0]
    if not _NVIDIA_DEVICE.match(host):
        return "%s is not an NVIDIA device node: --gpus passes the GPUs, no other host device" % host
    if len(parts) > 1 and parts[1] not in ("", host) and not set(parts[1]) <= set("rwm"):
        return "%s: keep the NVIDIA node at its own path in the container" % value
    return None


def _check_env(value, _ctx):
    if "=" in value:
        return (
            "%s=... puts a value on the docker command line (visible in ps and the unit file): pass it "
            "in %s (a root-only env file)" % (value.split("=", 1)[0], EXTRA_ENV_VAR)
        )
    problems = env_name_problems(value, "the variable")
    return "; ".join(problems) if problems else None


def _check_gpus(value, _ctx):
    text = value[1:-1] if len(value) > 1 and value[0] == value[-1] == '"' else value
    if not re.match(r"[A-Za-z0-9_.:=,-]+\Z", text):
        return "%s is not a GPU request (all, a count, or device=...)" % value
    for field in text.split(","):
        key = field.split("=", 1)[0] if "=" in field else None
        if key is not None and key not in _GPU_KEYS:
            return "%s: %s= is not a GPU request field (%s)" % (value, key, ", ".join(_GPU_KEYS))
    return None


def _check_ipc(value, _ctx):
    if value in ("private", "shareable", ""):
        return None
    return (
        "%s shares another IPC namespace (the host's SysV segments and semaphores); the plan sizes a "
        "private /dev/shm" % value
    )


def _check_label(value, _ctx):
    if value.lower().startswith(OUR_LABEL_PREFIX):
        return "%s: the %s labels are the role's own (they mark what it made)" % (value, OUR_LABEL_PREFIX)
    return None


def _check_log_driver(value, _ctx):
    return None if value in _LOG_DRIVERS else "%s: keep the log on the host (%s)" % (value, ", ".join(_LOG_DRIVERS))


def _check_log_opt(value, _ctx):
    key = value.split("=", 1)[0]
    if key in _LOG_OPTS:
        return None
    if key in ("env", "env-regex"):
        return "%s copies environment values (HF_TOKEN and the like) into every log record" % key
    return "%s is not a local log setting (%s)" % (key, ", ".join(_LOG_OPTS))


def _check_bind(source, readonly, propagation, ctx, shown):
    if not source.startswith("/"):
        return "%s: a named volume; only the model or the service's config directory, read-only" % shown
    if ".." in source.split("/"):
        return "%s: '..' in the host path" % shown
    path = posixpath.normpath(source)
    roots = [posixpath.normpath(r) for r in ctx.mount_roots]
    if not any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots):
        return "%s: the host path is neither the model directory nor the service's config directory" % shown
    if not readonly:
        return "%s: mount it read-only (ro)" % shown
    if propagation and propagation not in ("private", "rprivate"):
        return "%s: %s propagation would carry mounts to the host" % (shown, propagation)
    return None


def _check_volume(value, ctx):
    parts = value.split(":")
    if len(parts) < 2:
        return "%s: an anonymous volume; only the model or the service's config directory, read-only" % value
    modes = parts[2].split(",") if len(parts) > 2 else []
    if len(parts) > 3 or any(m not in _VOLUME_MODES for m in modes):
        return "%s: mount options other than %s" % (value, ", ".join(_VOLUME_MODES))
    return _check_bind(parts[0], "ro" in modes, None, ctx, value)


def _check_mount(value, ctx):
    fields = {}
    for field in value.split(","):
        key, eq, val = field.partition("=")
        fields[key.strip().lower()] = val if eq else "true"
    kind = fields.get("type", "volume")
    if kind == "tmpfs":
        return None
    if kind != "bind":
        return "%s: type=%s; only tmpfs or a read-only bind" % (value, kind)
    source = fields.get("source", fields.get("src", ""))
    readonly = _truthy(fields.get("readonly", fields.get("ro", "false")))
    return _check_bind(source, readonly, fields.get("bind-propagation"), ctx, value)


def _check_network(value, ctx):
    if value in ("bridge", "default"):
        return None
    if value == "host":
        if ctx.expose:
            return None
        return (
            "shares the host's network: the server would listen on every host interface; remove it, "
            "or set %s: true if the server is meant to be reachable from the network" % EXPOSE_VAR
        )
    return "%s: the role publishes its port from Docker's default bridge network" % value


def _check_false_only(value, _ctx):
    return None if not _truthy(value) else "it is on"


def _check_oom_score(value, _ctx):
    try:
        number = int(value)
    except (TypeError, ValueError):
        return "%s is not a whole number" % value
    return None if 0 <= number <= 1000 else "%d: only 0 to 1000" % number


def _check_pull(value, _ctx):
    return None if value in ("never", "missing") else "%s: the host is offline (never or missing)" % value


def _check_runtime(value, _ctx):
    return None if value in ("nvidia", "runc") else "%s: only nvidia or runc" % value


def _check_security_opt(value, _ctx):
    m = re.match(r"([^=:]*)(?:[=:](.*))?\Z", value, re.S)
    key, setting = m.group(1), m.group(2) or ""
    if key == "no-new-privileges":
        return None if setting in ("", "true") else "%s: no-new-privileges is always set" % value
    if key == "seccomp":
        if setting == "unconfined":
            return None  # the planner's rule; vllm_service_seccomp decides what replaces it
        return "%s: the seccomp choice is vllm_service_seccomp (profile, unconfined or docker_default)" % value
    return "%s loosens or replaces the container's confinement" % value


def _check_ulimit(value, _ctx):
    key = value.split("=", 1)[0]
    if key in ("rtprio", "rttime", "nice"):
        return "%s lets the container's processes out-schedule the host's" % key
    return None


def _check_storage_opt(value, _ctx):
    return None if value.split("=", 1)[0] == "size" else "%s: only size=" % value


_CHECKS = {
    "--cgroupns": _check_cgroupns,
    "--device": _check_device,
    "--env": _check_env,
    "--gpus": _check_gpus,
    "--ipc": _check_ipc,
    "--label": _check_label,
    "--log-driver": _check_log_driver,
    "--log-opt": _check_log_opt,
    "--mount": _check_mount,
    "--network": _check_network,
    "--oom-kill-disable": _check_false_only,
    "--oom-score-adj": _check_oom_score,
    "--privileged": _check_false_only,
    "--pull": _check_pull,
    "--runtime": _check_runtime,
    "--security-opt": _check_security_opt,
    "--storage-opt": _check_storage_opt,
    "--ulimit": _check_ulimit,
    "--volume": _check_volume,
}


def _opt_in(name):
    return "if it is really wanted, add %s to %s" % (name, OPTIONS_VAR)


def decide_option(name, value, ctx):
    """None when the option is allowed with this value, else the reason it is refused (with the way out)."""
    spec = DOCKER_RUN_OPTIONS.get(name)
    if spec is None:
        return "is not a docker run option of Docker 20.10 (the oldest engine supported); %s" % _opt_in(name)
    decision, reason = spec[2], spec[3]
    if decision == ALLOW or name in ctx.allow:
        return None
    if spec[1] and value is None:
        return "has no value"
    if decision == ROLE:
        return "is the role's own (%s); %s" % (reason, _opt_in(name))
    if decision == REFUSE:
        return "is refused: %s; %s" % (reason, _opt_in(name))
    if decision == EXPOSE:
        if ctx.expose or (not spec[1] and not _truthy(value)):
            return None
        return "%s; remove it, or set %s: true if the server is meant to be reachable from the network" % (
            reason,
            EXPOSE_VAR,
        )
    problem = _CHECKS[name](value, ctx)
    if problem is None:
        return None
    if name == "--network" and value == "host":
        return problem
    if name == "--env":
        return problem
    return "is refused (%s): %s; %s" % (reason, problem, _opt_in(name))


def docker_option_problems(options, ctx, var=DOCKER_VAR):
    """Every refused docker run option of ``options`` (strings), one message each."""
    problems = []
    for i, name, value, spelled in parse_docker(options):
        where = "%s[%d]" % (var, i)
        if name is None:
            problems.append("%s %r is not an option: the image and the command are the service's" % (where, value))
            continue
        problem = decide_option(name, value, ctx)
        if problem:
            shown = spelled if value is None or name == "--env" else "%s %s" % (spelled, value)
            problems.append("%s %s %s" % (where, shown, problem))
    return problems
