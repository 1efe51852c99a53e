"""tests/faults/campaign.py's own logic (issue 46): where it cuts, what it reads from a run, what it calls wrong."""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "faults"))

import campaign  # noqa: E402

RUN = """
PLAY [Preflight] ***************************************************************

TASK [Gathering Facts] *********************************************************
ok: [kylin-faults]

TASK [airgap.vllm.vllm_service : Write the systemd unit and the logging configuration] ***
changed: [kylin-faults]

TASK [airgap.vllm.vllm_service : Start or restart the service with the new configuration] ***
changed: [kylin-faults]

TASK [airgap.vllm.vllm_service : Confirm the plan with the engine's own numbers (report)] ***
ok: [kylin-faults]

PLAY RECAP *********************************************************************
kylin-faults               : ok=4    changed=2    unreachable=0    failed=0    skipped=0    rescued=0    ignored=0
other                      : ok=1    changed=1    unreachable=0    failed=0    skipped=0    rescued=0    ignored=0
"""

GOOD = dict(
    daemon="ab" * 32,
    units="/etc/systemd/system/vllm.service ",
    containers="vllm:running ",
    seqs="8",
    running="8",
    active="active",
    health="200",
    partial="",
)


def test_the_task_boundaries_and_the_hosts_recap_are_read_from_the_output():
    assert campaign.tasks_of(RUN)[1:] == [
        "airgap.vllm.vllm_service : Write the systemd unit and the logging configuration",
        "airgap.vllm.vllm_service : Start or restart the service with the new configuration",
        "airgap.vllm.vllm_service : Confirm the plan with the engine's own numbers (report)",
    ]
    assert campaign.recap(RUN, "kylin-faults") == dict(ok=4, changed=2, unr=0, failed=0)
    assert campaign.recap(RUN, "nobody") is None


def test_the_long_lane_cuts_at_every_boundary_after_the_first_or_at_the_numbers_given():
    ref = campaign.tasks_of(RUN)
    assert campaign.choose("all", ref) == [("kill", 2), ("kill", 3), ("kill", 4)]
    assert campaign.choose("2,4", ref) == [("kill", 2), ("kill", 4)]
    assert campaign.choose("every:2", ref) == [("kill", 2), ("power", 4)]
    assert campaign.choose("every:2@3", ref) == [("kill", 3)]
    assert campaign.choose("every:1@1", ref) == [("kill", 2), ("power", 3), ("kill", 4)]


def test_the_sample_names_tasks_the_service_role_has():
    with open(os.path.join(HERE, "..", "..", "..", "roles", "vllm_service", "tasks", "start.yml")) as f:
        start = f.read()
    for _kind, name in campaign.SAMPLE:
        assert "- name: " + name in start, name


def test_a_cut_by_number_and_by_name_stop_the_run_at_that_task(tmp_path):
    script = "import time\nfor n in ('A', 'B', 'C'):\n    print('TASK [%s] ***' % n, flush=True)\n    time.sleep(0.2)\n"
    cmd = [sys.executable, "-c", script]
    assert campaign.run_and_cut(cmd, str(tmp_path / "a.log"), 2)[:2] == (True, "B")
    assert (tmp_path / "a.log").read_text().count("TASK [") == 2
    assert campaign.run_and_cut(cmd, str(tmp_path / "b.log"), "C")[:2] == (True, "C")
    assert campaign.run_and_cut(cmd, str(tmp_path / "c.log"), "D")[:2] == (False, None)


def test_a_converged_host_is_judged_right():
    assert campaign.judge(GOOD, GOOD, 8) == []


@pytest.mark.parametrize(
    "change,words",
    [
        (dict(daemon="cd" * 32), "daemon.json changed"),
        (dict(units="/etc/systemd/system/vllm.service /etc/systemd/system/vllm-new.service "), "our units"),
        (dict(containers="vllm:exited vllm-old:running "), "our containers"),
        (dict(seqs="4"), "the unit runs --max-num-seqs 4, not 8"),
        # The unit written, the old container still running: what a cut before the restart left (issue 46).
        (dict(running="4"), "the running container has --max-num-seqs 4, not 8"),
        (dict(health="000"), "/health 000"),
        (dict(active="activating"), "engine activating"),
        (dict(partial="/opt/airgap-vllm/models/x.part "), "left behind: /opt/airgap-vllm/models/x.part"),
    ],
)
def test_each_way_a_cut_can_leave_the_host_is_named(change, words):
    wrong = campaign.judge(GOOD, dict(GOOD, **change), 8)
    assert len(wrong) == 1 and words in wrong[0], wrong


def test_the_command_is_the_readmes_change_a_setting_line():
    cmd = campaign.site_cmd("/repo", "/inv", "h", 8)
    assert cmd[:2] == ["ansible-playbook", "/repo/playbooks/site.yml"]
    assert cmd[cmd.index("--tags") + 1] == "plan,service"
    assert "vllm_plan_concurrency=8" in cmd
    with open(os.path.join(HERE, "..", "..", "..", "README.md")) as f:
        assert "--tags plan,service -e vllm_plan_concurrency=8   # change a setting" in f.read()


def test_the_table_names_each_cut_and_counts_them():
    rows = [
        dict(
            point=3,
            kind="kill",
            task="Start",
            setting=8,
            converged=True,
            wrong=[],
            seconds=dict(cut=1, rerun=2, again=3),
        ),
        dict(
            point="Confirm",
            kind="power",
            task=None,
            setting=4,
            converged=False,
            wrong=["daemon.json changed"],
            seconds=dict(cut=4, rerun=5, again=6),
        ),
    ]
    text = campaign.table(rows)
    assert "| 1 | kill | Start | 8 | yes |  | 1 / 2 / 3 |" in text
    assert "| 2 | power | Confirm | 4 | **no** | daemon.json changed | 4 / 5 / 6 |" in text
    assert "2 points tried, 1 converged" in text
