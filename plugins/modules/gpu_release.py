#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: gpu_release
short_description: Free the GPU of other Docker workloads and put them back later
version_added: 0.1.0
description:
  - With O(state=released), scales the swarm services owning the given containers (or named
    directly) to 0 replicas — C(docker stop) on a swarm task only makes swarm start another — and
    stops plain containers after setting their restart policy to C(no).
  - What it changed (replica counts, restart policies, running state) is written to O(state_file)
    before the first change, and a later run never overwrites a recorded value, so an interrupted
    release can still be undone exactly.
  - With O(state=restored), scales the services back, restores restart policies, starts the
    containers that were running, and removes the state file - only once that really happened. While
    C(docker info) fails, or the swarm node is not C(active) (it is C(pending) for a while after a
    reboot), the task fails and keeps the state file, so a later run can still restore.
  - A state file of the wrong shape fails naming the file and what to do, never with a traceback.
  - Uses the Docker CLI; the target needs no Python Docker SDK.
options:
  state:
    description: Release the workloads, or restore what an earlier release changed.
    type: str
    choices: [released, restored]
    default: released
  containers:
    description:
      - Container names or ids holding the GPU (for example the C(container_id) of each process
        returned by M(airgap.vllm.nvml_info)). Swarm tasks among them release their service.
    type: list
    elements: str
    default: []
  services:
    description: Swarm service names to scale to 0 in addition.
    type: list
    elements: str
    default: []
  exclude:
    description: Container names or ids never touched (the vLLM service this collection manages).
    type: list
    elements: str
    default: []
  state_file:
    description: Where the record of changes lives (root only).
    type: path
    default: /var/lib/airgap-vllm/gpu-release.json
  docker_bin:
    description: Docker CLI to run.
    type: str
    default: docker
attributes:
  check_mode:
    support: full
    description: Reports the docker commands it would run, runs none and writes no state.
  diff_mode:
    support: full
    description: Shows the recorded state before and after.
  idempotent:
    support: full
    description: Released workloads stay released; a second restore finds nothing to do.
author:
  - airgap.vllm maintainers (@airgap-vllm)
'''

EXAMPLES = r'''
- name: Read who holds the GPU
  airgap.vllm.nvml_info:
  register: __gpu

- name: Free the GPU of other containers and swarm services
  airgap.vllm.gpu_release:
    containers: "{{ __gpu.gpus | map(attribute='processes') | flatten
                    | selectattr('container_id') | map(attribute='container_id') | unique }}"
    exclude: [vllm]

- name: Put them back (for example after a maintenance window)
  airgap.vllm.gpu_release:
    state: restored
'''

RETURN = r'''
commands:
  description: Docker CLI commands run (or, in check mode, that would run).
  returned: always
  type: list
  elements: str
  sample: ["docker service scale --detach llm_api=0", "docker update --restart=no 3f2a...", "docker stop 3f2a..."]
released_services:
  description: Swarm services recorded as released, with the replica count to restore.
  returned: always
  type: dict
  sample: {"llm_api": {"replicas": 2}}
released_containers:
  description: Plain containers recorded as released, with restart policy and running state.
  returned: always
  type: dict
gone:
  description: Recorded workloads that no longer exist and so were not restored.
  returned: when state=restored
  type: list
  elements: str
'''

import json

from ansible_collections.airgap.vllm.plugins.module_utils.common._docker import DockerCli, DockerError
from ansible_collections.airgap.vllm.plugins.module_utils.driver._gpu_release import (
    GpuReleaseError,
    classify,
    load_state,
    plan_release,
    read_state_file,
    restore_workloads,
    write_state_atomic,
)
from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module


def release(module, docker, state):
    containers = docker.inspect('container', module.params['containers'])
    service_names, plain = classify(containers, module.params['exclude'])
    for name in module.params['services']:
        if name not in service_names:
            service_names.append(name)
    services = docker.inspect('service', service_names)
    missing = sorted(set(service_names) - set(s['Spec']['Name'] for s in services))
    if missing:
        raise GpuReleaseError('swarm service(s) not found: %s' % ', '.join(missing))
    actions, new_state = plan_release(state, services, plain)
    if actions and not module.check_mode:
        # Record first: if a command below fails, `restored` still knows the original settings.
        write_state_atomic(module.params['state_file'], new_state)
        for action in actions:
            docker.call(action)
    return actions, new_state, {}


def restore(module, docker, state):
    recorded = bool(state['services'] or state['containers'])
    actions, gone = restore_workloads(docker, state, module.params['state_file'], module.check_mode)
    return actions, load_state(''), {'gone': gone, '_recorded': recorded}


@ansible_module(
    dict(
        state=dict(type='str', choices=['released', 'restored'], default='released'),
        containers=dict(type='list', elements='str', default=[]),
        services=dict(type='list', elements='str', default=[]),
        exclude=dict(type='list', elements='str', default=[]),
        state_file=dict(type='path', default='/var/lib/airgap-vllm/gpu-release.json'),
        docker_bin=dict(type='str', default='docker'),
    ),
    errors=(GpuReleaseError, DockerError, ValueError, OSError),
)
def main(module):
    docker = DockerCli(module.get_bin_path(module.params['docker_bin'], required=True))
    before = read_state_file(module.params['state_file'])
    handler = release if module.params['state'] == 'released' else restore
    actions, after, extra = handler(module, docker, before)
    recorded = extra.pop('_recorded', False)
    result = dict(
        changed=bool(actions) or recorded,
        commands=['docker ' + ' '.join(a) for a in actions],
        released_services=after['services'],
        released_containers=after['containers'],
        **extra,
    )
    for item in extra.get('gone', []):
        module.warn('%s was released earlier but no longer exists; not restored' % item)
    if module._diff:
        result['diff'] = dict(
            before=json.dumps(before, indent=2, sort_keys=True) + '\n',
            after=json.dumps(after, indent=2, sort_keys=True) + '\n',
        )
    return result


if __name__ == '__main__':
    main()
