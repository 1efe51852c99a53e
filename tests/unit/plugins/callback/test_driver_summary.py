"""airgap.vllm.driver_summary: the rows and the table (pure functions), and the callback over Ansible's own stats
as a run leaves them (set_stats per host, failures, rescues), printing after the recap."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import yaml
from ansible.executor.stats import AggregateStats
from ansible.executor.task_result import TaskResult
from ansible.inventory.host import Host
from ansible.playbook.task import Task

from ansible_collections.airgap.vllm.plugins.callback import driver_summary as plugin
from ansible_collections.airgap.vllm.plugins.callback.driver_summary import driver_rows, format_table

FAIL_TASK = "airgap.vllm.nvidia_driver : Fail with what happened to the new driver and the old one"
OLD = "570.172.08"
NEW = "580.65.06"


def test_a_stopped_rollout_names_every_host():
    states = {
        "fleet-1": {"before": OLD, "reached": True, "after": NEW},
        "fleet-2": {"before": OLD, "reached": True, "after": OLD},
        "fleet-3": {"before": OLD},
    }
    rows = driver_rows(["fleet-3", "fleet-1", "fleet-2"], states, {"fleet-2": FAIL_TASK})
    assert rows == [
        ("fleet-1", OLD, NEW, "changed"),
        ("fleet-2", OLD, OLD, "failed at " + FAIL_TASK),
        ("fleet-3", OLD, OLD, "not reached"),
    ]


def test_a_converged_host_is_unchanged():
    assert driver_rows(["a"], {"a": {"before": NEW, "reached": True, "after": NEW}}, {}) == [
        ("a", NEW, NEW, "unchanged")
    ]


def test_a_failure_before_the_driver_stage_keeps_the_driver_read_before():
    rows = driver_rows(["a"], {"a": {"before": OLD}}, {"a": "airgap.vllm.preflight : Fail with every failing check"})
    assert rows == [("a", OLD, OLD, "failed at airgap.vllm.preflight : Fail with every failing check")]


def test_a_failure_inside_the_stage_without_a_published_driver_is_unknown():
    rows = driver_rows(["a"], {"a": {"before": OLD, "reached": True}}, {"a": "airgap.vllm.nvidia_driver : Install"})
    assert rows == [("a", OLD, "unknown", "failed at airgap.vllm.nvidia_driver : Install")]


def test_a_host_of_the_failed_batch_stopped_midway_is_unknown_and_check_mode_changed_nothing():
    states = {"a": {"before": OLD, "reached": True}}
    assert driver_rows(["a"], states, {}) == [
        ("a", OLD, "unknown", "stopped (its batch failed before its stage ended)")
    ]
    assert driver_rows(["a"], states, {}, check_mode=True) == [("a", OLD, OLD, "nothing changed (check mode)")]


def test_no_driver_and_hosts_without_any_state():
    rows = driver_rows(["b", "a"], {"a": {"before": "", "reached": True, "after": NEW}}, {})
    assert rows == [("a", "-", NEW, "changed"), ("b", "-", "-", "not reached")]


def test_the_table_is_aligned_under_its_header():
    lines = format_table([("fleet-1", OLD, NEW, "changed"), ("host-with-a-long-name", "-", "-", "not reached")])
    assert lines == [
        "host                   before      after      what happened",
        "fleet-1                570.172.08  580.65.06  changed",
        "host-with-a-long-name  -           -          not reached",
    ]
    assert format_table([]) == []


def test_the_documentation_names_the_plugin():
    doc = yaml.safe_load(plugin.DOCUMENTATION)
    assert doc["name"] == "driver_summary" and doc["type"] == "aggregate"
    assert plugin.CallbackModule.CALLBACK_NAME == "airgap.vllm." + doc["name"]


def _failed(callback, host, name, ignore_errors=False):
    task = Task()
    task.name = name
    task.no_log = True
    callback.v2_runner_on_failed(
        TaskResult(Host(host), task, {"failed": True, "msg": "secret-key-123"}), ignore_errors=ignore_errors
    )


def test_the_callback_prints_the_table_from_the_stats_only(capsys):
    stats = AggregateStats()
    for host in ("fleet-1", "fleet-2", "fleet-3"):
        stats.increment("ok", host)
    stats.update_custom_stats("nvidia_driver_state", {"before": OLD}, "fleet-3")
    for host, after in (("fleet-1", NEW), ("fleet-2", OLD)):
        stats.update_custom_stats("nvidia_driver_state", {"before": OLD}, host)
        stats.update_custom_stats("nvidia_driver_state", {"before": OLD, "reached": True}, host)
        stats.update_custom_stats("nvidia_driver_state", {"after": after}, host)
    stats.update_custom_stats("unrelated", {"x": 1})
    callback = plugin.CallbackModule()
    # A failure a rescue caught (fleet-1's, no failure in the recap), an ignored one, and the stage's.
    _failed(callback, "fleet-1", "airgap.vllm.nvidia_driver : Assert NVML")
    _failed(callback, "fleet-3", "ignored", ignore_errors=True)
    _failed(callback, "fleet-2", FAIL_TASK)
    stats.increment("failures", "fleet-2")
    capsys.readouterr()
    callback.v2_playbook_on_stats(stats)
    out = capsys.readouterr().out
    assert "NVIDIA DRIVER" in out
    assert [ln.split() for ln in out.splitlines() if ln.startswith("fleet-")] == [
        ["fleet-1", OLD, NEW, "changed"],
        ["fleet-2", OLD, OLD, "failed", "at"] + FAIL_TASK.split(),
        ["fleet-3", OLD, OLD, "not", "reached"],
    ]
    assert "secret-key-123" not in out


def test_a_run_without_the_driver_stage_prints_nothing(capsys):
    stats = AggregateStats()
    stats.increment("ok", "a")
    stats.update_custom_stats("other", {"x": 1}, "a")
    capsys.readouterr()
    plugin.CallbackModule().v2_playbook_on_stats(stats)
    assert capsys.readouterr().out == ""
