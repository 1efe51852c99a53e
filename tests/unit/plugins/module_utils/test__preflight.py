"""Preflight's GPU-memory decision: our own serving container is not a foreign workload."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.host._preflight import GIB, gpu_memory_verdict

OWN = "a" * 64
FOREIGN = "b" * 64


def nvml(used_by):
    total = 48 * GIB
    procs = [
        {"pid": 100 + i, "name": "python3", "used_memory": size, "container_id": cid}
        for i, (cid, size) in enumerate(used_by)
    ]
    used = sum(pair[1] for pair in used_by)
    return {
        "nvml_state": "ok",
        "gpus": [
            {"index": 0, "name": "RTX 6000 Ada", "memory_total": total, "memory_free": total - used, "processes": procs}
        ],
    }


def test_a_serving_host_is_not_busy_with_itself():
    state = nvml([(OWN, int(48 * GIB * 0.93))])
    assert gpu_memory_verdict(state, 0.93)["status"] == "fail"  # what production saw on a re-run
    verdict = gpu_memory_verdict(state, 0.93, [OWN[:12]])
    assert verdict["status"] == "ok", verdict
    assert "held by our own service" in verdict["detail"]


def test_a_foreign_container_still_fails_and_is_named():
    state = nvml([(OWN, 20 * GIB), (FOREIGN, 10 * GIB)])
    verdict = gpu_memory_verdict(state, 0.93, [OWN])
    assert verdict["status"] == "fail" and verdict["short"] == [0]
    assert "container bbbbbbbbbbbb" in verdict["detail"]
    assert "container aaaaaaaaaaaa" not in verdict["detail"]


def test_short_ids_never_match_by_accident():
    state = nvml([(FOREIGN, 40 * GIB)])
    assert gpu_memory_verdict(state, 0.5, ["b"])["status"] == "fail"


def test_unknown_sizes_and_no_container():
    state = nvml([])
    state["gpus"][0]["processes"] = [{"pid": 7, "name": None, "used_memory": None, "container_id": None}]
    verdict = gpu_memory_verdict(state, 0.5)
    assert verdict["status"] == "ok" and "size unknown" in verdict["detail"]


def test_without_nvml_or_gpus():
    assert gpu_memory_verdict({"nvml_state": "mismatch"}, 0.9)["status"] == "n/a"
    assert gpu_memory_verdict({"nvml_state": "ok", "gpus": []}, 0.9)["status"] == "fail"


def test_only_selected_gpus_count():
    state = nvml([(FOREIGN, 40 * GIB)])
    state["gpus"].append(dict(state["gpus"][0], index=1, memory_free=48 * GIB, processes=[]))
    assert gpu_memory_verdict(state, 0.9, gpu_indexes=[1])["status"] == "ok"
    assert gpu_memory_verdict(state, 0.9)["short"] == [0]


# ------------------------------------------------------------------ every other decision of the role
from ansible_collections.airgap.vllm.plugins.module_utils.host._preflight import (  # noqa: E402
    CHECKS,
    disk_check,
    docker_runtime_check,
    driver_version_check,
    evaluate,
    failure_message,
    gpu_present_check,
    listening_ports,
    nvml_check,
    os_check,
    port_check,
    select_gpus,
    summary_lines,
    version_at_least,
)

KYLIN = {
    "distribution": "Kylin Linux Advanced Server",
    "distribution_version": "V10",
    "distribution_release": "Lance",
    "kylin": True,
    "kylin_sp": "SP3",
    "kernel_release": "4.19.90-52.22.v2207.ky10.x86_64",
    "python_version": "3.7.9",
}
NVML_OK = {
    "nvml_state": "ok",
    "nvml_error": None,
    "driver_version": "580.65.06",
    "library_version": "580.65.06",
    "kernel_module_version": "580.65.06",
    "gpu_count": 2,
    "cuda_version": "13.0",
    "hint": None,
    "gpus": [
        {
            "index": 0,
            "uuid": "GPU-aaaa",
            "name": "A",
            "memory_total": 48 * GIB,
            "memory_free": 10 * GIB,
            "processes": [],
        },
        {
            "index": 1,
            "uuid": "GPU-bbbb",
            "name": "B",
            "memory_total": 48 * GIB,
            "memory_free": 47 * GIB,
            "processes": [],
        },
    ],
}
# /proc/net/tcp: 8000 (1F40) listening on 127.0.0.1, 22 on 0.0.0.0, an established connection from port 8001
TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1
   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1
   2: 0100007F:1F41 0100007F:0016 01 00000000:00000000 00:00000000 00000000     0        0 3 1
"""
TCP6 = "   0: 00000000000000000000000000000000:2328 00000000000000000000000000000000:0000 0A 0 0 0 0 0\n"


