# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the vLLM container may be given: the one table of ``docker run`` options and environment names.

Pure, stdlib only, Python 3.7-clean. Used by the service guard (_service_guard.guard, module
airgap.vllm.vllm_service_guard) over the final docker options, environment and argv before the unit is
written, and by _plan_extras to read docker options the way Docker does. Each option's value check, against
this table, is _container_checks.py's.

- ``DOCKER_RUN_OPTIONS``: every long option of Docker 20.10's ``docker run`` (the oldest engine the
  collection supports; the unit tests parse that release's ``docker run --help`` and fail on an option
  this table does not decide), with its shorthand, whether it takes a value, the decision and the reason.
  Decisions: ``allow`` (any value), ``check`` (allowed with the values its checker accepts), ``expose``
  (only with ``vllm_service_expose_to_network``), ``role`` (the role sets it itself) and ``refuse``.
  An option not in the table (a newer Docker's) is refused too. Whatever is refused may be allowed, option
  by option, with ``vllm_service_allow_docker_options`` (the message names the option and that variable).
- Environment: names are ``[A-Z_][A-Z0-9_]*`` (no padding, no lower case: Docker's env file would trim or
  refuse them, so a padded ``VLLM_API_KEY`` could not be seen by name); key-bearing names (``API_KEY`` in
  any spelling) are refused always - the keys belong in ``vllm_service_api_keys``; other names are allowed
  when the plan sets them (``ENV_NAMES``) or they start with a prefix of ``ENV_PREFIXES`` (the software in
  the image reads them); anything else needs ``vllm_service_allow_env_names``.
- Control characters (C0, DEL, C1, U+2028/U+2029) are refused in every value that reaches the unit, a file
  or argv: a newline in an env value would start a new ``NAME=value`` line (``VLLM_API_KEY`` smuggled in).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.airgap.vllm.plugins.module_utils.service._container_options import OFFLINE_ENV

OPTIONS_VAR = "vllm_service_allow_docker_options"
ENV_VAR = "vllm_service_allow_env_names"
EXPOSE_VAR = "vllm_service_expose_to_network"
DOCKER_VAR = "vllm_service_docker_options"
EXTRA_ENV_VAR = "vllm_service_extra_env"
KEYS_VAR = "vllm_service_api_keys"

ALLOW, CHECK, EXPOSE, ROLE, REFUSE = "allow", "check", "expose", "role", "refuse"
DECISIONS = (ALLOW, CHECK, EXPOSE, ROLE, REFUSE)

_LIMIT = "a resource limit: it only restricts the container"
_NOT_NEEDED = "not needed by vLLM"

# name: (shorthand, takes a value, decision, reason). Docker 20.10's `docker run --help`, every option.
DOCKER_RUN_OPTIONS = {
    "--add-host": (None, True, REFUSE, "changes name resolution; the offline container talks to nobody"),
    "--attach": ("a", True, REFUSE, "the unit owns the container's output streams"),
    "--blkio-weight": (None, True, ALLOW, _LIMIT),
    "--blkio-weight-device": (None, True, ALLOW, _LIMIT),
    "--cap-add": (None, True, REFUSE, "adds Linux capabilities (ALL is root on the host in all but name)"),
    "--cap-drop": (None, True, ALLOW, "drops Linux capabilities: only takes away"),
    "--cgroup-parent": (None, True, REFUSE, "places the container in a host cgroup of the operator's choice"),
    "--cgroupns": (None, True, CHECK, "private only; host shares the host's cgroup namespace"),
    "--cidfile": (None, True, REFUSE, "writes a file on the host; the role names the container"),
    "--cpu-period": (None, True, ALLOW, _LIMIT),
    "--cpu-quota": (None, True, ALLOW, _LIMIT),
    "--cpu-rt-period": (None, True, REFUSE, "real-time scheduling can starve the host"),
    "--cpu-rt-runtime": (None, True, REFUSE, "real-time scheduling can starve the host"),
    "--cpu-shares": ("c", True, ALLOW, _LIMIT),
    "--cpus": (None, True, ALLOW, _LIMIT),
    "--cpuset-cpus": (None, True, ALLOW, _LIMIT),
    "--cpuset-mems": (None, True, ALLOW, _LIMIT),
    "--detach": ("d", False, ROLE, "systemd runs the container in the foreground (Type=simple)"),
    "--detach-keys": (None, True, REFUSE, "the unit has no terminal"),
    "--device": (None, True, CHECK, "NVIDIA device nodes only (what GPU access needs); --gpus passes them itself"),
    "--device-cgroup-rule": (None, True, REFUSE, "lets the container create and use host devices"),
    "--device-read-bps": (None, True, ALLOW, _LIMIT),
    "--device-read-iops": (None, True, ALLOW, _LIMIT),
    "--device-write-bps": (None, True, ALLOW, _LIMIT),
    "--device-write-iops": (None, True, ALLOW, _LIMIT),
    "--disable-content-trust": (None, False, ALLOW, "only concerns pulling; the image is local"),
    "--dns": (None, True, REFUSE, "the offline container resolves nothing"),
    "--dns-option": (None, True, REFUSE, "the offline container resolves nothing"),
    "--dns-search": (None, True, REFUSE, "the offline container resolves nothing"),
    "--domainname": (None, True, REFUSE, _NOT_NEEDED),
    "--entrypoint": (None, True, REFUSE, "the image runs `vllm serve` with the plan's argv"),
    "--env": (
        "e",
        True,
        CHECK,
        "a NAME only (its value from the unit's environment); values belong in "
        "vllm_service_extra_env, a root-only file",
    ),
    "--env-file": (None, True, ROLE, "the role passes its own root-only env file (vllm_service_extra_env)"),
    "--expose": (None, True, REFUSE, "the role publishes the one port it serves"),
    "--gpus": (None, True, CHECK, "the planner's GPU request (all, or the selected devices)"),
    "--group-add": (None, True, REFUSE, "extra groups (docker, disk, video) reach host resources"),
    "--health-cmd": (None, True, ALLOW, "runs inside the container only"),
    "--health-interval": (None, True, ALLOW, "a health check setting"),
    "--health-retries": (None, True, ALLOW, "a health check setting"),
    "--health-start-period": (None, True, ALLOW, "a health check setting"),
    "--health-timeout": (None, True, ALLOW, "a health check setting"),
    "--help": (None, False, REFUSE, "docker would print its help instead of running"),
    "--hostname": ("h", True, ALLOW, "names the container's own UTS namespace"),
    "--init": (None, False, ALLOW, "an init as PID 1 forwards signals and reaps processes"),
    "--interactive": ("i", False, REFUSE, "the unit has no terminal"),
    "--ip": (None, True, REFUSE, "the role uses Docker's default bridge network"),
    "--ip6": (None, True, REFUSE, "the role uses Docker's default bridge network"),
    "--ipc": (
        None,
        True,
        CHECK,
        "private or shareable only; host shares the host's SysV IPC (the plan sizes a private /dev/shm instead)",
    ),
    "--isolation": (None, True, REFUSE, "Windows containers only"),
    "--kernel-memory": (None, True, ALLOW, _LIMIT),
    "--label": ("l", True, CHECK, "metadata; the org.airgap.vllm. labels are the role's own (they mark what it made)"),
    "--label-file": (None, True, REFUSE, "reads a host file; labels could claim the role's ownership marks"),
    "--link": (None, True, REFUSE, "joins other containers"),
    "--link-local-ip": (None, True, REFUSE, "the role uses Docker's default bridge network"),
    "--log-driver": (None, True, CHECK, "a driver that stays on the host (json-file, local, journald, syslog, none)"),
    "--log-opt": (
        None,
        True,
        CHECK,
        "the planner's rotation and other local settings; none that sends logs off "
        "the host or copies the environment (HF_TOKEN) into them",
    ),
    "--mac-address": (None, True, REFUSE, "the role uses Docker's default bridge network"),
    "--memory": ("m", True, ALLOW, _LIMIT),
    "--memory-reservation": (None, True, ALLOW, _LIMIT),
    "--memory-swap": (None, True, ALLOW, _LIMIT),
    "--memory-swappiness": (None, True, ALLOW, _LIMIT),
    "--mount": (None, True, CHECK, "tmpfs, or a read-only bind of the model or the service's config directory"),
    "--name": (None, True, ROLE, "the role names the container vllm_service_name"),
    "--network": (
        None,
        True,
        CHECK,
        "Docker's default bridge (the role's publish needs it); host only with vllm_service_expose_to_network",
    ),
    "--network-alias": (None, True, REFUSE, "the role uses Docker's default bridge network"),
    "--no-healthcheck": (None, False, ALLOW, "turns the image's health check off"),
    "--oom-kill-disable": (None, False, CHECK, "false only: the host would run out of memory instead"),
    "--oom-score-adj": (None, True, CHECK, "0 to 1000 only: a negative score makes the host's processes die first"),
    "--pid": (None, True, REFUSE, "shares the host's (or another container's) processes"),
    "--pids-limit": (None, True, ALLOW, _LIMIT),
    "--platform": (None, True, REFUSE, "the image is the imported one"),
    "--privileged": (
        None,
        False,
        CHECK,
        "false only: every capability and device of the host (--gpus passes the GPUs)",
    ),
    "--publish": ("p", True, EXPOSE, "the role publishes its own port on vllm_service_host"),
    "--publish-all": ("P", False, EXPOSE, "publishes every exposed port on all interfaces"),
    "--pull": (None, True, CHECK, "never or missing: the host is offline"),
    "--read-only": (None, False, ALLOW, "a read-only root filesystem only restricts"),
    "--restart": (None, True, ROLE, "systemd restarts the unit (Restart=on-failure); the role runs --rm"),
    "--rm": (None, False, ROLE, "the role removes the container when it stops"),
    "--runtime": (None, True, CHECK, "nvidia (the planner's, for Docker < 19.03) or runc"),
    "--security-opt": (
        None,
        True,
        CHECK,
        "no-new-privileges, and the planner's seccomp=unconfined (replaced by "
        "vllm_service_seccomp's choice); nothing that loosens confinement",
    ),
    "--shm-size": (None, True, ALLOW, "the planner sizes /dev/shm (a cap: tmpfs pages are allocated as written)"),
    "--sig-proxy": (None, False, ALLOW, "signal forwarding by the client"),
    "--stop-signal": (None, True, ALLOW, "how docker stop asks vLLM to stop"),
    "--stop-timeout": (None, True, ALLOW, "how long docker stop waits"),
    "--storage-opt": (None, True, CHECK, "size= only (a limit)"),
    "--sysctl": (None, True, REFUSE, "kernel settings of the container's namespaces; not needed by vLLM"),
    "--tmpfs": (None, True, ALLOW, "a memory-backed directory inside the container"),
    "--tty": ("t", False, REFUSE, "the unit has no terminal"),
    "--ulimit": (
        None,
        True,
        CHECK,
        "per-process limits (memlock, nofile for NCCL); not rtprio, rttime or nice, "
        "which let the container out-schedule the host",
    ),
    "--user": ("u", True, ALLOW, "the user inside the container"),
    "--userns": (None, True, REFUSE, "host turns the daemon's user-namespace remapping off"),
    "--uts": (None, True, REFUSE, "host shares the host's hostname namespace"),
    "--volume": ("v", True, CHECK, "a read-only bind of the model or the service's config directory"),
    "--volume-driver": (None, True, REFUSE, "named volumes are not used"),
    "--volumes-from": (None, True, REFUSE, "mounts another container's volumes"),
    "--workdir": ("w", True, ALLOW, "the working directory inside the container"),
}
# Docker's own aliases (hidden in --help).
DOCKER_ALIASES = {"--net": "--network", "--net-alias": "--network-alias"}
DOCKER_SHORT = dict(("-" + spec[0], name) for name, spec in DOCKER_RUN_OPTIONS.items() if spec[0])
DOCKER_BOOLEAN = frozenset(name for name, spec in DOCKER_RUN_OPTIONS.items() if not spec[1])

ENV_NAME_RE = re.compile(r"[A-Z_][A-Z0-9_]*\Z")
# Names the plan sets (its offline environment, the GPU selection under --runtime nvidia) and the role's own.
ENV_NAMES = dict((name, "the plan's offline environment: " + why) for name, _value, why in OFFLINE_ENV)
ENV_NAMES.update(
    {
        "NVIDIA_VISIBLE_DEVICES": "the planner's GPU selection under --runtime nvidia (Docker < 19.03)",
        "CUDA_VISIBLE_DEVICES": "which GPUs CUDA sees",
        "VLLM_LOGGING_CONFIG_PATH": "the role's logging config (silences the line that logs the API keys)",
    }
)
# Operator extras: names the software in the image reads (the documented pattern).
ENV_PREFIXES = (
    ("VLLM_", "vLLM's own settings (vllm/envs.py)"),
    ("HF_", "Hugging Face Hub switches (HF_HUB_OFFLINE, HF_HOME, ...)"),
    ("TRANSFORMERS_", "transformers' settings"),
    ("TOKENIZERS_", "tokenizers' settings (TOKENIZERS_PARALLELISM)"),
    ("CUDA_", "the CUDA runtime's settings"),
    ("NCCL_", "NCCL's settings (tensor parallelism)"),
    ("TORCH_", "PyTorch's settings"),
    ("PYTORCH_", "PyTorch's settings (PYTORCH_CUDA_ALLOC_CONF)"),
    ("TRITON_", "Triton's settings"),
    ("FLASHINFER_", "FlashInfer's settings"),
    ("OMP_", "OpenMP threads"),
    ("MKL_", "MKL threads"),
)
# Every spelling of a name that carries an API key: refused even when listed in vllm_service_allow_env_names.
_KEY_MARKS = ("APIKEY", "APITOKEN")

# C0 controls, DEL, C1 controls, LINE and PARAGRAPH SEPARATOR: a unit line, an env file line or a YAML
# scalar could be split by any of them.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


# ---------------------------------------------------------------- words


def control_char(text):
    """The first control character of ``text`` as U+XXXX, or None."""
    m = _CONTROL.search(text)
    return "U+%04X" % ord(m.group(0)) if m else None


def _kind(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a %s" % type(value).__name__


def words(items, var, secret=False):
    """(strings, problems): ``items`` as a list of one-line strings; numbers are taken as their text.

    Anything else (a mapping, a list, null, a boolean) is a problem naming ``var`` and the index, never
    turned into text. ``secret``: the messages never repeat a value.
    """
    if items is None:
        return [], []
    if isinstance(items, str) or not isinstance(items, (list, tuple)):
        return [], ["%s must be a list of strings, one per item; got %s" % (var, _kind(items))]
    out, problems = [], []
    for i, item in enumerate(items):
        if isinstance(item, bool) or not isinstance(item, (str, int, float)):
            problems.append("%s[%d] is %s: give a string (one word per item)" % (var, i, _kind(item)))
            continue
        word = item if isinstance(item, str) else str(item)
        bad = control_char(word)
        if bad:
            problems.append(
                "%s[%d] holds the control character %s: refused (it would split the unit file, the "
                "env file or the command line)" % (var, i, bad)
            )
            continue
        out.append(word)
    return out, problems


# ---------------------------------------------------------------- environment


def key_bearing(name):
    """Whether a variable name carries an API key in any spelling (VLLM_API_KEY, vllm-api-key, ' VLLM_APIKEY')."""
    normal = re.sub(r"[^A-Z0-9]", "", name.upper())
    return any(mark in normal for mark in _KEY_MARKS)


def env_name_reason(name):
    """Why the container may have ``name`` (None: not allowed without the opt-in)."""
    if name in ENV_NAMES:
        return ENV_NAMES[name]
    for prefix, why in ENV_PREFIXES:
        if name.startswith(prefix):
            return why
    return None


def env_name_problems(name, where, allow=()):
    """Problems of one environment variable name."""
    if not isinstance(name, str):
        return ["%s: a variable name is %s; give a string" % (where, _kind(name))]
    if key_bearing(name):
        return [
            "%s %r carries an API key: list the keys in %s instead (a root-only file read with --config)"
            % (where, name, KEYS_VAR)
        ]
    if not ENV_NAME_RE.match(name):
        return [
            "%s %r is not a plain variable name (capitals, digits and _ only; no spaces, padding or control "
            "characters)" % (where, name)
        ]
    if env_name_reason(name) is None and name not in set(allow or ()):
        return [
            "%s %s is not a variable the container needs (allowed: the plan's own and names starting %s); "
            "if it is really wanted, add %s to %s"
            % (where, name, ", ".join(p for p, _w in ENV_PREFIXES), name, ENV_VAR)
        ]
    return []


def env_problems(env, var, allow=()):
    """Problems of an environment mapping: names (see env_name_problems) and values (one-line strings)."""
    if env is None:
        return []
    if not isinstance(env, dict):
        return ["%s must be a mapping of NAME: value; got %s" % (var, _kind(env))]
    problems = []
    for name in sorted(env, key=str):
        problems += env_name_problems(name, var, allow)
        value = env[name]
        shown = name if isinstance(name, str) and not control_char(name) else repr(name)
        if isinstance(value, bool) or value is None or not isinstance(value, (str, int, float)):
            problems.append(
                "%s %s is %s: give a string (quote it: a YAML true or an empty value would be written "
                "as True or None)" % (var, shown, _kind(value))
            )
        elif isinstance(value, str) and control_char(value):
            problems.append(
                "%s %s: the value holds the control character %s, which would start a new line of the "
                "env file: refused" % (var, shown, control_char(value))
            )
    return problems


def unit_value_problems(values):
    """Problems of the role's own words of the unit (image, model directory, ...): {variable: value}."""
    if not isinstance(values, dict):
        return [] if values is None else ["the unit's values must be a mapping of variable: value"]
    problems = []
    for var in sorted(values, key=str):
        value = values[var]
        if isinstance(value, bool) or value is None or not isinstance(value, (str, int, float)):
            problems.append("%s is %s: give a string" % (var, _kind(value)))
        elif isinstance(value, str) and control_char(value):
            problems.append(
                "%s holds the control character %s: refused (it would split the unit file's command "
                "line)" % (var, control_char(value))
            )
    return problems


# ---------------------------------------------------------------- API keys


def api_key_problems(keys, var=KEYS_VAR):
    """Problems of the API keys (a list of one-line strings); the messages never repeat a key."""
    if keys is None:
        return []
    if isinstance(keys, str) or not isinstance(keys, (list, tuple)):
        return [
            "%s must be a list of strings, one key per item; got %s (it would be written as its text)"
            % (var, _kind(keys))
        ]
    problems = []
    for i, key in enumerate(keys):
        if not isinstance(key, str):
            problems.append(
                "%s[%d] is %s: give each key as a quoted string (it would be written as its text)"
                % (var, i, _kind(key))
            )
        elif not key.strip():
            problems.append("%s[%d] is empty: drop it" % (var, i))
        elif control_char(key):
            problems.append("%s[%d] holds the control character %s: refused" % (var, i, control_char(key)))
        elif key != key.strip():
            problems.append("%s[%d] starts or ends with a space: clients would not send it" % (var, i))
    return problems
