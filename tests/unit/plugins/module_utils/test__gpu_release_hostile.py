"""Hostile/broken conditions for gpu_release (issue 12: #6, #9). Each test name states what is defended."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.common import _docker as dk
from ansible_collections.airgap.vllm.plugins.module_utils.driver import _gpu_release as g

CID = 'c' * 64


class FakeDocker(object):
    """Answers the CLI calls restore makes; records the mutating ones."""

    def __init__(self, swarm='active', info_rc=0, services=('llm_api',), containers=(CID,)):
        self.swarm = swarm
        self.info_rc = info_rc
        self.services = services
        self.containers = containers
        self.mutations = []

    def run(self, argv):
        args = argv[1:]
        if args[:1] == ['info']:
            return (
                self.info_rc,
                self.swarm + '\n' if self.info_rc == 0 else '',
                'Cannot connect to the Docker daemon' if self.info_rc else '',
            )
        if args[:2] == ['service', 'ls']:
            if self.swarm != 'active':
                return 1, '', 'This node is not a swarm manager.'
            return 0, '\n'.join(self.services), ''
        if args[:1] == ['ps']:
            if self.info_rc:
                return 1, '', 'Cannot connect to the Docker daemon'
            return 0, '\n'.join(self.containers), ''
        self.mutations.append(args)
        return 0, '', ''


def recorded(tmp_path):
    state = g.empty_state()
    state['services'] = {'llm_api': {'replicas': 2}}
    state['containers'] = {
        CID: {'name': 'comfyui', 'restart_policy': 'always', 'maximum_retry_count': 0, 'was_running': True}
    }
    path = str(tmp_path / 'gpu-release.json')
    g.write_state_atomic(path, state)
    return path, state


def test_restore_while_swarm_node_pending_fails_and_keeps_the_record(tmp_path):
    path, state = recorded(tmp_path)
    fake = FakeDocker(swarm='pending')
    with pytest.raises(g.GpuReleaseError, match=r"swarm node is 'pending'.*llm_api.*record .*gpu-release.json is kept"):
        g.restore_workloads(dk.DockerCli(run=fake.run), state, path)
    assert os.path.exists(path) and g.read_state_file(path) == state
    assert fake.mutations == []


def test_restore_while_docker_info_fails_fails_and_keeps_the_record(tmp_path):
    path, state = recorded(tmp_path)
    fake = FakeDocker(info_rc=1)
    with pytest.raises(g.GpuReleaseError, match=r"docker info failed.*record .* is kept"):
        g.restore_workloads(dk.DockerCli(run=fake.run), state, path)
    assert os.path.exists(path) and fake.mutations == []


def test_restore_with_swarm_active_scales_back_and_only_then_drops_the_record(tmp_path):
    path, state = recorded(tmp_path)
    fake = FakeDocker()
    actions, gone = g.restore_workloads(dk.DockerCli(run=fake.run), state, path)
    assert ['service', 'scale', '--detach', 'llm_api=2'] in fake.mutations
    assert ['start', CID] in fake.mutations and gone == []
    assert not os.path.exists(path)


def test_restore_failing_docker_command_keeps_the_record(tmp_path):
    path, state = recorded(tmp_path)
    fake = FakeDocker()
    real = fake.run

    def run(argv):
        if argv[1:3] == ['service', 'scale']:
            return 1, '', 'rpc error'
        return real(argv)

    with pytest.raises(g.GpuReleaseError, match='rpc error'):
        g.restore_workloads(dk.DockerCli(run=run), state, path)
    assert os.path.exists(path)


def test_restore_of_containers_only_does_not_need_swarm(tmp_path):
    path, state = recorded(tmp_path)
    state['services'] = {}
    fake = FakeDocker(swarm='inactive')
    g.restore_workloads(dk.DockerCli(run=fake.run), state, path)
    assert ['start', CID] in fake.mutations and not os.path.exists(path)


@pytest.mark.parametrize(
    'content',
    [
        b'[]',
        b'null',
        b'{"version": 1, "services": []}',
        b'"x"',
        b'{',
        b'{"version": 1, "services": {"a": {"replicas": "two"}}}',
        b'{"version": 1, "containers": {"x": null}}',
        b'\xff\xfe',
    ],
)
def test_state_file_of_the_wrong_shape_fails_naming_the_file_and_the_fix(tmp_path, content):
    path = tmp_path / 'gpu-release.json'
    path.write_bytes(content)
    with pytest.raises(g.GpuReleaseError, match=r'state file .*gpu-release.json is unreadable: .*delete the file'):
        g.read_state_file(str(path))
