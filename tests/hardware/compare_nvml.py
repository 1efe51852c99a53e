"""Compare airgap.vllm's NVML reader with nvidia-smi on a real GPU host.

Usage: python3 tests/hardware/compare_nvml.py [OUTDIR]
Starts one CUDA process (ctypes -> libcuda, 1 GiB allocation) so the process list is not empty,
then compares every field of _nvml.collect() with nvidia-smi --query-gpu / --query-compute-apps.
Writes OUTDIR/compare.json and OUTDIR/compare.txt; exit status 0 only when every field matches.
Needs only python3 and the NVIDIA driver (no Ansible, no pip packages).
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# Import the module_utils the way Ansible does (ansible_collections.airgap.vllm...), without Ansible
# installed: a temporary collection tree linking to this work tree.
_TREE = tempfile.mkdtemp(prefix='airgap-vllm-')
os.makedirs(os.path.join(_TREE, 'ansible_collections', 'airgap'))
os.symlink(
    os.path.abspath(os.path.join(HERE, '..', '..')), os.path.join(_TREE, 'ansible_collections', 'airgap', 'vllm')
)
sys.path.insert(0, _TREE)
from ansible_collections.airgap.vllm.plugins.module_utils.host import _nvml  # noqa: E402 pylint: disable=wrong-import-position

GPU_FIELDS = [
    'index',
    'uuid',
    'name',
    'pci.bus_id',
    'pci.device_id',
    'memory.total',
    'memory.used',
    'memory.free',
    'memory.reserved',
    'driver_version',
    'compute_cap',
    'persistence_mode',
]
APP_FIELDS = ['gpu_uuid', 'pid', 'process_name', 'used_gpu_memory']

CUDA_HOLDER = r'''
import ctypes, sys, time
cuda = ctypes.CDLL("libcuda.so.1")
dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
for call in (lambda: cuda.cuInit(0), lambda: cuda.cuDeviceGet(ctypes.byref(dev), 0),
             lambda: cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev),
             lambda: cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(1 << 30))):
    rc = call()
    if rc:
        print("CUDA error", rc, flush=True); sys.exit(1)
print("ready", flush=True)
time.sleep(120)
'''


def smi(*args):
    p = subprocess.run(
        ['nvidia-smi'] + list(args),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        universal_newlines=True,
        check=False,
    )
    return p.returncode, p.stdout


def csv(args):
    rc, out = smi(*args)
    if rc:
        raise SystemExit('nvidia-smi %s failed (%d): %s' % (' '.join(args), rc, out))
    return [[c.strip() for c in line.split(',')] for line in out.splitlines() if line.strip()]


def mib(b):
    # nvidia-smi rounds memory up to whole MiB (seen on an H200, 580.159.04: 1550.81 MiB prints 1551)
    return None if b is None else str(-(-b // (1024 * 1024)))


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else '.'
    os.makedirs(outdir, exist_ok=True)
    holder = subprocess.Popen([sys.executable, '-c', CUDA_HOLDER], stdout=subprocess.PIPE, universal_newlines=True)
    ready = holder.stdout.readline().strip()
    time.sleep(2)
    try:
        started = time.time()
        mine = _nvml.collect()
        elapsed = time.time() - started
        gpus = csv(['--query-gpu=' + ','.join(GPU_FIELDS), '--format=csv,noheader,nounits'])
        apps = csv(['--query-compute-apps=' + ','.join(APP_FIELDS), '--format=csv,noheader,nounits'])
        rc, table = smi()
    finally:
        holder.kill()
        holder.wait()
    rows = []

    def cmp(what, ours, theirs):
        rows.append({'field': what, 'nvml_info': ours, 'nvidia_smi': theirs, 'equal': ours == theirs})

    cuda = re.search(r'CUDA Version:\s*([\d.]+)', table)
    cmp('cuda_version', mine['cuda_version'], cuda.group(1) if cuda else None)
    cmp('nvml_state', mine['nvml_state'], 'ok' if rc == 0 else 'nvidia-smi rc %d' % rc)
    cmp('gpu_count', mine['gpu_count'], len(gpus))
    by_uuid = {}
    for g, row in zip(mine['gpus'], gpus):
        s = dict(zip(GPU_FIELDS, row))
        p = 'gpu[%d].' % g['index']
        cmp(p + 'driver_version', mine['driver_version'], s['driver_version'])
        cmp(p + 'index', str(g['index']), s['index'])
        cmp(p + 'uuid', g['uuid'], s['uuid'])
        cmp(p + 'name', g['name'], s['name'])
        cmp(p + 'pci_bus_id', g['pci_bus_id'], s['pci.bus_id'])
        cmp(p + 'pci_device_id', g['pci_device_id'], s['pci.device_id'])
        for f in ('total', 'used', 'free', 'reserved'):
            cmp(p + 'memory_%s (MiB)' % f, mib(g['memory_' + f]), s['memory.' + f])
        cmp(p + 'compute_capability', g['compute_capability'], s['compute_cap'])
        cmp(p + 'persistence_mode', 'Enabled' if g['persistence_mode'] else 'Disabled', s['persistence_mode'])
        by_uuid[g['uuid']] = g
    ours_apps = sorted((u, p['pid']) for u, g in by_uuid.items() for p in g['processes'])
    cmp('compute processes (gpu_uuid, pid)', ours_apps, sorted((a[0], int(a[1])) for a in apps))
    for a in apps:
        s = dict(zip(APP_FIELDS, a))
        match = [p for p in by_uuid.get(s['gpu_uuid'], {}).get('processes', []) if str(p['pid']) == s['pid']]
        if not match:
            continue
        p = match[0]
        cmp('pid %s used_memory (MiB)' % s['pid'], mib(p['used_memory']), s['used_gpu_memory'])
        # comm is the first 15 bytes of the executable's name; nvidia-smi prints the path
        cmp('pid %s name (comm vs basename[:15])' % s['pid'], p['name'], os.path.basename(s['process_name'])[:15])
    absent = _nvml.collect(library='/nonexistent/libnvidia-ml.so.1')
    cmp('missing library -> nvml_state', absent['nvml_state'], 'absent')
    ok = all(r['equal'] for r in rows)
    report = {
        'ok': ok,
        'cuda_holder': ready,
        'collect_seconds': round(elapsed, 3),
        'python': sys.version.split()[0],
        'nvml_info': mine,
        'nvidia_smi_gpus': gpus,
        'nvidia_smi_apps': apps,
        'nvidia_smi_table': table,
        'comparison': rows,
    }
    with open(os.path.join(outdir, 'compare.json'), 'w') as f:
        json.dump(report, f, indent=2, sort_keys=True)
    lines = [
        '%-5s %-42s %-45s %s' % ('same' if r['equal'] else 'DIFF', r['field'], r['nvml_info'], r['nvidia_smi'])
        for r in rows
    ]
    lines.append('ALL EQUAL' if ok else 'DIFFERENCES FOUND')
    with open(os.path.join(outdir, 'compare.txt'), 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print('\n'.join(lines))
    print(table)
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
