# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Security decisions of the vllm_service role, as pure functions (airgap.vllm.vllm_service_guard).

- API keys never on a command line: every spelling vLLM 0.27.1's parser turns into ``api_key``.
  Checked against the real parser (tests/real_wheel/test__service_guard_real_parser.py):
  ``FlexibleArgumentParser`` has argparse's ``allow_abbrev`` on and rewrites ``_`` to ``-`` in option
  names, so ``--api-key``, ``--api_key``, ``--api-key=K``, ``--api_key=K`` and the unambiguous
  prefixes ``--api-k``, ``--api-ke`` (and their ``_``/``=`` forms) all set it; ``--api`` and
  ``--api-`` are ambiguous with ``--api-server-count`` and rejected by vLLM itself.
- The container gets no more than the plan gives it: every docker run option is decided by the allowlist
  of _container_allowlist (one table, a reason each; unknown options refused) and every environment
  variable name by its name rules; control characters are refused in every argv item, docker option,
  environment value and API key (they would split the unit, the env file or the key file); a mapping or
  a list where a string belongs is refused, never turned into its text. The operator's ways out, option
  by option: ``vllm_service_allow_docker_options``, ``vllm_service_allow_env_names``.
- The loopback promise: no ``--network host``, no publish but the role's own, no ``--host 0.0.0.0``/``::``
  in the vLLM argv, and the role's publish address on loopback, unless
  the one opt-in (``vllm_service_expose_to_network``) says the server is meant for the network. The
  one narrower opt-in, Prometheus access (``vllm_service_metrics_expose``, module_utils/front/_expose.py),
  adds one publish on one named host address, refused without API keys (the port is the whole API).
- Least privilege: Docker's default seccomp profile with ``clone3`` answering ENOSYS (glibc then
  falls back to ``clone``) instead of ``seccomp=unconfined``; ``no-new-privileges`` always.
- The one composer of the unit's ``docker run`` command (``run_argv``): the role's publish, env file, logging
  configuration, read-only binds (``:ro,z`` when SELinux wants a relabel), the model-version label, the key file
  and its ``--config``, the options decided above, the image and the argv. The unit template only formats it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import posixpath

from ansible_collections.airgap.vllm.plugins.module_utils.service._container_allowlist import (
    DOCKER_VAR,
    ENV_VAR,
    EXTRA_ENV_VAR,
    OPTIONS_VAR,
    _kind,
    api_key_problems,
    control_char,
    env_name_problems,
    env_problems,
    unit_value_problems,
    words,
)
from ansible_collections.airgap.vllm.plugins.module_utils.service._container_checks import (
    Context,
    docker_option_problems,
)
from ansible_collections.airgap.vllm.plugins.module_utils.front._expose import (
    ExposeError,
    check_metrics,
    publish_binding,
)

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
# vLLM's own default port; the argv's --port moves it.
CONTAINER_PORT = 8000
# vLLM logs its non-default arguments, API keys included: the role's logging.json, mounted here, silences that line.
CONTAINER_LOGGING = "/etc/vllm/logging.json"
MODEL_VERSION_LABEL = "org.airgap.vllm.model-version"
SELINUX_RELABEL = ("auto", "always", "never")
# The unit's words run_argv takes from the caller as they are (checked for control characters).
UNIT_WORDS = ("docker_bin", "name", "service_dir", "model_dir", "image", "model_version", "api_keys_container_path")
CLONE3_RULES = (
    {
        "names": ["clone3"],
        "action": "SCMP_ACT_ALLOW",
        "excludes": {"minKernel": "5.3"},
        "comment": "airgap.vllm: kernels before 5.3 have no clone3, so the kernel answers ENOSYS (glibc falls back "
        "to clone); works on Docker < 20.10.10, which ignores errnoRet",
    },
    {
        "names": ["clone3"],
        "action": "SCMP_ACT_ERRNO",
        "errnoRet": ENOSYS,
        "includes": {"minKernel": "5.3"},
        "excludes": {"caps": ["CAP_SYS_ADMIN"]},
        "comment": "Docker >= 20.10.10: ENOSYS, as clone3's flags cannot be filtered",
    },
)


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
    """Problems of the vLLM argv (a list of strings: see _container_allowlist.words)."""
    argv, problems = words(argv, "vllm_service_argv")
    for i, name, _values in api_key_args(argv):
        problems.append(
            "vllm_service_argv[%d] %s puts an API key on the command line (visible in ps, the unit file and the "
            "journal): remove it and list the keys in vllm_service_api_keys (a root-only file read with --config)"
            % (i, name)
        )
    if not expose:
        for i, name, value in host_args(argv):
            if value.strip() in ALL_INTERFACES:
                problems.append(
                    "vllm_service_argv[%d] %s %r binds every interface: drop it (the container port is published "
                    "on vllm_service_host only), or set vllm_service_expose_to_network: true if the server is "
                    "meant to be reachable from the network" % (i, name, value)
                )
    return problems


