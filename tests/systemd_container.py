"""The `docker run` flags of a systemd (and docker-in-docker) container of the test world, once: for the tests that
start such a host themselves instead of through molecule. --privileged is refused here (tests/world/README.md).
Also the `docker` call and the skip mark those tests share."""

import json
import os
import re
import shutil
import subprocess

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
KYLIN_IMAGE = os.environ.get("AIRGAP_KYLIN_IMAGE", "airgap-test/kylin:v10sp3")


def docker(*args, **kw):
    """`docker ARGS` as a CompletedProcess of text (check=False and a 300 s timeout unless given)."""
    kw.setdefault("timeout", 300)
    return subprocess.run(["docker"] + list(args), capture_output=True, text=True, check=kw.pop("check", False), **kw)


def needs_image(image=KYLIN_IMAGE):
    """The pytest mark that skips a module when docker or `image` is absent."""
    present = bool(shutil.which("docker")) and docker("image", "inspect", image).returncode == 0
    return pytest.mark.skipif(not present, reason="needs docker and the test world image " + image)


def molecule_capabilities():
    """The capabilities of molecule's platform (.config/molecule/config.yml): the simulated host's."""
    with open(os.path.join(ROOT, ".config", "molecule", "config.yml")) as f:
        return yaml.safe_load(f)["platforms"][0]["capabilities"]


def systemd_flags(caps=None):
    """The flags: `caps` added (None: molecule's), no seccomp or AppArmor confinement, tmpfs /run, /run/lock and
    /tmp, and the host's cgroup tree (systemd as PID 1 needs it)."""
    caps = molecule_capabilities() if caps is None else caps
    return [a for c in caps for a in ("--cap-add", c)] + [
        "--security-opt",
        "seccomp=unconfined",
        "--security-opt",
        "apparmor=unconfined",
        "--tmpfs",
        "/run",
        "--tmpfs",
        "/run/lock",
        "--tmpfs",
        "/tmp",
        "-v",
        "/sys/fs/cgroup:/sys/fs/cgroup:rw",
        "--cgroupns=host",
    ]


def play_on_container(name, playbook, tmp_path, check=False, variables=None):
    """ansible-playbook `playbook` against the container `name` over community.docker.docker, this checkout's
    collection first; `variables` as an extra-vars file. {"rc", "out", "changed", "failed"} of its recap."""
    env = dict(os.environ)
    env["ANSIBLE_COLLECTIONS_PATH"] = os.pathsep.join(
        [os.path.join(ROOT, "build", "collections"), os.path.expanduser("~/.ansible/collections")]
    )
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env["ANSIBLE_NOCOLOR"] = "1"
    env["ANSIBLE_STDOUT_CALLBACK"] = "default"
    env["ANSIBLE_CALLBACK_RESULT_FORMAT"] = "json"  # messages as JSON strings, never folded
    env["ANSIBLE_LOCAL_TEMP"] = str(tmp_path / "ansible-local")
    inventory = tmp_path / "inventory.ini"
    inventory.write_text(
        "%s ansible_connection=community.docker.docker ansible_python_interpreter=/usr/bin/python3\n" % name
    )
    cmd = ["ansible-playbook", "-i", str(inventory), playbook]
    if variables:
        varfile = tmp_path / "vars.json"
        varfile.write_text(json.dumps(variables))
        cmd += ["-e", "@" + str(varfile)]
    if check:
        cmd.append("--check")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600, check=False)
    out = r.stdout + r.stderr
    m = re.search(r"ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", out)
    assert m, out[-4000:]
    return {"rc": r.returncode, "out": out, "changed": int(m.group(2)), "failed": int(m.group(4))}
