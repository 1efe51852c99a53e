from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.common._docker import DockerCli, DockerError
from ansible_collections.airgap.vllm.plugins.module_utils.driver._gpu_release import (
    GpuReleaseError,
    classify,
    empty_state,
    load_state,
    plan_release,
    plan_restore,
)


def container(cid, name, running=True, policy='always', retries=0, service=None):
    labels = {'com.docker.swarm.service.name': service} if service else {}
    return {
        'Id': cid,
        'Name': '/' + name,
        'State': {'Running': running},
        'HostConfig': {'RestartPolicy': {'Name': policy, 'MaximumRetryCount': retries}},
        'Config': {'Labels': labels},
    }


def service(name, replicas=None, mode='replicated'):
    spec_mode = {'Replicated': {'Replicas': replicas}} if mode == 'replicated' else {'Global': {}}
    return {'ID': 'svc' + name, 'Spec': {'Name': name, 'Mode': spec_mode}}


CID_A = 'a' * 64
CID_B = 'b' * 64


def test_classify_splits_swarm_tasks_from_plain_containers_and_skips_excluded():
    found = [
        container(CID_A, 'stack_api.1.xyz', service='stack_api'),
        container(CID_B, 'comfyui'),
        container('c' * 64, 'vllm'),
    ]
    services, plain = classify(found, exclude=['vllm'])
    assert services == ['stack_api']
    assert [c['Id'] for c in plain] == [CID_B]


def test_swarm_service_is_scaled_to_zero_never_stopped():
    actions, state = plan_release(empty_state(), [service('stack_api', 2)], [])
    assert actions == [['service', 'scale', '--detach', 'stack_api=0']]
    assert state['services'] == {'stack_api': {'replicas': 2}}


def test_plain_container_gets_restart_no_then_stop():
    actions, state = plan_release(empty_state(), [], [container(CID_B, 'comfyui', policy='unless-stopped')])
    assert actions == [['update', '--restart=no', CID_B], ['stop', CID_B]]
    assert state['containers'][CID_B] == {
        'name': 'comfyui',
        'restart_policy': 'unless-stopped',
        'maximum_retry_count': 0,
        'was_running': True,
    }


def test_second_release_is_a_no_op_and_keeps_the_original_record():
    _actions, state = plan_release(empty_state(), [service('stack_api', 3)], [container(CID_B, 'x')])
    # After the first run: service at 0, container stopped with restart=no.
    actions, again = plan_release(state, [service('stack_api', 0)], [container(CID_B, 'x', running=False, policy='no')])
    assert actions == []
    assert again == state


def test_rerun_after_partial_release_does_not_overwrite_recorded_values():
    _actions, state = plan_release(empty_state(), [], [container(CID_B, 'x', policy='always')])
    # The update ran, the stop did not: a re-run must still remember 'always'.
    actions, again = plan_release(state, [], [container(CID_B, 'x', policy='no', running=True)])
    assert actions == [['stop', CID_B]]
    assert again['containers'][CID_B]['restart_policy'] == 'always'


def test_global_service_cannot_be_scaled():
    with pytest.raises(GpuReleaseError, match='global mode'):
        plan_release(empty_state(), [service('agent', mode='global')], [])


def test_restore_puts_back_exactly_what_was_recorded():
    _actions, state = plan_release(
        empty_state(),
        [service('stack_api', 2)],
        [container(CID_B, 'x', policy='on-failure', retries=5), container(CID_A, 'y', running=False, policy='always')],
    )
    actions, gone = plan_restore(state, {'stack_api'}, {CID_A, CID_B})
    assert gone == []
    assert ['service', 'scale', '--detach', 'stack_api=2'] in actions
    assert ['update', '--restart=on-failure:5', CID_B] in actions
    assert ['start', CID_B] in actions
    assert ['update', '--restart=always', CID_A] in actions
    assert ['start', CID_A] not in actions


def test_restore_reports_workloads_that_disappeared():
    _actions, state = plan_release(empty_state(), [service('old', 1)], [])
    actions, gone = plan_restore(state, set(), set())
    assert actions == [] and gone == ['service old']


def test_state_round_trip_and_version_check():
    assert load_state('') == empty_state()
    assert load_state(json.dumps(empty_state())) == empty_state()
    with pytest.raises(GpuReleaseError):
        load_state('{"version": 99}')


def test_docker_cli_inspect_skips_unknown_refs_and_raises_on_failed_actions():
    calls = []

    def fake_run(argv):
        calls.append(argv)
        if argv[-1] == 'missing':
            return 1, '', 'Error: No such object: missing'
        if argv[1] == 'inspect':
            return 0, json.dumps([container(CID_A, 'x')]), ''
        return 1, '', 'boom'

    docker = DockerCli('docker', run=fake_run)
    assert [c['Id'] for c in docker.inspect('container', ['x', 'missing'])] == [CID_A]
    with pytest.raises(DockerError, match='boom'):
        docker.call(['stop', CID_A])
