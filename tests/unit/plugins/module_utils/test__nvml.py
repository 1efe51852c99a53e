"""_nvml against the stand-in libnvidia-ml (compiled here from tests/world/fakes/nvml), not ctypes mocks."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.host import _nvml

FAKES = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', 'world', 'fakes', 'nvml'))
VERSION = '580.65.06'
GIB = 1024**3


@pytest.fixture(scope='session')
def build(tmp_path_factory):
    if not shutil.which('gcc'):
        pytest.skip('gcc is needed to build the stand-in NVML library')
    out = tmp_path_factory.mktemp('nvml')
    subprocess.run(['make', '-s', '-C', FAKES, 'VERSION=' + VERSION, 'OUT=' + str(out)], check=True)
    os.symlink('libnvidia-ml.so.' + VERSION, str(out / 'libnvidia-ml.so.1'))
    return out


def gpu(index=0, used=0, processes=(), **kw):
    g = {
        'index': index,
        'uuid': 'GPU-%08d-1c2d-4e5f-8a9b-0c1d2e3f4a5b' % index,
        'name': 'NVIDIA RTX 6000 Ada Generation',
        'pci_bus_id': '00000000:%02X:00.0' % (0x3B + index),
        'pci_device_id': '0x26B110DE',
        'memory_total': 48 * GIB,
        'memory_used': used,
        'compute_capability': [8, 9],
        'persistence_mode': 0,
        'processes': list(processes),
    }
    g.update(kw)
    return g


@pytest.fixture
def world(build, tmp_path, monkeypatch):
    """Write a state file and return a collect() bound to the stand-in library."""
    state_file = tmp_path / 'state.json'
    version_file = tmp_path / 'version'
    monkeypatch.setenv('FAKE_NVML_STATE', str(state_file))

    def run(state=None, kernel_text=None, **overrides):
        if state is not None:
            base = {'kernel_module_version': VERSION, 'init_error': None, 'cuda_driver_version': 13000, 'gpus': [gpu()]}
            base.update(state)
            state_file.write_text(json.dumps(base))
        if kernel_text is not None:
            version_file.write_text(kernel_text)
        kw = {'library': str(build / 'libnvidia-ml.so.1'), 'driver_version_file': str(version_file)}
        kw.update(overrides)
        return _nvml.collect(**kw)

    return run


def test_healthy_host_reports_every_field(world):
    busy = gpu(
        1,
        used=20 * GIB,
        persistence_mode=1,
        compute_capability=[9, 0],
        name='NVIDIA H200',
        processes=[{'pid': 4000000, 'used_memory': 20 * GIB, 'name': 'vllm'}],
    )
    r = world({'gpus': [gpu(), busy]})
    assert r['nvml_state'] == 'ok' and r['nvml_error'] is None
    assert (r['driver_version'], r['cuda_driver_version'], r['cuda_version']) == (VERSION, 13000, '13.0')
    assert r['nvml_version'] == '13.' + VERSION
    assert r['library_version'] == VERSION and r['library_path'].endswith('libnvidia-ml.so.' + VERSION)
    assert r['gpu_count'] == 2
    g0, g1 = r['gpus']
    assert g0 == {
        'index': 0,
        'uuid': 'GPU-00000000-1c2d-4e5f-8a9b-0c1d2e3f4a5b',
        'name': 'NVIDIA RTX 6000 Ada Generation',
        'pci_bus_id': '00000000:3B:00.0',
        'pci_device_id': '0x26B110DE',
        'compute_capability': '8.9',
        'fp8_capable': True,
        'persistence_mode': False,
        'memory_total': 48 * GIB,
        'memory_used': 0,
        'memory_free': 48 * GIB,
        'memory_reserved': 0,
        'processes': [],
    }
    assert (g1['name'], g1['compute_capability'], g1['persistence_mode']) == ('NVIDIA H200', '9.0', True)
    assert (g1['memory_used'], g1['memory_free']) == (20 * GIB, 28 * GIB)
    # pid not visible here: the name comes from NVML (the simulated host's view)
    assert g1['processes'] == [{'pid': 4000000, 'used_memory': 20 * GIB, 'name': 'vllm', 'container_id': None}]


def test_fp8_needs_ada_or_newer(world):
    r = world({'gpus': [gpu(compute_capability=[8, 6]), gpu(1, compute_capability=[8, 0])]})
    assert [g['fp8_capable'] for g in r['gpus']] == [False, False]


def test_visible_process_named_from_proc_and_container_from_cgroup(world, tmp_path):
    pid = os.getpid()
    procs = [{'pid': pid, 'used_memory': 123 * 1024**2, 'name': 'ignored'}]
    r = world({'gpus': [gpu(processes=procs)]})
    with open('/proc/%d/comm' % pid) as f:
        comm = f.read().strip()
    with open('/proc/%d/cgroup' % pid) as f:
        expected_cid = _nvml.container_id_from_cgroup(f.read())
    assert r['gpus'][0]['processes'] == [
        {'pid': pid, 'used_memory': 123 * 1024**2, 'name': comm, 'container_id': expected_cid}
    ]


def test_fake_proc_root_gives_container_id(build, world, tmp_path):
    cid = 'a' * 64
    root = tmp_path / 'proc'
    (root / '4242').mkdir(parents=True)
    (root / '4242' / 'comm').write_text('python3\n')
    (root / '4242' / 'cgroup').write_text('12:memory:/docker/%s\n0::/system.slice/docker-%s.scope\n' % (cid, cid))
    r = world({'gpus': [gpu(processes=[{'pid': 4242, 'used_memory': 1, 'name': 'x'}])]}, proc_root=str(root))
    assert r['gpus'][0]['processes'][0] == {'pid': 4242, 'used_memory': 1, 'name': 'python3', 'container_id': cid}


def test_many_processes_use_the_size_probe(world):
    procs = [{'pid': 3000000 + i, 'used_memory': i, 'name': 'p%d' % i} for i in range(40)]
    r = world({'gpus': [gpu(processes=procs)]})
    assert [p['pid'] for p in r['gpus'][0]['processes']] == [p['pid'] for p in procs]


def test_used_memory_not_available_is_none(world):
    r = world({'gpus': [gpu(processes=[{'pid': 3999999, 'used_memory': 2**64 - 1, 'name': 'x'}])]})
    assert r['gpus'][0]['processes'][0]['used_memory'] is None


OLD_PROPRIETARY = (
    'NVRM version: NVIDIA UNIX x86_64 Kernel Module  560.35.03  Fri Aug 16 21:39:15 UTC 2024\n'
    'GCC version:  gcc version 7.3.0 (GCC)\n'
)
OPEN_MODULE = (
    'NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  '
    '(dvs-builder@U16-I3-B03-4-3)  Tue Jul 22 16:51:23 UTC 2025\n'
)


def test_version_mismatch_reports_both_versions_and_a_fix(world):
    r = world({'kernel_module_version': '560.35.03'}, kernel_text=OLD_PROPRIETARY)
    assert r['nvml_state'] == 'version_mismatch'
    assert r['nvml_error']['code'] == 18 and r['nvml_error']['name'] == 'NVML_ERROR_LIB_RM_VERSION_MISMATCH'
    assert r['nvml_error']['message'] == 'RM has detected an NVML/RM version mismatch.'
    assert (r['kernel_module_version'], r['library_version']) == ('560.35.03', VERSION)
    assert '560.35.03' in r['hint'] and VERSION in r['hint'] and 'reboot' in r['hint'] and 'rmmod' in r['hint']
    assert r['gpus'] == [] and r['driver_version'] is None


@pytest.mark.parametrize('state', [{'kernel_module_version': None}, None])
def test_driver_not_loaded(world, state, tmp_path, monkeypatch):
    if state is None:  # no state file at all: no kernel driver
        monkeypatch.setenv('FAKE_NVML_STATE', str(tmp_path / 'missing.json'))
    r = world(state)
    assert r['nvml_state'] == 'driver_not_loaded' and r['nvml_error']['code'] == 9
    assert 'modprobe' in r['hint']


def test_library_missing_is_absent(world, tmp_path):
    r = world({}, library=str(tmp_path / 'nope' / 'libnvidia-ml.so.1'))
    assert r['nvml_state'] == 'absent' and r['gpus'] == [] and 'install' in r['hint']


@pytest.mark.parametrize('code', sorted(set(_nvml.NVML_ERROR_NAMES) | {12345}))
def test_every_init_error_is_data_not_a_traceback(world, code):
    r = world({'init_error': code})
    expected = _nvml.STATE_BY_INIT_ERROR.get(code, 'error')
    assert r['nvml_state'] == expected
    assert r['nvml_error']['code'] == code and r['nvml_error']['function'] == 'nvmlInit_v2'
    assert r['hint']


def test_corrupt_state_is_unknown_error(world, tmp_path, monkeypatch):
    bad = tmp_path / 'bad.json'
    bad.write_text('{"gpus": [')
    monkeypatch.setenv('FAKE_NVML_STATE', str(bad))
    r = world()
    assert r['nvml_state'] == 'error' and r['nvml_error']['name'] == 'NVML_ERROR_UNKNOWN'


@pytest.mark.parametrize(
    'text,version',
    [
        (OLD_PROPRIETARY, '560.35.03'),
        (OPEN_MODULE, '580.65.06'),
        ('', None),
        ('garbage', None),
    ],
)
def test_parse_kernel_module_version(text, version):
    assert _nvml.parse_kernel_module_version(text) == version


CID = '0123456789abcdef' * 4


@pytest.mark.parametrize(
    'text,cid',
    [
        ('12:memory:/docker/%s\n1:name=systemd:/docker/%s\n' % (CID, CID), CID),
        ('0::/system.slice/docker-%s.scope\n' % CID, CID),
        ('11:cpu:/kubepods/besteffort/pod1234/%s\n' % CID, CID),
        ('0::/system.slice/containerd.service/kubepods-pod1.slice:cri-containerd:%s\n' % CID, CID),
        ('0::/user.slice/user-0.slice/session-1.scope\n', None),
        ('12:memory:/\n', None),
        (None, None),
    ],
)
def test_container_id_from_cgroup(text, cid):
    assert _nvml.container_id_from_cgroup(text) == cid


def test_library_version_from_path():
    assert _nvml.library_version_from_path('/usr/lib64/libnvidia-ml.so.580.65.06') == '580.65.06'
    assert _nvml.library_version_from_path('/usr/lib64/libnvidia-ml.so.1') is None


def smi(build, *args):
    env = dict(os.environ, LD_LIBRARY_PATH=str(build))
    return subprocess.run(
        [str(build / 'nvidia-smi')] + list(args), env=env, stdout=subprocess.PIPE, universal_newlines=True, check=False
    )


def mib(b):
    return str(-(-b // 2**20))  # nvidia-smi rounds up (seen on a real H200)


def test_standin_nvidia_smi_agrees_with_module(build, world):
    procs = [{'pid': 3777777, 'used_memory': 5 * GIB, 'name': 'python3'}]
    r = world({'gpus': [gpu(used=5 * GIB + 1000, processes=procs), gpu(1)]})
    out = smi(
        build,
        '--query-gpu=index,uuid,name,pci.bus_id,memory.total,memory.used,memory.free,'
        'driver_version,compute_cap,persistence_mode',
        '--format=csv,noheader,nounits',
    )
    assert out.returncode == 0
    rows = [line.split(', ') for line in out.stdout.splitlines()]
    for g, row in zip(r['gpus'], rows):
        assert row == [
            str(g['index']),
            g['uuid'],
            g['name'],
            g['pci_bus_id'],
            mib(g['memory_total']),
            mib(g['memory_used']),
            mib(g['memory_free']),
            r['driver_version'],
            g['compute_capability'],
            'Enabled' if g['persistence_mode'] else 'Disabled',
        ]
    apps = smi(build, '--query-compute-apps=pid,process_name,used_gpu_memory,gpu_uuid', '--format=csv')
    assert apps.stdout.splitlines() == [
        'pid, process_name, used_gpu_memory [MiB], gpu_uuid',
        '3777777, python3, 5120 MiB, %s' % r['gpus'][0]['uuid'],
    ]
    assert smi(build, '-L').stdout.splitlines()[1] == 'GPU 1: %s (UUID: %s)' % (
        r['gpus'][1]['name'],
        r['gpus'][1]['uuid'],
    )
    assert smi(build, '--query-gpu=bogus', '--format=csv').returncode == 2


def test_standin_nvidia_smi_fails_like_the_real_one(build, world):
    world({'kernel_module_version': '560.35.03'})
    out = smi(build)
    assert (out.returncode, out.stdout.splitlines()[0]) == (
        18,
        'Failed to initialize NVML: Driver/library version mismatch',
    )
    world({'kernel_module_version': None})
    out = smi(build, '-L')
    assert out.returncode == 9
    assert out.stdout.startswith("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")


def test_a_non_utf8_version_file_is_read_not_a_traceback(tmp_path):
    path = tmp_path / 'version'
    path.write_bytes(
        b'NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  '
        b'(dvs-builder@U16-I3-B13-4-1)  Mon \xff\xfe Jul 2025\n'
    )
    assert _nvml.read_kernel_module_version(str(path)) == '580.65.06'
    path.write_bytes(b'\xff\xfe\x00garbage\x80\n')
    assert _nvml.read_kernel_module_version(str(path)) in (None, _nvml.read_kernel_module_version('/nonexistent'))


def test_a_non_utf8_maps_file_is_read_not_a_traceback(tmp_path):
    maps = tmp_path / 'maps'
    maps.write_bytes(
        b'7f00-7f01 r-xp 00000000 08:01 1 /opt/caf\xe9/lib.so\n'
        b'7f02-7f03 r-xp 00000000 08:01 2 /usr/lib64/libnvidia-ml.so.580.65.06\n'
    )
    assert _nvml.loaded_library_path(maps_path=str(maps)) == os.path.realpath('/usr/lib64/libnvidia-ml.so.580.65.06')


def test_collect_with_a_non_utf8_version_file_does_not_raise(tmp_path):
    path = tmp_path / 'version'
    path.write_bytes(b'\xff Kernel Module  580.65.06 \xfe\n')
    result = _nvml.collect(library=str(tmp_path / 'no-such-libnvidia-ml.so.1'), driver_version_file=str(path))
    assert result['nvml_state'] == 'absent' and result['kernel_module_version'] == '580.65.06'
