# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight decisions that are more than a comparison: pure functions, unit-tested, called by the
preflight role through the airgap.vllm filters (the role only gathers facts and reports)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

GIB = 1024 ** 3


def _is_own(process, own_container_ids):
    cid = process.get('container_id') or ''
    return bool(cid) and any(cid.startswith(own) or own.startswith(cid)
                             for own in own_container_ids if len(own) >= 12)


def gpu_memory_verdict(nvml, utilization, own_container_ids=(), gpu_indexes=None):
    """Is there room on each GPU for vLLM's share (total x utilization)?

    Memory held by our own service's container (``own_container_ids``: full or >= 12-char ids of the
    container this collection runs) counts as available: a re-run on a serving host replaces that
    container, it does not run beside it. ``gpu_indexes``: only these GPUs (default all).
    Returns {'status': 'ok'|'fail'|'n/a', 'detail': str, 'short': [indexes without room]}.
    """
    if not nvml or nvml.get('nvml_state') != 'ok':
        return {'status': 'n/a', 'detail': 'needs NVML (see the nvml check)', 'short': []}
    utilization = float(utilization)
    own = [str(c) for c in own_container_ids or () if c]
    gpus = [g for g in nvml.get('gpus') or []
            if gpu_indexes is None or g.get('index') in gpu_indexes]
    if not gpus:
        return {'status': 'fail', 'detail': 'NVML sees no GPU', 'short': []}
    short, parts = [], []
    for g in gpus:
        procs = g.get('processes') or []
        ours = sum(p.get('used_memory') or 0 for p in procs if _is_own(p, own))
        available = g['memory_free'] + ours
        need = g['memory_total'] * utilization
        if available < need:
            short.append(g['index'])
        text = 'GPU%s %s: free %.1f GiB of %.1f GiB' % (g['index'], g.get('name', '?'),
                                                        g['memory_free'] / GIB, g['memory_total'] / GIB)
        if ours:
            text += ' (+%.1f GiB held by our own service, replaced on restart)' % (ours / GIB)
        text += ', need %.1f GiB (%s)' % (need / GIB, utilization)
        foreign = [p for p in procs if not _is_own(p, own)]
        if foreign:
            held = []
            for p in foreign:
                size = ('%.1f GiB' % (p['used_memory'] / GIB)) if p.get('used_memory') is not None \
                    else 'size unknown'
                cont = (', container ' + p['container_id'][:12]) if p.get('container_id') else ''
                held.append('pid %s %s (%s%s)' % (p.get('pid'), p.get('name') or '?', size, cont))
            text += '; held by ' + ', '.join(held)
        parts.append(text)
    return {'status': 'fail' if short else 'ok', 'detail': '; '.join(parts), 'short': short}