def check_docker_options(options, expose=False, allow=(), mount_roots=()):
    """Problems of the docker run options: the allowlist of _container_allowlist (one table, a reason each)."""
    options, problems = words(options, DOCKER_VAR)
    allow_names, allow_problems = words(allow, OPTIONS_VAR)
    ctx = Context(expose=expose, allow=allow_names, mount_roots=mount_roots)
    return problems + allow_problems + docker_option_problems(options, ctx)


def check_env_names(names, allow=()):
    """Problems of the container's environment variable names (the values: check_env)."""
    if names is None:
        return []
    if isinstance(names, (str, dict)) or not isinstance(names, (list, tuple)):
        return ["the environment names must be a list of strings, not %s" % _kind(names)]
    allow_names, problems = words(allow, ENV_VAR)
    for name in names:
        problems += env_name_problems(name, "vllm_service_env / vllm_service_extra_env", allow_names)
    return problems


def check_env(env=None, extra_env=None, allow=()):
    """Problems of the plan's environment and the operator's extras: names and one-line values."""
    allow_names, problems = words(allow, ENV_VAR)
    return (
        problems
        + env_problems(env, "vllm_service_env", allow_names)
        + env_problems(extra_env, EXTRA_ENV_VAR, allow_names)
    )


def check_publish_host(host, expose=False):
    if not isinstance(host, str) or not host or control_char(host) or host != host.strip():
        return [
            "vllm_service_host %s: give one address, such as 127.0.0.1 (no spaces or control characters)"
            % ("is " + _kind(host) if not isinstance(host, str) else repr(host))
        ]
    if expose or host in LOOPBACK or host.startswith("127."):
        return []
    return [
        "vllm_service_host %r is not a loopback address: the API would be reachable from the network; "
        "put a TLS reverse proxy in front and keep 127.0.0.1, or set vllm_service_expose_to_network: true" % (host,)
    ]


def seccomp_supported(security_options):
    """From `docker info` SecurityOptions (["name=seccomp,profile=default", ...]); None (unknown) -> True."""
    if not isinstance(security_options, (list, tuple)):
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


