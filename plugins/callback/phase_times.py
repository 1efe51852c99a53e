# -*- coding: utf-8 -*-
# Copyright: (c) 2026, airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Callback plugin: a short table at the end of every run, each stage of site.yml with the seconds it took."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: phase_times
type: aggregate
short_description: Say at the end of a run how long each stage took
description:
  - Prints one table after the play recap - the run's phases in the order they first ran, with the wall-clock
    seconds spent in each and the total.
  - A task's phase is the first stage tag it carries (C(bundle), C(preflight), C(driver), C(toolkit), C(gpu),
    C(model), C(image), C(plan), C(service), C(front), C(observe) - the tags C(playbooks/site.yml) runs each stage by,
    which its roles' tasks inherit), else its play's name up to the first dash (C(Validate)). A task's time counts
    until the next task starts (tasks of one batch run on all its hosts at once - wall time, not a sum
    over hosts); a stage that runs in several batches is one row.
  - It reads task names and tags only, never a result.
version_added: 1.0.0
requirements:
  - enable it in C(callbacks_enabled) (the repository's and the bundle's C(ansible.cfg) do)
"""

EXAMPLES = r"""
# What it prints after PLAY RECAP:
# PHASES *************************************************************************
# phase      seconds
# Validate         4
# bundle          12
# preflight        9
# ...
# total          301
"""

import time

from ansible_collections.airgap.vllm.plugins.plugin_utils._callback import SummaryCallback

# site.yml's stage tags (README's stage table), in the order the stages run.
STAGES = ("bundle", "preflight", "driver", "toolkit", "gpu", "model", "image", "plan", "service", "front", "observe")


def phase_of(tags, play_name):
    """The stage a task belongs to: its first stage tag, else its play's name up to the first dash."""
    for tag in tags or []:
        if tag in STAGES:
            return tag
    name = (play_name or "").strip()
    for dash in (" — ", " - ", " -- "):
        name = name.split(dash)[0]
    return name.strip() or "-"


def phase_rows(events, end):
    """[(phase, seconds)] in first-seen order from [(start time, phase)] and the run's end time; each event lasts
    until the next one starts (the last until end). Phases seen again later add to their first row."""
    order, spent = [], {}
    for index, (start, phase) in enumerate(events):
        stop = events[index + 1][0] if index + 1 < len(events) else end
        if phase not in spent:
            order.append(phase)
            spent[phase] = 0.0
        spent[phase] += max(stop - start, 0.0)
    return [(phase, spent[phase]) for phase in order]


def format_rows(rows):
    """Aligned lines: a header, one line per phase (whole seconds), the total; none for no rows."""
    if not rows:
        return []
    table = [("phase", "seconds")] + [(p, "%d" % round(s)) for p, s in rows]
    table.append(("total", "%d" % round(sum(s for _p, s in rows))))
    width = max(len(p) for p, _s in table)
    digits = max(len(s) for _p, s in table)
    return ["%s  %s" % (p.ljust(width), s.rjust(digits)) for p, s in table]


class CallbackModule(SummaryCallback):
    """Notes when each task starts and under which phase; prints phase_rows() at the end of the run."""

    CALLBACK_NAME = "airgap.vllm.phase_times"

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._events = []
        self._play = ""

    def v2_playbook_on_play_start(self, play):
        self._play = play.get_name()

    def _start(self, task):
        self._events.append((time.time(), phase_of(task.tags, self._play)))

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._start(task)

    def v2_playbook_on_handler_task_start(self, task):
        self._start(task)

    def v2_playbook_on_stats(self, stats):
        lines = format_rows(phase_rows(self._events, time.time()))
        if lines:
            self.summary("PHASES", lines)
