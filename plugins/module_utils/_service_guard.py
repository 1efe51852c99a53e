# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Security decisions of the vllm_service role, as pure functions (airgap.vllm.vllm_service_guard).

- API keys never on a command line: every spelling vLLM 0.27.1's parser turns into ``api_key``.
  Checked against the real parser (tests/integration_wheel/test__service_guard_real_parser.py):
  ``FlexibleArgumentParser`` has argparse's ``allow_abbrev`` on and rewrites ``_`` to ``-`` in option
  names, so ``--api-key``, ``--api_key``, ``--api-key=K``, ``--api_key=K`` and the unambiguous
  prefixes ``--api-k``, ``--api-ke`` (and their ``_``/``=`` forms) all set it; ``--api`` and
  ``--api-`` are ambiguous with ``--api-server-count`` and rejected by vLLM itself.
- The loopback promise: no ``--network host``, no publish but the role's own, no ``--privileged``,
  no ``--host 0.0.0.0``/``::`` in the vLLM argv, and the role's publish address on loopback, unless
  the one opt-in (``vllm_service_expose_to_network``) says the server is meant for the network. The
  one narrower opt-in, Prometheus access (``vllm_service_metrics_expose``, module_utils/_expose.py),
  adds one publish on one named host address, refused without API keys (the port is the whole API).
- Least privilege: Docker's default seccomp profile with ``clone3`` answering ENOSYS (glibc then
  falls back to ``clone``) instead of ``seccomp=unconfined``; ``no-new-privileges`` always.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

from ansible_collections.airgap.vllm.plugins.module_utils._expose import check_metrics, publish_binding

API_KEY_OPTION = "--api-key"
# vLLM 0.27.1: the only other long option starting "--api" is --api-server-count, so a prefix of
# --api-key is unambiguous from "--api-k" on (argparse allow_abbrev, underscores read as dashes).
API_KEY_MIN_PREFIX = "--api-k"
HOST_OPTION = "--host"
# Other long options starting "--h": --h11-*, --headless, --help, --hf-*; "--ho" is unambiguous.
HOST_MIN_PREFIX = "--ho"
ALL_INTERFACES = ("0.0.0.0", "::", "[::]", "", "*", "0")
LOOPBACK = ("127.0.0.1", "::1", "[::1]", "localhost")
SECCOMP_MODES = ("profile", "unconfined", "docker_default")
ENOSYS = 38
CLONE3_RULES = (
    {"names": ["clone3"], "action": "SCMP_ACT_ALLOW", "excludes": {"minKernel": "5.3"},
     "comment": "airgap.vllm: kernels before 5.3 have no clone3, so the kernel answers ENOSYS (glibc falls back "
                "to clone); works on Docker < 20.10.10, which ignores errnoRet"},
    {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": ENOSYS,
     "includes": {"minKernel": "5.3"}, "excludes": {"caps": ["CAP_SYS_ADMIN"]},
     "comment": "Docker >= 20.10.10: ENOSYS, as clone3's flags cannot be filtered"},
)
# docker run shorthand flags that take a value (the rest of a combined -xyz group is that value).
_DOCKER_SHORT_WITH_VALUE = set("acehlmpuvw")


class GuardError(Exception):
    """Refused configuration; the message lists every problem and the fix."""


def _long_name(item):
    """'--api_key=x' -> '--api-key' (vLLM's parser reads underscores as dashes)."""
    return item.split("=", 1)[0].replace("_", "-")


def _is_prefix_option(item, full, min_prefix):
    if not item.startswith("--"):
        return False
    name = _long_name(item)
    return len(name) >= len(min_prefix) and full.startswith(name)


