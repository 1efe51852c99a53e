"""_observe: thresholds from the plan and the load check, per-site rules, file_sd targets (promtool runs the rules
themselves in tests/observability)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.observe import _observe


def _alerts(doc, group=None):
    return dict(
        (r['alert'], r) for g in doc['groups'] if group in (None, g['name']) for r in g['rules'] if 'alert' in r
    )


def test_static_set_has_every_alert_once():
    doc = _observe.rules()
    names = [r['alert'] for g in doc['groups'] for r in g['rules'] if 'alert' in r]
    assert len(names) == len(set(names))
    assert {
        'VllmEngineDown',
        'VllmEngineRestarted',
        'VllmKvCacheNearlyFull',
        'VllmPreempting',
        'VllmQueueGrowing',
        'VllmQueueTimeHigh',
        'VllmTtftOverBaseline',
        'GpuTemperatureHigh',
        'GpuMemoryOutOfPlan',
        'GpuXidError',
        'GpuXidCritical',
        'GpuThrottled',
        'GpuEccUncorrectable',
        'GpuResetPending',
        'GpuExporterDown',
        'GpuExporterStale',
    } == set(names)
    plan = _alerts(doc, 'airgap-vllm.plan')
    assert plan['VllmQueueGrowing']['expr'] == 'airgap_vllm:num_requests_waiting:max > 256'
    assert plan['VllmTtftOverBaseline']['expr'] == 'airgap_vllm:time_to_first_token_seconds:p95_5m > 5'
    assert plan['GpuMemoryOutOfPlan']['expr'] == 'airgap_vllm:gpu_fb_used:ratio > 0.97'


@pytest.mark.parametrize(
    'plan,loadcheck,expected',
    [
        (
            {'argv': ['--model', '/m', '--max-num-seqs', '48', '--gpu-memory-utilization', '0.85']},
            {'figures': {'p95_ttft_ms': 812.5}},
            (48, 812.5, 0.85),
        ),
        ({'argv': ['--max-num-seqs=12', '--gpu-memory-utilization=0.9']}, {'p95_ttft_ms': 300}, (12, 300.0, 0.9)),
        ({'argv': ['--model', '/m']}, {'figures': {'p95_ttft_ms': None}}, (None, None, None)),
        (None, None, (None, None, None)),
        ({'argv': ['--gpu-memory-utilization', 'lots']}, {'figures': {'p95_ttft_ms': 0}}, (None, None, None)),
    ],
)
def test_service_thresholds_from_plan_and_load_check(plan, loadcheck, expected):
    t = _observe.service_thresholds('gpu1', 'vllm', plan, loadcheck)
    assert (t['max_num_seqs'], t['ttft_p95_ms'], t['gpu_memory_utilization']) == expected
    assert (t['host'], t['service']) == ('gpu1', 'vllm')


def test_site_rules_one_set_per_service():
    services = [
        {'host': 'gpu1', 'service': 'vllm', 'max_num_seqs': 64, 'ttft_p95_ms': 800, 'gpu_memory_utilization': 0.45},
        {
            'host': 'gpu1',
            'service': 'vllm-b',
            'max_num_seqs': None,
            'ttft_p95_ms': None,
            'gpu_memory_utilization': 0.45,
        },
        {'host': 'gpu"2', 'service': 'vllm'},
    ]
    doc = _observe.rules({'ttft_factor': 3, 'queue_factor': 0.5}, services)
    site = [g for g in doc['groups'] if g['name'] == 'airgap-vllm.plan'][0]['rules']
    exprs = [r['expr'] for r in site]
    assert 'airgap_vllm:num_requests_waiting:max{host="gpu1",service="vllm"} > 32' in exprs
    assert 'airgap_vllm:num_requests_waiting:max{host="gpu1",service="vllm-b"} > 128' in exprs
    assert 'airgap_vllm:time_to_first_token_seconds:p95_5m{host="gpu1",service="vllm"} > 2.4' in exprs
    assert 'airgap_vllm:time_to_first_token_seconds:p95_5m{host="gpu1",service="vllm-b"} > 5' in exprs
    assert 'airgap_vllm:num_requests_waiting:max{host="gpu\\"2",service="vllm"} > 128' in exprs
    # the host's GPUs once, at the plan's share + margin
    mem = [e for e in exprs if 'gpu_fb_used' in e]
    assert mem == [
        'airgap_vllm:gpu_fb_used:ratio{host="gpu1"} > 0.5',
        'airgap_vllm:gpu_fb_used:ratio{host="gpu\\"2"} > 0.97',
    ]
    assert [g['name'] for g in _observe.plan_rules(services=services[:1], group='airgap-vllm.plan.gpu1')['groups']] == [
        'airgap-vllm.plan.gpu1'
    ]
    ttft = [r for r in site if r['alert'] == 'VllmTtftOverBaseline'][0]
    assert "the load check's p95 800ms x 3" in ttft['annotations']['description']


@pytest.mark.parametrize(
    'overrides,message',
    [
        ({'nope': 1}, 'unknown threshold nope'),
        ({'gpu_temp_c': 'hot'}, 'is not a number'),
        ({'kv_usage_ratio': -1}, 'is negative'),
        ({'kv_for': '5 minutes'}, 'duration like 5m'),
        ({'vllm_job': ''}, 'job name'),
    ],
)
def test_thresholds_refused(overrides, message):
    with pytest.raises(_observe.ObserveError, match=message):
        _observe.rules(overrides)


def test_thresholds_override_and_none_keeps_default():
    doc = _observe.rules({'gpu_temp_c': 80, 'kv_usage_ratio': None, 'vllm_job': 'engines', 'kv_for': '2m'})
    alerts = _alerts(doc)
    assert alerts['GpuTemperatureHigh']['expr'] == 'DCGM_FI_DEV_GPU_TEMP > 80'
    assert alerts['VllmKvCacheNearlyFull']['expr'] == 'airgap_vllm:kv_cache_usage:ratio > 0.95'
    assert alerts['VllmKvCacheNearlyFull']['for'] == '2m'
    assert alerts['VllmEngineDown']['expr'] == 'up{job="engines"} == 0'


@pytest.mark.parametrize('services', [[{'host': 'a'}], [{'host': 'a', 'service': 's'}, {'host': 'a', 'service': 's'}]])
def test_site_services_refused(services):
    with pytest.raises(_observe.ObserveError):
        _observe.rules(services=services)


def test_scrape_targets():
    t = _observe.scrape_targets(
        'gpu1', '10.20.0.15', 9100, [{'name': 'vllm', 'metrics_port': 9443}, {'name': 'vllm-b', 'metrics_port': 0}]
    )
    assert t == {
        'node': [{'targets': ['10.20.0.15:9100'], 'labels': {'host': 'gpu1'}}],
        'vllm': [{'targets': ['10.20.0.15:9443'], 'labels': {'host': 'gpu1', 'service': 'vllm'}}],
    }
    assert _observe.scrape_targets('gpu1', 'fd00::15', 0, [{'name': 'v', 'metrics_port': '9443'}]) == {
        'node': [],
        'vllm': [{'targets': ['[fd00::15]:9443'], 'labels': {'host': 'gpu1', 'service': 'v'}}],
    }
    with pytest.raises(_observe.ObserveError, match='empty'):
        _observe.scrape_targets('gpu1', '', 9100)


SERVICES = [{'name': 'vllm', 'port': 8000, 'settings': {}}, {'name': 'vllm-b', 'port': 8001, 'settings': {}}]
INSTANCES = {
    'plan': {
        'vllm': {'facts': {'vllm_plan_result': {'argv': ['--max-num-seqs', '32', '--gpu-memory-utilization', '0.45']}}}
    }
}


def test_role_outputs_from_plan_load_check_and_front_door():
    out = _observe.role_outputs(
        SERVICES,
        'gpu1',
        '10.0.0.5',
        9100,
        INSTANCES,
        {'vllm': {'figures': {'p95_ttft_ms': 500}}, 'vllm-b': None},
        front={'vllm_front_metrics_port': 9443},
        overrides=[{'name': 'vllm-b', 'max_num_seqs': 8}],
    )
    assert out['services'] == [
        {
            'host': 'gpu1',
            'service': 'vllm',
            'max_num_seqs': 32,
            'ttft_p95_ms': 500.0,
            'gpu_memory_utilization': 0.45,
            'metrics_port': 9443,
        },
        {
            'host': 'gpu1',
            'service': 'vllm-b',
            'max_num_seqs': 8,
            'ttft_p95_ms': None,
            'gpu_memory_utilization': None,
            'metrics_port': 9444,
        },
    ]
    assert [t['targets'] for t in out['targets']['vllm']] == [['10.0.0.5:9443'], ['10.0.0.5:9444']]
    group = out['plan_rules']['groups'][0]
    assert group['name'] == 'airgap-vllm.plan.gpu1'
    assert 'airgap_vllm:num_requests_waiting:max{host="gpu1",service="vllm"} > 32' in [
        r['expr'] for r in group['rules']
    ]


def test_role_outputs_without_front_door_or_records():
    out = _observe.role_outputs(SERVICES[:1], 'gpu1', '10.0.0.5', 9100, dcgm_port=9400)
    assert out['targets']['dcgm'] == [{'targets': ['10.0.0.5:9400'], 'labels': {'host': 'gpu1'}}]
    assert out['targets']['vllm'] == [] and out['services'][0]['max_num_seqs'] is None
    with pytest.raises(_observe.ObserveError, match='does not have: nope'):
        _observe.role_outputs(SERVICES, 'gpu1', '10.0.0.5', 9100, overrides=[{'name': 'nope'}])


def test_every_alert_names_what_it_reads():
    """The live check (tests/observability/live_check.py) proves a quiet alert can fire by the series it reads: every
    alert has them, derived (`<signal> <op> <number>`) or named in ALERT_SIGNALS; a compound alert without an entry
    fails here rather than being skipped there."""
    services = [{'host': 'gpu1', 'service': 'vllm', 'max_num_seqs': 8}]
    alerts = [r for g in _observe.rules(None, services)['groups'] for r in g['rules'] if 'alert' in r]
    missing = [r['alert'] for r in alerts if not _observe.signals(r['expr'], r['alert'])]
    assert missing == []
    assert _observe.signals('up{job="vllm"} == 0', 'VllmEngineDown') == ['up{job="vllm"}']
    assert _observe.signals('time() - x{job="node"} > 120') == ['time() - x{job="node"}']
    assert _observe.signals('sum(a) / sum(b) > -1') == ['sum(a) / sum(b)']
    assert _observe.signals('x{reason=~"a|b"} == 1') == ['x{reason=~"a|b"}']
    # a set operation is no single filter; a plain expression none at all
    assert _observe.signals('a == 1 or b == 1') is None and _observe.signals('rate(x[5m])') is None
    assert set(_observe.ALERT_SIGNALS) <= set(r['alert'] for r in alerts)


def test_role_outputs_base_rules_at_the_deployments_thresholds():
    out = _observe.role_outputs(
        SERVICES[:1], 'gpu1', '10.0.0.5', 9100, thresholds={'engine_down_for': '10s', 'gpu_temp_c': 80}
    )
    alerts = dict((r['alert'], r) for g in out['base_rules']['groups'] for r in g['rules'] if 'alert' in r)
    assert (
        alerts['VllmEngineDown']['for'] == '10s' and alerts['GpuTemperatureHigh']['expr'] == 'DCGM_FI_DEV_GPU_TEMP > 80'
    )
    assert _observe.role_outputs(SERVICES[:1], 'gpu1', '10.0.0.5', 9100)['base_rules'] == _observe.base_rules()
