# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which installed RPMs belong to a packaged NVIDIA driver (removed before the .run install).

A rule, not a list: NVIDIA's RHEL 8 repository alone names 16 driver packages, its later branches add
more (nvidia-driver-cuda-libs, kmod-nvidia-open-dkms, precompiled kmod-nvidia-<version>-<kernel>),
RPM Fusion and ELRepo name them again differently (akmod-nvidia, xorg-x11-drv-nvidia*), and dnf
module streams pull in cuda-drivers. So a package goes when its name has `nvidia` as a dash-separated
word, starts with `libnvidia-`, or is `cuda-drivers*` -- unless it belongs to the container toolkit
(nvidia-container-toolkit*, libnvidia-container*, nvidia-container-runtime, nvidia-docker2,
nvidia-container-selinux), which the nvidia_toolkit role installs and keeps, or the operator keeps it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import re

DRIVER_RULES = (
    re.compile(r'(^|-)nvidia(-|$)', re.IGNORECASE),
    re.compile(r'^libnvidia-', re.IGNORECASE),
    re.compile(r'^cuda-drivers(-|$)'),
)
TOOLKIT_KEEP = ('nvidia-container-*', 'libnvidia-container*', 'nvidia-docker*')
RPM_QUERY_FORMAT = '%{NAME}\\t%{EPOCHNUM}:%{VERSION}-%{RELEASE}.%{ARCH}\\n'


def is_toolkit(name):
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in TOOLKIT_KEEP)


def is_driver_package(name, keep=()):
    """Whether `name` is a packaged-driver RPM to remove (toolkit and `keep` globs never are)."""
    if is_toolkit(name) or any(fnmatch.fnmatchcase(name, pattern) for pattern in keep or ()):
        return False
    return any(rule.search(name) for rule in DRIVER_RULES)


def parse_rpm_qa(text):
    """{name: [versions]} from `rpm -qa --qf RPM_QUERY_FORMAT` (several versions of one name can be installed)."""
    installed = {}
    for line in (text or '').splitlines():
        name, _sep, version = line.strip().partition('\t')
        if name:
            installed.setdefault(name, []).append(version)
    return installed


def version_release(evra):
    """'0:1.17.8-1.x86_64' (RPM_QUERY_FORMAT's version column) -> '1.17.8-1'."""
    vra = evra.partition(':')[2] if ':' in evra else evra
    return vra.rsplit('.', 1)[0] if '.' in vra.rpartition('-')[2] else vra


def driver_packages(installed, keep=(), extra=()):
    """Sorted names to remove: every installed driver package by the rule, plus installed `extra` names."""
    names = set(n for n in installed if is_driver_package(n, keep))
    names.update(n for n in extra or () if n in installed and not is_toolkit(n))
    return sorted(names)


def kept_packages(installed, keep=()):
    """Installed names with nvidia in them that the rule keeps (the toolkit's, the operator's): for the report."""
    return sorted(n for n in installed if 'nvidia' in n.lower() and not is_driver_package(n, keep))


def _name_of_nevra(nevra):
    """'nvidia-container-toolkit-1.17.8-1.x86_64' -> 'nvidia-container-toolkit'."""
    parts = nevra.strip().rsplit('-', 2)
    return parts[0] if len(parts) == 3 else nevra.strip()


def parse_erase_test(text):
    """{dependent package name: [what it needs]} from `rpm -e --test` (its "is needed by (installed)" lines).

    Those dependents are what `dnf remove` would take away too.
    """
    dependents = {}
    for line in (text or '').splitlines():
        need, sep, who = line.strip().partition(' is needed by (installed) ')
        if sep:
            dependents.setdefault(_name_of_nevra(who), []).append(need.strip())
    return dependents


def removal_blockers(names, dependents, keep=()):
    """(blocked, also_removed): dependents outside `names` that are kept (refuse) or would go too (report)."""
    outside = dict((d, needs) for d, needs in dependents.items() if d not in names)
    blocked = dict(
        (d, needs)
        for d, needs in outside.items()
        if is_toolkit(d) or any(fnmatch.fnmatchcase(d, p) for p in keep or ())
    )
    return blocked, sorted(d for d in outside if d not in blocked)
