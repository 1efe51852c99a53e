"""The one PCI probe: NVIDIA display-class functions from `lspci -D -mm -nn -d 10de:`."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys

from ansible_collections.airgap.vllm.plugins.module_utils.host._pci import (
    LSPCI_ARGS,
    describe,
    is_nvswitch,
    nvidia_gpus,
    nvswitches,
    parse_lspci_mm,
    pci_facts,
)

# Real `lspci -D -mm -nn -d 10de:` lines: an RTX 6000 Ada with its audio function, an H100 (3D controller),
# an NVSwitch (bridge class) and an old card whose line carries a prog-if option.
REAL = (
    "\n".join(
        [
            '0000:3b:00.0 "VGA compatible controller [0300]" "NVIDIA Corporation [10de]"'
            ' "AD102GL [RTX 6000 Ada Generation] [26b1]" -ra1 "NVIDIA Corporation [10de]" "Device [16a1]"',
            '0000:3b:00.1 "Audio device [0403]" "NVIDIA Corporation [10de]"'
            ' "AD102 High Definition Audio Controller [22ba]" -ra1 "NVIDIA Corporation [10de]" "Device [16a1]"',
            '0000:18:00.0 "3D controller [0302]" "NVIDIA Corporation [10de]"'
            ' "GH100 [H100 SXM5 80GB] [2330]" -ra1 "NVIDIA Corporation [10de]" "Device [16c1]"',
            '0000:05:00.0 "Bridge [0680]" "NVIDIA Corporation [10de]" "GH100 [H100 NVSwitch] [22a3]" -ra1'
            ' "NVIDIA Corporation [10de]" "Device [1796]"',
            '0000:af:00.0 "VGA compatible controller [0300]" "NVIDIA Corporation [10de]"'
            ' "GP102 [TITAN Xp] [1b02]" -ra1 -p00 "NVIDIA Corporation [10de]" "Device [11df]"',
        ]
    )
    + "\n"
)


def test_only_display_class_functions_are_gpus_in_bus_order():
    gpus = nvidia_gpus(REAL)
    assert [g['slot'] for g in gpus] == ['0000:18:00.0', '0000:3b:00.0', '0000:af:00.0']
    assert [g['class'] for g in gpus] == ['0302', '0300', '0300']
    assert gpus[1]['device_name'] == 'AD102GL [RTX 6000 Ada Generation]' and gpus[1]['device'] == '26b1'
    assert describe(gpus[1]) == '0000:3b:00.0 AD102GL [RTX 6000 Ada Generation] [10de:26b1]'


def test_nvswitches_are_nvidia_bridge_class_functions_only():
    switches = nvswitches(REAL)
    assert [(s['slot'], s['device']) for s in switches] == [('0000:05:00.0', '22a3')]
    assert describe(switches[0]) == '0000:05:00.0 GH100 [H100 NVSwitch] [10de:22a3]'
    # An Intel bridge of the same class, and NVIDIA's GPUs, are no NVSwitch.
    assert not is_nvswitch({'vendor': '8086', 'class': '0680'})
    assert not any(is_nvswitch(g) for g in nvidia_gpus(REAL))
    facts = pci_facts(0, REAL, '', '/usr/sbin/lspci')
    assert facts['nvswitch_summary'] == ['0000:05:00.0 GH100 [H100 NVSwitch] [10de:22a3]']
    assert len(facts['gpus']) == 3


def test_every_device_is_parsed_and_noise_ignored():
    text = 'pcilib: Cannot open /proc/bus/pci\n' + REAL + '\n"unbalanced\n'
    devices = parse_lspci_mm(text)
    assert len(devices) == 5
    assert {d['class'] for d in devices} == {'0300', '0403', '0302', '0680'}


def test_facts_for_missing_lspci_failed_run_and_no_gpu():
    assert pci_facts(None, '', '', None)['error'] == 'lspci not found (install pciutils)'
    failed = pci_facts(1, '', 'lspci: Cannot find any working access method.\n', '/usr/sbin/lspci')
    assert failed['error'] == 'lspci failed (rc 1): lspci: Cannot find any working access method.'
    assert failed['gpus'] == []
    none = pci_facts(0, '', '', '/usr/sbin/lspci')
    assert none['error'] is None and none['gpus'] == [] and none['summary'] == []
    assert none['nvswitches'] == [] and failed['nvswitches'] == [] and failed['nvswitch_summary'] == []


def test_the_test_worlds_lspci_speaks_the_same_format(tmp_path):
    fake = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'world', 'fakes', 'pci', 'lspci')
    state = tmp_path / 'state.json'
    state.write_text(
        json.dumps(
            {
                'kernel_module_version': '580.65.06',
                'gpus': [
                    {'pci_bus_id': '00000000:3B:00.0', 'pci_device_id': '0x26B110DE'},
                    {'pci_bus_id': '00000000:18:00.0', 'pci_device_id': '0x233010DE'},
                ],
            }
        )
    )
    out = subprocess.run(
        [sys.executable, fake] + LSPCI_ARGS,
        stdout=subprocess.PIPE,
        universal_newlines=True,
        env=dict(os.environ, FAKE_NVML_STATE=str(state)),
        check=True,
    ).stdout
    facts = pci_facts(0, out, '', fake)
    assert [g['slot'] for g in facts['gpus']] == ['0000:18:00.0', '0000:3b:00.0']
    assert facts['summary'][1] == '0000:3b:00.0 AD102GL [RTX 6000 Ada Generation] [10de:26b1]'
    assert facts['nvswitches'] == []


def test_the_test_worlds_lspci_shows_an_hgx_boards_nvswitches(tmp_path):
    fake = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'world', 'fakes', 'pci', 'lspci')
    state = tmp_path / 'state.json'
    state.write_text(
        json.dumps(
            {
                'kernel_module_version': '580.65.06',
                'gpus': [{'pci_bus_id': '00000000:18:00.0', 'pci_device_id': '0x233010DE'}],
                'nvswitches': [{'pci_bus_id': '00000000:%02X:00.0' % b, 'pci_device_id': '0x22A310DE'} for b in (5, 6)],
            }
        )
    )
    out = subprocess.run(
        [sys.executable, fake] + LSPCI_ARGS,
        stdout=subprocess.PIPE,
        universal_newlines=True,
        env=dict(os.environ, FAKE_NVML_STATE=str(state)),
        check=True,
    ).stdout
    facts = pci_facts(0, out, '', fake)
    assert facts['nvswitch_summary'] == [
        '0000:05:00.0 GH100 [H100 NVSwitch] [10de:22a3]',
        '0000:06:00.0 GH100 [H100 NVSwitch] [10de:22a3]',
    ]
    assert [g['device'] for g in facts['gpus']] == ['2330']
