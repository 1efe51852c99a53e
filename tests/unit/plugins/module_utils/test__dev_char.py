"""The systemd cgroup driver's daemon-reload hazard and NVIDIA's /dev/char remedy (module_utils/driver/_dev_char.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.driver import _dev_char as D

SYSTEMD = {"running": True, "cgroup_driver": "systemd", "cgroup_version": "1"}
CGROUPFS = {"running": True, "cgroup_driver": "cgroupfs", "cgroup_version": "1"}


def test_rule_is_nvidias_word_for_word():
    text = D.rule_text()
    lines = text.splitlines()
    assert lines[0] == D.MARKER
    # NVIDIA/nvidia-docker issue 1671 (the notice NVIDIA points to from nvidia-container-toolkit issue 48).
    assert lines[1:] == [
        "# This will create /dev/char symlinks to all device nodes",
        'ACTION=="add", DEVPATH=="/bus/pci/drivers/nvidia", '
        'RUN+="/usr/bin/nvidia-ctk system create-dev-char-symlinks --create-all"',
    ]
    assert D.RULE_PATH == "/lib/udev/rules.d/71-nvidia-dev-char.rules"


@pytest.mark.parametrize("bad", ["nvidia-ctk", '/usr/bin/nv"ctk', "/usr/bin/x\ny"])
def test_rule_refuses_a_path_udev_cannot_run(bad):
    with pytest.raises(ValueError):
        D.rule_text(bad)


def test_exposure_by_cgroup_driver():
    assert D.exposure(SYSTEMD, "1.17.8-1")["status"] == "exposed"
    assert D.exposure(SYSTEMD, "1.17.8-1")["remedy"] is True
    assert D.exposure(dict(SYSTEMD, cgroup_driver="Systemd "), "1.17.8-1")["remedy"] is True
    safe = D.exposure(CGROUPFS, "1.17.8-1")
    assert (safe["status"], safe["remedy"], safe["error"]) == ("safe", False, "")
    down = D.exposure({"running": False}, "1.17.8-1")
    assert (down["status"], down["remedy"]) == ("unknown", False)


def test_exposure_old_toolkit_cannot_apply_the_remedy():
    old = D.exposure(SYSTEMD, "1.11.0-1")
    assert old["status"] == "exposed" and old["remedy"] is False
    assert "1.11.0-1" in old["error"] and "1.12.0" in old["error"] and "cgroupfs" in old["error"]
    assert D.exposure(SYSTEMD, "1.12.0-1")["error"] == ""
    # Version unknown (not installed yet): the stage installs one that has the command.
    assert D.exposure(SYSTEMD, "")["remedy"] is True


def test_missing_links():
    nodes = [
        {"path": "/dev/nvidia0", "major": 195, "minor": 0},
        {"path": "/dev/nvidiactl", "major": 195, "minor": 255},
        {"path": "/dev/nvidia-uvm", "major": 511, "minor": 0},
    ]
    links = {"195:0": "/dev/nvidia0", "195:255": None, "511:0": "/dev/sda"}
    assert D.missing_links(nodes, links) == ["/dev/nvidia-uvm", "/dev/nvidiactl"]
    assert (
        D.missing_links(nodes, {"195:0": "/dev/nvidia0", "195:255": "/dev/nvidiactl", "511:0": "/dev/nvidia-uvm"}) == []
    )
    assert D.missing_links([], {}) == []


def test_remedy_plan():
    dev_char = {"missing": ["/dev/nvidia0"]}
    plan = D.remedy_plan(SYSTEMD, "1.17.8-1", dev_char)
    assert plan["links"] and plan["rule"]
    assert plan["argv"] == ["/usr/bin/nvidia-ctk", "system", "create-dev-char-symlinks", "--create-all"]
    assert plan["content"] == D.rule_text()
    converged = D.remedy_plan(SYSTEMD, "1.17.8-1", {"missing": []})
    assert not converged["links"] and converged["rule"]
    none = D.remedy_plan(CGROUPFS, "1.17.8-1", dev_char)
    assert not none["links"] and not none["rule"]
    old = D.remedy_plan(SYSTEMD, "1.10.0-1", dev_char)
    assert not old["links"] and not old["rule"] and old["error"]


def test_read_dev_char(tmp_path):
    """On a real tree: a character device of our own is not possible unprivileged, so /dev/null stands in."""
    dev = tmp_path / "dev"
    char = dev / "char"
    char.mkdir(parents=True)
    os.symlink("/dev/null", str(dev / "nvidia0"))
    (dev / "nvidiactl").write_text("not a device")
    (dev / "sda").write_text("")
    st = os.stat("/dev/null")
    key = "%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))
    got = D.read_dev_char(str(dev), str(char))
    assert got["nodes"] == [
        {
            "path": str(dev / "nvidia0"),
            "major": os.major(st.st_rdev),
            "minor": os.minor(st.st_rdev),
            "real": "/dev/null",
        }
    ]
    assert got["missing"] == [str(dev / "nvidia0")]
    os.symlink("../nvidia0", str(char / key))
    got = D.read_dev_char(str(dev), str(char))
    # The link resolves through dev/nvidia0 to /dev/null: a link to the node, not to its own path.
    assert got["links"][key] == "/dev/null" and got["missing"] == []
