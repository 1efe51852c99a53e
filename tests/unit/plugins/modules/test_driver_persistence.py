"""driver_persistence as Ansible runs it: asks NVML until every GPU says Enabled, fails naming the others."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.airgap.vllm.plugins.modules import driver_persistence as M


def nvml(*modes):
    return {
        "nvml_state": "ok",
        "gpus": [{"index": i, "pci_bus_id": "0000:%02d:00.0" % i, "persistence_mode": m} for i, m in enumerate(modes)],
    }


def test_enabled_everywhere_passes_unchanged_also_in_check_mode(run_module, monkeypatch):
    monkeypatch.setattr(M, "collect", lambda **kw: nvml(True, True))
    for check in (False, True):
        r = run_module(M, check_mode=check, wait=0)
        assert not r.get("failed") and not r["changed"]
        assert r["enabled"] == ["GPU 0 (0000:00:00.0)", "GPU 1 (0000:01:00.0)"] and r["nvml_state"] == "ok"


def test_waits_for_the_daemon_to_turn_it_on(run_module, monkeypatch):
    answers = [nvml(False), nvml(False), nvml(True)]
    monkeypatch.setattr(M, "collect", lambda **kw: answers.pop(0) if len(answers) > 1 else answers[0])
    monkeypatch.setattr(M.time, "sleep", lambda s: None)
    r = run_module(M, wait=30)
    assert not r.get("failed") and r["enabled"] == ["GPU 0 (0000:00:00.0)"]


def test_fails_naming_the_disabled_gpu_after_the_wait(run_module, monkeypatch):
    calls = []
    monkeypatch.setattr(M, "collect", lambda **kw: calls.append(kw) or nvml(True, False))
    r = run_module(M, wait=0, driver_version_file="/x/version", unit="p.service")
    assert r["failed"] and r["disabled"] == ["GPU 1 (0000:01:00.0)"]
    assert "Disabled on GPU 1 (0000:01:00.0)" in r["msg"] and "journalctl -u p.service" in r["msg"]
    assert calls[0] == {"library": "libnvidia-ml.so.1", "driver_version_file": "/x/version"}
