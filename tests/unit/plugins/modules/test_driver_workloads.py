"""driver_workloads as Ansible runs it: stop ours and the host units with a record first, start them again (issue 29)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat

from ansible_collections.airgap.vllm.plugins.modules import driver_workloads as M

OURS = "a" * 64
FOREIGN = "b" * 64


def systemctl(tmp_path, monkeypatch, states):
    """A systemctl on PATH: `show` answers from `states`, every other call is logged."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "states.json").write_text(json.dumps(states))
    path = bin_dir / "systemctl"
    path.write_text(
        "#!/usr/bin/env python3\nimport json, sys\n"
        "if sys.argv[1] == 'show':\n"
        "    st = json.load(open(%r)).get(sys.argv[-1], {'ActiveState': 'inactive', 'UnitFileState': ''})\n"
        "    print('\\n'.join('%%s=%%s' %% kv for kv in st.items()))\n"
        "else:\n"
        "    open(%r, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        % (str(tmp_path / "states.json"), str(tmp_path / "calls.log"))
    )
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))
    return tmp_path / "calls.log"


SERVICES = {"vllm": {"unit_ours": True, "containers": [OURS]}, "other": {"unit_ours": False, "containers": []}}
GPUS = [
    {
        "processes": [
            {"pid": 1, "name": "vllm", "container_id": OURS},
            {"pid": 2, "name": "train", "container_id": FOREIGN},
        ]
    }
]
STATES = {
    "vllm.service": {"ActiveState": "active", "UnitFileState": "enabled"},
    "nvidia-persistenced.service": {"ActiveState": "active", "UnitFileState": "disabled"},
}


def test_check_mode_says_what_it_would_stop(run_module, tmp_path, monkeypatch):
    calls = systemctl(tmp_path, monkeypatch, STATES)
    record = tmp_path / "rec.json"
    r = run_module(
        M,
        check_mode=True,
        services=SERVICES,
        gpus=GPUS,
        host_units=["nvidia-persistenced.service"],
        record_file=str(record),
        from_version="570.172.08",
        to_version="580.65.06",
    )
    assert r["changed"] and r["stopped_units"] == ["vllm.service", "nvidia-persistenced.service"]
    assert r["park_containers"] == [FOREIGN] and not record.exists() and not calls.exists()


def test_stop_records_first_then_start_puts_back_and_forgets(run_module, tmp_path, monkeypatch):
    calls = systemctl(tmp_path, monkeypatch, STATES)
    record = tmp_path / "rec.json"
    r = run_module(
        M,
        services=SERVICES,
        gpus=GPUS,
        host_units=["nvidia-persistenced.service"],
        record_file=str(record),
        from_version="570.172.08",
        to_version="580.65.06",
    )
    assert r["changed"] and json.loads(record.read_text())["units"] == {
        "vllm.service": {"enabled": True},
        "nvidia-persistenced.service": {"enabled": False},
    }
    assert oct(record.stat().st_mode & 0o777) == "0o600"
    # Ours disabled across the window (a boot cannot start it on the old driver); the host unit only stopped.
    assert calls.read_text().splitlines() == [
        "stop vllm.service",
        "disable --quiet vllm.service",
        "stop nvidia-persistenced.service",
    ]
    # Check mode of the start says the order and changes nothing.
    r = run_module(M, check_mode=True, state="started", record_file=str(record))
    assert r["started_units"] == ["nvidia-persistenced.service", "vllm.service"] and record.exists()
    calls.unlink()
    r = run_module(M, state="started", record_file=str(record))
    assert r["changed"] and not record.exists()
    assert calls.read_text().splitlines() == [
        "start nvidia-persistenced.service",
        "enable --quiet vllm.service",
        "start vllm.service",
    ]
    assert not run_module(M, state="started", record_file=str(record))["changed"]


def test_nothing_running_nothing_recorded(run_module, tmp_path, monkeypatch):
    calls = systemctl(tmp_path, monkeypatch, {})
    r = run_module(
        M,
        services=SERVICES,
        gpus=[],
        host_units=["nvidia-persistenced.service"],
        record_file=str(tmp_path / "rec.json"),
    )
    assert not r["changed"] and r["stopped_units"] == [] and not (tmp_path / "rec.json").exists()
    assert not calls.exists()


def test_a_damaged_record_fails_with_what_to_do(run_module, tmp_path, monkeypatch):
    systemctl(tmp_path, monkeypatch, {})
    (tmp_path / "rec.json").write_text("{broken")
    r = run_module(M, state="started", record_file=str(tmp_path / "rec.json"))
    assert r["failed"] and "systemctl enable --now UNIT" in r["msg"] and "not valid JSON" in r["msg"]
