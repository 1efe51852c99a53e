# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA driver's state read in one pass (airgap.vllm.host_info nvidia_driver=...), and whether it is converged.

Converged means every change the nvidia_driver role could make is already made: no packaged driver RPM
left, the .run installed at the wanted version, no other version registered with dkms, nouveau
blacklisted with the role's file, the dnf nvidia-driver module stream reset, and the wanted kernel module
live (NVML answers at that version, nvidia-smi runs without a mismatch). Each rule that does not hold is a
reason in `pending`; an empty list lets the role skip its install and configure work as a block.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# dkms 2.x prints "nvidia, 560.35.03, <kernel>, x86_64: installed", 3.x "nvidia/560.35.03, <kernel>, x86_64:
# installed" (both ": added" without a kernel); other modules (nvidia-fs/...) are not the driver.
_DKMS_NVIDIA = re.compile(r'(?m)^nvidia(?:/|,\s*)([0-9][^,:\s]*)')
_INSTALLER_VERSION = re.compile(r'nvidia-installer:\s+version\s+(\S+)')
# The keys `dnf module reset nvidia-driver` empties in /etc/dnf/modules.d/nvidia-driver.module.
DNF_MODULE_KEYS = ('stream', 'profiles', 'state')


def dkms_versions(text):
    """nvidia versions known to dkms, in order of appearance, each once."""
    seen = []
    for version in _DKMS_NVIDIA.findall(text or ''):
        if version not in seen:
            seen.append(version)
    return seen


def installer_version(text):
    """Version of the .run-installed driver from `nvidia-installer --version` ('' when none)."""
    m = _INSTALLER_VERSION.search(text or '')
    return m.group(1) if m else ''


def dnf_module_reset(text):
    """Whether a dnf module file (None: absent) has every key `dnf module reset` empties empty."""
    if text is None:
        return True
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition('=')
        if sep:
            values[key.strip()] = value.strip()
    return all(not values.get(key) for key in DNF_MODULE_KEYS)


def smi_mismatch(rc, out, err):
    """Whether nvidia-smi failed or reports a driver/library mismatch (None rc: not found)."""
    return rc != 0 or 'mismatch' in ('%s %s' % (out or '', err or '')).lower()


def pending(state, version, blacklist_content=None):
    """Reasons the driver is not converged at `version` (empty list: converged).

    state: the dict host_info returns as nvidia_driver (nvml, rpms, installed_version, dkms_versions,
    blacklist_text, dnf_module_reset, smi_rc, smi_output, rpm_error). blacklist_content: what the role's
    blacklist file holds, None when the role does not manage it.
    """
    reasons = []
    nvml = state.get('nvml') or {}
    if state.get('rpm_error'):
        reasons.append('installed RPMs unreadable: %s' % state['rpm_error'])
    if state.get('rpms'):
        reasons.append('packaged driver RPMs installed: %s' % ', '.join(state['rpms']))
    if state.get('installed_version') != version:
        reasons.append('.run driver installed: %s, wanted %s' % (state.get('installed_version') or 'none', version))
    others = [v for v in state.get('dkms_versions') or [] if v != version]
    if others:
        reasons.append('other nvidia versions in dkms: %s' % ', '.join(others))
    if blacklist_content is not None and state.get('blacklist_text') != blacklist_content:
        reasons.append('nouveau blacklist file missing or different')
    if not state.get('dnf_module_reset', True):
        reasons.append('dnf nvidia-driver module stream not reset')
    live = (nvml.get('nvml_state'), nvml.get('driver_version'), nvml.get('library_version'))
    if live != ('ok', version, version):
        reasons.append('NVML %s (driver %s, library %s), wanted %s' % (live + (version,)))
    if smi_mismatch(state.get('smi_rc'), state.get('smi_output'), ''):
        reasons.append('nvidia-smi fails or reports a mismatch (rc %s)' % state.get('smi_rc'))
    return reasons
