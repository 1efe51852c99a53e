# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU health as node_exporter textfile metrics (the vllm_observe role's exporter, run by a systemd timer).

NVML is read through _nvml (the one ctypes binding); names follow NVIDIA's DCGM exporter where they mean the
same thing (DCGM_FI_DEV_*, same units, labels gpu/UUID/device/modelName/pci_bus_id), so dashboards built for
DCGM work. What DCGM does not have is named airgap_gpu_*.

XID errors come from the kernel log (`NVRM: Xid` lines): the exporter is a one-shot run every 15 s, and NVML's
event API only reports events that happen while a process waits on it, so the kernel log (kept since boot) is
the complete source.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import subprocess
import sys
import time

from ansible_collections.airgap.vllm.plugins.module_utils.host import _nvml
from ansible_collections.airgap.vllm.plugins.module_utils.common._files import write_atomic

TEXTFILE_NAME = 'airgap_gpu.prom'
MIB = 1024 * 1024


def _nested(outer, key):
    """The field of a health dict's sub-dict (utilization, remapped_rows), None when either is absent."""
    return lambda g: (g.get(outer) or {}).get(key)


def _watts(key):
    """A milliwatt field in W."""
    return lambda g: None if g.get(key) is None else g[key] / 1000.0


def _mib(key):
    """A byte field in whole MiB."""
    return lambda g: None if g.get(key) is None else g[key] // MIB


# (metric, type, help, field or function of the health dict)
GPU_METRICS = (
    ('DCGM_FI_DEV_GPU_TEMP', 'gauge', 'GPU temperature (in C).', 'temperature_c'),
    ('DCGM_FI_DEV_POWER_USAGE', 'gauge', 'Power draw (in W).', _watts('power_mw')),
    ('airgap_gpu_power_limit_watts', 'gauge', 'Enforced power limit (in W).', _watts('power_limit_mw')),
    ('DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION', 'counter', 'Total energy consumption since boot (in mJ).', 'energy_mj'),
    ('DCGM_FI_DEV_SM_CLOCK', 'gauge', 'SM clock frequency (in MHz).', 'sm_clock_mhz'),
    ('DCGM_FI_DEV_MEM_CLOCK', 'gauge', 'Memory clock frequency (in MHz).', 'mem_clock_mhz'),
    (
        'DCGM_FI_DEV_CLOCK_THROTTLE_REASONS',
        'gauge',
        'Current clock throttle reasons (NVML bitmask).',
        'throttle_reasons',
    ),
    ('DCGM_FI_DEV_GPU_UTIL', 'gauge', 'GPU utilization (in %).', _nested('utilization', 'gpu')),
    ('DCGM_FI_DEV_MEM_COPY_UTIL', 'gauge', 'Memory utilization (in %).', _nested('utilization', 'memory')),
    ('DCGM_FI_DEV_FB_USED', 'gauge', 'Framebuffer memory used (in MiB).', _mib('memory_used')),
    ('DCGM_FI_DEV_FB_FREE', 'gauge', 'Framebuffer memory free (in MiB).', _mib('memory_free')),
    ('airgap_gpu_fb_total_mib', 'gauge', 'Framebuffer memory total (in MiB).', _mib('memory_total')),
    ('DCGM_FI_DEV_ECC_SBE_VOL_TOTAL', 'counter', 'Single-bit volatile ECC errors.', 'ecc_sbe_volatile'),
    ('DCGM_FI_DEV_ECC_DBE_VOL_TOTAL', 'counter', 'Double-bit volatile ECC errors.', 'ecc_dbe_volatile'),
    ('DCGM_FI_DEV_ECC_SBE_AGG_TOTAL', 'counter', 'Single-bit persistent ECC errors.', 'ecc_sbe_aggregate'),
    ('DCGM_FI_DEV_ECC_DBE_AGG_TOTAL', 'counter', 'Double-bit persistent ECC errors.', 'ecc_dbe_aggregate'),
    ('DCGM_FI_DEV_RETIRED_SBE', 'counter', 'Total number of retired pages due to single-bit errors.', 'retired_sbe'),
    ('DCGM_FI_DEV_RETIRED_DBE', 'counter', 'Total number of retired pages due to double-bit errors.', 'retired_dbe'),
    ('DCGM_FI_DEV_RETIRED_PENDING', 'gauge', 'Pages pending retirement (1: a reset is needed).', 'retired_pending'),
    (
        'DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS',
        'counter',
        'Rows remapped for correctable errors.',
        _nested('remapped_rows', 'correctable'),
    ),
    (
        'DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS',
        'counter',
        'Rows remapped for uncorrectable errors.',
        _nested('remapped_rows', 'uncorrectable'),
    ),
    (
        'DCGM_FI_DEV_ROW_REMAP_FAILURE',
        'gauge',
        'Whether remapping of rows has failed.',
        _nested('remapped_rows', 'failure'),
    ),
    (
        'airgap_gpu_row_remap_pending',
        'gauge',
        'Rows pending remapping (1: a reset is needed).',
        _nested('remapped_rows', 'pending'),
    ),
)
# Every metric name the exporter can write (the dashboard and rule tests check their names against it).
METRIC_NAMES = tuple(m[0] for m in GPU_METRICS) + (
    'airgap_gpu_clock_throttle_reason',
    'DCGM_FI_DEV_XID_ERRORS',
    'airgap_gpu_xid_errors_total',
    'airgap_gpu_exporter_up',
    'airgap_gpu_exporter_last_run_timestamp_seconds',
    'airgap_gpu_count',
    'airgap_gpu_read_errors',
    'airgap_gpu_metric_unavailable',
)

