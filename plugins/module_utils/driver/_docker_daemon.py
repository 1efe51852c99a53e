# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What Docker's daemon.json should become for the nvidia runtime, as pure functions (issue 32 item 2).

One home of the nvidia_toolkit role's daemon.json decisions (filter airgap.vllm.toolkit_daemon_plan):

- ``parse_daemon_json()``: the file's text as data - an absent, empty or blank file is ``{}``; text that is not
  JSON, or JSON whose top level is not an object (or whose ``runtimes`` is not one), is an error, nothing changed;
- ``with_runtime()``: what ``nvidia-ctk runtime configure --runtime=docker [--set-as-default]`` writes: every key
  kept, ``runtimes.nvidia`` set to ``RUNTIME_ENTRY`` (an entry already there is replaced, whatever its args), and
  ``default-runtime: nvidia`` with ``--set-as-default``; ``ctk_argv()`` is that command line;
- ``without_runtime()``: the uninstall's inverse: ``runtimes.nvidia`` out (``runtimes`` gone once empty) and
  ``default-runtime`` out when it named nvidia;
- ``rpms_wrong()``: which toolkit packages are not installed at the wanted version-release;
- ``runtime_listed()``/``docker_knows_runtime()``: whether the running Docker daemon lists the nvidia runtime
  (also the preflight role's Docker runtime check, module_utils/host/_preflight.py);
- ``plan()``: all of it for one host from the probe's readings: before, after, differs, converged, restart,
  argv, rpms_wrong and error.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

from ansible_collections.airgap.vllm.plugins.module_utils.common._text import as_text as _text

RUNTIME_NAME = "nvidia"
# What nvidia-ctk writes under runtimes.nvidia.
RUNTIME_ENTRY = {"args": [], "path": "nvidia-container-runtime"}
DEFAULT_PATH = "/etc/docker/daemon.json"

_JSON_KINDS = ((list, "an array"), (bool, "a boolean"), (int, "a number"), (float, "a number"))


def _kind(value):
    """How the JSON top level reads in a message: 'an array', 'a string', 'null'..."""
    if value is None:
        return "null"
    for kind, name in _JSON_KINDS:
        if isinstance(value, kind):
            return name
    if isinstance(value, (bytes, str)):
        return "a string"
    return "a %s" % type(value).__name__


def parse_daemon_json(value):
    """(data, problem): daemon.json's text as a dict and None, or None and what is wrong with the file.

    ``value`` is the file's text (None when the file is absent) - or data already (Ansible's templating turns a
    variable holding JSON text into what it spells; a dict is taken as it is)."""
    if isinstance(value, dict):
        data = value
    elif isinstance(value, list):
        return None, "is not a JSON object (its top level is an array)"
    else:
        text = _text(value)
        if not text.strip():
            return {}, None
        try:
            data = json.loads(text)
        except ValueError:
            return None, "is not valid JSON"
        if not isinstance(data, dict):
            return None, "is not a JSON object (its top level is %s)" % _kind(data)
    runtimes = data.get("runtimes")
    # null or [] read as no runtimes (as Ansible's combine read them before, and nvidia-ctk replaces them).
    if runtimes is not None and runtimes != [] and not isinstance(runtimes, dict):
        return None, 'has a "runtimes" that is not a JSON object (it is %s)' % _kind(runtimes)
    return data, None


def _runtimes(config):
    runtimes = config.get("runtimes")
    return dict(runtimes) if isinstance(runtimes, dict) else {}


def with_runtime(config, set_as_default=False):
    """daemon.json as nvidia-ctk leaves it: the nvidia runtime registered, every other key kept."""
    after = copy.deepcopy(config)
    runtimes = _runtimes(after)
    runtimes[RUNTIME_NAME] = copy.deepcopy(RUNTIME_ENTRY)
    after["runtimes"] = runtimes
    if set_as_default:
        after["default-runtime"] = RUNTIME_NAME
    return after


def without_runtime(config):
    """daemon.json without the nvidia runtime: runtimes.nvidia out (runtimes gone once empty, an empty one
    before included), default-runtime out when it was nvidia; every other key kept."""
    after = dict((k, copy.deepcopy(v)) for k, v in config.items() if k not in ("runtimes", "default-runtime"))
    runtimes = dict((k, copy.deepcopy(v)) for k, v in _runtimes(config).items() if k != RUNTIME_NAME)
    if runtimes:
        after["runtimes"] = runtimes
    if "default-runtime" in config and config["default-runtime"] != RUNTIME_NAME:
        after["default-runtime"] = config["default-runtime"]
    return after


def ctk_argv(path=DEFAULT_PATH, set_as_default=False):
    """The nvidia-ctk command that writes with_runtime()'s result to ``path``."""
    argv = ["nvidia-ctk", "runtime", "configure", "--runtime=docker", "--config=%s" % path]
    if set_as_default:
        argv.append("--set-as-default")
    return argv


def rpms_wrong(packages, version, rpms):
    """The packages not installed at ``version`` (``rpms``: {name: [installed version-release, ...]})."""
    rpms = rpms or {}
    return [name for name in packages or [] if version not in (rpms.get(name) or [])]


def runtime_listed(runtimes):
    """Whether Docker's runtimes (names, or `docker info`'s Runtimes mapping) include the nvidia runtime."""
    return RUNTIME_NAME in (runtimes or [])


def docker_knows_runtime(docker):
    """Whether the Docker daemon (host_info's ``docker`` facts) runs and lists the nvidia runtime."""
    docker = docker or {}
    return bool(docker.get("running")) and runtime_listed(docker.get("runtimes"))


def _error(path, problem, remove):
    """The message to fail with (the invalid-JSON wording is the one the role's Jinja used)."""
    if remove:
        return (
            "%s %s: the nvidia runtime cannot be taken out of it. Fix the file by hand (nothing was changed "
            "by this step)." % (path, problem)
        )
    return (
        "%s %s; nvidia-ctk would refuse it and Docker would not start with it. Fix the file by hand (nothing "
        "was changed)." % (path, problem)
    )


def plan(
    daemon_json, set_as_default=False, docker=None, rpms=None, packages=(), version="", path=DEFAULT_PATH, remove=False
):
    """What daemon.json should become, and what is left to do.

    daemon_json: the file's text (None when absent); set_as_default: nvidia as Docker's default runtime;
    docker: host_info's ``docker`` facts (running, runtimes); rpms: host_info's ``rpms`` ({name: [versions]});
    packages, version: the toolkit packages and the version-release they must be at; path: the file (named in
    the command line and the error); remove: plan the uninstall (nvidia taken out) instead - then only before,
    after, differs and error are meant (converged and restart false, argv empty).

    Returns before and after (dicts; {} on error), differs (after is not before: the file is to be written),
    converged (RPMs at the version, nothing to change and the running daemon lists the runtime), restart (the
    file is right but the daemon does not list the runtime: restart it), argv (the nvidia-ctk command),
    rpms_wrong (the packages not at the version) and error ('' or the message to fail with; nothing to do then).
    """
    wrong = rpms_wrong(packages, version, rpms)
    result = {
        "before": {},
        "after": {},
        "differs": False,
        "converged": False,
        "restart": False,
        "argv": [] if remove else ctk_argv(path, set_as_default),
        "rpms_wrong": wrong,
        "error": "",
    }
    before, problem = parse_daemon_json(daemon_json)
    if problem:
        result["error"] = _error(path, problem, remove)
        return result
    if remove:
        after = without_runtime(before)
        result.update(before=before, after=after, differs=before != after)
        return result
    after = with_runtime(before, set_as_default)
    differs = before != after
    docker = docker or {}
    result.update(
        before=before,
        after=after,
        differs=differs,
        converged=not wrong and not differs and docker_knows_runtime(docker),
        restart=not differs and not runtime_listed(docker.get("runtimes")),
    )
    return result
