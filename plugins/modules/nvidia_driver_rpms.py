#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: nvidia_driver_rpms
short_description: Remove every installed RPM of a packaged NVIDIA driver, keeping the container toolkit
version_added: 0.1.0
description:
  - Lists the installed packages with C(rpm -qa) and picks the packaged driver's by a rule, not a fixed
    list - a name with C(nvidia) as a dash-separated word, C(libnvidia-*) or C(cuda-drivers*) - so NVIDIA's
    RHEL repository names, precompiled C(kmod-nvidia-<version>-<kernel>), RPM Fusion/ELRepo names and the
    C(cuda-drivers) meta-package all go.
  - The container toolkit's packages (C(nvidia-container-*), C(libnvidia-container*), C(nvidia-docker*)) are
    never removed, nor any name matching O(keep).
  - Removes them in one C(dnf remove) with every repository disabled (the host is air-gapped) and without
    removing their no-longer-needed dependencies, then checks that none is left.
  - Packages that depend on them go too (dnf's rule) and are reported in RV(also_removed); when one of those is
    kept (the toolkit's, O(keep)) the module fails before removing anything.
  - The rule lives in module_utils/driver/_nvidia_rpms.py.
options:
  keep:
    description: Shell-style patterns (C(fnmatch)) of package names never removed, besides the toolkit's.
    type: list
    elements: str
    default: []
  extra:
    description: More installed package names to remove (for example the owner of a file the rule missed).
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    description: Lists the packages that would be removed, removes none.
  diff_mode:
    support: full
    description: Shows the driver packages installed before and after, one C(name version) a line.
  idempotent:
    support: full
    description: Once they are gone there is nothing to remove.
author:
  - airgap.vllm maintainers (@airgap-vllm)
'''

EXAMPLES = r'''
- name: Remove RPM-packaged NVIDIA drivers (check mode lists them)
  airgap.vllm.nvidia_driver_rpms:
    keep: [nvidia-fabric-manager*]
'''

RETURN = r'''
packages:
  description: Driver packages removed (or that would be, in check mode), sorted.
  returned: always
  type: list
  elements: str
  sample: [kmod-nvidia-latest-dkms, nvidia-driver, nvidia-driver-libs]
versions:
  description: Installed C(epoch:version-release.arch) of each of them.
  returned: always
  type: dict
  sample: {nvidia-driver: ["3:560.35.03-1.el8.x86_64"]}
kept:
  description: Installed packages with C(nvidia) in their name that the rule keeps (the toolkit's, O(keep)).
  returned: always
  type: list
  elements: str
  sample: [libnvidia-container1, nvidia-container-toolkit]
also_removed:
  description: Installed packages outside the rule that depend on the removed ones, so dnf removes them too.
  returned: when packages were found
  type: list
  elements: str
  sample: [python3-pynvml]
cmd:
  description: The removal command run (or that would run).
  returned: when packages were found
  type: list
  elements: str
'''

from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module
from ansible_collections.airgap.vllm.plugins.module_utils.driver._nvidia_rpms import (
    RPM_QUERY_FORMAT,
    driver_packages,
    kept_packages,
    parse_erase_test,
    parse_rpm_qa,
    removal_blockers,
)


def installed_packages(module, rpm):
    rc, out, err = module.run_command([rpm, '-qa', '--qf', RPM_QUERY_FORMAT])
    if rc != 0:
        module.fail_json(msg='rpm -qa failed (rc %d): %s' % (rc, (err or out).strip()))
    return parse_rpm_qa(out)


def listing(names, installed):
    return ''.join('%s %s\n' % (n, v) for n in names for v in installed.get(n, []))


@ansible_module(
    dict(
        keep=dict(type='list', elements='str', default=[]),
        extra=dict(type='list', elements='str', default=[]),
    ),
)
def main(module):
    p = module.params
    rpm = module.get_bin_path('rpm', required=True)
    installed = installed_packages(module, rpm)
    names = driver_packages(installed, p['keep'], p['extra'])
    result = dict(
        changed=bool(names),
        packages=names,
        versions=dict((n, installed[n]) for n in names),
        kept=kept_packages(installed, p['keep']),
    )
    if names:
        # What depends on them goes with them in `dnf remove`: refuse when that is a kept package, report the rest.
        _rc, out, err = module.run_command([rpm, '-e', '--test'] + names)
        blocked, result['also_removed'] = removal_blockers(names, parse_erase_test(out + '\n' + err), p['keep'])
        if blocked:
            module.fail_json(
                msg='removing the NVIDIA driver packages would also remove kept package(s) %s (%s); '
                'nothing was removed: remove or rebuild those first, or keep the driver packages '
                'they need'
                % (
                    ', '.join(sorted(blocked)),
                    '; '.join('%s needs %s' % (d, ', '.join(n)) for d, n in sorted(blocked.items())),
                ),
                **result,
            )
        dnf = module.get_bin_path('dnf') or module.get_bin_path('yum', required=True)
        result['cmd'] = [dnf, '-y', '--disablerepo=*', '--setopt=clean_requirements_on_remove=False', 'remove'] + names
        if not module.check_mode:
            rc, out, err = module.run_command(result['cmd'])
            left = driver_packages(installed_packages(module, rpm), p['keep'], p['extra'])
            if rc != 0 or left:
                module.fail_json(
                    msg='removing the NVIDIA driver packages failed (rc %d)%s: %s'
                    % (rc, '; still installed: %s' % ', '.join(left) if left else '', (err or out).strip()[-2000:]),
                    **result,
                )
    if module._diff:
        result['diff'] = dict(
            before=listing(names, installed),
            after='',
            before_header='NVIDIA driver RPMs',
            after_header='NVIDIA driver RPMs',
        )
    return result


if __name__ == '__main__':
    main()