# `NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.` (R470+), and the older
# `NVRM: Xid (0000:03:00): 31, Ch 00000010, ...`; the function number (.0) is absent in both.
XID_RE = re.compile(r'NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]{4,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})(?:\.[0-7])?\): (\d+)')


def bus_key(pci_bus_id):
    """'00000000:3B:00.0' (NVML) or '0000:3b:00' (kernel log) -> '0000:3b:00'."""
    m = re.match(r'^([0-9A-Fa-f]+):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})', pci_bus_id or '')
    if not m:
        return None
    return '%04x:%s:%s' % (int(m.group(1), 16), m.group(2).lower(), m.group(3).lower())


def parse_xid(text):
    """Every XID event of a kernel log text, in order: [{'bus': '0000:3b:00', 'xid': 79}]."""
    events = []
    for line in (text or '').splitlines():
        m = XID_RE.search(line)
        if m:
            events.append(
                {
                    'bus': '%04x:%s:%s' % (int(m.group(1), 16), m.group(2).lower(), m.group(3).lower()),
                    'xid': int(m.group(4)),
                }
            )
    return events


def _escape(value):
    return str(value).replace('\\', '\\\\').replace('\n', '\\n').replace('"', '\\"')


def _labels(labels):
    return '{' + ','.join('%s="%s"' % (k, _escape(v)) for k, v in labels) + '}'


def _number(value):
    if isinstance(value, bool):
        return '1' if value else '0'
    if isinstance(value, float):
        return repr(value)
    return str(int(value))


def gpu_labels(gpu):
    return (
        ('gpu', gpu['index']),
        ('UUID', gpu.get('uuid') or ''),
        ('device', 'nvidia%d' % gpu['index']),
        ('modelName', gpu.get('name') or ''),
        ('pci_bus_id', gpu.get('pci_bus_id') or ''),
    )