def api_key_args(argv):
    """[(index, spelling shown without the value, [key values])] for every API key given in argv."""
    found = []
    i = 0
    argv = [str(a) for a in argv or []]
    while i < len(argv):
        item = argv[i]
        if item == "--":
            break
        if _is_prefix_option(item, API_KEY_OPTION, API_KEY_MIN_PREFIX):
            name = item.split("=", 1)[0]
            if "=" in item:
                found.append((i, name + "=...", [item.split("=", 1)[1]]))
            else:
                values = []
                j = i + 1
                while j < len(argv) and not argv[j].startswith("-"):
                    values.append(argv[j])
                    j += 1
                found.append((i, name, values))
                i = j - 1
        i += 1
    return found


def host_args(argv):
    """[(index, spelling, value)] for every --host (or an unambiguous prefix) in the vLLM argv."""
    out = []
    argv = [str(a) for a in argv or []]
    for i, item in enumerate(argv):
        if item == "--":
            break
        if _is_prefix_option(item, HOST_OPTION, HOST_MIN_PREFIX):
            if "=" in item:
                out.append((i, item.split("=", 1)[0], item.split("=", 1)[1]))
            elif i + 1 < len(argv):
                out.append((i, item, argv[i + 1]))
    return out


def check_argv(argv, expose=False):
    problems = []
    for i, name, _values in api_key_args(argv):
        problems.append(
            "vllm_service_argv[%d] %s puts an API key on the command line (visible in ps, the unit file and the "
            "journal): remove it and list the keys in vllm_service_api_keys (a root-only file read with --config)"
            % (i, name))
    if not expose:
        for i, name, value in host_args(argv):
            if value.strip() in ALL_INTERFACES:
                problems.append(
                    "vllm_service_argv[%d] %s %r binds every interface: drop it (the container port is published "
                    "on vllm_service_host only), or set vllm_service_expose_to_network: true if the server is "
                    "meant to be reachable from the network" % (i, name, value))
    return problems


def _docker_flags(options):
    """Normalised (index, flag, value) of docker run options; value None for a flag without one."""
    out = []
    options = [str(o) for o in options or []]
    i = 0
    while i < len(options):
        item = options[i]
        if item.startswith("--"):
            name, eq, value = item.partition("=")
            if eq:
                out.append((i, name, value))
            elif name in ("--privileged", "--publish-all", "--rm", "--init", "--read-only", "--detach",
                          "--interactive", "--tty"):
                out.append((i, name, None))
            elif i + 1 < len(options) and not options[i + 1].startswith("-"):
                out.append((i, name, options[i + 1]))
                i += 1
            else:
                out.append((i, name, None))  # a boolean flag (or a value-less one at the end)
        elif item.startswith("-") and len(item) > 1:
            letters = item[1:]
            for k, letter in enumerate(letters):
                if letter in _DOCKER_SHORT_WITH_VALUE:
                    rest = letters[k + 1:].lstrip("=")
                    if not rest:
                        rest = options[i + 1] if i + 1 < len(options) else ""
                        i += 1
                    out.append((i, "-" + letter, rest))
                    break
                out.append((i, "-" + letter, None))
        i += 1
    return out


def _true(value):
    return value is None or str(value).lower() in ("true", "1", "yes")


def check_docker_options(options, expose=False):
    problems = []
    hint = "set vllm_service_expose_to_network: true if the server is meant to be reachable from the network"
    for i, flag, value in _docker_flags(options):
        where = "vllm_service_docker_options[%d]" % i
        if flag in ("--network", "--net") and (value or "").strip() == "host" and not expose:
            problems.append("%s %s host shares the host's network: the server would listen on every host "
                            "interface; remove it, or %s" % (where, flag, hint))
        elif flag in ("-p", "--publish") and not expose:
            problems.append("%s %s %s publishes a port besides the role's own (vllm_service_host:"
                            "vllm_service_port); remove it, or %s" % (where, flag, value, hint))
        elif flag in ("-P", "--publish-all") and _true(value) and not expose:
            problems.append("%s %s publishes every exposed port on all interfaces; remove it, or %s"
                            % (where, flag, hint))
        elif flag == "--privileged" and _true(value) and not expose:
            problems.append("%s --privileged gives the container every capability and device: remove it "
                            "(--gpus passes the GPUs), or %s" % (where, hint))
        elif flag in ("-e", "--env") and "=" in (value or ""):
            problems.append("%s %s %s=... puts a value on the docker command line (visible in ps and the unit "
                            "file): pass it in vllm_service_extra_env (a root-only env file)"
                            % (where, flag, value.split("=", 1)[0]))
    return problems


