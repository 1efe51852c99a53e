"""airgap.vllm.validate on a real ansible-playbook run: a host whose PCI bus shows NVSwitches (the test world's lspci
over an HGX state) and a bundle without the Fabric Manager RPM of the driver's version is refused with one clear
line; the RPM added, or a host without NVSwitches, passes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os

import pytest
import yaml

from .test_validate_services import ROOT, run

PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Check the variables and the bundle
      airgap.vllm.validate:
        stages: [bundle, nvidia_driver]
        check_connection: false
"""
FM_RPM = "nvidia-fabric-manager-580.65.06-1.x86_64.rpm"
RUN_FILE = "NVIDIA-Linux-x86_64-580.65.06.run"
pytestmark = pytest.mark.skipif(
    not os.path.isdir(os.path.join(ROOT, "build", "collections", "ansible_collections", "airgap")),
    reason="the collection is not linked (bash tests/link-collection.sh)",
)


def bundle(root, files):
    """A controller-side bundle: the files under artifacts/ and a manifest.yml listing them."""
    entries = []
    for name, kind in files:
        data = name.encode()
        (root / "artifacts").mkdir(parents=True, exist_ok=True)
        (root / "artifacts" / name).write_bytes(data)
        entries.append(
            {
                "kind": kind,
                "name": name,
                "version": "580.65.06",
                "path": "artifacts/" + name,
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        )
    (root / "manifest.yml").write_text(yaml.safe_dump({"artifacts": entries}))
    return str(root)


def host_bus(tmp_path, monkeypatch, nvswitches):
    """The module's lspci is the test world's, over a GPU state with or without NVSwitches."""
    state = tmp_path / "state.json"
    state.write_text(
        json.dumps(
            {
                "kernel_module_version": "580.65.06",
                "gpus": [{"pci_bus_id": "00000000:18:00.0", "pci_device_id": "0x233010DE"}],
                "nvswitches": [
                    {"pci_bus_id": "00000000:%02X:00.0" % b, "pci_device_id": "0x22A310DE"}
                    for b in range(5, 5 + nvswitches)
                ],
            }
        )
    )
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(os.path.join(ROOT, "tests", "world", "fakes", "pci", "lspci"), str(bindir / "lspci"))
    monkeypatch.setenv("PATH", "%s%s%s" % (bindir, os.pathsep, os.environ.get("PATH", "")))
    monkeypatch.setenv("FAKE_NVML_STATE", str(state))


def test_an_nvswitch_host_with_a_bundle_without_fabric_manager_is_refused(tmp_path, monkeypatch):
    host_bus(tmp_path, monkeypatch, nvswitches=4)
    without = bundle(tmp_path / "b1", [(RUN_FILE, "driver")])
    rc, r = run(tmp_path, None, play=PLAY, bundle_path=without)
    assert rc != 0 and r.get("failed") is True
    assert (
        "bundle_path: got a bundle without %s (%s/manifest.yml: it carries no fabricmanager artifact); wants the "
        "Fabric Manager RPM of driver 580.65.06: this host needs it (lspci shows 4 NVSwitch(es) (vendor 10de, "
        "class 0680): 0000:05:00.0 GH100 [H100 NVSwitch] [10de:22a3]" % (FM_RPM, without)
    ) in r["msg"], r["msg"]
    assert "Add it to bundle_build_artifacts as kind fabricmanager" in r["msg"]

    with_fm = bundle(tmp_path / "b2", [(RUN_FILE, "driver"), (FM_RPM, "fabricmanager")])
    rc, r = run(tmp_path, None, play=PLAY, bundle_path=with_fm)
    assert rc == 0, r.get("msg")
    # Forced off, the same host passes without it (the operator's word).
    rc, r = run(tmp_path, None, play=PLAY, bundle_path=without, nvidia_driver_fabric_manager=False)
    assert rc == 0, r.get("msg")


def test_a_host_without_nvswitches_needs_no_fabric_manager_and_a_bad_setting_is_named(tmp_path, monkeypatch):
    host_bus(tmp_path, monkeypatch, nvswitches=0)
    plain = bundle(tmp_path / "b", [(RUN_FILE, "driver")])
    assert run(tmp_path, None, play=PLAY, bundle_path=plain)[0] == 0
    rc, r = run(tmp_path, None, play=PLAY, bundle_path=plain, nvidia_driver_fabric_manager="sometimes")
    assert rc != 0 and "nvidia_driver_fabric_manager: got 'sometimes' (a string); wants auto, true or false" in r["msg"]