def render(health, xid_events=None, now=None):
    """The textfile (Prometheus text format 0.0.4): one HELP/TYPE per family, a sample only where NVML
    answered, so a figure a GPU does not offer is absent rather than a false 0."""
    families = []  # (name, type, help, [(labels, value)])
    gpus = health.get('gpus') or []
    up = 1 if health.get('nvml_state') == 'ok' else 0
    families.append(
        (
            'airgap_gpu_exporter_up',
            'gauge',
            'NVML answered (1) or not (0: see nvml_state).',
            [((('nvml_state', health.get('nvml_state') or 'unknown'),), up)],
        )
    )
    if now is not None:
        families.append(
            (
                'airgap_gpu_exporter_last_run_timestamp_seconds',
                'gauge',
                'When the exporter last ran (Unix time).',
                [((), float(now))],
            )
        )
    if up:
        families.append(
            ('airgap_gpu_count', 'gauge', 'GPUs NVML lists.', [((), len(gpus) + len(health.get('gpu_errors') or []))])
        )
        families.append(
            (
                'airgap_gpu_read_errors',
                'gauge',
                'GPUs whose NVML reads failed on this run.',
                [((('gpu', e['index']), ('error', e.get('name') or '')), 1) for e in health.get('gpu_errors') or []],
            )
        )
    unavailable = []  # (gpu, metric): what NVML did not answer, said once rather than left to guess
    for name, kind, text, field in GPU_METRICS:
        samples = []
        for g in gpus:
            value = field(g) if callable(field) else g.get(field)
            if value is not None:
                samples.append((gpu_labels(g), value))
            else:
                unavailable.append((g, name))
        families.append((name, kind, text, samples))
    reasons = []
    for g in gpus:
        mask = g.get('throttle_reasons')
        if mask is None:
            unavailable.append((g, 'airgap_gpu_clock_throttle_reason'))
            continue
        for bit, reason in _nvml.THROTTLE_REASONS:
            reasons.append((gpu_labels(g) + (('reason', reason),), 1 if mask & bit else 0))
    families.append(
        (
            'airgap_gpu_clock_throttle_reason',
            'gauge',
            'Clock throttle reason active (1) or not (0), one series per NVML reason bit.',
            reasons,
        )
    )
    if xid_events is not None:
        by_bus = dict((bus_key(g.get('pci_bus_id')), g) for g in gpus)
        last, counts = {}, {}
        for event in xid_events:
            g = by_bus.get(event['bus'])
            if g is None:
                continue
            last[g['index']] = event['xid']
            counts[(g['index'], event['xid'])] = counts.get((g['index'], event['xid']), 0) + 1
        families.append(
            (
                'DCGM_FI_DEV_XID_ERRORS',
                'gauge',
                'Value of the last XID error encountered (0: none since boot).',
                [(gpu_labels(g), last.get(g['index'], 0)) for g in gpus],
            )
        )
        families.append(
            (
                'airgap_gpu_xid_errors_total',
                'counter',
                'XID errors in the kernel log since boot, by XID.',
                [
                    (gpu_labels(by_index) + (('xid', xid),), n)
                    for (index, xid), n in sorted(counts.items())
                    for by_index in gpus
                    if by_index['index'] == index
                ],
            )
        )
    families.append(
        (
            'airgap_gpu_metric_unavailable',
            'gauge',
            'A figure NVML did not answer for this GPU (not offered by the card or driver): the metric '
            'named is absent, not 0.',
            [(gpu_labels(g) + (('metric', name),), 1) for g, name in unavailable],
        )
    )
    lines = []
    for name, kind, text, samples in families:
        if not samples:
            continue
        lines.append('# HELP %s %s' % (name, text))
        lines.append('# TYPE %s %s' % (name, kind))
        for labels, value in samples:
            lines.append('%s%s %s' % (name, _labels(labels) if labels else '', _number(value)))
    return '\n'.join(lines) + '\n'


def kernel_log(run=None):
    """The kernel log since boot: journalctl -k -b, else dmesg; None when neither answers."""
    run = run or _run
    for argv in (['journalctl', '-k', '-b', '--no-pager', '-q', '-o', 'short-monotonic'], ['dmesg']):
        out = run(argv)
        if out is not None:
            return out
    return None


def _run(argv):
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, dummy = proc.communicate()
    except OSError:
        return None
    if proc.returncode != 0:
        return None
    return out.decode('utf-8', 'replace')


def export(path, library='libnvidia-ml.so.1', xid=True, run=None, now=None):
    """Read NVML (and the kernel log), write the textfile atomically; returns the health dict."""
    health = _nvml.collect_health(library)
    events = None
    if xid:
        log = kernel_log(run)
        events = parse_xid(log) if log is not None else None
    write_atomic(path, render(health, events, time.time() if now is None else now), mode=0o644)
    return health


def main(argv=None):
    """airgap-gpu-exporter [TEXTFILE_DIR] [--library PATH] [--no-xid]"""
    argv = list(sys.argv[1:] if argv is None else argv)
    library, xid, directory = 'libnvidia-ml.so.1', True, '/var/lib/node_exporter/textfile_collector'
    while argv:
        arg = argv.pop(0)
        if arg == '--library' and argv:
            library = argv.pop(0)
        elif arg == '--no-xid':
            xid = False
        else:
            directory = arg
    health = export(os.path.join(directory, TEXTFILE_NAME), library, xid)
    if health.get('nvml_state') != 'ok':
        sys.stderr.write('NVML: %s %s\n' % (health.get('nvml_state'), (health.get('nvml_error') or {}).get('name')))
    return 0
