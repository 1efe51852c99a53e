"""Persistence mode verified from NVML (issue 29, item 4): every GPU Enabled, or a message naming the others."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.driver._driver_persistence import persistence_report


def gpu(index, mode, bus=True):
    g = {"index": index, "uuid": "GPU-%d" % index, "persistence_mode": mode}
    if bus:
        g["pci_bus_id"] = "00000000:%02X:00.0" % (0x3B + index)
    return g


def test_every_gpu_enabled_is_ok():
    r = persistence_report({"nvml_state": "ok", "gpus": [gpu(0, True), gpu(1, True)]})
    assert r["ok"] and r["disabled"] == [] and r["unsupported"] == []
    assert r["enabled"] == ["GPU 0 (00000000:3B:00.0, GPU-0)", "GPU 1 (00000000:3C:00.0, GPU-1)"]
    assert r["msg"].startswith("Persistence mode Enabled on all 2 GPU(s)")


def test_one_gpu_disabled_is_named_with_the_unit_to_look_at():
    r = persistence_report({"nvml_state": "ok", "gpus": [gpu(0, True), gpu(1, False)]}, unit="pd.service")
    assert not r["ok"]
    assert r["disabled"] == ["GPU 1 (00000000:3C:00.0, GPU-1)"] and r["enabled"] == ["GPU 0 (00000000:3B:00.0, GPU-0)"]
    assert "Disabled on GPU 1 (00000000:3C:00.0, GPU-1)" in r["msg"]
    assert "Enabled on 1 of 2 GPU(s)" in r["msg"]
    assert "systemctl status pd.service" in r["msg"] and "journalctl -u pd.service" in r["msg"]
    assert "GPU 0" not in r["msg"].split("(Enabled")[0]


def test_a_gpu_nvml_cannot_answer_for_is_not_proven():
    r = persistence_report({"nvml_state": "ok", "gpus": [gpu(0, None, bus=False)]})
    assert not r["ok"] and r["unsupported"] == ["GPU 0 (GPU-0)"]
    assert "not reported by NVML for GPU 0 (GPU-0)" in r["msg"]


@pytest.mark.parametrize(
    "nvml, words",
    [
        (
            {"nvml_state": "driver_not_loaded", "hint": "load the module", "gpus": []},
            "NVML says driver_not_loaded (load the module)",
        ),
        ({"nvml_state": "version_mismatch", "gpus": [gpu(0, True)]}, "NVML says version_mismatch"),
        ({}, "NVML says absent"),
        (None, "NVML says absent"),
        ({"nvml_state": "ok", "gpus": []}, "NVML sees no GPU"),
    ],
)
def test_no_working_nvml_or_no_gpu_cannot_be_verified(nvml, words):
    r = persistence_report(nvml)
    assert not r["ok"] and words in r["msg"] and r["enabled"] == []
