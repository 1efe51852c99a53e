#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: driver_persistence
short_description: Verify through NVML that every GPU reports persistence mode Enabled
version_added: 0.3.0
description:
  - Asks NVML (as M(airgap.vllm.nvml_info) does) for each GPU's persistence mode and fails, naming the GPUs, unless
    every GPU reports Enabled. NVML not working, or no GPU, fails as well (persistence cannot be proven).
  - Asks again for up to O(wait) seconds while it is not yet Enabled (the daemon turns it on just after its start).
  - The decision is module_utils/driver/_driver_persistence.py's.
options:
  wait:
    description: Seconds to keep asking while persistence mode is not Enabled on every GPU.
    type: int
    default: 10
  unit:
    description: The unit that runs nvidia-persistenced, named in the failure message.
    type: str
    default: nvidia-persistenced.service
extends_documentation_fragment:
  - airgap.vllm.nvml
  - airgap.vllm.attributes.read_only
author:
  - airgap.vllm maintainers (@airgap-vllm)
"""

EXAMPLES = r"""
- name: Verify persistence mode on every GPU
  airgap.vllm.driver_persistence:
    wait: 10
"""

RETURN = r"""
enabled:
  description: The GPUs that report persistence mode Enabled (C(GPU <index> (<bus id>, <uuid>))).
  returned: always
  type: list
  elements: str
disabled:
  description: The GPUs that report it Disabled.
  returned: always
  type: list
  elements: str
unsupported:
  description: The GPUs whose NVML does not answer the query.
  returned: always
  type: list
  elements: str
nvml_state:
  description: NVML's state (C(ok), C(absent), C(driver_not_loaded), C(version_mismatch), C(error)).
  returned: always
  type: str
seconds:
  description: How long it waited until every GPU said Enabled (or it gave up).
  returned: always
  type: float
msg:
  description: What NVML says, readable.
  returned: always
  type: str
"""

import time

from ansible_collections.airgap.vllm.plugins.module_utils.driver._driver_persistence import persistence_report
from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module
from ansible_collections.airgap.vllm.plugins.module_utils.host._nvml import NVML_ARGUMENT_SPEC, collect


@ansible_module(
    dict(
        NVML_ARGUMENT_SPEC,
        wait=dict(type='int', default=10),
        unit=dict(type='str', default='nvidia-persistenced.service'),
    ),
)
def main(module):
    p = module.params
    start = time.time()
    while True:
        nvml = collect(library=p['library'], driver_version_file=p['driver_version_file'])
        report = persistence_report(nvml, unit=p['unit'])
        if report['ok'] or time.time() - start >= p['wait']:
            break
        time.sleep(0.5)
    result = dict(changed=False, nvml_state=nvml.get('nvml_state'), seconds=round(time.time() - start, 1), **report)
    result.pop('ok')
    if not report['ok']:
        module.fail_json(**result)
    return result


if __name__ == '__main__':
    main()
