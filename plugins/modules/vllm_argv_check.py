#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: vllm_argv_check
short_description: Judge a vllm serve argv with the image's own vLLM argument parser, before the service is touched
version_added: 0.1.0
description:
  - Runs the image's own C(vllm serve) argument parser on O(argv) in a throwaway container (C(--network none),
    removed at exit, no GPU, no engine start, the image's entry point not run), O(script) (the role's
    C(files/parse_argv.py)) through the image's O(python).
  - Fails, naming the refused, renamed or removed flag and the vLLM release, when the parser refuses the argv, and
    when the check could not run at all (no python in the image, Docker refused the container). An image whose vLLM
    has no parser the script can import (a stand-in) is not judged; the module warns and returns RV(checked) false.
  - The verdict is kept in O(cache_file) by (image ID, argv, script), so a converged re-run starts no container.
  - C(--config FILE) (the unit's API-key file, mounted only into the serving container) is left out of the argv
    judged; the keys never reach the check.
  - The decisions live in C(plugins/module_utils/image/_argv_check.py).
options:
  image:
    description: The image to judge with (an image ID or a reference in the local Docker).
    type: str
    required: true
  argv:
    description: Everything after C(vllm serve), model path first (the plan's C(argv)).
    type: list
    elements: str
    required: true
  script:
    description: The text of the parser script (C(roles/vllm_service/files/parse_argv.py)).
    type: str
    required: true
  release:
    description:
      - The vLLM release the image stage read from the image (C(vllm_image_vllm_version)), named in the verdict.
        Empty, the one the script reads in the image.
    type: str
    default: ''
  python:
    description: The image's Python interpreter (its C(--entrypoint) for the check).
    type: str
    default: python3
  docker_options:
    description:
      - The serving container's docker options; only their C(--security-opt) settings (the seccomp profile,
        no-new-privileges) are given to the check container.
    type: list
    elements: str
    default: []
  seccomp_profile:
    description:
      - The text of the seccomp profile the service runs under (the role's C(files/seccomp-clone3-enosys.json)). When
        O(docker_options) name a seccomp profile file, the check container runs under a temporary copy of this text
        instead (the service's own copy is written only after the check, so a first deployment has none yet).
      - A mapping (Ansible reads a JSON file's text into one) is written as JSON.
    type: raw
  docker_bin:
    description: The Docker CLI.
    type: str
    default: docker
  cache_file:
    description: Where the verdicts are kept (root-only JSON; its directory is made 0700 if missing). Unset, no cache.
    type: path
  timeout:
    description: Seconds the check container may take (importing vLLM's parser, cold, takes about a minute).
    type: int
    default: 900
attributes:
  check_mode:
    support: full
    description: The check is read-only and runs the same in check mode; the cache is not written.
  diff_mode:
    support: none
    description: Nothing to show as a diff.
  idempotent:
    support: full
    description: Never changes the host's configuration (C(changed) is always false); the cache only saves work.
author:
  - airgap.vllm maintainers (@airgap-vllm)
'''

EXAMPLES = r'''
- name: Judge the plan's argv with the new image's own parser before the unit is rewritten
  airgap.vllm.vllm_argv_check:
    image: "{{ vllm_image_ref }}"
    argv: "{{ vllm_plan_result.argv }}"
    script: "{{ lookup('ansible.builtin.file', 'parse_argv.py') }}"
    release: "{{ vllm_image_vllm_version | default('') }}"
    docker_bin: /usr/bin/docker
    cache_file: /etc/airgap-vllm/vllm/argv-check.json
'''

RETURN = r'''
ok:
  description: True when the parser accepted the argv; null when nothing was judged (RV(checked) false).
  returned: always
  type: bool
checked:
  description: Whether the image's parser judged the argv.
  returned: always
  type: bool
cached:
  description: The verdict came from O(cache_file) (no container was started).
  returned: always
  type: bool
release:
  description: The vLLM release named in the verdict (O(release), else what the image's package metadata says).
  returned: always
  type: str
  sample: 0.27.1+cpu
flags:
  description: The flags the parser refused (empty when it accepted).
  returned: always
  type: list
  elements: str
  sample: ["--swap-space"]
message:
  description: The verdict in words.
  returned: always
  type: str
  sample: vLLM 0.27.1+cpu (image sha256:05f7...) accepts the plan's argv
image_id:
  description: The image ID judged with.
  returned: always
  type: str
argv:
  description: The argv judged (O(argv) without C(--config FILE)).
  returned: always
  type: list
  elements: str
key:
  description: The verdict's cache key (sha256 over image ID, argv and script).
  returned: always
  type: str
cache_written:
  description: Whether this run stored the verdict in O(cache_file).
  returned: always
  type: bool
'''

import json
import os
import tempfile

from ansible_collections.airgap.vllm.plugins.module_utils.image._argv_check import ArgvCheckError, check
from ansible_collections.airgap.vllm.plugins.module_utils.common._docker import DockerCli
from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module


@ansible_module(
    dict(
        image=dict(type='str', required=True),
        argv=dict(type='list', elements='str', required=True),
        script=dict(type='str', required=True),
        release=dict(type='str', default=''),
        python=dict(type='str', default='python3'),
        docker_options=dict(type='list', elements='str', default=[]),
        seccomp_profile=dict(type='raw'),
        docker_bin=dict(type='str', default='docker'),
        cache_file=dict(type='path'),
        timeout=dict(type='int', default=900),
    ),
    wording='The argv check could not be made (the running service was not touched): {0}',
    worded=(ArgvCheckError, IOError, OSError),
)
def main(module):
    p = module.params
    seccomp_path = None
    if p['seccomp_profile']:
        # A temporary copy in the system's temporary directory (removed below), read by the Docker CLI; not the module's
        # tmpdir, which would make ~/.ansible/tmp on the host and warn about it (remote_tmp) on a green run.
        fd, seccomp_path = tempfile.mkstemp(prefix='seccomp-', suffix='.json')
        profile = p['seccomp_profile']
        with os.fdopen(fd, 'w') as handle:
            handle.write(profile if isinstance(profile, str) else json.dumps(profile, indent=2))
    try:
        result = check(
            DockerCli(p['docker_bin']),
            p['image'],
            p['argv'],
            p['script'],
            release=p['release'] or None,
            cache_path=p['cache_file'],
            python=p['python'],
            docker_options=p['docker_options'],
            check_mode=module.check_mode,
            timeout=p['timeout'],
            seccomp_path=seccomp_path,
        )
    finally:
        if seccomp_path:
            os.unlink(seccomp_path)
    result['release'] = result.get('release') or ''
    if result['ok'] is False:
        module.fail_json(
            changed=False, msg=result['message'], **dict((k, v) for k, v in result.items() if k != 'message')
        )
    if result['ok'] is None:
        module.warn(result['message'])
    return dict(changed=False, **result)


if __name__ == '__main__':
    main()