def test_os_kylin_best_effort_and_refused():
    assert os_check(KYLIN, "Kylin Linux Advanced Server", "V10")["status"] == "ok"
    assert "Kylin Linux Advanced Server V10 (Lance) SP3, kernel 4.19.90" in os_check(KYLIN, "Kylin", "V10")["detail"]
    assert os_check(dict(KYLIN, kylin_sp="SP4"), "Kylin", "V10")["status"] == "fail"
    rocky = {
        "distribution": "Rocky Linux",
        "distribution_version": "8.9",
        "kylin": False,
        "kylin_sp": None,
        "kernel_release": "4.18",
        "python_version": "3.6.8",
    }
    assert os_check(rocky, "Rocky", "8")["detail"].endswith("(best effort), kernel 4.18, Python 3.6.8")
    assert os_check(rocky, "Rocky", "8", allow_best_effort=False)["status"] == "fail"
    assert os_check(rocky, "Rocky", "7")["status"] == "fail"
    assert os_check(rocky, "openEuler", "22")["status"] == "ok"
    refused = os_check(rocky, "Ubuntu", "22")
    assert refused["hint"].startswith("Supported: Kylin Linux Advanced Server V10 SP1-SP3, and (best effort)")


def test_gpu_present_from_the_pci_probe():
    ok = gpu_present_check({"summary": ["0000:3b:00.0 AD102GL [RTX 6000 Ada Generation] [10de:26b1]"], "error": None})
    assert ok["status"] == "ok" and ok["detail"].startswith("1 NVIDIA GPU(s): 0000:3b:00.0") and ok["hint"] == ""
    assert (
        gpu_present_check({"summary": [], "error": "lspci not found (install pciutils)"})["detail"]
        == "lspci not found (install pciutils)"
    )
    none = gpu_present_check({"summary": [], "error": None})
    assert none["status"] == "fail" and "vendor 10de" in none["detail"] and "pciutils" in none["hint"]


def test_driver_versions_compare_as_numbers():
    assert version_at_least("580.65.06", "580.65.06") and version_at_least("580.100.1", "580.65.06")
    assert not version_at_least("580.9.99", "580.65.06") and not version_at_least("", "1")
    assert version_at_least("590", "580.65.06") and not version_at_least("580", "580.65.06")
    old = driver_version_check(dict(NVML_OK), "590.0.0")
    assert old["status"] == "fail"
    assert old["detail"] == "driver 580.65.06 (need >= 590.0.0, kernel module 580.65.06)"
    mismatch = {
        "nvml_state": "version_mismatch",
        "driver_version": None,
        "library_version": "580.65.06",
        "kernel_module_version": "560.35.03",
    }
    assert driver_version_check(mismatch, "580.65.06")["status"] == "ok"  # the installed driver is new enough
    assert driver_version_check({}, "580.65.06")["detail"] == "no NVIDIA driver found (need >= 580.65.06)"


def test_nvml_detail_and_hint():
    bad = {
        "nvml_state": "version_mismatch",
        "nvml_error": {"name": "NVML_ERROR_LIB_RM_VERSION_MISMATCH"},
        "kernel_module_version": "560.35.03",
        "library_version": "580.65.06",
        "hint": "reboot, or stop GPU users",
    }
    r = nvml_check(bad)
    assert r["detail"] == (
        "nvml_state version_mismatch (NVML_ERROR_LIB_RM_VERSION_MISMATCH), kernel module 560.35.03, library 580.65.06"
    )
    assert r["status"] == "fail" and r["hint"] == "reboot, or stop GPU users"
    ok = nvml_check(NVML_OK)
    assert ok["status"] == "ok" and ok["detail"].endswith("2 GPU(s), CUDA 13.0") and ok["hint"] == ""


