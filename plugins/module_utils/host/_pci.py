# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one PCI probe: which NVIDIA GPUs and NVSwitches are on the bus (seen by lspci even with no driver loaded).

A GPU is a function of vendor 10de whose class is a display controller (03xx: 0300 VGA, 0302 3D, 0380
other); NVIDIA's audio (0403) and USB (0c03) functions on the same card are not GPUs. An NVSwitch (the HGX/DGX
baseboards' NVLink switches that need Fabric Manager) is a function of vendor 10de of class 0680 ("Bridge"), e.g.
1af1 "GA100 [A100 NVSwitch]" or 22a3 "GH100 [H100 NVSwitch]" in pci.ids. The probe reads
`lspci -D -mm -nn -d 10de:` (machine-readable, names and numeric ids), the one format parsed here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import shlex

NVIDIA_VENDOR = '10de'
# PCI class 06 (bridge) subclass 80 (other bridge): how the NVSwitches of HGX/DGX baseboards show on the bus.
NVSWITCH_CLASS = '0680'
LSPCI_ARGS = ['-D', '-mm', '-nn', '-d', NVIDIA_VENDOR + ':']
_ID = re.compile(r'^(.*?)\s*\[([0-9a-fA-F]{4})\]$')
_SLOT = re.compile(r'^(?:[0-9a-fA-F]{4,}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$')


def _name_and_id(field):
    m = _ID.match(field.strip())
    return (m.group(1), m.group(2).lower()) if m else (field.strip(), None)


def parse_lspci_mm(text):
    """Every device of `lspci -D -mm -nn` output: [{'slot', 'class', 'class_name', 'vendor', 'vendor_name',
    'device', 'device_name'}]. Lines that are not devices (warnings) are ignored."""
    devices = []
    for line in (text or '').splitlines():
        try:
            tokens = shlex.split(line)
        except ValueError:
            continue
        if not tokens or not _SLOT.match(tokens[0]):
            continue
        fields = [t for t in tokens[1:] if not re.match(r'^-[a-z]', t)]
        if len(fields) < 3:
            continue
        class_name, class_id = _name_and_id(fields[0])
        vendor_name, vendor_id = _name_and_id(fields[1])
        device_name, device_id = _name_and_id(fields[2])
        devices.append(
            {
                'slot': tokens[0].lower(),
                'class': class_id,
                'class_name': class_name,
                'vendor': vendor_id,
                'vendor_name': vendor_name,
                'device': device_id,
                'device_name': device_name,
            }
        )
    return devices


def is_nvidia_gpu(device):
    """Vendor 10de and a display-controller class (03xx)."""
    return device.get('vendor') == NVIDIA_VENDOR and (device.get('class') or '').startswith('03')


def nvidia_gpus(lspci_text):
    """The NVIDIA GPUs in `lspci -D -mm -nn` output, in bus order."""
    return sorted((d for d in parse_lspci_mm(lspci_text) if is_nvidia_gpu(d)), key=lambda d: d['slot'])


def is_nvswitch(device):
    """Vendor 10de and class 0680 (an NVSwitch: NVIDIA makes no other bridge function)."""
    return device.get('vendor') == NVIDIA_VENDOR and (device.get('class') or '') == NVSWITCH_CLASS


def nvswitches(lspci_text):
    """The NVIDIA NVSwitches in `lspci -D -mm -nn` output, in bus order."""
    return sorted((d for d in parse_lspci_mm(lspci_text) if is_nvswitch(d)), key=lambda d: d['slot'])


def describe(gpu):
    """'0000:3b:00.0 AD102GL [RTX 6000 Ada Generation] [10de:26b1]' for reports."""
    return '%s %s [%s:%s]' % (gpu['slot'], gpu['device_name'], gpu['vendor'], gpu['device'])


def pci_facts(rc, out, err, lspci_path):
    """host_info's `pci` result from one lspci run: {'lspci', 'error', 'gpus', 'summary', 'nvswitches',
    'nvswitch_summary'}."""
    empty = {'gpus': [], 'summary': [], 'nvswitches': [], 'nvswitch_summary': []}
    if not lspci_path:
        return dict(empty, lspci=None, error='lspci not found (install pciutils)')
    if rc != 0:
        return dict(empty, lspci=lspci_path, error='lspci failed (rc %s): %s' % (rc, (err or out or '').strip()))
    gpus = nvidia_gpus(out)
    switches = nvswitches(out)
    return {
        'lspci': lspci_path,
        'error': None,
        'gpus': gpus,
        'summary': [describe(g) for g in gpus],
        'nvswitches': switches,
        'nvswitch_summary': [describe(s) for s in switches],
    }
