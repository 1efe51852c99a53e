# -*- coding: utf-8 -*-
# Copyright: (c) 2026, airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Callback plugin: one table at the end of every run, host -> driver before -> driver after."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: driver_summary
type: aggregate
short_description: Say at the end of a run which host is on which NVIDIA driver
description:
  - Prints one table after the play recap of every run in which the driver stage took part, also when the
    rollout stopped at a failed host - one line per host, inventory names sorted - with the driver the host ran
    before the run, the driver it runs after it, and what happened - C(changed), C(unchanged), C(failed at
    <task>), C(not reached) (a later batch the rollout never got to), C(stopped) (its batch failed before its
    stage ended).
  - It reads only what the role C(airgap.vllm.nvidia_driver) publishes for it on purpose, the per-host custom
    stat C(nvidia_driver_state) (C(ansible.builtin.set_stats); C(before), C(reached), C(after)), and the
    names of the tasks that failed. It never reads a task's result, so nothing a C(no_log) task holds can
    reach the table.
  - C(playbooks/site.yml) reads the driver of every host before the rollout (no C(serial)), so a host of a batch
    the rollout did not reach still says which driver it is on.
  - Runs beside the stdout callback (type aggregate); it prints nothing in a run without the driver stage.
version_added: 1.0.0
requirements:
  - enable it in C(callbacks_enabled) (the repository's and the bundle's C(ansible.cfg) do)
"""

EXAMPLES = r"""
# ansible.cfg of a fleet playbook's directory
# [defaults]
# callbacks_enabled = airgap.vllm.driver_summary
#
# or for one run:
# ANSIBLE_CALLBACKS_ENABLED=airgap.vllm.driver_summary ansible-playbook -i inventory site.yml --tags driver
#
# What it prints after PLAY RECAP (a driver change stopped at fleet-2):
# NVIDIA DRIVER ******************************************************************
# host     before      after       what happened
# fleet-1  570.172.08  580.65.06   changed
# fleet-2  570.172.08  570.172.08  failed at airgap.vllm.nvidia_driver : Fail when the new module loaded ...
# fleet-3  570.172.08  570.172.08  not reached
"""

from ansible import context

from ansible_collections.airgap.vllm.plugins.plugin_utils._callback import SummaryCallback

STAT = "nvidia_driver_state"
HEADER = ("host", "before", "after", "what happened")


def _version(value):
    """A published version, or a dash for none."""
    return value if value else "-"


def driver_rows(hosts, states, failed_at, check_mode=False):
    """One row per host: (host, before, after, what happened).

    hosts: the run's host names; states: host -> the published nvidia_driver_state (before, reached, after);
    failed_at: host -> the name of the task the host failed or was unreachable at (failures a rescue caught
    left out). A host without a published after is still on its before driver unless it failed after
    publishing reached (then what it runs is not known: the stage stopped midway).
    """
    rows = []
    for host in sorted(set(hosts) | set(states)):
        state = states.get(host) or {}
        before = state.get("before") or ""
        after = state.get("after") or ""
        reached = bool(state.get("reached"))
        if host in failed_at:
            what = "failed at %s" % failed_at[host]
            if not after:
                # Failed before its driver stage: the driver is the one it had; failed within it: unknown.
                after = "unknown" if reached else before
        elif after:
            what = "unchanged" if after == before else "changed"
        elif reached:
            what = "nothing changed (check mode)" if check_mode else "stopped (its batch failed before its stage ended)"
            after = before if check_mode else "unknown"
        else:
            what = "not reached"
            after = before
        rows.append((host, _version(before), _version(after), what))
    return rows


def format_table(rows):
    """The rows as aligned text lines under a header; no lines for no rows."""
    if not rows:
        return []
    table = [HEADER] + [tuple(row) for row in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(HEADER) - 1)]
    return [
        "  ".join([cell.ljust(width) for cell, width in zip(row[:-1], widths)] + [row[-1]]).rstrip() for row in table
    ]


class CallbackModule(SummaryCallback):
    """Keeps the failed task of each host; prints driver_rows() at the end of the run."""

    CALLBACK_NAME = "airgap.vllm.driver_summary"

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._failed_at = {}

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if not ignore_errors:
            # The task's name only: never its result (no_log).
            self._failed_at[result._host.get_name()] = result._task.get_name()

    def v2_runner_on_unreachable(self, result):
        self._failed_at[result._host.get_name()] = "%s (unreachable)" % result._task.get_name()

    def v2_playbook_on_stats(self, stats):
        states = {}
        for host, custom in (stats.custom or {}).items():
            state = custom.get(STAT) if isinstance(custom, dict) else None
            if host != "_run" and isinstance(state, dict):
                states[host] = state
        if not states:
            return
        # A failure a rescue caught is not one: only hosts the recap counts as failed or unreachable.
        failed = dict(
            (host, task) for host, task in self._failed_at.items() if stats.failures.get(host) or stats.dark.get(host)
        )
        check_mode = bool(context.CLIARGS.get("check"))
        self.summary("NVIDIA DRIVER", format_table(driver_rows(list(stats.processed), states, failed, check_mode)))
