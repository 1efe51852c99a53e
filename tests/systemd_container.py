"""The `docker run` flags of a systemd (and docker-in-docker) container of the test world, once: for the tests that
start such a host themselves instead of through molecule. --privileged is refused here (tests/world/README.md)."""

import os

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


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
