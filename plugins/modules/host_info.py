#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: host_info
short_description: Kylin-aware host facts for the GPU roles
version_added: 0.1.0
description:
  - Distribution from os-release, the Kylin V10 service pack from C(/etc/.productinfo) or the codename
    (Tercel=SP1, Sword=SP2, Lance=SP3, Halberd=SP3), kernel release, target Python version, and the Docker
    engine version and registered runtimes from C(docker info).
  - The service pack is a name; C(V10) is never compared as a number.
options:
  kernel_release:
    description: Kernel release to report instead of the running one (tests run on another kernel).
    type: str
  os_release_path:
    description: os-release file.
    type: path
    default: /etc/os-release
  productinfo_path:
    description: Kylin product info file.
    type: path
    default: /etc/.productinfo
  docker:
    description: Query the Docker engine (C(docker info)).
    type: bool
    default: true
  docker_bin:
    description: Docker CLI to query (name on the PATH or absolute path).
    type: str
    default: docker
  pci:
    description:
      - List the NVIDIA GPUs on the PCI bus (C(lspci -D -mm -nn -d 10de:)), which works with no driver loaded.
      - A GPU is a function of vendor 10de with a display-controller class (03xx); the rule lives in
        module_utils/_pci.py.
    type: bool
    default: false
extends_documentation_fragment:
  - airgap.vllm.attributes.read_only
author:
  - airgap.vllm maintainers (@airgap-vllm)
'''

EXAMPLES = r'''
- name: Read host facts
  airgap.vllm.host_info:
    kernel_release: "{{ preflight_kernel_release }}"
  register: __host
'''

RETURN = r'''
distribution: {description: "NAME from os-release.", returned: always, type: str, sample: Kylin Linux Advanced Server}
distribution_id: {description: "ID from os-release.", returned: always, type: str, sample: kylin}
distribution_version: {description: "VERSION_ID from os-release (a string; V10 for Kylin).", returned: always,
                       type: str, sample: V10}
distribution_release: {description: "Codename from the os-release VERSION.", returned: always, type: str, sample: Lance}
kylin: {description: "Whether the host is Kylin.", returned: always, type: bool}
kylin_sp: {description: "Kylin V10 service pack (SP1, SP2, SP3) or null.", returned: always, type: str, sample: SP3}
kernel_release: {description: "Running kernel release, or I(kernel_release) when given.", returned: always, type: str,
                 sample: 4.19.90-52.22.v2207.ky10.x86_64}
python_version: {description: "Target Python version.", returned: always, type: str, sample: 3.7.9}
docker:
  description: Docker engine facts.
  returned: always
  type: dict
  contains:
    installed: {description: "docker CLI found.", type: bool, returned: always}
    running: {description: "The daemon answered.", type: bool, returned: always}
    error: {description: "Why the daemon did not answer.", type: str, returned: when not running}
    server_version: {description: "Engine version.", type: str, returned: when running, sample: 20.10.24}
    runtimes: {description: "Registered runtimes.", type: list, elements: str, returned: when running,
               sample: [io.containerd.runc.v2, nvidia, runc]}
    default_runtime: {description: "Default runtime.", type: str, returned: when running, sample: runc}
    cgroup_driver: {description: "Cgroup driver.", type: str, returned: when running, sample: cgroupfs}
pci:
  description: NVIDIA GPUs on the PCI bus.
  returned: when I(pci=true)
  type: dict
  contains:
    lspci: {description: "lspci used (null when not found).", type: str, returned: always}
    error: {description: "Why the bus could not be read, or null.", type: str, returned: always}
    gpus:
      description: One entry per GPU function, in bus order.
      type: list
      elements: dict
      returned: always
      sample: [{slot: "0000:3b:00.0", class: "0300", class_name: VGA compatible controller, vendor: 10de,
                vendor_name: NVIDIA Corporation, device: 26b1, device_name: "AD102GL [RTX 6000 Ada Generation]"}]
    summary: {description: "One line per GPU for reports.", type: list, elements: str, returned: always,
              sample: ["0000:3b:00.0 AD102GL [RTX 6000 Ada Generation] [10de:26b1]"]}
'''

import platform

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.airgap.vllm.plugins.module_utils._docker import DockerCli, DockerError
from ansible_collections.airgap.vllm.plugins.module_utils._files import read_text_report
from ansible_collections.airgap.vllm.plugins.module_utils._hostinfo import host_facts, parse_docker_info
from ansible_collections.airgap.vllm.plugins.module_utils._pci import LSPCI_ARGS, pci_facts


def docker_facts(module, docker_bin):
    docker = module.get_bin_path(docker_bin)
    if not docker:
        return {'installed': False, 'running': False, 'error': 'docker CLI %s not found' % docker_bin}
    try:
        rc, out, err = DockerCli(docker, timeout=60).call(['info', '--format', '{{json .}}'], check=False)
    except DockerError as e:
        return {'installed': True, 'running': False, 'error': str(e)}
    if rc != 0:
        return {'installed': True, 'running': False, 'error': (err or out).strip()}
    try:
        facts = parse_docker_info(out)
    except ValueError as e:
        return {'installed': True, 'running': False, 'error': 'unreadable docker info: %s' % e}
    if facts['server_version'] is None:
        return {'installed': True, 'running': False, 'error': '; '.join(facts['server_errors']) or 'no server'}
    facts.update(installed=True, running=True)
    return facts


def main():
    module = AnsibleModule(
        argument_spec=dict(
            kernel_release=dict(type='str'),
            os_release_path=dict(type='path', default='/etc/os-release'),
            productinfo_path=dict(type='path', default='/etc/.productinfo'),
            docker=dict(type='bool', default=True),
            docker_bin=dict(type='str', default='docker'),
            pci=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    os_release, os_release_problem = read_text_report(p['os_release_path'])
    productinfo, productinfo_problem = read_text_report(p['productinfo_path'])
    for problem in (os_release_problem, productinfo_problem):
        if problem:
            module.warn(problem)
    result = host_facts(os_release, productinfo, p['kernel_release'] or platform.release(), platform.python_version())
    result['docker'] = docker_facts(module, p['docker_bin']) if p['docker'] else {'installed': None, 'running': None}
    if p['pci']:
        lspci = module.get_bin_path('lspci')  # PATH, then the sbin directories
        rc, out, err = module.run_command([lspci] + LSPCI_ARGS) if lspci else (None, '', '')
        result['pci'] = pci_facts(rc, out, err, lspci)
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()
