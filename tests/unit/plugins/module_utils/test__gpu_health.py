"""_nvml's health reads (through a Python stand-in for libnvidia-ml's entry points) and the textfile exporter."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes
import os
import re
import shutil
import subprocess

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.host import _nvml
from ansible_collections.airgap.vllm.plugins.module_utils.observe import _gpu_health

GIB = 1024**3
MIB = 1024**2
FAKES = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', 'world', 'fakes', 'nvml'))


def _set(ref, value):
    ref._obj.value = value


class FakeLib:
    """Entry points NVML's way: pointers out, an nvmlReturn_t back. `missing` names entry points absent from
    the library (an older driver); `errors` maps an entry point to the code it returns."""

    def __init__(self, gpus, missing=(), errors=None):
        self.gpus = gpus
        self.missing = set(missing)
        self.errors = errors or {}

    def __getattr__(self, name):
        if name in self.missing or not hasattr(type(self), '_' + name):
            raise AttributeError(name)
        impl = getattr(self, '_' + name)

        def fn(*args):
            if name in self.errors:
                return self.errors[name]
            return impl(*args) or 0

        return fn

    def _g(self, handle):
        return self.gpus[handle.value - 1]

    def _nvmlErrorString(self, code):
        return b'fake error'

    def _nvmlDeviceGetHandleByIndex_v2(self, index, ref):
        ref._obj.value = index.value + 1

    def _nvmlDeviceGetPciInfo_v3(self, handle, ref):
        ref._obj.busId = self._g(handle)['bus'].encode()

    def _nvmlDeviceGetUUID(self, handle, buf, size):
        buf.value = self._g(handle)['uuid'].encode()

    def _nvmlDeviceGetName(self, handle, buf, size):
        buf.value = b'NVIDIA H200'

    def _nvmlDeviceGetTemperature(self, handle, sensor, ref):
        assert sensor.value == _nvml.NVML_TEMPERATURE_GPU
        _set(ref, self._g(handle)['temp'])

    def _nvmlDeviceGetPowerUsage(self, handle, ref):
        _set(ref, 351250)

    def _nvmlDeviceGetEnforcedPowerLimit(self, handle, ref):
        _set(ref, 700000)

    def _nvmlDeviceGetTotalEnergyConsumption(self, handle, ref):
        _set(ref, 123456789)

    def _nvmlDeviceGetClockInfo(self, handle, kind, ref):
        _set(ref, {_nvml.NVML_CLOCK_SM: 1980, _nvml.NVML_CLOCK_MEM: 3201}[kind.value])

    def _nvmlDeviceGetCurrentClocksEventReasons(self, handle, ref):
        _set(ref, self._g(handle).get('throttle', 0))

    def _nvmlDeviceGetCurrentClocksThrottleReasons(self, handle, ref):
        _set(ref, 0x4)

    def _nvmlDeviceGetUtilizationRates(self, handle, ref):
        ref._obj.gpu, ref._obj.memory = 97, 41

    def _nvmlDeviceGetTotalEccErrors(self, handle, error_type, counter_type, ref):
        _set(ref, {(0, 0): 5, (1, 0): 0, (0, 1): 12, (1, 1): 1}[(error_type.value, counter_type.value)])

    def _nvmlDeviceGetRetiredPages(self, handle, cause, count, addresses):
        assert addresses is None and count._obj.value == 0
        n = {0: 0, 1: 2}[cause.value]
        count._obj.value = n
        return _nvml.NVML_ERROR_INSUFFICIENT_SIZE if n else 0

    def _nvmlDeviceGetRetiredPagesPendingStatus(self, handle, ref):
        _set(ref, 1)

    def _nvmlDeviceGetRemappedRows(self, handle, corr, unc, pending, failure):
        corr._obj.value, unc._obj.value, pending._obj.value, failure._obj.value = 3, 1, 0, 0

    def _nvmlDeviceGetMemoryInfo(self, handle, ref):
        ref._obj.total, ref._obj.used, ref._obj.free = 141 * GIB, 120 * GIB, 21 * GIB


def gpu(i, **kw):
    g = {'bus': '00000000:%02X:00.0' % (0x3B + i), 'uuid': 'GPU-%d' % i, 'temp': 60 + i}
    g.update(kw)
    return g


def test_every_health_figure_read():
    h = _nvml.gpu_health(_nvml.Nvml(FakeLib([gpu(0, throttle=0x48)])), 0)
    assert h == {
        'index': 0,
        'uuid': 'GPU-0',
        'name': 'NVIDIA H200',
        'pci_bus_id': '00000000:3B:00.0',
        'temperature_c': 60,
        'power_mw': 351250,
        'power_limit_mw': 700000,
        'energy_mj': 123456789,
        'sm_clock_mhz': 1980,
        'mem_clock_mhz': 3201,
        'throttle_reasons': 0x48,
        'utilization': {'gpu': 97, 'memory': 41},
        'ecc_sbe_volatile': 5,
        'ecc_dbe_volatile': 0,
        'ecc_sbe_aggregate': 12,
        'ecc_dbe_aggregate': 1,
        'retired_sbe': 0,
        'retired_dbe': 2,
        'retired_pending': True,
        'remapped_rows': {'correctable': 3, 'uncorrectable': 1, 'pending': False, 'failure': False},
        'memory_total': 141 * GIB,
        'memory_used': 120 * GIB,
        'memory_free': 21 * GIB,
        'memory_reserved': None,
    }


def test_older_driver_uses_the_throttle_name():
    h = _nvml.gpu_health(_nvml.Nvml(FakeLib([gpu(0)], missing=['nvmlDeviceGetCurrentClocksEventReasons'])), 0)
    assert h['throttle_reasons'] == 0x4


@pytest.mark.parametrize('code', [_nvml.NVML_ERROR_NOT_SUPPORTED, _nvml.NVML_ERROR_NO_PERMISSION])
def test_what_a_gpu_does_not_offer_is_none(code):
    errors = dict(
        (n, code)
        for n in (
            'nvmlDeviceGetTotalEccErrors',
            'nvmlDeviceGetRetiredPages',
            'nvmlDeviceGetRemappedRows',
            'nvmlDeviceGetPowerUsage',
        )
    )
    h = _nvml.gpu_health(_nvml.Nvml(FakeLib([gpu(0)], errors=errors)), 0)
    assert h['ecc_sbe_volatile'] is None and h['retired_dbe'] is None and h['remapped_rows'] is None
    assert h['power_mw'] is None and h['temperature_c'] == 60


def test_a_real_failure_is_raised():
    lib = FakeLib([gpu(0)], errors={'nvmlDeviceGetTemperature': 15})  # GPU_IS_LOST
    with pytest.raises(_nvml.NvmlError) as e:
        _nvml.gpu_health(_nvml.Nvml(lib), 0)
    assert e.value.name == 'NVML_ERROR_GPU_IS_LOST'


# Real kernel log lines (R470+ and older drivers; journalctl short-monotonic and dmesg prefixes).
XID_LOG = """\
[  102.123456] nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms  580.65.06
[ 4113.991726] NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.
[ 5000.000001] NVRM: GPU at PCI:0000:3b:00: GPU-0
[ 5120.554120] NVRM: Xid (PCI:0000:3c:00): 48, pid=1234, name=python3, An uncorrectable double bit error (DBE) \
has been detected on GPU in the framebuffer at partition 0, subpartition 0.
[ 5121.100000] NVRM: Xid (PCI:0000:3c:00): 63, pid=1234, name=python3, Row Remapper: New row marked for remapping, \
reset gpu to activate.
[ 6000.000000] NVRM: Xid (PCI:0000:3C:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on \
(GPC 0, TPC 0, SM 0): Out Of Range Address
Dec 01 10:00:00 gpu1 kernel: NVRM: Xid (0000:3d:00): 31, Ch 00000010, intr 10000000. MMU Fault: ENGINE GRAPHICS
"""


def test_parse_xid_real_lines():
    assert _gpu_health.parse_xid(XID_LOG) == [
        {'bus': '0000:3b:00', 'xid': 79},
        {'bus': '0000:3c:00', 'xid': 48},
        {'bus': '0000:3c:00', 'xid': 63},
        {'bus': '0000:3c:00', 'xid': 13},
        {'bus': '0000:3d:00', 'xid': 31},
    ]
    assert _gpu_health.parse_xid('') == [] and _gpu_health.parse_xid(None) == []


@pytest.mark.parametrize(
    'raw,key',
    [
        ('00000000:3B:00.0', '0000:3b:00'),
        ('0000:3b:00', '0000:3b:00'),
        ('00000001:AF:00.0', '0001:af:00'),
        ('junk', None),
        (None, None),
    ],
)
def test_bus_key(raw, key):
    assert _gpu_health.bus_key(raw) == key


def _health(*gpus_):
    nvml = _nvml.Nvml(FakeLib(list(gpus_)))
    return {'nvml_state': 'ok', 'gpus': [_nvml.gpu_health(nvml, i) for i in range(len(gpus_))], 'gpu_errors': []}


def _samples(text):
    out = {}
    for line in text.splitlines():
        if line.startswith('#'):
            continue
        m = re.match(r'^([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})? (\S+)$', line)
        assert m, line
        out.setdefault(m.group(1), []).append((m.group(2) or '', float(m.group(3))))
    return out


def test_render_dcgm_names_units_and_labels():
    text = _gpu_health.render(_health(gpu(0, throttle=0x48), gpu(1)), _gpu_health.parse_xid(XID_LOG), now=1000)
    s = _samples(text)
    lab0 = '{gpu="0",UUID="GPU-0",device="nvidia0",modelName="NVIDIA H200",pci_bus_id="00000000:3B:00.0"}'
    assert ('{nvml_state="ok"}', 1.0) in s['airgap_gpu_exporter_up']
    lab1 = lab0.replace('"0"', '"1"').replace('GPU-0', 'GPU-1').replace('nvidia0', 'nvidia1').replace('3B', '3C')
    assert s['DCGM_FI_DEV_GPU_TEMP'] == [(lab0, 60.0), (lab1, 61.0)]
    assert s['DCGM_FI_DEV_POWER_USAGE'][0] == (lab0, 351.25)
    assert s['DCGM_FI_DEV_FB_USED'][0] == (lab0, 120 * 1024.0) and s['DCGM_FI_DEV_FB_FREE'][0] == (lab0, 21 * 1024.0)
    assert s['DCGM_FI_DEV_CLOCK_THROTTLE_REASONS'][0] == (lab0, 72.0)
    active = [lab for lab, v in s['airgap_gpu_clock_throttle_reason'] if v == 1 and 'GPU-0' in lab]
    assert [re.search('reason="([a-z_]+)"', lab).group(1) for lab in active] == ['hw_slowdown', 'hw_thermal_slowdown']
    assert s['DCGM_FI_DEV_RETIRED_DBE'][0] == (lab0, 2.0) and s['DCGM_FI_DEV_RETIRED_PENDING'][0] == (lab0, 1.0)
    # XID: last value per GPU (DCGM's meaning) and a count per XID; GPU 1 (3c) saw 48, 63, then 13
    assert [v for dummy, v in s['DCGM_FI_DEV_XID_ERRORS']] == [79.0, 13.0]
    counts = dict(
        (re.search(r'gpu="(\d)".*xid="(\d+)"', lab).groups(), v) for lab, v in s['airgap_gpu_xid_errors_total']
    )
    assert counts == {('0', '79'): 1, ('1', '48'): 1, ('1', '63'): 1, ('1', '13'): 1}
    assert s['airgap_gpu_exporter_last_run_timestamp_seconds'] == [('', 1000.0)]
    # one HELP and TYPE per family, every family named in METRIC_NAMES
    names = re.findall(r'^# TYPE (\S+) ', text, re.M)
    assert len(names) == len(set(names)) and set(names) <= set(_gpu_health.METRIC_NAMES)
    assert set(s) == set(names)


def test_render_leaves_out_what_nvml_did_not_answer():
    h = _health(gpu(0))
    h['gpus'][0]['ecc_sbe_volatile'] = None
    h['gpus'][0]['throttle_reasons'] = None
    s = _samples(_gpu_health.render(h, None))
    assert 'DCGM_FI_DEV_ECC_SBE_VOL_TOTAL' not in s and 'airgap_gpu_clock_throttle_reason' not in s
    # ... and says so, once per GPU and figure (the live check tells a card without the figure from a lost metric)
    said = sorted(re.search('metric="([A-Za-z_]+)"', lab).group(1) for lab, v in s['airgap_gpu_metric_unavailable'])
    assert said == [
        'DCGM_FI_DEV_CLOCK_THROTTLE_REASONS',
        'DCGM_FI_DEV_ECC_SBE_VOL_TOTAL',
        'airgap_gpu_clock_throttle_reason',
    ]
    assert all(v == 1 for dummy, v in s['airgap_gpu_metric_unavailable'])
    assert 'airgap_gpu_metric_unavailable' not in _samples(_gpu_health.render(_health(gpu(0)), None))
    assert 'DCGM_FI_DEV_XID_ERRORS' not in s  # no kernel log: no XID figure (not a false 0)


def test_render_nvml_down():
    s = _samples(_gpu_health.render({'nvml_state': 'driver_not_loaded', 'gpus': []}, [], now=5))
    assert s['airgap_gpu_exporter_up'] == [('{nvml_state="driver_not_loaded"}', 0.0)]
    assert 'airgap_gpu_count' not in s


def test_label_values_escaped():
    h = _health(gpu(0))
    h['gpus'][0]['name'] = 'odd "name"\\x'
    assert 'modelName="odd \\"name\\"\\\\x"' in _gpu_health.render(h)


def test_kernel_log_falls_back_to_dmesg():
    calls = []

    def run(argv):
        calls.append(argv[0])
        return None if argv[0] == 'journalctl' else XID_LOG

    assert _gpu_health.kernel_log(run) == XID_LOG and calls == ['journalctl', 'dmesg']
    assert _gpu_health.kernel_log(lambda argv: None) is None


@pytest.fixture(scope='module')
def standin(tmp_path_factory):
    if not shutil.which('gcc'):
        pytest.skip('gcc is needed to build the stand-in NVML library')
    out = tmp_path_factory.mktemp('nvml')
    subprocess.run(['make', '-s', '-C', FAKES, 'VERSION=580.65.06', 'OUT=' + str(out)], check=True)
    os.symlink('libnvidia-ml.so.580.65.06', str(out / 'libnvidia-ml.so.1'))
    return str(out / 'libnvidia-ml.so.1')


def test_export_against_the_stand_in_library(standin, tmp_path, monkeypatch):
    """The test world's libnvidia-ml has none of the health entry points: the exporter still writes the
    memory figures and leaves the rest out; the file is replaced atomically (no temporary file left)."""
    import json

    state = tmp_path / 'state.json'
    state.write_text(
        json.dumps(
            {
                'kernel_module_version': '580.65.06',
                'init_error': None,
                'cuda_driver_version': 13000,
                'gpus': [
                    {
                        'index': 0,
                        'uuid': 'GPU-a',
                        'name': 'NVIDIA H200',
                        'pci_bus_id': '00000000:3B:00.0',
                        'pci_device_id': '0x233510DE',
                        'memory_total': 141 * GIB,
                        'memory_used': GIB,
                        'compute_capability': [9, 0],
                        'persistence_mode': 1,
                        'processes': [],
                    }
                ],
            }
        )
    )
    monkeypatch.setenv('FAKE_NVML_STATE', str(state))
    out = tmp_path / 'textfile'
    out.mkdir()
    log = '[ 1.0] NVRM: Xid (PCI:0000:3b:00): 94, pid=1, Contained ECC error.\n'
    health = _gpu_health.export(str(out / 'airgap_gpu.prom'), standin, run=lambda argv: log, now=7)
    assert health['nvml_state'] == 'ok' and health['gpus'][0]['temperature_c'] is None
    assert os.listdir(str(out)) == ['airgap_gpu.prom']
    s = _samples((out / 'airgap_gpu.prom').read_text())
    assert s['DCGM_FI_DEV_FB_USED'][0][1] == 1024 and s['DCGM_FI_DEV_XID_ERRORS'][0][1] == 94
    assert 'DCGM_FI_DEV_GPU_TEMP' not in s
    said = set(re.search('metric="([A-Za-z_]+)"', lab).group(1) for lab, v in s['airgap_gpu_metric_unavailable'])
    assert {'DCGM_FI_DEV_GPU_TEMP', 'airgap_gpu_clock_throttle_reason'} <= said and 'DCGM_FI_DEV_FB_USED' not in said


def test_export_without_a_library(tmp_path):
    _gpu_health.main([str(tmp_path), '--library', str(tmp_path / 'nope.so'), '--no-xid'])
    s = _samples((tmp_path / 'airgap_gpu.prom').read_text())
    assert s['airgap_gpu_exporter_up'] == [('{nvml_state="absent"}', 0.0)]


def test_ctypes_struct_sizes():
    assert ctypes.sizeof(_nvml.Utilization) == 8


def test_metric_field_helpers():
    g = {'utilization': {'gpu': 7}, 'power_mw': 1500, 'memory_used': 3 * MIB + 5, 'remapped_rows': None}
    assert _gpu_health._nested('utilization', 'gpu')(g) == 7
    assert _gpu_health._nested('remapped_rows', 'pending')(g) is None  # a sub-dict NVML did not answer
    assert _gpu_health._nested('utilization', 'memory')({}) is None
    assert _gpu_health._watts('power_mw')(g) == 1.5
    assert _gpu_health._watts('power_limit_mw')(g) is None
    assert _gpu_health._mib('memory_used')(g) == 3
    assert _gpu_health._mib('memory_free')(g) is None
