# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The paths a vllm_service configuration writes, with what it writes there (module_utils/service/_service_config.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: vllm_service_config_expected
short_description: The paths a vllm_service configuration writes, with modes and SHA-1s, for host_info's paths
description:
  - Called by the vllm_service role (tasks/configure.yml) on its files with their texts rendered on the controller
    (C(query('ansible.builtin.template', ...))); the list is what M(airgap.vllm.host_info)'s
    O(airgap.vllm.host_info#module:paths) reads, so one probe tells a converged re-run that nothing is to be written.
  - In order, the configuration directory and its C(last-good/) (V(0700) directories), the seccomp profile
    (V(0600), with O(seccomp) V(profile)), the files not in O(secret), then the files in O(secret), each with its
    mode and the SHA-1 of its text. Nothing of a text is returned.
  - The secret files are hashed apart, in a task that shows nothing - O(part) V(public), then O(part) V(secret)
    with the public part's list as O(expected).
options:
  _input:
    description: The role's files, each C(src) (template name), C(dest) and C(mode) (octal string).
    type: list
    elements: dict
    required: true
  rendered:
    description: The rendered text of each file of O(part), by its C(src); a file of the part without one is an error.
    type: dict
    required: true
  config_dir:
    description: The service's configuration directory.
    type: str
    default: ''
  secret:
    description: The C(src) of the secret files (API keys, the container environment).
    type: list
    elements: str
    default: []
  part:
    description:
      - V(public) - the directories, the seccomp profile and the files not in O(secret).
      - V(secret) - O(expected) with the secret files appended.
      - V(all) - both at once.
    type: str
    choices: [all, public, secret]
    default: all
  seccomp:
    description: The role's C(vllm_service_seccomp); V(profile) adds the seccomp profile.
    type: str
    default: ''
  seccomp_profile:
    description: Where the seccomp profile is written (with O(seccomp) V(profile)).
    type: str
    default: ''
  seccomp_text:
    description: The seccomp profile's text (with O(seccomp) V(profile)).
    type: str
  expected:
    description: The list of O(part) V(public) (only with O(part) V(secret)).
    type: list
    elements: dict
    default: []
'''

EXAMPLES = r'''
expected: >-
  {{ files | airgap.vllm.vllm_service_config_expected(
       dict(srcs | zip(query('ansible.builtin.template', *srcs, convert_data=false))),
       config_dir='/etc/airgap-vllm/vllm', secret=['keys.yaml.j2'], part='public', seccomp='profile',
       seccomp_profile='/etc/airgap-vllm/vllm/seccomp.json',
       seccomp_text=lookup('ansible.builtin.file', 'seccomp-clone3-enosys.json', rstrip=false)) }}
'''

RETURN = r'''
_value:
  description: The paths in order, each C(path), C(mode) and either C(type) V(directory) or C(sha1) (of a file's text).
  type: list
  elements: dict
'''

from ansible_collections.airgap.vllm.plugins.module_utils.service._service_config import expected_paths


def vllm_service_config_expected(
    files,
    rendered,
    config_dir='',
    secret=None,
    part='all',
    seccomp='',
    seccomp_profile='',
    seccomp_text=None,
    expected=None,
):
    return expected_paths(
        config_dir,
        list(files or []),
        dict(rendered or {}),
        secret=list(secret or []),
        part=part,
        seccomp=seccomp or '',
        seccomp_profile=seccomp_profile or '',
        seccomp_text=seccomp_text,
        expected=list(expected or []),
    )


class FilterModule(object):
    def filters(self):
        return {'vllm_service_config_expected': vllm_service_config_expected}
