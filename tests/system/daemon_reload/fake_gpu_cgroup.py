"""Test-only model of the device cgroup of GPU containers under Docker's systemd cgroup driver (issue 46).

The real loss (NVIDIA/nvidia-container-toolkit issues 48 and 251): a GPU container's device cgroup grants
`c 195:N rw` for its GPUs and nvidiactl at start; on `systemctl daemon-reload`, systemd re-applies each container
scope's device policy from the /dev/char/MAJOR:MINOR paths it can resolve, and the NVIDIA nodes have none, so the
cgroup is left with `c 195:* m` and NVML inside prints "Failed to initialize NVML: Unknown Error". With the
cgroupfs driver systemd does not own the container's cgroup and nothing changes; with the /dev/char links the
grants survive.

    start NAME       a GPU container starts: grant `c M:m rw` for every /dev/nvidia* character node
    reload           run as a systemd generator, i.e. on every daemon-reload: with Docker's systemd driver
                     (exec-opts native.cgroupdriver=systemd in /etc/docker/daemon.json) each grant whose
                     /dev/char link is missing becomes `c M:* m`
    nvidia-smi NAME  nvidia-smi inside that container: the GPU list, or NVML's error when a grant is gone
"""

import json
import os
import stat
import sys

STATE = "/run/fake-gpu-cgroup"
DAEMON_JSON = "/etc/docker/daemon.json"


def nodes():
    out = []
    for name in sorted(os.listdir("/dev")):
        path = "/dev/" + name
        if name.startswith("nvidia") and stat.S_ISCHR(os.stat(path).st_mode):
            rdev = os.stat(path).st_rdev
            out.append((path, os.major(rdev), os.minor(rdev)))
    return out


def systemd_driver():
    try:
        with open(DAEMON_JSON) as f:
            opts = json.load(f).get("exec-opts") or []
    except (OSError, ValueError):
        return False
    return any(o.replace(" ", "").lower() == "native.cgroupdriver=systemd" for o in opts)


def linked(major, minor):
    link = "/dev/char/%d:%d" % (major, minor)
    try:
        st = os.stat(link)
    except OSError:
        return False
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(major, minor)


def devices_list(name):
    return os.path.join(STATE, name, "devices.list")


def start(name):
    os.makedirs(os.path.join(STATE, name), exist_ok=True)
    with open(devices_list(name), "w") as f:
        f.write("".join("c %d:%d rw\n" % (ma, mi) for _p, ma, mi in nodes()))
    return 0


def reload():
    if not systemd_driver() or not os.path.isdir(STATE):
        return 0
    for name in os.listdir(STATE):
        with open(devices_list(name)) as f:
            lines = f.read().splitlines()
        kept = []
        for line in lines:
            kind, dummy, rest = line.partition(" ")
            dev, dummy, access = rest.partition(" ")
            major, dummy, minor = dev.partition(":")
            if access == "rw" and minor != "*" and not linked(int(major), int(minor)):
                line = "c %s:* m" % major
            if line not in kept:
                kept.append(line)
        with open(devices_list(name), "w") as f:
            f.write("".join(line + "\n" for line in kept))
    return 0


def nvidia_smi(name):
    with open(devices_list(name)) as f:
        granted = set(f.read().splitlines())
    if not nodes() or any("c %d:%d rw" % (ma, mi) not in granted for _p, ma, mi in nodes()):
        print("Failed to initialize NVML: Unknown Error")
        return 255
    gpus = [p for p, _ma, _mi in nodes() if p[len("/dev/nvidia") :].isdigit()]
    for i, _p in enumerate(gpus):
        print("GPU %d: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-00000000000%d)" % (i, i))
    return 0


if __name__ == "__main__":
    cmd = sys.argv[1:2]
    if cmd == ["start"]:
        sys.exit(start(sys.argv[2]))
    if cmd == ["reload"]:
        sys.exit(reload())
    if cmd == ["nvidia-smi"]:
        sys.exit(nvidia_smi(sys.argv[2]))
    sys.stderr.write(__doc__)
    sys.exit(2)
