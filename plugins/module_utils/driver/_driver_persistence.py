# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Persistence mode after the driver stage: does NVML report it Enabled on every GPU?

nvidia-persistenced (from the installed .run; the nvidia_driver role writes and starts its unit) keeps the driver's
state while no client holds a GPU: without it the driver tears the GPUs down after the last client exits and the
next one (an engine start, nvidia-smi) waits for the re-initialisation. The role verifies it through NVML
(airgap.vllm.nvml_info's per-GPU `persistence_mode`); this is the decision, pure, for airgap.vllm.driver_persistence.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def _gpu_name(gpu):
    text = 'GPU %s' % gpu.get('index', '?')
    if gpu.get('pci_bus_id'):
        text += ' (%s' % gpu['pci_bus_id']
        text += (', %s)' % gpu['uuid']) if gpu.get('uuid') else ')'
    elif gpu.get('uuid'):
        text += ' (%s)' % gpu['uuid']
    return text


def persistence_report(nvml, unit='nvidia-persistenced.service'):
    """{'ok': bool, 'enabled': [names], 'disabled': [names], 'unsupported': [names], 'msg': str} from nvml_info's
    result (`nvml_state`, `gpus[].persistence_mode`: True, False or None when NVML does not support the query).

    ok only when NVML works, sees at least one GPU and every GPU says Enabled. A GPU whose NVML cannot answer counts
    as not enabled: the stage cannot prove what it was asked to prove.
    """
    nvml = nvml or {}
    state = nvml.get('nvml_state') or 'absent'
    gpus = nvml.get('gpus') or []
    enabled, disabled, unsupported = [], [], []
    for gpu in gpus:
        mode = gpu.get('persistence_mode')
        (enabled if mode is True else unsupported if mode is None else disabled).append(_gpu_name(gpu))
    if state != 'ok':
        msg = 'Persistence mode cannot be verified: NVML says %s%s' % (
            state,
            (' (%s)' % nvml['hint']) if nvml.get('hint') else '',
        )
        return dict(ok=False, enabled=[], disabled=[], unsupported=[], msg=msg)
    if not gpus:
        return dict(
            ok=False,
            enabled=[],
            disabled=[],
            unsupported=[],
            msg='Persistence mode cannot be verified: NVML sees no GPU',
        )
    if not disabled and not unsupported:
        return dict(
            ok=True,
            enabled=enabled,
            disabled=[],
            unsupported=[],
            msg='Persistence mode Enabled on all %d GPU(s): %s' % (len(enabled), ', '.join(enabled)),
        )
    parts = []
    if disabled:
        parts.append('Disabled on %s' % ', '.join(disabled))
    if unsupported:
        parts.append('not reported by NVML for %s' % ', '.join(unsupported))
    msg = (
        'Persistence mode is %s (Enabled on %d of %d GPU(s)). %s runs nvidia-persistenced, which turns it on for '
        'every GPU it finds: see systemctl status %s and journalctl -u %s.'
        % ('; '.join(parts), len(enabled), len(gpus), unit, unit, unit)
    )
    return dict(ok=False, enabled=enabled, disabled=disabled, unsupported=unsupported, msg=msg)