def test_gpu_selection_by_index_or_uuid():
    assert select_gpus(NVML_OK["gpus"], []) == (NVML_OK["gpus"], [])
    assert select_gpus(NVML_OK["gpus"], ["1"]) == ([NVML_OK["gpus"][1]], [])
    assert select_gpus(NVML_OK["gpus"], ["gpu-AAAA", "0"]) == ([NVML_OK["gpus"][0]], [])
    assert select_gpus(NVML_OK["gpus"], ["7", "GPU-zz"]) == ([], ["7", "GPU-zz"])
    unknown = nvml_check(NVML_OK, ["1", "GPU-zz"])
    assert unknown["status"] == "fail" and "preflight_gpus names GPU-zz, which NVML does not see" in unknown["detail"]
    assert "selected 1" in unknown["detail"] and "UUID" in unknown["hint"]


def test_free_memory_is_checked_only_on_the_selected_gpus():
    settings = dict(checks=["gpu_memory"], min_driver_version="1", gpu_memory_utilization=0.9, port=8000)
    facts = {"nvml": NVML_OK}
    assert evaluate(facts, dict(settings, gpus=[]))[0]["status"] == "fail"  # GPU0 has 10 of 48 GiB free
    only_b = evaluate(facts, dict(settings, gpus=["GPU-bbbb"]))[0]
    assert only_b["status"] == "ok" and "GPU1 B" in only_b["detail"] and "GPU0" not in only_b["detail"]
    assert evaluate(facts, dict(settings, gpus=[1]))[0]["status"] == "ok"
    assert evaluate(facts, dict(settings, gpus=["5"]))[0]["status"] == "fail"


def test_docker_runtime():
    docker = {"running": True, "server_version": "20.10.24", "runtimes": ["nvidia", "runc"], "default_runtime": "runc"}
    assert docker_runtime_check(False, {})["status"] == "n/a"
    # The daemon-reload exposure of Docker's cgroup driver, in the detail (module_utils/driver/_dev_char.py).
    systemd = docker_runtime_check(True, dict(docker, cgroup_driver="systemd"), "1.17.8-1")
    assert systemd["status"] == "ok" and "cgroup driver systemd" in systemd["detail"]
    assert "udev rule" in systemd["detail"]
    cgroupfs = docker_runtime_check(True, dict(docker, cgroup_driver="cgroupfs"), "1.17.8-1")
    assert "cgroup driver cgroupfs: a systemctl daemon-reload leaves" in cgroupfs["detail"]
    assert docker_runtime_check(True, docker)["detail"].startswith(
        "Docker 20.10.24, runtimes nvidia, runc (default runc); "
    )
    assert docker_runtime_check(True, dict(docker, runtimes=["runc"]))["status"] == "fail"
    down = docker_runtime_check(True, {"running": False, "error": "Cannot connect"})
    assert down["status"] == "fail" and down["detail"] == "Docker not running: Cannot connect"


def test_disk_rows_low_and_unknown():
    r = disk_check(
        [
            {"item": {"path": "/var/lib/docker", "min_free_gb": 30}, "rc": 0, "stdout": "%d /" % (40 * GIB)},
            {"item": {"path": "/opt/models", "min_free_gb": 40.5}, "rc": 0, "stdout": "%d /opt" % (20 * GIB)},
            {"path": "/srv/x", "min_free_gb": 1, "rc": 1, "stdout": ""},
        ]
    )
    assert r["status"] == "fail"
    assert r["detail"] == (
        "/var/lib/docker (on /): 40.0 GiB free, need 30.0; "
        "/opt/models (on /opt): 20.0 GiB free, need 40.5 LOW; "
        "/srv/x (on ?): unknown GiB free, need 1.0 LOW"
    )
    assert disk_check([{"item": {"path": "/", "min_free_gb": 1}, "rc": 0, "stdout": "%d /" % GIB}])["status"] == "ok"


