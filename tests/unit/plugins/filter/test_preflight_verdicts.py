"""airgap.vllm.preflight_verdicts as roles/preflight/tasks/checks.yml calls it (gathered facts + settings)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from ansible.errors import AnsibleFilterError

GIB = 1024**3
SETTINGS = {
    "checks": ["gpu_present", "disk", "port"],
    "skip_checks": ["port"],
    "allow_best_effort_os": True,
    "min_driver_version": "580.65.06",
    "gpu_memory_utilization": 0.93,
    "gpus": [],
    "port": 8000,
    "service_container_name": "vllm",
}


def gathered(free_gib):
    # The shapes the role hands over: host_info with pci, a registered df loop, /proc/net/tcp text.
    return {
        "host": {
            "pci": {"summary": ["0000:3b:00.0 AD102GL [RTX 6000 Ada Generation] [10de:26b1]"], "error": None},
            "docker": {"running": False},
        },
        "disk": [
            {
                "item": {"path": "/opt/models", "min_free_gb": 40},
                "rc": 0,
                "changed": False,
                "stdout": "%d /opt" % int(free_gib * GIB),
            }
        ],
        "proc_net_tcp": "",
        "port_publishers": [],
    }


def test_records_lines_and_message(render):
    out = render("{{ facts | airgap.vllm.preflight_verdicts(settings) }}", facts=gathered(12), settings=SETTINGS)
    assert [(r["check"], r["status"]) for r in out["records"]] == [
        ("gpu_present", "ok"),
        ("disk", "fail"),
        ("port", "skipped"),
    ]
    assert len(out["lines"]) == 4 and out["lines"][2].startswith("disk            FAIL     /opt/models (on /opt)")
    assert out["message"].startswith("Preflight failed 1 check(s): [disk] /opt/models (on /opt): 12.0 GiB free")
    healthy = render("{{ facts | airgap.vllm.preflight_verdicts(settings) }}", facts=gathered(50), settings=SETTINGS)
    assert healthy["message"] == ""


def test_an_unknown_check_is_a_clear_error(render):
    with pytest.raises(AnsibleFilterError, match="unknown preflight check"):
        render(
            "{{ facts | airgap.vllm.preflight_verdicts(settings) }}",
            facts=gathered(50),
            settings=dict(SETTINGS, checks=["gpus"]),
        )


# Two services, as roles/preflight/tasks/checks.yml hands them over: registered loops over names and ports.
TCP = (
    "  sl  local_address rem_address   st\n"
    "   0: 00000000:1F40 00000000:0000 0A 0 0 0 0 0\n"
    "   1: 00000000:1F41 00000000:0000 0A 0 0 0 0 0\n"
)
TWO = [{"name": "vllm", "port": 8000, "gpus": ["0"]}, {"name": "vllm-b", "port": 8001, "gpus": ["1"]}]


def registered(rows):
    return [
        {
            "item": item,
            "changed": False,
            "rc": 0,
            "stdout": "\n".join(lines),
            "stdout_lines": lines,
            "ansible_loop_var": "item",
        }
        for item, lines in rows
    ]


def test_several_services_one_port_line_each(render):
    facts = dict(
        gathered(50),
        proc_net_tcp=TCP,
        own_containers=registered([("vllm", ["a" * 64]), ("vllm-b", ["b" * 64])]),
        port_owners=registered([(8000, ["vllm"]), (8001, ["vllm"])]),
    )
    settings = dict(SETTINGS, checks=["port"], skip_checks=[], services=TWO)
    out = render("{{ facts | airgap.vllm.preflight_verdicts(settings) }}", facts=facts, settings=settings)
    assert [(r["check"], r["status"]) for r in out["records"]] == [("port", "ok"), ("port", "fail")]
    assert out["lines"][1].endswith("vllm: port 8000 held by our container vllm")
    assert out["lines"][2].endswith("vllm-b: port 8001 held by our other service vllm, not by vllm-b")
    assert out["message"].startswith("Preflight failed 1 check(s): [port] vllm-b: port 8001 held by our other")


def test_a_malformed_service_list_is_a_clear_error(render):
    with pytest.raises(AnsibleFilterError, match=r"preflight_verdicts: preflight_services\[1\].port 8000 is also"):
        render(
            "{{ facts | airgap.vllm.preflight_verdicts(settings) }}",
            facts=gathered(50),
            settings=dict(SETTINGS, services=[TWO[0], dict(TWO[1], port=8000)]),
        )
