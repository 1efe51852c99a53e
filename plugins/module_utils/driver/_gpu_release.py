# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Free a GPU of other Docker workloads, remembering how to put them back.

Swarm tasks must be scaled to 0 on their service: `docker stop` on a task only makes swarm start a
new one. Plain containers are stopped with their restart policy set to `no` (otherwise the daemon or
a reboot brings them back). What was changed is recorded so `restored` undoes exactly that.
Pure planning functions take `docker inspect` data; the Docker CLI is module_utils/common/_docker.py's DockerCli.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.airgap.vllm.plugins.module_utils.common._docker import DockerError
from ansible_collections.airgap.vllm.plugins.module_utils.common._files import write_atomic

SWARM_SERVICE_LABEL = 'com.docker.swarm.service.name'
STATE_VERSION = 1


class GpuReleaseError(Exception):
    """A workload cannot be released or restored; the message says what to do."""


def empty_state():
    return {'version': STATE_VERSION, 'services': {}, 'containers': {}}


def load_state(text):
    """Parse the state file's text; raises GpuReleaseError (never a traceback) on any other shape."""
    if not text or not text.strip():
        return empty_state()
    try:
        state = json.loads(text)
    except ValueError as exc:
        raise GpuReleaseError('not valid JSON (%s)' % exc)
    if not isinstance(state, dict):
        raise GpuReleaseError('holds %s, not a JSON object' % type(state).__name__)
    if state.get('version') != STATE_VERSION:
        raise GpuReleaseError('unknown gpu release state version %r' % state.get('version'))
    state.setdefault('services', {})
    state.setdefault('containers', {})
    services, containers = state['services'], state['containers']
    if not isinstance(services, dict) or not all(
        isinstance(r, dict) and isinstance(r.get('replicas'), int) for r in services.values()
    ):
        raise GpuReleaseError('"services" must map service names to {"replicas": <int>}')
    if not isinstance(containers, dict) or not all(
        isinstance(r, dict)
        and isinstance(r.get('name'), str)
        and isinstance(r.get('restart_policy'), str)
        and isinstance(r.get('was_running'), bool)
        for r in containers.values()
    ):
        raise GpuReleaseError('"containers" must map container ids to {"name", "restart_policy", "was_running"}')
    return state


def read_state_file(path):
    """The recorded state at path (empty when the file is absent); errors name the file and the fix."""
    if not os.path.exists(path):
        return empty_state()
    try:
        with open(path, 'rb') as handle:
            text = handle.read().decode('utf-8')
        return load_state(text)
    except (GpuReleaseError, ValueError, IOError, OSError) as exc:
        raise GpuReleaseError(
            'gpu release state file %s is unreadable: %s. It records what to put back after a release: '
            'restore those workloads by hand (docker service scale / docker update --restart / docker start) '
            'and delete the file, or fix its JSON' % (path, exc)
        )


def _name(container):
    return (container.get('Name') or container.get('Id', '')[:12]).lstrip('/')


def classify(containers, exclude=()):
    """Split inspected containers into swarm service names and plain containers.

    Containers whose name or id (prefix) is in `exclude` (our own service) are left alone.
    """
    services, plain = [], []
    for container in containers:
        name = _name(container)
        cid = container.get('Id', '')
        if any(name == item or (len(item) >= 12 and cid.startswith(item)) for item in exclude):
            continue
        labels = (container.get('Config') or {}).get('Labels') or {}
        service = labels.get(SWARM_SERVICE_LABEL)
        if service:
            if service not in services:
                services.append(service)
        else:
            plain.append(container)
    return services, plain


def service_replicas(service):
    """Replica count of an inspected service; global services cannot be scaled."""
    mode = (service.get('Spec') or {}).get('Mode') or {}
    if 'Replicated' not in mode:
        raise GpuReleaseError(
            'swarm service %s runs in global mode and cannot be scaled to 0: remove it '
            '(docker service rm) or constrain it off this node (docker service update '
            '--constraint-add node.hostname!=<this host>) and run again'
            % (service.get('Spec') or {}).get('Name', service.get('ID'))
        )
    return int(mode['Replicated'].get('Replicas') or 0)