def test_listening_ports_and_port_owner():
    assert listening_ports(TCP + TCP6) == [22, 8000, 9000]
    assert port_check(8001, TCP, [], "vllm")["detail"] == "port 8001 free"  # only an outgoing connection
    assert port_check(8000, TCP, ["vllm"], "vllm")["status"] == "ok"
    theirs = port_check(8000, TCP, ["comfyui", ""], "vllm")
    assert theirs["status"] == "fail" and theirs["detail"] == "port 8000 in use by container(s) comfyui"
    outside = port_check(9000, TCP6, [], "vllm")
    assert outside["detail"] == "port 9000 in use by a process outside Docker" and "sport = :9000" in outside["hint"]


def test_evaluate_runs_the_pass_in_order_skips_and_reports():
    facts = {
        "host": dict(KYLIN, pci={"summary": ["x"], "error": None}, docker={"running": False, "error": "e"}),
        "distribution": "Kylin",
        "distribution_major_version": "V10",
        "nvml": NVML_OK,
        "toolkit_installed": True,
        "disk": [],
        "proc_net_tcp": TCP,
        "port_publishers": [],
    }
    settings = dict(
        checks=list(CHECKS),
        skip_checks=["gpu_memory"],
        min_driver_version="580.65.06",
        gpu_memory_utilization=0.9,
        gpus=[],
        port=8000,
        service_container_name="vllm",
    )
    records = evaluate(facts, settings)
    assert [r["check"] for r in records] == list(CHECKS)
    by = dict((r["check"], r) for r in records)
    assert by["gpu_memory"] == {
        "check": "gpu_memory",
        "status": "skipped",
        "detail": "skipped by preflight_skip_checks",
        "hint": "",
    }
    assert by["docker_runtime"]["status"] == "fail" and by["port"]["status"] == "fail"
    assert [r["check"] for r in evaluate(facts, dict(settings, checks=["port", "os"]))] == ["os", "port"]
    lines = summary_lines(records)
    assert lines[0].split() == ["CHECK", "STATUS", "DETAIL"] and lines[1].startswith("os              OK ")
    message = failure_message(records)
    assert message.startswith("Preflight failed 2 check(s): [docker_runtime] Docker not running: e -- fix: ")
    assert " | [port] port 8000 in use by a process outside Docker -- fix: Stop what" in message
    assert failure_message([r for r in records if r["status"] != "fail"]) == ""
    with pytest.raises(ValueError, match="unknown preflight check"):
        evaluate(facts, dict(settings, checks=["gpu"]))


# ------------------------------------------------------------------ several services (preflight_services)
from ansible_collections.airgap.vllm.plugins.module_utils.host._preflight import gpu_selection  # noqa: E402
from ansible_collections.airgap.vllm.plugins.module_utils.host._preflight_services import service_list  # noqa: E402

# 8000 (1F40) and 8001 (1F41) listening, 8002 (1F42) only an outgoing connection
TCP_TWO = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1
   1: 00000000:1F41 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1
   2: 0100007F:1F42 0100007F:0016 01 00000000:00000000 00:00000000 00000000     0        0 3 1
