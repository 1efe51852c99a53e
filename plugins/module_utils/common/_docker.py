# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one Docker CLI helper of the collection (targets have no Docker SDK, only the CLI).

``DockerCli(docker_bin, run=None, timeout=120)``: every call runs ``[docker_bin] + args`` with a time limit,
failures raise typed errors that carry the command, its exit status and both outputs, and the JSON
``inspect`` calls tell "no such object" (None) from a daemon that does not answer (DockerError).
``run`` replaces the subprocess runner (tests, or AnsibleModule.run_command): ``run(argv) -> (rc, out, err)``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import subprocess

from ansible_collections.airgap.vllm.plugins.module_utils.common._text import as_text as _text

DEFAULT_TIMEOUT = 120
# `docker load` of an 8.5 GB vLLM image takes minutes on a slow disk.
LOAD_TIMEOUT = 3600
_MISSING = ("no such image", "no such object", "no such container", "no such service")


class DockerError(Exception):
    """A docker CLI call failed; cmd, rc, stdout and stderr say how."""

    def __init__(self, msg, cmd=None, rc=None, stdout=None, stderr=None):
        super(DockerError, self).__init__(msg)
        self.cmd = cmd
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr

    @property
    def details(self):
        """The failed call's cmd, rc, stdout and stderr: the result keys a module fails with (_module.py)."""
        return dict(cmd=self.cmd, rc=self.rc, stdout=self.stdout, stderr=self.stderr)


class DockerTimeout(DockerError):
    """A docker CLI call ran past its time limit (and was killed)."""


def subprocess_run(argv, timeout=None):
    """(rc, stdout, stderr) of argv, killed after `timeout` seconds (DockerTimeout). A missing binary is rc 127."""
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        return 127, "", "%s: %s" % (argv[0], exc.strerror or exc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise DockerTimeout(
            "%s did not finish within %ss (killed)" % (" ".join(argv), timeout),
            cmd=list(argv),
            rc=None,
            stdout=_text(out),
            stderr=_text(err),
        )
    return proc.returncode, _text(out), _text(err)


def is_missing(text):
    """Whether docker's error text says the object does not exist (rather than that the daemon failed)."""
    text = (text or "").lower()
    return any(marker in text for marker in _MISSING)


class DockerCli(object):
    """The Docker CLI calls the modules need, on one binary, each with a time limit."""

    def __init__(self, docker_bin="docker", run=None, timeout=DEFAULT_TIMEOUT):
        self.docker_bin = docker_bin
        self.timeout = timeout
        self._run = run

    def call(self, args, check=True, timeout=None):
        """(rc, out, err) of `docker <args>`; DockerError on a non-zero exit when `check`."""
        cmd = [self.docker_bin] + list(args)
        if self._run is None:
            rc, out, err = subprocess_run(cmd, timeout or self.timeout)
        else:
            rc, out, err = self._run(cmd)
        out, err = _text(out), _text(err)
        if check and rc != 0:
            raise self.failed(args, rc, out, err)
        return rc, out, err

    def failed(self, args, rc, out, err):
        """The DockerError of `docker <args>` that exited rc (the one wording of a failed call)."""
        cmd = [self.docker_bin] + list(args)
        return DockerError(
            "%s failed (rc=%s): %s" % (" ".join(cmd), rc, (err or out).strip()), cmd=cmd, rc=rc, stdout=out, stderr=err
        )

    def inspect_json(self, args):
        """Parsed JSON of an inspect-like call, or None when docker says the object does not exist."""
        rc, out, err = self.call(args, check=False)
        if rc != 0:
            if is_missing(err) or is_missing(out):
                return None
            raise self.failed(args, rc, out, err)
        try:
            return json.loads(out)
        except ValueError as exc:
            raise DockerError(
                "docker %s printed no JSON (%s): %s" % (" ".join(args), exc, out[:200]),
                cmd=[self.docker_bin] + list(args),
                rc=rc,
                stdout=out,
                stderr=err,
            )

    # ------------------------------------------------------------------ images
    def image_id(self, ref):
        """Image ID a reference resolves to, or None when absent."""
        args = ["image", "inspect", "--format", "{{.Id}}", ref]
        rc, out, err = self.call(args, check=False)
        if rc == 0:
            return out.strip() or None
        if is_missing(err) or is_missing(out):
            return None
        raise self.failed(args, rc, out, err)

    def load(self, path):
        return self.call(["load", "--input", path], timeout=LOAD_TIMEOUT)

    def root_dir(self):
        """The daemon's DockerRootDir (where `docker load` writes)."""
        return self.call(["info", "--format", "{{.DockerRootDir}}"])[1].strip()

    def tag(self, image_id, ref):
        return self.call(["tag", image_id, ref])

    # ------------------------------------------------------- containers, swarm
    def inspect(self, kind, refs):
        """Inspect containers (`kind` container) or swarm services (`kind` service); unknown refs are skipped."""
        found = []
        for ref in refs:
            args = ["service", "inspect", ref] if kind == "service" else ["inspect", "--type", "container", ref]
            try:
                items = self.inspect_json(args)
            except DockerError as exc:
                # A node outside a swarm (or a worker) has no services to inspect: the service is not there.
                if kind == "service" and "not a swarm manager" in (exc.stderr or "").lower():
                    continue
                raise
            if items:
                found.extend(items)
        return found

    def swarm_state(self):
        """LocalNodeState (active, pending, inactive, locked, error); DockerError when `docker info` fails."""
        return self.call(["info", "--format", "{{.Swarm.LocalNodeState}}"])[1].strip()

    def swarm_active(self):
        try:
            return self.swarm_state() == "active"
        except DockerError:
            return False

    def service_names(self):
        if not self.swarm_active():
            return set()
        return set(self.call(["service", "ls", "--format", "{{.Name}}"])[1].split())

    def container_ids(self):
        return set(self.call(["ps", "-a", "--no-trunc", "--format", "{{.ID}}"])[1].split())

    def info(self):
        """`docker info` as a dict (raises DockerError when the CLI fails or prints no JSON object)."""
        data = self.inspect_json(["info", "--format", "{{json .}}"])
        if not isinstance(data, dict):
            raise DockerError("docker info did not return a JSON object", cmd=[self.docker_bin, "info"])
        return data