def guard(
    argv,
    docker_options,
    env_names=(),
    publish_host="127.0.0.1",
    expose=False,
    seccomp="profile",
    profile_path=None,
    security_options=None,
    metrics=None,
    allow_options=(),
    allow_env=(),
    env=None,
    extra_env=None,
    api_keys=None,
    mount_roots=(),
    unit_values=None,
    unit=None,
):
    """All checks; returns {'docker_options', 'secrets', 'warnings', 'container_port', 'served_model_name'} (and
    'run_argv' with `unit`) or raises GuardError listing every problem.

    `secrets` are the API key values found in argv (for the caller to mask in its output).
    `metrics`: the opt-in Prometheus exposure (module_utils/front/_expose.py) - {'expose', 'address', 'port',
    'publish_port', 'container_port', 'has_api_keys'}; when accepted, its extra --publish of the container
    port on the named address joins the docker options (the only publish besides the role's own).
    `allow_options`/`allow_env`: the operator's opt-ins (vllm_service_allow_docker_options /
    vllm_service_allow_env_names) for options and variable names the allowlist refuses. `env`/`extra_env`:
    the plan's environment and the operator's extras (values checked, never repeated); `api_keys`: the keys
    (a list of strings; never repeated); `mount_roots`: the host directories a read-only bind may show;
    `unit_values`: the role's own words of the unit ({variable: value}: image, model directory, ...).
    `unit`: the unit's own inputs, for the composed `run_argv` ({'docker_bin', 'name', 'publish_port', 'service_dir',
    'model_dir', 'image', 'model_version', 'api_keys_container_path', 'selinux_relabel', 'selinux_enabled'}; the
    publish address is `publish_host`, whether there are keys `api_keys` (else metrics' 'has_api_keys')).
    Never raises anything but GuardError, whatever the input.
    """
    argv_words, _argv_problems = words(argv, "vllm_service_argv")
    secrets = [v for _i, _n, values in api_key_args(argv_words) for v in values]
    metrics = metrics if isinstance(metrics, dict) else {}
    unit = unit if isinstance(unit, dict) else None
    if unit is not None and unit_values is None:
        # No names of the caller's own: the unit's words are checked under the module's option names.
        unit_values = dict((k, unit[k]) for k in UNIT_WORDS if unit.get(k) is not None)
    key_problems = api_key_problems(api_keys)
    if api_keys is not None and not key_problems:
        metrics = dict(metrics, has_api_keys=len(api_keys) > 0)
    problems = (
        check_argv(argv, expose)
        + check_docker_options(docker_options, expose, allow_options, mount_roots)
        + check_env_names(env_names, allow_env)
        + check_env(env, extra_env, allow_env)
        + key_problems
        + check_publish_host(publish_host, expose)
        + unit_value_problems(unit_values)
        + check_metrics(
            metrics.get("expose"),
            metrics.get("address"),
            metrics.get("port"),
            publish_host,
            metrics.get("publish_port"),
            metrics.get("has_api_keys"),
            expose,
        )
    )
    if problems:
        error = GuardError("refused: " + "; ".join(problems))
        error.secrets = secrets
        raise error
    warnings = []
    if seccomp == "unconfined":
        warnings.append(
            "vllm_service_seccomp: unconfined runs vLLM without any syscall filter; the shipped "
            "profile (Docker's default with clone3 -> ENOSYS) is enough for kernel 4.19 + Docker "
            "< 20.10.10"
        )
    if expose:
        warnings.append("vllm_service_expose_to_network: true - the loopback-only checks are off")
    supported = seccomp_supported(security_options)
    if not supported and seccomp != "docker_default":
        warnings.append(
            "the Docker engine reports no seccomp support (docker info SecurityOptions %s): no seccomp "
            "option is passed" % (security_options,)
        )
    options = effective_docker_options(words(docker_options, DOCKER_VAR)[0], seccomp, profile_path, supported)
    port = str(metrics["container_port"]) if metrics.get("container_port") else container_port(argv_words)
    try:
        binding = publish_binding(
            metrics.get("expose"),
            metrics.get("address"),
            metrics.get("port"),
            port,
            publish_host,
            metrics.get("publish_port") or (unit or {}).get("publish_port") or 8000,
        )
    except ExposeError as e:
        raise GuardError("refused: %s" % e)
    if binding:
        options = ["--publish", binding] + options
    out = {
        "docker_options": options,
        "secrets": secrets,
        "warnings": warnings,
        "container_port": port,
        "served_model_name": served_model_name(argv_words, (unit or {}).get("model_dir")),
    }
    if unit is not None:
        out["run_argv"] = run_argv(
            unit.get("docker_bin") or "/usr/bin/docker",
            unit.get("name"),
            publish_host,
            unit.get("publish_port") or 8000,
            unit.get("service_dir"),
            unit.get("model_dir"),
            unit.get("image"),
            argv_words,
            options,
            port=port,
            model_version=unit.get("model_version") or "",
            has_api_keys=bool(metrics.get("has_api_keys")),
            api_keys_container_path=unit.get("api_keys_container_path") or "/etc/vllm/keys.yaml",
            selinux_relabel=unit.get("selinux_relabel") or "auto",
            selinux_enabled=unit.get("selinux_enabled"),
        )
    return out