"""
ID_A = "a" * 64
ID_B = "b" * 64
ID_X = "c" * 64
TWO = [{"name": "vllm", "port": 8000, "gpus": ["0"]}, {"name": "vllm-b", "port": "8001", "gpus": [1]}]


def loop(rows):
    """A registered loop as Ansible hands it over: one result per item, skipped ones without stdout."""
    return [
        {"item": item, "skipped": True}
        if lines is None
        else {"item": item, "rc": 0, "stdout": "\n".join(lines), "stdout_lines": list(lines)}
        for item, lines in rows
    ]


def serving(free_gib=(1, 1), procs=((ID_A, 44), (ID_B, 44))):
    """Two 48 GiB GPUs, each nearly full with the given (container id, GiB) processes."""
    gpus = []
    for index, (free, (cid, used)) in enumerate(zip(free_gib, procs)):
        gpus.append(
            {
                "index": index,
                "uuid": "GPU-%d" % index,
                "name": "A",
                "memory_total": 48 * GIB,
                "memory_free": free * GIB,
                "processes": [{"pid": 10 + index, "name": "python3", "used_memory": used * GIB, "container_id": cid}],
            }
        )
    return dict(NVML_OK, gpus=gpus)


def by_check(records, check):
    return [r for r in records if r["check"] == check]


def test_service_list_empty_is_the_one_service_of_before():
    legacy = dict(port=9000, service_container_name="svc", gpus=[1, "GPU-bbbb"])
    assert service_list(legacy) == [{"name": "svc", "port": 9000, "gpus": ["1", "GPU-bbbb"]}]
    assert service_list(dict(legacy, services=[])) == service_list(legacy)
    assert service_list(dict(legacy, services=TWO)) == [
        {"name": "vllm", "port": 8000, "gpus": ["0"]},
        {"name": "vllm-b", "port": 8001, "gpus": ["1"]},
    ]
    assert service_list({"services": [{"name": "x", "port": 1}]}) == [{"name": "x", "port": 1, "gpus": []}]


@pytest.mark.parametrize(
    "services, message",
    [
        ({"name": "x"}, "must be a list"),
        (["vllm"], r"preflight_services\[0\] must be a mapping"),
        (
            [{"name": "x", "port": 1, "gpu": [0]}],
            r"preflight_services\[0\] has gpu; a service takes name, port, gpus, gpu_memory_utilization",
        ),
        ([{"name": "", "port": 1}], r"preflight_services\[0\].name must be"),
        ([{"name": "x", "port": 0}], r"preflight_services\[0\].port must be a TCP port \(1-65535\), got 0"),
        ([{"name": "x", "port": "http"}], "got 'http'"),
        ([{"name": "x", "port": True}], "got True"),
        ([{"name": "x", "port": 70000}], "got 70000"),
        ([{"name": "x", "port": 1, "gpus": {"0": 1}}], r"preflight_services\[0\].gpus must be a list"),
        ([{"name": "x", "port": 1, "gpus": ["0", ""]}], r"gpus holds '': wants an NVML index"),
        (
            [{"name": "x", "port": 1}, {"name": "x", "port": 2}],
            r"preflight_services\[1\].name x is also preflight_services\[0\]",
        ),
        (
            [{"name": "x", "port": 1}, {"name": "y", "port": "1"}],
            r"preflight_services\[1\].port 1 is also preflight_services\[0\]",
        ),
    ],
)
def test_service_list_refuses_a_malformed_list(services, message):
    with pytest.raises(ValueError, match=message):
        service_list({"services": services})


def test_gpu_selection_is_the_union_or_every_gpu():
    assert gpu_selection(service_list({"services": TWO})) == (["0", "1"], False)
    three = TWO + [{"name": "c", "port": 8002, "gpus": ["1", "GPU-x"]}]
    assert gpu_selection(service_list({"services": three})) == (["0", "1", "GPU-x"], False)
    assert gpu_selection(service_list({"services": TWO + [{"name": "c", "port": 8002}]})) == (["0", "1"], True)
    assert gpu_selection(service_list({"gpus": []})) == ([], True)


SERVICES = dict(
    checks=["nvml", "gpu_memory", "port"],
    min_driver_version="1",
    gpu_memory_utilization=0.9,
    port=8000,
    service_container_name="vllm",
    gpus=[],
)


def test_every_service_port_is_checked_one_line_each():
    facts = {
        "nvml": serving(),
        "proc_net_tcp": TCP_TWO,
        "own_containers": loop([("vllm", [ID_A]), ("vllm-b", [ID_B])]),
        "port_owners": loop([(8000, ["vllm"]), (8001, ["vllm-b"]), (8002, [])]),
    }
    three = TWO + [{"name": "vllm-c", "port": 8002, "gpus": ["1"]}]
    ports = by_check(evaluate(facts, dict(SERVICES, services=three)), "port")
    assert [(r["status"], r["detail"]) for r in ports] == [
        ("ok", "vllm: port 8000 held by our container vllm"),
        ("ok", "vllm-b: port 8001 held by our container vllm-b"),
        ("ok", "vllm-c: port 8002 free"),
    ]
    lines = summary_lines(ports)
    assert [line.split()[:3] for line in lines[1:]] == [
        ["port", "OK", "vllm:"],
        ["port", "OK", "vllm-b:"],
        ["port", "OK", "vllm-c:"],
    ]


def test_a_port_held_by_another_of_our_services_fails_naming_it():
    # The services swapped ports since the last run: vllm-b would start on 8000 while vllm still holds it.
    facts = {"nvml": serving(), "proc_net_tcp": TCP_TWO, "port_owners": loop([(8000, ["vllm"]), (8001, ["vllm-b"])])}
    swapped = [{"name": "vllm-b", "port": 8000, "gpus": ["1"]}, {"name": "vllm", "port": 8001, "gpus": ["0"]}]
    records = evaluate(facts, dict(SERVICES, checks=["port"], services=swapped))
    assert [r["status"] for r in records] == ["fail", "fail"]
    assert records[0]["detail"] == "vllm-b: port 8000 held by our other service vllm, not by vllm-b"
    assert "stop vllm first (systemctl stop vllm)" in records[0]["hint"]
    message = failure_message(records)
    assert message.startswith("Preflight failed 2 check(s): [port] vllm-b: port 8000 held by our other service vllm")
    # A foreign container and a process outside Docker are still told apart, per port.
    facts["port_owners"] = loop([(8000, ["comfyui"]), (8001, None)])
    records = evaluate(facts, dict(SERVICES, checks=["port"], services=TWO))
    assert [r["detail"] for r in records] == [
        "vllm: port 8000 in use by container(s) comfyui",
        "vllm-b: port 8001 in use by a process outside Docker",
    ]
    assert "sport = :8001" in records[1]["hint"]


def test_a_skipped_port_check_is_one_line():
    records = evaluate({"proc_net_tcp": TCP_TWO}, dict(SERVICES, checks=["port"], skip_checks=["port"], services=TWO))
    assert [r["status"] for r in records] == ["skipped"]


def test_memory_of_every_listed_service_is_ours_on_a_rerun():
    facts = {"nvml": serving(), "own_containers": loop([("vllm", [ID_A]), ("vllm-b", [ID_B])])}
    settings = dict(SERVICES, checks=["gpu_memory"], services=TWO)
    verdict = evaluate(facts, settings)[0]
    assert verdict["status"] == "ok", verdict
    assert verdict["detail"].count("held by our own service") == 2
    # Only our own names count: the same container under a name we do not manage is foreign.
    facts["own_containers"] = loop([("vllm", [ID_A]), ("vllm-b", None)])
    verdict = evaluate(facts, settings)[0]
    assert verdict["status"] == "fail" and "container bbbbbbbbbbbb" in verdict["detail"]
    # A container of a name probed but not among the services (e.g. preflight_service_container_name) is foreign.
    facts["own_containers"] = {"vllm": [ID_A], "other": [ID_B]}
    assert evaluate(facts, settings)[0]["status"] == "fail"


def test_memory_is_checked_on_the_union_of_the_services_gpus():
    facts = {"nvml": serving(procs=((ID_A, 44), (ID_X, 44))), "own_containers": {"vllm": [ID_A]}}
    only_gpu0 = dict(SERVICES, checks=["gpu_memory"], services=[{"name": "vllm", "port": 8000, "gpus": ["GPU-0"]}])
    verdict = evaluate(facts, only_gpu0)[0]
    assert verdict["status"] == "ok" and "GPU1" not in verdict["detail"]
    both = dict(only_gpu0, services=only_gpu0["services"] + [{"name": "vllm-b", "port": 8001, "gpus": ["1"]}])
    verdict = evaluate(facts, both)[0]
    assert verdict["status"] == "fail" and "GPU1" in verdict["detail"] and "container cccccccccccc" in verdict["detail"]
    # A service with no gpus takes every GPU: GPU1 is checked although the other service names only GPU0.
    every = dict(only_gpu0, services=only_gpu0["services"] + [{"name": "vllm-b", "port": 8001, "gpus": []}])
    assert evaluate(facts, every)[0]["status"] == "fail"


def test_a_gpu_no_service_can_have_fails_naming_the_service():
    facts = {"nvml": serving()}
    services = [{"name": "vllm", "port": 8000, "gpus": []}, {"name": "vllm-b", "port": 8001, "gpus": ["7"]}]
    nvml, memory = evaluate(facts, dict(SERVICES, checks=["nvml", "gpu_memory"], services=services))
    for r in (nvml, memory):
        assert r["status"] == "fail"
        assert "preflight_services names 7 (vllm-b), which NVML does not see (present: 0 GPU-0, 1 GPU-1)" in r["detail"]
        assert "each service's gpus" in r["hint"]


def test_empty_services_decide_exactly_as_before():
    facts = {
        "nvml": serving(procs=((ID_A, 44), (ID_X, 44))),
        "proc_net_tcp": TCP_TWO,
        "own_container_ids": [ID_A],
        "port_publishers": ["vllm"],
    }
    legacy = dict(SERVICES, gpus=["0"])
    records = evaluate(facts, legacy)
    assert evaluate(facts, dict(legacy, services=[])) == records
    assert [(r["check"], r["status"]) for r in records] == [("nvml", "ok"), ("gpu_memory", "ok"), ("port", "ok")]
    assert records[2]["detail"] == "port 8000 held by our container vllm"  # no service label with one service
    assert "preflight_gpus names 7" in evaluate(facts, dict(legacy, gpus=["7"]))[0]["detail"]
    # The role's loop shapes give the same verdicts as the older flat lists.
    looped = dict(
        facts,
        own_container_ids=[],
        port_publishers=[],
        own_containers=loop([("vllm", [ID_A])]),
        port_owners=loop([(8000, ["vllm"])]),
    )
    assert evaluate(looped, legacy) == records


def test_each_gpu_needs_the_utilization_of_the_services_on_it():
    # GPU0: 30 of 48 GiB free; GPU1: 47 free. vllm plans 0.5 on GPU0, vllm-b 0.93 on GPU1.
    state = dict(NVML_OK, gpus=[dict(NVML_OK["gpus"][0], memory_free=30 * GIB), NVML_OK["gpus"][1]])
    services = [
        {"name": "vllm", "port": 8000, "gpus": ["0"], "gpu_memory_utilization": 0.5},
        {"name": "vllm-b", "port": 8001, "gpus": ["1"], "gpu_memory_utilization": "0.93"},
    ]
    settings = dict(SERVICES, checks=["gpu_memory"], gpu_memory_utilization=0.93, services=services)
    verdict = evaluate({"nvml": state}, settings)[0]
    assert verdict["status"] == "ok", verdict
    assert "need 24.0 GiB (0.5)" in verdict["detail"] and "need 44.6 GiB (0.93)" in verdict["detail"]
    # Without its own, a service takes preflight_gpu_memory_utilization: GPU0 is then short.
    del services[0]["gpu_memory_utilization"]
    assert evaluate({"nvml": state}, settings)[0]["status"] == "fail"
    # A GPU two services may use (one takes all) needs the higher of the two.
    services[0].update(gpus=[], gpu_memory_utilization=0.95)
    services[1].update(gpu_memory_utilization=0.5)
    verdict = evaluate({"nvml": state}, settings)[0]
    assert verdict["status"] == "fail"
    assert "GPU0 A: free 30.0 GiB of 48.0 GiB, need 45.6 GiB (0.95)" in verdict["detail"]
    assert "GPU1 B: free 47.0 GiB of 48.0 GiB, need 45.6 GiB (0.95)" in verdict["detail"]
    with pytest.raises(
        ValueError, match=r"preflight_services\[0\].gpu_memory_utilization must be above 0 and at most 1"
    ):
        service_list({"services": [{"name": "x", "port": 1, "gpu_memory_utilization": 1.5}]})
    with pytest.raises(ValueError, match=r"gpu_memory_utilization must be above 0 and at most 1, got 'high'"):
        service_list({"services": [{"name": "x", "port": 1, "gpu_memory_utilization": "high"}]})


# ------------------------------------------------------------------ probes a pass runs (probes_for)
from ansible_collections.airgap.vllm.plugins.module_utils.host._preflight import CHECK_PROBES, probes_for  # noqa: E402

# Which gathered fact each probe of roles/preflight/tasks/probe.yml fills ('pci' is the host's pci key).
PROBE_FACTS = {
    "host": "host",
    "nvml": "nvml",
    "toolkit": "toolkit_installed",
    "disk": "disk",
    "tcp": "proc_net_tcp",
    "port_owners": "port_owners",
    "own_containers": "own_containers",
}


def full_facts():
    ours = [{"pid": 9, "name": "python3", "used_memory": 30 * GIB, "container_id": ID_A}]
    return {
        "host": dict(
            KYLIN,
            pci={"summary": ["0000:3b:00.0 X [10de:2335]"], "error": None},
            docker={"running": True, "runtimes": ["runc"], "error": None},
        ),
        "distribution": "Kylin",
        "distribution_major_version": "V10",
        "nvml": dict(NVML_OK, gpus=[dict(g, processes=ours) for g in NVML_OK["gpus"]]),
        "toolkit_installed": True,
        "disk": [{"item": {"path": "/opt", "min_free_gb": 40}, "rc": 0, "stdout": "%d /" % (20 * GIB)}],
        "proc_net_tcp": TCP_TWO,
        "own_containers": [{"item": "vllm", "stdout_lines": [ID_A]}, {"item": "vllm-b", "stdout_lines": []}],
        "port_owners": [{"item": 8000, "stdout_lines": ["vllm"]}, {"item": 8001, "stdout_lines": ["other"]}],
    }


def only(facts, probes):
    """What a pass with these probes gathers: the skipped probes' facts absent, pci absent without 'pci'."""
    kept = dict(
        (k, v)
        for k, v in facts.items()
        if k not in PROBE_FACTS.values() or any(PROBE_FACTS.get(p) == k for p in probes)
    )
    if "host" in kept and "pci" not in probes:
        kept["host"] = dict((k, v) for k, v in kept["host"].items() if k != "pci")
    return kept


