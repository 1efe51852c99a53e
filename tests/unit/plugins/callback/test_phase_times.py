"""airgap.vllm.phase_times: the phase of a task, the rows and the table (pure functions), and the callback over a real
run's events."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

import yaml

from ansible_collections.airgap.vllm.plugins.callback import phase_times as plugin
from ansible_collections.airgap.vllm.plugins.callback.phase_times import format_rows, phase_of, phase_rows
from ansible_collections.airgap.vllm.tests.unit.plugins.plugin_utils.test__callback import DisplayRecorder


def test_phase_is_the_first_stage_tag_else_the_play():
    assert phase_of(["always", "service", "vllm_service_configure"], "Roll out — x") == "service"
    assert phase_of(["vllm_front", "front"], "Roll out — x") == "front"
    assert phase_of(["always"], "Validate — check every setting first") == "Validate"
    assert phase_of([], "Bundle - build") == "Bundle"
    assert phase_of([], "") == "-"


def test_rows_sum_each_phase_until_the_next_task_in_first_seen_order():
    events = [(0.0, "Validate"), (4.0, "bundle"), (10.0, "preflight"), (12.0, "driver"), (20.0, "preflight")]
    assert phase_rows(events, 23.0) == [("Validate", 4.0), ("bundle", 6.0), ("preflight", 5.0), ("driver", 8.0)]
    assert phase_rows([], 5.0) == []


def test_table_is_aligned_with_a_total():
    lines = format_rows([("Validate", 4.2), ("service", 123.6)])
    assert lines == ["phase     seconds", "Validate        4", "service       124", "total         128"]
    assert format_rows([]) == []


def test_the_shipped_ansible_cfgs_enable_it():
    for path in ("ansible.cfg", "roles/bundle_build/templates/ansible.cfg.j2"):
        with open(path) as handle:
            assert re.search(r"^callbacks_enabled = .*airgap\.vllm\.phase_times", handle.read(), re.M), path


def test_stages_are_site_yml_tags():
    with open("playbooks/site.yml") as handle:
        text = handle.read()
    for stage in plugin.STAGES:
        assert re.search(r"tags: \[%s\]" % stage, text), stage


def test_documentation_parses():
    doc = yaml.safe_load(plugin.DOCUMENTATION)
    assert doc["name"] == "phase_times" and doc["type"] == "aggregate"


class _Task:
    def __init__(self, tags):
        self.tags = tags


class _Play:
    def get_name(self):
        return "Roll out — preflight, driver"


def test_callback_prints_the_phases_after_the_recap(monkeypatch):
    clock = iter([100.0, 103.0, 110.0, 111.0])
    monkeypatch.setattr(plugin.time, "time", lambda: next(clock))
    callback = plugin.CallbackModule()
    callback._display = DisplayRecorder()
    callback.v2_playbook_on_play_start(_Play())
    callback.v2_playbook_on_task_start(_Task(["always"]), False)
    callback.v2_playbook_on_task_start(_Task(["preflight"]), False)
    callback.v2_playbook_on_handler_task_start(_Task(["service"]))
    callback.v2_playbook_on_stats(None)
    assert callback._display.lines == [
        "== PHASES",
        "phase      seconds",
        "Roll out         3",
        "preflight        7",
        "service          1",
        "total           11",
        "",
    ]
