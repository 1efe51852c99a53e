# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan's argv checked by the new image's own ``vllm serve`` parser, before the service is touched (issue 30).

Pure, stdlib only, Python 3.7-clean. The role runs roles/vllm_service/files/parse_argv.py in a throwaway
``--network none`` container of the image (no engine start, no GPU); the script prints one line
``MARKER <json>`` with [{"id", "ok", "error", "args", "vllm"}]. ``verdict`` reads that output and names the flags
the release refused; ``check_key`` keys the verdict on the host by (image ID, argv) so that a converged re-run
starts no container (``cached``/``remember``). ``check`` is the whole step for the vllm_argv_check module: the image
ID, the cache, one throwaway container (``check_command``), the verdict, the cache written back (never in check
mode).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import re

from ansible_collections.airgap.vllm.plugins.module_utils.common._docker import DockerError, DockerTimeout
from ansible_collections.airgap.vllm.plugins.module_utils.common._files import read_text, write_atomic

MARKER = "AIRGAP_VLLM_PARSE"
# How many verdicts the host keeps (one per image x argv; older ones go first).
CACHE_LIMIT = 20
# Importing vLLM's parser (torch, transformers) in a cold container: about 1 minute on 2 busy cores.
CHECK_TIMEOUT = 900
# Flags whose value is a file only the serving container has: `--config` is the unit's root-only API-key file
# (mounted into the serving container alone). The check never sees the keys, and the parser would try to open it.
CONTAINER_FILE_FLAGS = ("--config",)

_FLAG_RE = re.compile(r"(?<![\w-])(--?[A-Za-z][\w.-]*)")


class ArgvCheckError(Exception):
    """The check cannot be made at all (the image is absent, Docker does not answer)."""