def check_env_names(names):
    if "VLLM_API_KEY" in (names or []):
        return ["VLLM_API_KEY in vllm_service_env / vllm_service_extra_env: list the keys in "
                "vllm_service_api_keys instead (a root-only file read with --config)"]
    return []


def check_publish_host(host, expose=False):
    if expose or str(host).strip() in LOOPBACK or str(host).startswith("127."):
        return []
    return ["vllm_service_host %r is not a loopback address: the API would be reachable from the network; "
            "put a TLS reverse proxy in front and keep 127.0.0.1, or set vllm_service_expose_to_network: true"
            % (host,)]


def seccomp_supported(security_options):
    """From `docker info` SecurityOptions (["name=seccomp,profile=default", ...]); None (unknown) -> True."""
    if security_options is None:
        return True
    return any("seccomp" in str(o) for o in security_options)


def effective_docker_options(options, seccomp="profile", profile_path=None, supported=True):
    """The docker options with the seccomp choice applied and no-new-privileges added.

    profile: any `seccomp=...` option (the planner's `unconfined` on old Docker) is replaced by
    `seccomp=<profile_path>`; unconfined: opt-in, `seccomp=unconfined`; docker_default: no seccomp
    option (Docker's built-in profile). When the engine has no seccomp support (`supported` false,
    e.g. a Docker-in-Docker test host) no seccomp option is passed: Docker would refuse a profile.
    """
    if seccomp not in SECCOMP_MODES:
        raise GuardError("vllm_service_seccomp must be one of %s, not %r" % (", ".join(SECCOMP_MODES), seccomp))
    if seccomp == "profile" and not profile_path:
        raise GuardError("seccomp profile mode needs the profile path")
    out = []
    options = [str(o) for o in options or []]
    i = 0
    while i < len(options):
        item = options[i]
        if item == "--security-opt" and i + 1 < len(options):
            value = options[i + 1]
            i += 2
        elif item.startswith("--security-opt="):
            value = item.split("=", 1)[1]
            i += 1
        else:
            out.append(item)
            i += 1
            continue
        if value.startswith("seccomp=") or value.startswith("seccomp:") or value.startswith("no-new-privileges"):
            continue  # decided below
        out += ["--security-opt", value]
    if not supported:
        pass
    elif seccomp == "profile":
        out += ["--security-opt", "seccomp=%s" % profile_path]
    elif seccomp == "unconfined":
        out += ["--security-opt", "seccomp=unconfined"]
    out += ["--security-opt", "no-new-privileges"]
    return out