@pytest.mark.parametrize("check", CHECKS)
def test_each_check_decides_the_same_from_its_own_probes(check):
    settings = dict(
        checks=[check], skip_checks=[], min_driver_version="580.65.06", gpu_memory_utilization=0.9, services=TWO
    )
    everything = evaluate(full_facts(), settings)
    assert evaluate(only(full_facts(), probes_for([check])), settings) == everything
    # And the map is tight: without any one of its probes the check sees less (decides differently). host_info
    # also carries pci and gates the Docker probes (docker.running): needed there though evaluate reads none of it.
    for probe in (p for p in CHECK_PROBES[check] if p != "host" or check in ("os", "docker_runtime")):
        fewer = [p for p in probes_for([check]) if p != probe]
        assert evaluate(only(full_facts(), fewer), settings) != everything, (check, probe)


def test_probes_of_the_two_site_passes():
    assert probes_for(["os", "gpu_present", "disk", "port"]) == ["disk", "host", "pci", "port_owners", "tcp"]
    assert probes_for(["driver_version", "nvml", "docker_runtime", "gpu_memory"]) == [
        "host",
        "nvml",
        "own_containers",
        "toolkit",
    ]
    assert probes_for(None) == sorted(set(p for ps in CHECK_PROBES.values() for p in ps))
    assert probes_for(["os", "disk"], ["disk"]) == ["host"]
    with pytest.raises(ValueError, match="unknown preflight check"):
        probes_for(["gpu"])


