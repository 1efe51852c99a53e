"""driver_modules as Ansible runs it, against the test world's own fake-kmod as rmmod/modprobe (issue 29)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.airgap.vllm.plugins.modules import driver_modules as M

KMOD = os.path.join(os.path.dirname(__file__), "..", "..", "..", "world", "fakes", "driver", "fake-kmod")


@pytest.fixture
def world(tmp_path, monkeypatch):
    """A fake GPU state with the 570 driver booted, fake-kmod as rmmod/modprobe first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("rmmod", "modprobe"):
        os.symlink(os.path.abspath(KMOD), str(bin_dir / tool))
    state = tmp_path / "state.json"
    state.write_text(
        json.dumps(
            {
                "kernel_module_version": "570.172.08",
                "modules": ["nvidia", "nvidia_modeset", "nvidia_drm", "nvidia_uvm"],
                "gpus": [{"index": 0, "processes": []}],
            }
        )
    )
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))
    monkeypatch.setenv("FAKE_NVML_STATE", str(state))
    monkeypatch.setenv("FAKE_NVIDIA_VERSION_FILE", str(tmp_path / "version"))
    monkeypatch.setenv("FAKE_PROC_MODULES", str(tmp_path / "modules"))
    (tmp_path / "modules").write_text(
        "nvidia_uvm 1437696 0 - Live 0x0 (POE)\nnvidia_drm 77824 0 - Live 0x0 (POE)\n"
        "nvidia_modeset 1310720 1 nvidia_drm, Live 0x0 (POE)\nnvidia 54525952 2 nvidia_uvm,nvidia_modeset, Live 0x0 (POE)\n"
    )
    return tmp_path


def hold(world, pid):
    state = json.loads((world / "state.json").read_text())
    state["gpus"][0]["processes"] = [{"pid": pid, "used_memory": 1 << 30, "name": "vllm"}]
    (world / "state.json").write_text(json.dumps(state))


def test_check_mode_says_the_order_and_unloads_nothing(run_module, world):
    r = run_module(M, check_mode=True, state="absent", modules_file=str(world / "modules"))
    assert r["order"] == ["nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia"] == r["removed"]
    assert not r["changed"] and "nvidia " in (world / "modules").read_text()


def test_unloads_in_order_then_nothing_left(run_module, world):
    r = run_module(M, state="absent", modules_file=str(world / "modules"), wait=0)
    assert r["changed"] and r["unloaded"] and r["removed"] == ["nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia"]
    assert (world / "modules").read_text() == "" and not (world / "version").exists()
    again = run_module(M, state="absent", modules_file=str(world / "modules"), wait=0)
    assert not again["changed"] and again["unloaded"] and again["order"] == []


def test_a_gpu_process_keeps_nvidia_uvm_and_is_named(run_module, world):
    hold(world, os.getpid())
    r = run_module(M, state="absent", modules_file=str(world / "modules"), wait=0)
    assert not r["unloaded"] and r["removed"] == ["nvidia_drm", "nvidia_modeset"]
    assert r["failed_module"] == "nvidia_uvm"
    assert "rmmod said: rmmod: ERROR: Module nvidia_uvm is in use" in r["holders"]
    assert "failed" not in r


def test_waits_for_a_process_that_exits(run_module, world):
    import subprocess
    import threading

    child = subprocess.Popen(["sleep", "1.5"])
    hold(world, child.pid)
    reaper = threading.Thread(target=child.wait)  # as containerd-shim reaps a container's process
    reaper.start()
    try:
        r = run_module(M, state="absent", modules_file=str(world / "modules"), wait=20)
    finally:
        reaper.join()
    assert r["unloaded"] and r["seconds"] >= 1


def test_load_needs_a_module_file(run_module, world):
    run_module(M, state="absent", modules_file=str(world / "modules"), wait=0)
    r = run_module(M, state="present", modules_file=str(world / "modules"))
    assert r["failed"] and "modprobe nvidia failed" in r["msg"] and "Module nvidia not found" in r["msg"]