def guard(argv, docker_options, env_names=(), publish_host="127.0.0.1", expose=False, seccomp="profile",
          profile_path=None, security_options=None, metrics=None):
    """All checks; returns {'docker_options', 'secrets', 'warnings'} or raises GuardError listing every problem.

    `secrets` are the API key values found in argv (for the caller to mask in its output).
    `metrics`: the opt-in Prometheus exposure (module_utils/_expose.py) - {'expose', 'address', 'port',
    'publish_port', 'container_port', 'has_api_keys'}; when accepted, its extra --publish of the container
    port on the named address joins the docker options (the only publish besides the role's own).
    """
    secrets = [v for _i, _n, values in api_key_args(argv) for v in values]
    metrics = metrics or {}
    problems = (check_argv(argv, expose) + check_docker_options(docker_options, expose)
                + check_env_names(env_names) + check_publish_host(publish_host, expose)
                + check_metrics(metrics.get("expose"), metrics.get("address"), metrics.get("port"), publish_host,
                                metrics.get("publish_port"), metrics.get("has_api_keys"), expose))
    if problems:
        error = GuardError("refused: " + "; ".join(problems))
        error.secrets = secrets
        raise error
    warnings = []
    if seccomp == "unconfined":
        warnings.append("vllm_service_seccomp: unconfined runs vLLM without any syscall filter; the shipped "
                        "profile (Docker's default with clone3 -> ENOSYS) is enough for kernel 4.19 + Docker "
                        "< 20.10.10")
    if expose:
        warnings.append("vllm_service_expose_to_network: true - the loopback-only checks are off")
    supported = seccomp_supported(security_options)
    if not supported and seccomp != "docker_default":
        warnings.append("the Docker engine reports no seccomp support (docker info SecurityOptions %s): no seccomp "
                        "option is passed" % (security_options,))
    options = effective_docker_options(docker_options, seccomp, profile_path, supported)
    binding = publish_binding(metrics.get("expose"), metrics.get("address"), metrics.get("port"),
                              metrics.get("container_port") or 8000, publish_host, metrics.get("publish_port") or 8000)
    if binding:
        options = ["--publish", binding] + options
    return {"docker_options": options, "secrets": secrets, "warnings": warnings}


# ---------------------------------------------------------------- seccomp profile

def _names(rule):
    return rule.get("names") or ([rule["name"]] if rule.get("name") else [])


def _needs_sys_admin(rule):
    return "CAP_SYS_ADMIN" in ((rule.get("includes") or {}).get("caps") or [])


def clone3_enosys_profile(default_profile):
    """Docker's default seccomp profile with `clone3` answering ENOSYS instead of EPERM.

    Why: Docker < 20.10.10 does not list clone3, so its default action (EPERM) answers it; glibc >= 2.34
    then fails pthread_create instead of falling back to clone, which it does on ENOSYS. Docker >= 20.10.10
    answers ENOSYS itself (rule `clone3 -> SCMP_ACT_ERRNO, errnoRet 38` unless CAP_SYS_ADMIN). But Docker
    20.10.7's profile loader has no `errnoRet` (moby v20.10.7 profiles/seccomp/seccomp.go): that rule alone
    would still answer EPERM there. It does honour `minKernel` filters, so the profile says:
      - kernel < 5.3 (no clone3 in the kernel, e.g. Kylin V10's 4.19): ALLOW clone3 - the kernel itself
        answers ENOSYS, on every Docker version;
      - kernel >= 5.3: Docker's own `errnoRet 38` rule (ENOSYS), CAP_SYS_ADMIN keeping Docker's allow.
    Every other rule of the input is kept as is; clone3 is taken out of the rules that are not
    CAP_SYS_ADMIN-only, and the two rules go where Docker has its clone3 rule (else after the last clone
    rule). Idempotent: the output is a fixed point.
    """
    if not isinstance(default_profile, dict) or not isinstance(default_profile.get("syscalls"), list):
        raise GuardError("not a Docker seccomp profile (no syscalls list)")
    profile = copy.deepcopy(default_profile)
    out = []
    insert_at = None
    last_clone = None
    for rule in profile["syscalls"]:
        names = _names(rule)
        if "clone3" in names and not _needs_sys_admin(rule):
            if rule.get("action") != "SCMP_ACT_ALLOW" or names == ["clone3"]:
                if insert_at is None:
                    insert_at = len(out)
                continue
            rule["names"] = [n for n in names if n != "clone3"]
        out.append(rule)
        if "clone" in _names(rule) and not _needs_sys_admin(rule):
            last_clone = len(out)
    if insert_at is None:
        insert_at = last_clone if last_clone is not None else len(out)
    out[insert_at:insert_at] = [copy.deepcopy(r) for r in CLONE3_RULES]
    profile["syscalls"] = out
    return profile


def dump_profile(profile):
    """The exact text of the shipped profile file (stable, so a test can compare it)."""
    return json.dumps(profile, indent=1, sort_keys=True) + "\n"