def test_host_info_forms_decide_as_df_and_proc_net_tcp_do():
    """host_info's disk/listening answers (one call) against the df loop and /proc/net/tcp text they replace."""
    settings = dict(
        checks=["disk", "port"],
        skip_checks=[],
        services=TWO,
        disk_requirements=[{"path": "/opt", "min_free_gb": 40}, {"path": "/var/lib/docker", "min_free_gb": 1}],
    )
    old = dict(
        full_facts(),
        disk=[
            {"item": {"path": "/opt", "min_free_gb": 40}, "rc": 0, "stdout": "%d /" % (20 * GIB)},
            {"item": {"path": "/var/lib/docker", "min_free_gb": 1}, "rc": 1, "stdout": ""},
        ],
    )
    new = dict(
        full_facts(),
        disk_free={"/opt": {"free": 20 * GIB, "mount": "/"}, "/var/lib/docker": {"free": -1, "mount": "?"}},
        listening_ports=[8000, 8001],
    )
    del new["disk"], new["proc_net_tcp"]
    assert evaluate(new, settings) == evaluate(old, settings)
    assert [r["status"] for r in evaluate(new, settings)] == ["fail", "ok", "fail"]
    # A required path host_info was not asked about counts as unreadable, never as free.
    missing = evaluate(dict(new, disk_free={}), dict(settings, checks=["disk"]))
    assert missing[0]["status"] == "fail" and "unknown GiB free" in missing[0]["detail"]
