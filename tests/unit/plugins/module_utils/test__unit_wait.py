from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.airgap.vllm.plugins.module_utils.common import _unit_wait as W

RUNNING = "ActiveState=active\nSubState=running\nResult=success\nNRestarts=0\nExecMainStatus=0\n"


def test_parse_show():
    props = W.parse_show(RUNNING + "garbage line\n")
    assert props["SubState"] == "running" and W.restarts(props) == 0


def test_running_unit_keeps_waiting():
    assert W.unit_gave_up(W.parse_show(RUNNING), 0) is None


def test_auto_restart_gives_up_at_once():
    props = W.parse_show(
        RUNNING.replace("SubState=running", "SubState=auto-restart")
        .replace("ExecMainStatus=0", "ExecMainStatus=1")
        .replace("Result=success", "Result=exit-code")
    )
    reason = W.unit_gave_up(props, 0)
    assert "restarting" in reason and "exit status 1" in reason and "exit-code" in reason


def test_restart_counter_moved_gives_up():
    props = W.parse_show(RUNNING.replace("NRestarts=0", "NRestarts=2"))
    assert "2 time(s)" in W.unit_gave_up(props, 0)
    assert W.unit_gave_up(props, 2) is None


def test_failed_or_stopped_unit_gives_up():
    assert "failed/failed" in W.unit_gave_up({"ActiveState": "failed", "SubState": "failed"}, 0)
    assert "inactive" in W.unit_gave_up({"ActiveState": "inactive", "SubState": "dead"}, None)


def test_old_systemd_without_counter():
    props = W.parse_show(RUNNING.replace("NRestarts=0\n", ""))
    assert W.restarts(props) is None and W.unit_gave_up(props, None) is None


def test_started_and_enabled_only_when_systemd_has_nothing_to_do():
    from ansible_collections.airgap.vllm.plugins.module_utils.common._unit_wait import started_and_enabled

    up = {"LoadState": "loaded", "ActiveState": "active", "SubState": "running", "UnitFileState": "enabled"}
    assert started_and_enabled(up)
    for key, value in (
        ("ActiveState", "activating"),
        ("SubState", "auto-restart"),
        ("UnitFileState", "disabled"),
        ("LoadState", "not-found"),
        ("ActiveState", "failed"),
    ):
        assert not started_and_enabled(dict(up, **{key: value})), key
    assert not started_and_enabled(None) and not started_and_enabled({})


def test_the_rollback_says_healthy_again_with_its_time():
    out = W.rollback_outcome('vllm', '/etc/airgap-vllm/vllm/last-good', True, {'status': 200, 'elapsed': 42})
    assert out == {
        'headline': 'vllm did not come up healthy with the new configuration.',
        'rollback': 'Rolled back to the last good configuration (/etc/airgap-vllm/vllm/last-good): it is healthy again '
        '(after 42 s).',
        'refused': '',
    }


def test_the_rollback_says_why_the_old_configuration_did_not_come_back():
    out = W.rollback_outcome('chat', '/d/last-good', True, {'status': None, 'msg': 'unit failed'})
    assert out['rollback'] == (
        'Rolled back to the last good configuration (/d/last-good): it did not come back healthy: unit failed. '
        'See systemctl status chat.'
    )
    assert 'no answer' in W.rollback_outcome('chat', '/d/last-good', True, {'status': 503})['rollback']


def test_no_last_good_configuration_means_stopped_whatever_the_wait_says():
    for back in (None, {'skipped': True}, {'status': 200, 'elapsed': 1}):
        assert W.rollback_outcome('vllm', '/d', False, back)['rollback'] == (
            'No earlier good configuration exists: the service is stopped.'
        )


def test_a_noted_refusal_is_said_once():
    assert W.rollback_outcome('vllm', '/d', True, {'status': 200}, refused_noted=True)['refused'].startswith(
        'This plan is noted as refused: a run with it again'
    )
    assert W.rollback_outcome('vllm', '/d', True, {'status': 200})['refused'] == ''


def test_the_run_start_is_read_from_the_monotonic_clock_in_wall_clock_seconds():
    props = {"ActiveState": "active", "ActiveEnterTimestampMonotonic": "1000000000"}
    # 1000 s after boot; now is 1500 s after boot at wall clock 10,000: it started at 9,500.
    assert W.run_started_at(props, 10000.0, 1500.0) == 9500.0
    assert W.run_started_at(dict(props, ActiveState="failed"), 10000.0, 1500.0) is None
    assert W.run_started_at(dict(props, ActiveEnterTimestampMonotonic="0"), 10000.0, 1500.0) is None
    assert W.run_started_at({"ActiveState": "active"}, 10000.0, 1500.0) is None


METRICS = 'vllm:cache_config_info{block_size="16",cache_dtype="fp8",enable_prefix_caching="True"} 1.0\n'


def test_start_failure_is_empty_for_a_healthy_planned_answering_service():
    health = {'status': 200, 'content': METRICS}
    argv = ['--kv-cache-dtype', 'fp8', '--enable-prefix-caching']
    assert W.start_failure(health, argv, {'ok': True, 'reason': '', 'answer': 'x'}) == ''
    assert W.start_failure(health, ['--max-model-len', '4096'], None) == ''  # auto dtype, default prefix: not checked


def test_start_failure_says_the_health_waits_own_reason_first():
    health = {'failed': True, 'msg': 'vllm exited (status 1) after 3 restarts', 'status': None}
    assert W.start_failure(health, ['--kv-cache-dtype', 'fp8'], {'ok': False}) == (
        'vllm exited (status 1) after 3 restarts'
    )
    assert W.start_failure({'failed': True}, []) == 'the service did not come up healthy'
    # As the role registers it (failed_when: false): failed is false, the reason is in msg, there is no content.
    late = {'failed': False, 'msg': 'http://h/health did not answer HTTP 200 within 900s', 'status': 503}
    assert W.start_failure(late, []) == late['msg']
    metrics_down = {'failed': False, 'msg': 'vllm is healthy but /metrics answered 500: x', 'status': 200}
    assert W.start_failure(metrics_down, []) == metrics_down['msg']


def test_start_failure_names_cache_settings_that_are_not_the_plan():
    health = {'status': 200, 'content': METRICS}
    why = W.start_failure(health, ['--kv-cache-dtype', 'auto'], None)
    assert why.startswith('/metrics does not show the planned cache settings (kv dtype auto, prefix caching None)')
    assert 'cache_dtype="fp8"' in why
    why = W.start_failure(health, ['--no-enable-prefix-caching'], None)
    assert 'prefix caching False' in why
    why = W.start_failure({'status': 200, 'content': 'vllm:num_requests_running 0\n'}, [], None)
    assert why.endswith('no vllm:cache_config_info')


def test_start_failure_says_what_the_smoke_answer_got_wrong():
    health = {'status': 200, 'content': METRICS}
    why = W.start_failure(health, [], {'ok': False, 'reason': 'no tool call', 'answer': 'It is sunny.'})
    assert why == (
        'The smoke-test completion was not what a working server returns: no tool call. The server answered: '
        'It is sunny.'
    )