def check_key(image_id, argv, tool=None):
    """The cache key of one check: sha256 over the image ID and the argv (order and values count), and ``tool``
    (what judged it: the script and the interpreter; a new parse_argv.py checks again)."""
    if not image_id:
        raise ValueError("the argv check needs the image ID")
    parts = [str(image_id), [str(a) for a in (argv or [])]]
    if tool is not None:
        parts.append(str(tool))
    blob = json.dumps(parts, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def check_argv(argv):
    """The argv the parser judges: the plan's, without the flags whose value is a file only the serving container
    has (CONTAINER_FILE_FLAGS: ``--config FILE`` or ``--config=FILE``)."""
    out, skip = [], False
    for arg in argv or []:
        arg = str(arg)
        if skip:
            skip = False
            continue
        if arg in CONTAINER_FILE_FLAGS:
            skip = True
            continue
        if arg.split("=", 1)[0] in CONTAINER_FILE_FLAGS and "=" in arg:
            continue
        out.append(arg)
    return out


def check_options(docker_options, seccomp_path=None):
    """The serving container's ``--security-opt`` settings (the seccomp profile, no-new-privileges) out of its docker
    options: the check container runs under the same syscall filter (on kernel 4.19 with Docker < 20.10.10 the
    default filter answers clone3 with EPERM, and vLLM's imports start threads). GPUs, mounts, ports: none.

    ``seccomp_path``: a copy of the service's profile to use instead of the one its options name (that file is
    written only after the check, by configure.yml, so a first deployment has none yet); ``seccomp=unconfined``
    stays as it is."""
    opts = [str(o) for o in (docker_options or [])]
    out = []
    for i, opt in enumerate(opts):
        if opt == "--security-opt" and i + 1 < len(opts):
            value = opts[i + 1]
        elif opt.startswith("--security-opt="):
            value = opt.split("=", 1)[1]
        else:
            continue
        name = re.split(r"[=:]", value, maxsplit=1)[0]
        if seccomp_path and name == "seccomp" and value[len(name) + 1 :] != "unconfined":
            value = "seccomp=%s" % seccomp_path
        out += ["--security-opt", value]
    return out


def check_command(image_id, argv, script, python="python3", docker_options=(), seccomp_path=None):
    """``docker`` arguments of the throwaway check container: no network, removed at exit, the image's own python
    running parse_argv.py (``-c``) in its one-case mode on argv; the image's entry point is not run (an image whose
    entry point is broken is still judged by its parser; it fails later, at the start)."""
    return (
        ["run", "--rm", "--network", "none"]
        + check_options(docker_options, seccomp_path)
        + ["--entrypoint", python, str(image_id), "-c", script, "-"]
        + [str(a) for a in argv]
    )


def parse_output(stdout):
    """The script's result list from its stdout (vLLM's own log lines around it are ignored)."""
    for line in reversed(str(stdout or "").splitlines()):
        if line.startswith(MARKER + " "):
            try:
                out = json.loads(line[len(MARKER) + 1 :])
            except ValueError:
                break
            if isinstance(out, list):
                return out
            break
    raise ValueError(
        "the argv check printed no %s line (the image's python3 or vLLM parser did not run): %s"
        % (MARKER, str(stdout or "")[-400:])
    )


def refused_flags(error, argv=()):
    """The flags an argparse/vLLM error names: ``unrecognized arguments: --swap-space 4`` -> ["--swap-space"];
    ``argument --kv-cache-dtype: invalid choice`` -> ["--kv-cache-dtype"]. Only flags that are in ``argv``
    when argv is given (an error's own text may mention others, e.g. "did you mean --x")."""
    text = str(error or "")
    m = re.search(r"unrecognized arguments?:\s*(.*)", text)
    if m:
        found = _FLAG_RE.findall(m.group(1))
    else:
        m = re.search(r"argument ((?:--?[\w.-]+/?)+):", text)
        found = _FLAG_RE.findall(m.group(1)) if m else _FLAG_RE.findall(text)
    given = set(str(a).split("=", 1)[0] for a in (argv or ()) if str(a).startswith("-"))
    out = []
    for flag in found:
        flag = flag.split("=", 1)[0]
        if (not given or flag in given) and flag not in out:
            out.append(flag)
    return out


def verdict(stdout, release, image_id, argv, rc=0, stderr=""):
    """{"ok", "checked", "release", "flags", "error", "message"} of one check (the script's case "plan").

    ok false when the parser refused the argv (the message names the flags and the release) and when the check
    could not run at all (no result line: no python3 in the image, Docker refused the container); never a guess
    that it passed. ok None (checked false) when the script ran but the image's vLLM has no parser it can import
    (a stand-in, a release that moved it): nothing was judged, and the message says so. ``release``: the one the
    image stage read; else the one the script read in the image."""
    try:
        results = parse_output(stdout)
    except ValueError as exc:
        tail = str(stderr or "").strip()[-400:]
        return {
            "ok": False,
            "checked": False,
            "release": release or None,
            "flags": [],
            "error": str(exc),
            "message": "vLLM %s (image %s): the argv check did not run (rc %s): %s%s"
            % (release or "of unknown release", image_id, rc, exc, (" / stderr: " + tail) if tail else ""),
        }
    case = next((r for r in results if isinstance(r, dict) and r.get("id") == "plan"), None)
    if case is None:
        return {
            "ok": False,
            "checked": False,
            "release": release or None,
            "flags": [],
            "error": "no result for the plan",
            "message": "vLLM %s (image %s): the argv check returned no result for the plan"
            % (release or "of unknown release", image_id),
        }
    release = release or case.get("vllm") or None
    if case.get("ok") is None and case.get("unchecked"):
        return {
            "ok": None,
            "checked": False,
            "release": release,
            "flags": [],
            "error": str(case.get("error") or ""),
            "message": "vLLM %s (image %s): the argv was NOT checked: the image has no vLLM argument parser this "
            "check can import (%s); a refused flag shows only at the start"
            % (release or "of unknown release", image_id, str(case.get("error") or "?")[-200:]),
        }
    if case.get("ok"):
        return {
            "ok": True,
            "checked": True,
            "release": release,
            "flags": [],
            "error": None,
            "message": "vLLM %s (image %s) accepts the plan's argv" % (release or "of unknown release", image_id),
        }
    error = str(case.get("error") or "")
    flags = refused_flags(error, argv)
    return {
        "ok": False,
        "checked": True,
        "release": release,
        "flags": flags,
        "error": error[-600:],
        "message": "vLLM %s (image %s) refuses the plan's argv%s: %s. The running service was not touched; "
        "drop or rename the flag (vllm_plan_extra_args / vllm_plan_override_flags, or a planner "
        "rule for this release)"
        % (
            release or "of unknown release",
            image_id,
            (" at " + ", ".join(flags)) if flags else "",
            error.strip().splitlines()[-1][-300:] if error.strip() else "?",
        ),
    }


def cached(cache, key):
    """The verdict stored under key, or None (a cache that is not the shape we write counts as empty)."""
    entries = (cache or {}).get("verdicts") if isinstance(cache, dict) else None
    if not isinstance(entries, list):
        return None
    for entry in entries:
        if isinstance(entry, dict) and entry.get("key") == key and isinstance(entry.get("verdict"), dict):
            return entry["verdict"]
    return None


def remember(cache, key, result, limit=CACHE_LIMIT):
    """The cache with result stored under key as the newest entry. Only verdicts that let the stage go on are kept
    (accepted, or unchecked: an image without a parser stays without one): a refusal, or a check that did not run,
    is checked again next run (the operator's fix changes the argv, hence the key, anyway)."""
    entries = (cache or {}).get("verdicts") if isinstance(cache, dict) else None
    entries = [e for e in (entries if isinstance(entries, list) else []) if isinstance(e, dict) and e.get("key") != key]
    if result.get("ok") or (result.get("ok") is None and "ok" in result):
        entries.append({"key": key, "verdict": result})
    return {"verdicts": entries[-limit:]}


def read_cache(path):
    """The cache file's content; {} when it is missing, unreadable or not JSON (a damaged cache only costs a check)."""
    text = read_text(path) if path else None
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def check(
    cli,
    image,
    argv,
    script,
    release=None,
    cache_path=None,
    python="python3",
    docker_options=(),
    check_mode=False,
    timeout=CHECK_TIMEOUT,
    seccomp_path=None,
):
    """The argv check of one service: verdict (above) + {"cached", "key", "image_id", "argv", "cache_written"}.

    ``cli``: a _docker.DockerCli. The image must be in the local Docker (ArgvCheckError otherwise, as when Docker
    does not answer). A verdict stored under (image ID, judged argv, script, python) is returned without a
    container; otherwise one container judges the argv and, outside check mode, a verdict that lets the stage go
    on is stored (``cache_path``, root-only, its directory made 0700 if missing). ``seccomp_path``: see
    check_options."""
    try:
        image_id = cli.image_id(image)
    except DockerError as exc:
        raise ArgvCheckError("cannot read image %s: %s" % (image, exc))
    if not image_id:
        raise ArgvCheckError("image %s is not in the local Docker: run the vllm_image role first" % image)
    judged = check_argv(argv)
    tool = hashlib.sha256((str(python) + "\0" + str(script)).encode("utf-8")).hexdigest()
    key = check_key(image_id, judged, tool)
    cache = read_cache(cache_path)
    hit = cached(cache, key)
    extra = {"key": key, "image_id": image_id, "argv": judged, "cache_written": False}
    if hit is not None:
        return dict(hit, cached=True, **extra)
    cmd = check_command(image_id, judged, script, python, docker_options, seccomp_path)
    try:
        rc, out, err = cli.call(cmd, check=False, timeout=timeout)
    except DockerTimeout as exc:
        rc, out, err = None, exc.stdout or "", "%s %s" % (exc, exc.stderr or "")
    result = verdict(out, release, image_id, judged, rc=rc, stderr=err)
    if cache_path and not check_mode and result["ok"] is not False:
        write_atomic(
            cache_path,
            json.dumps(remember(cache, key, result), sort_keys=True, indent=1) + "\n",
            mode=0o600,
            makedirs=0o700,
        )
        extra["cache_written"] = True
    return dict(result, cached=False, **extra)