# ---------------------------------------------------------------- the unit's docker run command


def _option_value(argv, name):
    """The value vLLM's parser takes for the long option ``name``: ``name VALUE`` or ``name=VALUE``, ``_`` spelled
    for ``-`` (vLLM's FlexibleArgumentParser reads both), the last occurrence winning (argparse); None when absent.
    """
    value = None
    for i, word in enumerate(argv):
        given = str(word)
        option, eq, rest = given.partition("=")
        if not option.startswith("--") or "--" + option[2:].replace("_", "-") != name:
            continue
        if eq:
            value = rest
        elif i + 1 >= len(argv):
            raise GuardError("refused: vllm_service_argv ends with %s: give its value" % given)
        else:
            value = argv[i + 1]
    return value


def container_port(argv):
    """The port vLLM listens on inside the container, the one the unit publishes: the argv's ``--port`` as vLLM reads
    it (``--port 9000``, ``--port=9000``, the last one given; its text), else 8000."""
    value = _option_value(words(argv, "vllm_service_argv")[0], "--port")
    return str(CONTAINER_PORT) if value is None else value


def served_model_name(argv, model_dir):
    """The name clients ask for: the argv's first ``--served-model-name``, else the model directory's base name."""
    value = _option_value(words(argv, "vllm_service_argv")[0], "--served-model-name")
    return posixpath.basename(model_dir or "") if value is None else value


def mount_suffix(relabel="auto", selinux_enabled=False):
    """``:ro,z`` (Docker relabels the bind, a label shared by containers) or ``:ro``.

    With SELinux enabled on the host the container may read a bind mount only once Docker relabels it;
    ``z`` is the shared label, as one model may be served by more than one service.
    """
    if relabel not in SELINUX_RELABEL:
        raise GuardError(
            "refused: vllm_service_selinux_relabel must be one of %s, not %r" % (", ".join(SELINUX_RELABEL), relabel)
        )
    return ":ro,z" if relabel == "always" or (relabel == "auto" and bool(selinux_enabled)) else ":ro"


def run_argv(
    docker_bin,
    name,
    publish_host,
    publish_port,
    service_dir,
    model_dir,
    image,
    argv,
    docker_options,
    model_version="",
    has_api_keys=False,
    api_keys_container_path="/etc/vllm/keys.yaml",
    selinux_relabel="auto",
    selinux_enabled=False,
    port=None,
):
    """The unit's ``docker run`` command, one word per item (no shell involved; the template quotes each word).

    ``docker_options``: the guard's own (seccomp and no-new-privileges applied); ``argv``: everything after
    ``vllm serve``; ``service_dir``: the service's configuration directory on the host (container.env,
    logging.json, keys.yaml); ``port``: the container port (default: the argv's, see container_port). The order is
    the unit's since issue 12: changing it rewrites every unit and restarts every service once.
    """
    argv = words(argv, "vllm_service_argv")[0]
    ro = mount_suffix(selinux_relabel, selinux_enabled)
    model_dir = str(model_dir)
    out = [
        str(docker_bin),
        "run",
        "--rm",
        "--name",
        str(name),
        "--publish",
        "%s:%s:%s" % (publish_host, publish_port, port or container_port(argv)),
        "--env-file",
        "%s/container.env" % service_dir,
        "--env",
        "VLLM_LOGGING_CONFIG_PATH=" + CONTAINER_LOGGING,
        "--volume",
        "%s/logging.json:%s%s" % (service_dir, CONTAINER_LOGGING, ro),
        "--volume",
        "%s:%s%s" % (model_dir, model_dir, ro),
    ]
    if model_version:
        out += ["--label", "%s=%s" % (MODEL_VERSION_LABEL, model_version)]
    if has_api_keys:
        out += ["--volume", "%s/keys.yaml:%s%s" % (service_dir, api_keys_container_path, ro)]
    out += list(docker_options) + [str(image)] + argv
    if has_api_keys and "--config" not in argv:
        out += ["--config", str(api_keys_container_path)]
    return out


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
