"""A driver change on a serving host: /proc/modules, the unload order, what is stopped and parked, the record."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.driver import _driver_upgrade as U

PROC_MODULES = (
    "nvidia_uvm 1437696 1 - Live 0x0000000000000000 (POE)\n"
    "nvidia_drm 77824 0 - Live 0x0000000000000000 (POE)\n"
    "nvidia_modeset 1310720 1 nvidia_drm, Live 0x0000000000000000 (POE)\n"
    "nvidia 54525952 3 nvidia_uvm,nvidia_modeset,nvidia_peermem, Live 0x0000000000000000 (POE)\n"
    "nvidia_peermem 16384 0 - Live 0x0000000000000000 (POE)\n"
    "ib_core 1000 1 nvidia_peermem, Live 0x0 \n"
    "xfs 1609728 2 - Live 0x0000000000000000\n"
)
OURS = "a" * 64
FOREIGN = "b" * 64


def test_parse_proc_modules():
    mods = U.parse_proc_modules(PROC_MODULES)
    assert mods["nvidia"] == {
        "refcount": 3,
        "users": ["nvidia_uvm", "nvidia_modeset", "nvidia_peermem"],
        "state": "Live",
    }
    assert mods["nvidia_drm"]["users"] == [] and mods["xfs"]["refcount"] == 2
    assert U.parse_proc_modules("") == {} and U.parse_proc_modules(None) == {} and U.parse_proc_modules("x 1\n") == {}


def test_unload_order_dependents_first_and_only_loaded():
    mods = U.parse_proc_modules(PROC_MODULES)
    # nvidia_peermem uses nvidia: it must go first, or nvidia stays "in use by: nvidia_peermem".
    assert U.nvidia_modules(mods) == ["nvidia_peermem", "nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia"]
    assert U.nvidia_modules(U.parse_proc_modules("nvidia 1 0 - Live 0x0\n")) == ["nvidia"]
    assert U.nvidia_modules({}) == []
    assert U.MODULE_ORDER == ("nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia")


def test_unload_order_survives_a_user_cycle():
    mods = {"nvidia": {"users": ["a"]}, "a": {"users": ["b"]}, "b": {"users": ["a"]}}
    assert U.nvidia_modules(mods)[-1] == "nvidia"


def proc(pid, cid=None, name="vllm", mib=1024, cname=None):
    return {"pid": pid, "name": name, "container_id": cid, "container_name": cname, "used_memory": mib * 1048576}


def test_holder_text_names_modules_processes_and_rmmod():
    mods = U.parse_proc_modules(PROC_MODULES)
    text = U.holder_text(
        "nvidia", mods, [proc(42, OURS, cname="vllm")], "rmmod: ERROR: Module nvidia is in use by: nvidia_uvm"
    )
    assert text.startswith("nvidia: used by module(s) nvidia_uvm, nvidia_modeset, nvidia_peermem")
    assert "pid 42 (vllm, container vllm, 1024 MiB)" in text and "rmmod said: rmmod: ERROR" in text
    leaked = U.holder_text("nvidia_uvm", mods, [], "")
    assert "1 reference(s) no process on this host accounts for" in leaked
    assert U.holder_text("nvidia_drm", mods, [], "") == "nvidia_drm: nothing visible holds it"
    assert "container bbbbbbbbbbbb" in U.holder_text("nvidia", {}, [proc(7, FOREIGN)], "")


def test_gpu_processes_each_pid_once():
    gpus = [{"processes": [proc(1), proc(2)]}, {"processes": [proc(2)]}, {}]
    assert [p["pid"] for p in U.gpu_processes(gpus)] == [1, 2]
    assert U.gpu_processes(None) == []


SERVICES = {
    "vllm": {"unit_ours": True, "containers": [OURS]},
    "vllm-b": {"unit_ours": True, "containers": []},
    "theirs": {"unit_ours": False, "containers": []},
}


def states(**over):
    st = {
        "vllm.service": {"ActiveState": "active", "UnitFileState": "enabled"},
        "vllm-b.service": {"ActiveState": "inactive", "UnitFileState": "enabled"},
        "nvidia-persistenced.service": {"ActiveState": "active", "UnitFileState": "enabled"},
    }
    st.update(over)
    return st


def test_workload_plan_ours_host_units_foreign_and_outside():
    plan = U.workload_plan(
        SERVICES,
        states(),
        ["nvidia-persistenced.service", "absent.service"],
        [
            proc(10, OURS[:12]),
            proc(11, FOREIGN, name="python3", cname="trainer"),
            proc(12, FOREIGN),
            proc(13, None, name="cuda-app"),
        ],
    )
    # Ours first, then the host units; an inactive service and someone else's unit are left alone.
    assert plan["stop_units"] == ["vllm.service", "nvidia-persistenced.service"]
    assert plan["services"] == ["vllm"]
    # Our container (matched by a 12-hex prefix) is not parked; the foreign one once.
    assert plan["park_containers"] == [FOREIGN] and plan["ours_holding"] == ["vllm"]
    assert [p["pid"] for p in plan["outside"]] == [13]
    text = "\n".join(plan["lines"])
    assert "stop our service vllm (systemctl stop vllm.service" in text
    assert "park foreign GPU container trainer" in text
    assert "cannot stop pid 13 (cuda-app, 1024 MiB)" in text


def test_workload_plan_nothing_running():
    plan = U.workload_plan(
        SERVICES,
        states(
            **{"vllm.service": {"ActiveState": "failed"}, "nvidia-persistenced.service": {"ActiveState": "inactive"}}
        ),
        ["nvidia-persistenced.service"],
        [],
    )
    assert plan["stop_units"] == [] and plan["park_containers"] == [] and plan["lines"] == []
    assert U.workload_plan({}, {}, [], []) == {
        "stop_units": [],
        "services": [],
        "park_containers": [],
        "outside": [],
        "ours_holding": [],
        "lines": [],
    }


def test_workload_plan_our_container_without_its_unit_running():
    plan = U.workload_plan(SERVICES, states(**{"vllm.service": {"ActiveState": "inactive"}}), [], [proc(1, OURS)])
    assert plan["park_containers"] == [] and plan["ours_holding"] == ["vllm"]
    assert "our service vllm holds the GPU but its unit is not running" in plan["lines"][0]


def test_record_new_merge_load_and_start_order():
    plan = U.workload_plan(SERVICES, states(), ["nvidia-persistenced.service"], [])
    rec = U.new_record(plan, states(), "570.172.08", "580.65.06")
    assert rec == {
        "version": 1,
        "services": ["vllm"],
        "from_driver": "570.172.08",
        "to_driver": "580.65.06",
        "units": {"vllm.service": {"enabled": True}, "nvidia-persistenced.service": {"enabled": True}},
    }
    # Host units before the engines.
    assert U.start_order(rec) == ["nvidia-persistenced.service", "vllm.service"]
    assert U.load_record(json.dumps(rec)) == rec
    # A re-run after an interrupted stop sees the units stopped: the first record wins.
    again = U.new_record(
        U.workload_plan(SERVICES, states(**{"vllm.service": {"ActiveState": "inactive"}}), [], []), {}, "", "580.65.06"
    )
    assert U.merge_record(rec, again) == rec
    assert U.merge_record({}, again) == again
    more = dict(again, units={"x.service": {"enabled": False}}, services=["x"])
    merged = U.merge_record(rec, more)
    assert merged["units"]["x.service"] == {"enabled": False} and merged["services"] == ["vllm", "x"]
    assert U.start_order(merged)[-2:] == ["vllm.service", "x.service"]


@pytest.mark.parametrize(
    "text, error",
    [
        ("{", "not valid JSON"),
        ("[]", "not a version 1"),
        ('{"version": 2, "units": {}}', "not a version 1"),
        ('{"version": 1, "units": []}', '"units" must map'),
        ('{"version": 1, "units": {"a": 1}}', '"units" must map'),
    ],
)
def test_load_record_refuses_damage(text, error):
    with pytest.raises(U.DriverUpgradeError, match=error):
        U.load_record(text)


def test_load_record_absent_or_empty():
    assert U.load_record(None) == {} and U.load_record("  \n") == {}
    assert U.start_order({}) == []
