#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: nvml_info
short_description: Read GPU, driver and GPU-process facts from NVML
version_added: 0.1.0
description:
  - Talks to C(libnvidia-ml.so.1) directly through ctypes; needs no Python packages on the target.
  - Returns the driver, CUDA driver and NVML versions and, per GPU, identity, memory, compute capability,
    persistence mode and the compute processes using it (with the container id when a process runs in one).
  - NVML failures are returned as data in RV(nvml_state), never as a task failure, so callers decide.
    A missing library gives C(absent), an unloaded kernel module C(driver_not_loaded), a kernel module of
    another version than the library C(version_mismatch) (with both versions and a fix hint).
options: {}
extends_documentation_fragment:
  - airgap.vllm.nvml
  - airgap.vllm.attributes.read_only
author:
  - airgap.vllm maintainers (@airgap-vllm)
'''

EXAMPLES = r'''
- name: Read GPU facts
  airgap.vllm.nvml_info:
  register: __gpu

- name: Stop on a driver/library version mismatch
  ansible.builtin.fail:
    msg: "{{ __gpu.hint }}"
  when: __gpu.nvml_state == 'version_mismatch'
'''

RETURN = r'''
nvml_state:
  description: C(ok), C(absent), C(driver_not_loaded), C(version_mismatch) or C(error).
  returned: always
  type: str
  sample: ok
nvml_error:
  description: The NVML failure (code, name, message, function) when I(nvml_state) is not C(ok).
  returned: always
  type: dict
  sample: {code: 18, name: NVML_ERROR_LIB_RM_VERSION_MISMATCH, function: nvmlInit_v2,
           message: RM has detected an NVML/RM version mismatch.}
hint:
  description: What to do about a failed I(nvml_state).
  returned: always
  type: str
library_path:
  description: Resolved file of the loaded NVML library.
  returned: always
  type: str
  sample: /usr/lib64/libnvidia-ml.so.580.65.06
library_version:
  description: Driver version of the NVML library (from its file name, else from NVML).
  returned: always
  type: str
  sample: 580.65.06
kernel_module_version:
  description: Version of the loaded nvidia kernel module, null when none is loaded or readable.
  returned: always
  type: str
  sample: 560.35.03
driver_version:
  description: Driver version reported by NVML.
  returned: always
  type: str
  sample: 580.65.06
cuda_driver_version:
  description: CUDA driver API version as NVML encodes it (1000 * major + 10 * minor).
  returned: always
  type: int
  sample: 13000
cuda_version:
  description: The same as C(major.minor).
  returned: always
  type: str
  sample: '13.0'
nvml_version:
  description: NVML library version string.
  returned: always
  type: str
  sample: 13.580.65.06
gpu_count:
  description: Number of GPUs NVML sees.
  returned: always
  type: int
  sample: 1
gpus:
  description: One entry per GPU, in NVML index order.
  returned: always
  type: list
  elements: dict
  contains:
    index: {description: "NVML index.", type: int, returned: always}
    uuid: {description: "GPU UUID.", type: str, returned: always, sample: GPU-5b3a1f3e-1c2d-4e5f-8a9b-0c1d2e3f4a5b}
    name: {description: "Product name.", type: str, returned: always, sample: NVIDIA RTX 6000 Ada Generation}
    pci_bus_id: {description: "PCI bus id as nvidia-smi prints it.", type: str, returned: always,
                 sample: '00000000:3B:00.0'}
    pci_device_id: {description: "Combined device and vendor id.", type: str, returned: always, sample: '0x26B110DE'}
    memory_total: {description: "Bytes.", type: int, returned: always}
    memory_used: {description: "Bytes in use (without driver-reserved memory when NVML reports it).", type: int,
                  returned: always}
    memory_free: {description: "Bytes free.", type: int, returned: always}
    memory_reserved: {description: "Bytes reserved by the driver (null on NVML without the v2 call).", type: int,
                      returned: always}
    compute_capability: {description: "CUDA compute capability.", type: str, returned: always, sample: '8.9'}
    fp8_capable: {description: "Compute capability 8.9 or newer (Ada, Hopper and later).", type: bool,
                  returned: always}
    persistence_mode: {description: "Persistence mode enabled (null when not supported).", type: bool,
                       returned: always}
    processes:
      description: Compute processes on this GPU.
      type: list
      elements: dict
      returned: always
      contains:
        pid: {description: "Process id (in the host's pid namespace).", type: int, returned: always}
        used_memory: {description: "Bytes used, null when NVML cannot tell.", type: int, returned: always}
        name: {description: "From /proc/<pid>/comm, else from NVML.", type: str, returned: always}
        container_id: {description: "Container id from /proc/<pid>/cgroup, null outside containers.", type: str,
                       returned: always}
'''

from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module
from ansible_collections.airgap.vllm.plugins.module_utils.host._nvml import NVML_ARGUMENT_SPEC, collect


@ansible_module(dict(NVML_ARGUMENT_SPEC))
def main(module):
    result = collect(library=module.params['library'], driver_version_file=module.params['driver_version_file'])
    return dict(changed=False, **result)


if __name__ == '__main__':
    main()
