# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fingerprint of a vllm_service configuration's files (module_utils/service/_service_config.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: vllm_service_config_fingerprint
short_description: The fingerprint of a vllm_service configuration's files, kept in its last good record
description:
  - Called by the vllm_service role (tasks/configure.yml) after its probe and its writes. The SHA-256 of the files'
    SHA-1s joined with commas - the files not in O(secret), the files in O(secret), then the seccomp profile (an
    empty entry without one) - a re-run whose fingerprint matches the record copies nothing to C(last-good/).
  - Converged (O(converged)), the checksums are the probe's (RV(airgap.vllm.host_info#module:paths)); otherwise
    those the writes returned (O(written), O(secret_written), O(seccomp_written)), an empty entry for a write
    that returned none.
  - The value is stored in the hosts' state records; its formula never changes.
options:
  _input:
    description: The result of M(airgap.vllm.host_info) with the configuration's O(airgap.vllm.host_info#module:paths).
    type: dict
    required: true
  converged:
    description: Whether the probe found every path as it would be written (nothing was written).
    type: bool
    required: true
  files:
    description: The role's files, each C(src), C(dest) and C(mode).
    type: list
    elements: dict
    required: true
  secret:
    description: The C(src) of the secret files.
    type: list
    elements: str
    default: []
  seccomp:
    description: The role's C(vllm_service_seccomp); V(profile) counts the seccomp profile.
    type: str
    default: ''
  seccomp_profile:
    description: Where the seccomp profile is written.
    type: str
    default: ''
  written:
    description: The registered result of the looped template task that wrote the files not in O(secret).
    type: dict
    default: {}
  secret_written:
    description: The registered results of the tasks that wrote the secret files, in the order of O(files).
    type: list
    elements: dict
    default: []
  seccomp_written:
    description: The registered result of the task that wrote the seccomp profile.
    type: dict
    default: {}
'''

EXAMPLES = r'''
fingerprint: >-
  {{ probe | airgap.vllm.vllm_service_config_fingerprint(
       converged=probe.paths_differing | length == 0, files=files, secret=['container.env.j2', 'keys.yaml.j2'],
       seccomp='profile', seccomp_profile='/etc/airgap-vllm/vllm/seccomp.json', written=written,
       secret_written=[env_written, keys_written], seccomp_written=seccomp_written) }}
'''

RETURN = r'''
_value:
  description: The SHA-256 (hex) of the files' SHA-1s, joined with commas.
  type: str
'''

from ansible_collections.airgap.vllm.plugins.module_utils.service._service_config import config_fingerprint


def vllm_service_config_fingerprint(
    probe,
    converged,
    files,
    secret=None,
    seccomp='',
    seccomp_profile='',
    written=None,
    secret_written=None,
    seccomp_written=None,
):
    return config_fingerprint(
        bool(converged),
        list(files or []),
        secret=list(secret or []),
        seccomp=seccomp or '',
        seccomp_profile=seccomp_profile or '',
        probe_paths=(probe or {}).get('paths') or {},
        written=written or {},
        secret_written=list(secret_written or []),
        seccomp_written=seccomp_written or {},
    )


class FilterModule(object):
    def filters(self):
        return {'vllm_service_config_fingerprint': vllm_service_config_fingerprint}