def plan_release(state, services, containers):
    """Return (actions, new_state) for releasing the given workloads.

    `services`: list of inspected swarm services; `containers`: inspected plain containers.
    Each action is a docker CLI argv. The first recorded value wins, so a re-run after a partial
    release never overwrites the replica count or restart policy to restore with 0 / `no`.
    """
    new = json.loads(json.dumps(state))
    actions = []
    for service in services:
        name = service['Spec']['Name']
        replicas = service_replicas(service)
        if replicas == 0:
            continue
        new['services'].setdefault(name, {'replicas': replicas})
        actions.append(['service', 'scale', '--detach', '%s=0' % name])
    for container in containers:
        cid = container['Id']
        policy = (container.get('HostConfig') or {}).get('RestartPolicy') or {}
        running = bool((container.get('State') or {}).get('Running'))
        policy_name = policy.get('Name') or 'no'
        if not running and policy_name in ('no', ''):
            continue
        new['containers'].setdefault(
            cid,
            {
                'name': _name(container),
                'restart_policy': policy_name,
                'maximum_retry_count': int(policy.get('MaximumRetryCount') or 0),
                'was_running': running,
            },
        )
        if policy_name not in ('no', ''):
            actions.append(['update', '--restart=no', cid])
        if running:
            actions.append(['stop', cid])
    return actions, new


def restart_policy_arg(record):
    policy = record['restart_policy']
    if policy == 'on-failure' and record.get('maximum_retry_count'):
        return '--restart=on-failure:%d' % record['maximum_retry_count']
    return '--restart=%s' % policy


def plan_restore(state, existing_services, existing_containers):
    """Return the actions that put recorded workloads back; skips ones that no longer exist."""
    actions, gone = [], []
    for name, record in sorted(state['services'].items()):
        if name not in existing_services:
            gone.append('service %s' % name)
            continue
        actions.append(['service', 'scale', '--detach', '%s=%d' % (name, record['replicas'])])
    for cid, record in sorted(state['containers'].items()):
        if cid not in existing_containers:
            gone.append('container %s' % record['name'])
            continue
        if record['restart_policy'] not in ('no', ''):
            actions.append(['update', restart_policy_arg(record), cid])
        if record['was_running']:
            actions.append(['start', cid])
    return actions, gone


def write_state_atomic(path, state):
    """The record, readable by root only, replaced atomically and durably (module_utils/common/_files.py)."""
    write_atomic(
        path, json.dumps(state, indent=2, sort_keys=True) + '\n', mode=0o600, makedirs=0o700, prefix='.gpu-release-'
    )


def restore_workloads(docker, state, state_file, check_mode=False):
    """Put back what a release recorded; delete the record only once that really happened.

    Returns (actions, gone). Raises GpuReleaseError, keeping the state file, when Docker cannot say
    what exists: `docker info` failing, or a swarm node that is not `active` (right after a reboot it
    is `pending` for a while: its services would all look gone).
    """
    if state['services'] or state['containers']:
        try:
            swarm = docker.swarm_state()
        except DockerError as exc:
            raise GpuReleaseError(
                'docker info failed (rc %s): %s: cannot tell which released workloads still exist, so nothing was restored '
                'and the record %s is kept; start Docker and run again'
                % (exc.rc, (exc.stderr or exc.stdout or str(exc)).strip(), state_file)
            )
        if state['services'] and swarm != 'active':
            raise GpuReleaseError(
                'swarm node is %r, not active (right after a reboot it stays pending until it rejoins): '
                'services %s cannot be scaled back yet; nothing was restored and the record %s is kept. Run '
                'again once `docker info` shows Swarm: active (if this node left the swarm for good, scale them '
                'from a manager and delete the record)' % (swarm, ', '.join(sorted(state['services'])), state_file)
            )
        services = docker.service_names() if state['services'] else set()
    else:
        services = set()
    containers = docker.container_ids() if state['containers'] else set()
    actions, gone = plan_restore(state, services, containers)
    if not check_mode:
        for action in actions:
            try:
                docker.call(action)
            except DockerError as exc:
                raise GpuReleaseError('%s; the record %s is kept: fix the cause and run again' % (exc, state_file))
        if os.path.exists(state_file):
            os.unlink(state_file)
    return actions, gone
