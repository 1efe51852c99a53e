"""nvml_info as Ansible runs it, on the stand-in libnvidia-ml (compiled from tests/world/fakes/nvml)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import json

import pytest

from ansible_collections.airgap.vllm.plugins.modules import nvml_info as M

from ..module_utils import test__nvml as NV

GIB, VERSION = NV.GIB, NV.VERSION
build = NV.build  # the stand-in library, a session fixture: built once for both test files


@pytest.fixture(scope="module")
def library(request):
    return str(request.getfixturevalue("build") / "libnvidia-ml.so.1")


@pytest.fixture
def probe(run_module):
    """nvml_info only reads the host: run as in a --check run (tests/unit/conftest.py runs it)."""
    return functools.partial(run_module, M, check_mode=True)


def write_state(tmp_path, monkeypatch, module_version):
    state = tmp_path / "state.json"
    state.write_text(
        json.dumps(
            {
                "kernel_module_version": module_version,
                "init_error": None,
                "cuda_driver_version": 13000,
                "gpus": [
                    {
                        "index": 0,
                        "uuid": "GPU-3f1c2a9e-6b1d-4c55-9f0e-2a7d5c8e1b40",
                        "name": "NVIDIA RTX 6000 Ada Generation",
                        "pci_bus_id": "00000000:3B:00.0",
                        "pci_device_id": "0x26B110DE",
                        "memory_total": 48 * GIB,
                        "memory_used": 0,
                        "compute_capability": [8, 9],
                        "persistence_mode": 1,
                        "processes": [],
                    }
                ],
            }
        )
    )
    monkeypatch.setenv("FAKE_NVML_STATE", str(state))
    version = tmp_path / "version"
    version.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  %s  Release Build\n" % module_version)
    return str(version)


def test_healthy_host(probe, monkeypatch, tmp_path, library):
    version = write_state(tmp_path, monkeypatch, VERSION)
    r = probe(library=library, driver_version_file=version)
    assert not r["changed"] and r["nvml_state"] == "ok" and r["driver_version"] == VERSION
    assert r["gpu_count"] == 1 and r["gpus"][0]["uuid"].startswith("GPU-3f1c") and r["cuda_version"] == "13.0"


def test_mismatch_and_absent_library_are_states_not_failures(probe, monkeypatch, tmp_path, library):
    version = write_state(tmp_path, monkeypatch, "560.35.03")
    r = probe(library=library, driver_version_file=version)
    assert "failed" not in r and r["nvml_state"] == "version_mismatch" and r["kernel_module_version"] == "560.35.03"
    assert r["hint"]
    r = probe(library=str(tmp_path / "nope.so"), driver_version_file=version)
    assert "failed" not in r and r["nvml_state"] == "absent" and r["gpus"] == []
