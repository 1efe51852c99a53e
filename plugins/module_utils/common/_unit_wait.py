# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Decide, from `systemctl show`, whether waiting for a unit's endpoint still makes sense.

A container that exits at once (vLLM refusing its flags, a missing GPU) turns a
Restart=on-failure unit into a restart loop; the endpoint then never answers, and waiting
out the whole health timeout only delays the rollback."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

SHOW_PROPERTIES = ('ActiveState', 'SubState', 'Result', 'NRestarts', 'ExecMainCode', 'ExecMainStatus')


# What a converged run reads of a unit (host_info units): running and enabled, nothing for systemd to do.
UNIT_STATE_PROPERTIES = ('LoadState', 'ActiveState', 'SubState', 'UnitFileState')
# And when its current run started (CLOCK_MONOTONIC, microseconds), and whether its unit file changed since it was
# loaded: a run cut between writing a configuration and restarting the unit (issue 46) left it running the old one.
UNIT_RUN_PROPERTIES = ('ActiveEnterTimestampMonotonic', 'NeedDaemonReload')


def run_started_at(props, now_wall, now_mono):
    """The wall-clock time (epoch seconds) the unit's current run started, or None when it is not active or systemd
    does not say. now_wall, now_mono: time.time() and time.monotonic() read together (systemd's monotonic clock is
    CLOCK_MONOTONIC, as Python's), so a wall clock stepped since the start moves the answer only by the step."""
    props = props or {}
    if props.get('ActiveState') not in ('active', 'reloading'):
        return None
    try:
        mono_us = int(props.get('ActiveEnterTimestampMonotonic', ''))
    except ValueError:
        return None
    if mono_us <= 0:
        return None
    return now_wall - (now_mono - mono_us / 1e6)


def started_and_enabled(props):
    """True when `systemctl show` says the unit runs and starts at boot: `state: started, enabled: true`
    would change nothing (a unit still activating, failed or disabled is left to systemd_service)."""
    props = props or {}
    return (
        props.get('LoadState') == 'loaded'
        and props.get('ActiveState') == 'active'
        and props.get('SubState') == 'running'
        and props.get('UnitFileState') == 'enabled'
    )


def parse_show(text):
    """KEY=value lines of `systemctl show -p ...` into a dict."""
    props = {}
    for line in (text or '').splitlines():
        if '=' in line:
            key, value = line.split('=', 1)
            props[key.strip()] = value.strip()
    return props


def restarts(props):
    """NRestarts as an int, or None where systemd does not report it (before v235)."""
    try:
        return int(props.get('NRestarts', ''))
    except ValueError:
        return None


def unit_gave_up(props, baseline_restarts):
    """Why the unit's process is not going to answer, or None while it may still come up."""
    state = '%s/%s' % (props.get('ActiveState', '?'), props.get('SubState', '?'))
    detail = 'result %s, exit status %s' % (props.get('Result', '?'), props.get('ExecMainStatus', '?'))
    if props.get('ActiveState') in ('failed', 'inactive'):
        return 'the unit is %s (%s)' % (state, detail)
    if props.get('SubState') == 'auto-restart':
        return 'the process exited and systemd is restarting it (%s, %s)' % (state, detail)
    now = restarts(props)
    if baseline_restarts is not None and now is not None and now > baseline_restarts:
        return 'the process exited and was restarted %d time(s) while waiting (%s)' % (now - baseline_restarts, detail)
    return None


def rollback_outcome(name, last_good_dir, last_good_exists, back, refused_noted=False):
    """The sentences a failed start ends with, after the rollback: {'headline', 'rollback', 'refused'}.

    name: the service (unit) name; last_good_dir: where the last good configuration is kept; last_good_exists: whether
    there was one to put back; back: unit_health_wait's result for the restarted last good configuration (status 200
    when it serves again, `elapsed` seconds, `msg` otherwise; skipped or None when nothing was restarted);
    refused_noted: whether the rollback noted the plan as refused in the service's state record ('' when not).
    The role's fail task only lists them (vllm_service tasks/start.yml, filter vllm_rollback_outcome).
    """
    back = back if isinstance(back, dict) else {}
    headline = '%s did not come up healthy with the new configuration.' % name
    if not last_good_exists:
        rollback = 'No earlier good configuration exists: the service is stopped.'
    elif back.get('status') == 200:
        rollback = 'Rolled back to the last good configuration (%s): it is healthy again (after %s s).' % (
            last_good_dir,
            back.get('elapsed', 0),
        )
    else:
        rollback = (
            'Rolled back to the last good configuration (%s): it did not come back healthy: %s. '
            'See systemctl status %s.' % (last_good_dir, back.get('msg') or 'no answer', name)
        )
    refused = (
        'This plan is noted as refused: a run with it again (an unchanged inventory) stops before touching the service.'
        if refused_noted
        else ''
    )
    return dict(headline=headline, rollback=rollback, refused=refused)


_CACHE_INFO = re.compile(r'^vllm:cache_config_info\{.*$', re.MULTILINE)


def _argv_value(argv, flag):
    return argv[argv.index(flag) + 1] if flag in argv and argv.index(flag) + 1 < len(argv) else ''


def start_failure(health, argv, smoke=None):
    """Why the started service is not the planned, working one - '' when it is. Read once, failed on once: the role's
    verify reads (the health wait and the smoke test do not fail) and one task after the rollback says this reason.

    health: unit_health_wait's result, run with read_url (failed: `msg`; healthy: status 200 and the /metrics text as
    `content`); argv: the
    engine's argv (the planned --kv-cache-dtype and prefix caching are checked in vllm:cache_config_info); smoke: the
    smoke test's verdict ({ok, reason, answer}: _smoke.smoke_verdict), None when the smoke test is off.
    """
    health = health if isinstance(health, dict) else {}
    # Registered with failed_when: false, a failed wait says failed=False: it is the one without the /metrics text
    # (the module returns `content` only when the unit answered 200 and /metrics was read), with its reason in `msg`.
    if health.get('failed') or health.get('status') != 200 or 'content' not in health:
        return health.get('msg') or 'the service did not come up healthy'
    argv = [str(a) for a in argv or []]
    kv_dtype = _argv_value(argv, '--kv-cache-dtype')
    prefix = (
        'True' if '--enable-prefix-caching' in argv else ('False' if '--no-enable-prefix-caching' in argv else None)
    )
    match = _CACHE_INFO.search(health.get('content') or '')
    info = match.group(0) if match else ''
    if (
        not info
        or (kv_dtype and 'cache_dtype="%s"' % kv_dtype not in info)
        or (prefix is not None and 'enable_prefix_caching="%s"' % prefix not in info)
    ):
        return '/metrics does not show the planned cache settings (kv dtype %s, prefix caching %s): %s' % (
            kv_dtype or 'auto',
            prefix,
            info or 'no vllm:cache_config_info',
        )
    if isinstance(smoke, dict) and not smoke.get('ok'):
        return 'The smoke-test completion was not what a working server returns: %s. The server answered: %s' % (
            smoke.get('reason'),
            smoke.get('answer'),
        )
    return ''
