#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: driver_fabric_manager
short_description: Verify that NVIDIA Fabric Manager runs and has registered every GPU with the NVLink fabric
version_added: 0.3.0
description:
  - Reads the unit's C(ActiveState) (C(systemctl show)) and each GPU's C(Fabric) section of C(nvidia-smi -q) and fails,
    naming the GPUs, unless the unit is active and every GPU says State C(Completed), Status C(Success).
  - GPUs whose NVML reports no fabric state (C(N/A); A100 and older) are verified by Fabric Manager's own log instead,
    where its last start must have logged that all NVSwitches were configured.
  - Asks again for up to O(wait) seconds while registration is in progress; a failed unit or a Completed state with
    an error status fails at once.
  - The decision is module_utils/driver/_fabric_manager.py's.
options:
  unit:
    description: The Fabric Manager unit.
    type: str
    default: nvidia-fabricmanager.service
  nvidia_smi:
    description: nvidia-smi to run (a name on the PATH or an absolute path).
    type: str
    default: nvidia-smi
  log_file:
    description: Fabric Manager's log (C(LOG_FILE_NAME) of its fabricmanager.cfg).
    type: path
    default: /var/log/fabricmanager.log
  wait:
    description: Seconds to keep asking while the fabric is not yet set up.
    type: int
    default: 60
extends_documentation_fragment:
  - airgap.vllm.attributes.read_only
author:
  - airgap.vllm maintainers (@airgap-vllm)
"""

EXAMPLES = r"""
- name: Verify Fabric Manager set up the NVLink fabric
  airgap.vllm.driver_fabric_manager:
    wait: 60
"""

RETURN = r"""
unit_state:
  description: The unit's ActiveState at the last look.
  returned: always
  type: str
  sample: active
gpus:
  description: Each GPU's fabric State and Status from C(nvidia-smi -q).
  returned: always
  type: list
  elements: dict
  sample: [{gpu: "00000000:18:00.0", state: Completed, status: Success}]
completed:
  description: The GPUs whose fabric registration completed successfully.
  returned: always
  type: list
  elements: str
pending:
  description: The GPUs still registering (State Not Started or In Progress).
  returned: always
  type: list
  elements: str
failed:
  description: The GPUs whose registration completed with an error status.
  returned: always
  type: list
  elements: str
unsupported:
  description: The GPUs whose NVML reports no fabric state (N/A).
  returned: always
  type: list
  elements: str
seconds:
  description: How long it waited.
  returned: always
  type: float
msg:
  description: What was found, readable.
  returned: always
  type: str
"""

import os
import time

from ansible_collections.airgap.vllm.plugins.module_utils.driver._fabric_manager import UNIT, parse_smi_fabric, report
from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module

LOG_TAIL = 1024 * 1024


def read_log(path):
    """The last MiB of FM's log ('' when absent)."""
    try:
        with open(path, 'rb') as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - LOG_TAIL))
            return f.read().decode('utf-8', 'replace')
    except (IOError, OSError):
        return ''


def look(module, p):
    systemctl = module.get_bin_path('systemctl', required=True)
    _rc, out, _err = module.run_command([systemctl, 'show', '-p', 'ActiveState', '--value', p['unit']])
    unit_state = out.strip()
    smi = module.get_bin_path(p['nvidia_smi'])
    if not smi:
        module.fail_json(msg='%s not found: the driver is not installed' % p['nvidia_smi'])
    rc, out, err = module.run_command([smi, '-q'])
    gpus = parse_smi_fabric(out) if rc == 0 else []
    result = report(unit_state, gpus, read_log(p['log_file']), unit=p['unit'], log_file=p['log_file'])
    if rc != 0:
        result['msg'] = 'nvidia-smi -q failed (rc %s): %s; %s' % (rc, (err or out).strip()[:300], result['msg'])
        result['final'] = False
    return unit_state, gpus, result


@ansible_module(
    dict(
        unit=dict(type='str', default=UNIT),
        nvidia_smi=dict(type='str', default='nvidia-smi'),
        log_file=dict(type='path', default='/var/log/fabricmanager.log'),
        wait=dict(type='int', default=60),
    ),
)
def main(module):
    p = module.params
    start = time.time()
    while True:
        unit_state, gpus, result = look(module, p)
        if result['ok'] or result['final'] or time.time() - start >= p['wait']:
            break
        time.sleep(1)
    ok = result.pop('ok')
    result.pop('final')
    result.update(changed=False, unit_state=unit_state, gpus=gpus, seconds=round(time.time() - start, 1))
    if not ok:
        module.fail_json(**result)
    return result


if __name__ == '__main__':
    main()
