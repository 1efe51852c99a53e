"""The profile_tasks parsing of bench `rerun`, on the recorded fixtures and on edge cases."""

import os

import pytest

import rerun

FIX = os.path.join(os.path.dirname(__file__), "..", "fixtures")


def read(name):
    with open(os.path.join(FIX, name)) as f:
        return f.read()


def test_fixture_has_two_playbooks_per_run():
    runs = rerun.parse_profile(read("profile_tasks-first.txt"))
    assert len(runs) == 2  # bundle_build.yml then site.yml, as tests/simulate
    for r in runs:
        assert r["total_s"] > 0 and len(r["tasks"]) == 4
        assert set(r["hosts"]) == {"localhost"} and r["hosts"]["localhost"]["changed"] == 3
        assert all(isinstance(s, float) for _n, s in r["tasks"])
    assert runs[0]["tasks"][0][0] == "Slow first-time import (skipped when converged)"


def test_compare_uses_the_last_playbook():
    c = rerun.compare(read("profile_tasks-first.txt"), read("profile_tasks-rerun.txt"))
    last_first = rerun.parse_profile(read("profile_tasks-first.txt"))[-1]["total_s"]
    assert c["first_s"] == last_first
    assert c["changed"] == 0 and c["failed"] == 0
    assert c["ratio"] == pytest.approx(c["rerun_s"] / c["first_s"])
    assert [s for _n, s in c["slowest"]] == sorted((s for _n, s in c["slowest"]), reverse=True)


SYNTH = """\
PLAY RECAP *********************************************************************
airgap-kylin-sim           : ok=120  changed=0    unreachable=0    failed=0    skipped=31   rescued=0    ignored=1

Monday 30 November 2026  15:10:02 +0000 (0:00:00.412)       1:02:03.500 *******
===============================================================================
vllm_service : Wait for /health - vLLM loads the model --- 2 --------- 61.20s
bundle : Stage the bundle artifacts ---------------------------------- 1.50s
-------------------------------------------------------------------------------- 0.01s
"""


def test_hours_dashes_in_names_and_ignored_lines():
    runs = rerun.parse_profile(SYNTH)
    assert len(runs) == 1
    r = runs[0]
    assert r["total_s"] == pytest.approx(3723.5)
    assert r["tasks"][0] == ("vllm_service : Wait for /health - vLLM loads the model --- 2", 61.2)
    assert r["tasks"][1] == ("bundle : Stage the bundle artifacts", 1.5)
    assert r["hosts"]["airgap-kylin-sim"] == {
        "ok": 120,
        "changed": 0,
        "unreachable": 0,
        "failed": 0,
        "skipped": 31,
        "rescued": 0,
        "ignored": 1,
    }


def test_no_summary_is_an_error():
    with pytest.raises(ValueError):
        rerun.compare("PLAY RECAP ****\n", SYNTH)


def test_simulate_runs_with_profile_tasks_on(tmp_path, monkeypatch):
    """The full mode's runner (never the real tests/simulate here): callbacks enabled, output kept."""
    monkeypatch.setenv("ANSIBLE_CALLBACKS_ENABLED", "ansible.posix.timer")
    script = tmp_path / "fake-simulate"
    script.write_text(
        'echo "callbacks=$ANSIBLE_CALLBACKS_ENABLED limit=$PROFILE_TASKS_TASK_OUTPUT_LIMIT"\n'
        'cat "%s"\n' % os.path.join(FIX, "profile_tasks-first.txt")
    )
    log = str(tmp_path / "first.log")
    text = rerun.simulate(log, command=("bash", str(script)))
    assert "callbacks=ansible.posix.timer,ansible.posix.profile_tasks limit=all" in text
    assert len(rerun.parse_profile(text)) == 2
    with open(log) as f:
        assert f.read() == text


def test_simulate_failure_stops_the_bench(tmp_path):
    with pytest.raises(SystemExit):
        rerun.simulate(str(tmp_path / "x.log"), command=("bash", "-c", "echo boom; exit 3"))
