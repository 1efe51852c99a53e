# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus rules and scrape targets for day 2 (issue 31): one home for every threshold.

Rule files as mappings (Prometheus's rule-file format), checked by tests/observability (promtool):
- base_rules(): recording rules and the alerts with the same limits everywhere (files/prometheus/airgap-vllm.rules.yml);
- plan_rules(): the alerts whose limits come from the deployment's plan and load-check baseline - without services
  at the default limits (files/prometheus/airgap-vllm-plan-defaults.rules.yml), with services (each {host, service,
  max_num_seqs, ttft_p95_ms, gpu_memory_utilization}) one rule per service, selected by the file_sd labels host
  and service (the vllm_observe role writes one such file per host).

Metric names: vLLM 0.27.1's (vllm/v1/metrics/loggers.py; counters exposed with _total) and the GPU
exporter's (_gpu_health.METRIC_NAMES, DCGM names).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.airgap.vllm.plugins.module_utils.front._front_settings import front_inputs
from ansible_collections.airgap.vllm.plugins.module_utils.front._front_settings import max_num_seqs as argv_max_num_seqs

PREFIX = 'airgap_vllm'
# Labels every recorded vLLM figure keeps: Prometheus's own, ours from the file_sd targets, and vLLM's.
BY = 'job, instance, host, service, model_name'

DEFAULTS = {
    'vllm_job': 'vllm',  # scrape job of the engines' /metrics (through the front door)
    'node_job': 'node',  # scrape job of node_exporter (the GPU textfile metrics)
    'max_num_seqs': 256,  # vLLM 0.27.1's default on cards under 70 GiB
    'queue_factor': 1.0,  # waiting requests over max_num_seqs x this: the queue grows
    'queue_time_p95_s': 5.0,
    'ttft_p95_s': 5.0,  # without a load-check baseline
    'ttft_factor': 2.0,  # TTFT p95 over the load check's p95 x this
    'kv_usage_ratio': 0.95,
    'kv_for': '5m',
    'preemptions_per_s': 0.0,
    'preemptions_for': '10m',
    'engine_down_for': '1m',
    'gpu_temp_c': 85,
    'gpu_memory_utilization': 0.92,  # vLLM's default --gpu-memory-utilization
    'gpu_memory_margin': 0.05,  # used memory over the planned fraction + this: something else is on the GPU
    'gpu_exporter_stale_s': 120,
}
# XIDs after which NVIDIA's guide asks for a GPU reset or a node drain (DBE, fallen off the bus, contained and
# uncontained ECC errors, NVLink errors, row-remapping failure): these stay firing until the host reboots.
CRITICAL_XIDS = (48, 64, 74, 79, 92, 94, 95, 119, 120)
THROTTLE_BAD = ('hw_slowdown', 'hw_thermal_slowdown', 'sw_thermal_slowdown', 'hw_power_brake_slowdown')


# What a quiet alert reads: the series that must exist for it to be able to fire (the live check,
# tests/observability/live_check.py, evaluates these when the alert itself returns nothing). An alert
# `<signal> <op> <number>` reads its left side (signals() derives it); the others are named here. 'A or B': either is
# enough. XIDs: a count per XID exists only once one was logged; DCGM_FI_DEV_XID_ERRORS (0: none since boot) says
# the exporter read the kernel log. Pending resets: retired pages (cards before Ampere) or row remapping (Ampere on).
ALERT_SIGNALS = {
    'GpuXidError': ('airgap_gpu_xid_errors_total or DCGM_FI_DEV_XID_ERRORS',),
    'GpuXidCritical': ('airgap_gpu_xid_errors_total or DCGM_FI_DEV_XID_ERRORS',),
    'GpuResetPending': (
        'DCGM_FI_DEV_RETIRED_PENDING or airgap_gpu_row_remap_pending or DCGM_FI_DEV_ROW_REMAP_FAILURE',
    ),
}
_FILTER = re.compile(r'^(?P<signal>.+?)\s*(?:==|!=|>=|<=|>|<)\s*-?[0-9.]+(?:[eE][-+]?[0-9]+)?$', re.S)


class ObserveError(ValueError):
    pass


def _q(value):
    """A label value inside double quotes."""
    return '"%s"' % str(value).replace('\\', '\\\\').replace('"', '\\"')


def _num(value):
    return ('%.6f' % float(value)).rstrip('0').rstrip('.')


def _quantile(q, metric, window='5m'):
    return 'histogram_quantile(%s, sum by (%s, le) (rate(%s_bucket[%s])))' % (q, BY, metric, window)


def recording_rules():
    r = []

    def rec(name, expr):
        r.append({'record': '%s:%s' % (PREFIX, name), 'expr': expr})

    rec('request_success:rate5m', 'sum by (%s) (rate(vllm:request_success_total[5m]))' % BY)
    rec('prompt_tokens:rate5m', 'sum by (%s) (rate(vllm:prompt_tokens_total[5m]))' % BY)
    rec('generation_tokens:rate5m', 'sum by (%s) (rate(vllm:generation_tokens_total[5m]))' % BY)
    for q in ('0.5', '0.95', '0.99'):
        tag = 'p%d' % int(float(q) * 100)
        rec('time_to_first_token_seconds:%s_5m' % tag, _quantile(q, 'vllm:time_to_first_token_seconds'))
        rec(
            'request_time_per_output_token_seconds:%s_5m' % tag,
            _quantile(q, 'vllm:request_time_per_output_token_seconds'),
        )
    rec('inter_token_latency_seconds:p95_5m', _quantile('0.95', 'vllm:inter_token_latency_seconds'))
    rec('e2e_request_latency_seconds:p95_5m', _quantile('0.95', 'vllm:e2e_request_latency_seconds'))
    rec('request_queue_time_seconds:p95_5m', _quantile('0.95', 'vllm:request_queue_time_seconds'))
    rec('kv_cache_usage:ratio', 'max by (%s) (vllm:kv_cache_usage_perc)' % BY)
    rec('num_preemptions:rate5m', 'sum by (%s) (rate(vllm:num_preemptions_total[5m]))' % BY)
    rec('num_requests_waiting:max', 'max by (%s) (vllm:num_requests_waiting)' % BY)
    rec('num_requests_running:max', 'max by (%s) (vllm:num_requests_running)' % BY)
    # 0/0 (no queries in the window) gives no sample rather than a false 0 % hit rate
    rec(
        'prefix_cache_hit:ratio5m',
        'sum by (%s) (rate(vllm:prefix_cache_hits_total[5m])) / '
        'sum by (%s) (rate(vllm:prefix_cache_queries_total[5m])) > -1' % (BY, BY),
    )
    rec(
        'spec_decode_acceptance:ratio5m',
        'sum by (%s) (rate(vllm:spec_decode_num_accepted_tokens_total[5m])) / '
        'sum by (%s) (rate(vllm:spec_decode_num_draft_tokens_total[5m])) > -1' % (BY, BY),
    )
    rec('gpu_fb_used:ratio', 'DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE)')
    return r


def _alert(name, expr, for_, severity, summary, description):
    rule = {'alert': name, 'expr': expr}
    if for_:
        rule['for'] = for_
    rule['labels'] = {'severity': severity}
    rule['annotations'] = {'summary': summary, 'description': description}
    return rule


def _selector(service):
    if not service:
        return ''
    return '{host=%s,service=%s}' % (_q(service['host']), _q(service['service']))


def service_alerts(t, service=None):
    """The alerts whose limits come from the plan and the load check: one set per service (or one without a
    selector for the static default set)."""
    sel = _selector(service)
    who = '{{ $labels.host }}/{{ $labels.service }} ({{ $labels.model_name }})'
    queue = (
        float(service.get('max_num_seqs') or t['max_num_seqs']) * t['queue_factor']
        if service
        else t['max_num_seqs'] * t['queue_factor']
    )
    ttft = t['ttft_p95_s']
    source = 'the default %ss' % _num(ttft)
    if service and service.get('ttft_p95_ms'):
        ttft = float(service['ttft_p95_ms']) / 1000.0 * t['ttft_factor']
        source = "the load check's p95 %sms x %s" % (_num(service['ttft_p95_ms']), _num(t['ttft_factor']))
    util = float((service or {}).get('gpu_memory_utilization') or t['gpu_memory_utilization'])
    mem = min(util + t['gpu_memory_margin'], 0.999)
    node_sel = '{host=%s}' % _q(service['host']) if service else ''
    return [
        _alert(
            'VllmQueueGrowing',
            '%s:num_requests_waiting:max%s > %s' % (PREFIX, sel, _num(queue)),
            '5m',
            'warning',
            'vLLM queue longer than the planned batch on %s' % who,
            '{{ $value }} requests waiting for 5 minutes; the plan runs at most %s at once '
            '(max_num_seqs x %s).' % (_num(queue / t['queue_factor']), _num(t['queue_factor'])),
        ),
        _alert(
            'VllmTtftOverBaseline',
            '%s:time_to_first_token_seconds:p95_5m%s > %s' % (PREFIX, sel, _num(ttft)),
            '10m',
            'warning',
            'Time to first token p95 over the baseline on %s' % who,
            'TTFT p95 {{ $value | humanizeDuration }} for 10 minutes; the limit is %s.' % source,
        ),
        _alert(
            'GpuMemoryOutOfPlan',
            '%s:gpu_fb_used:ratio%s > %s' % (PREFIX, node_sel, _num(mem)),
            '10m',
            'warning',
            'GPU {{ $labels.gpu }} memory over the planned share on {{ $labels.instance }}',
            'Used {{ $value | humanizePercentage }} of the card; the plan gives vLLM %s (+ %s margin): '
            'another process holds GPU memory.' % (_num(util), _num(t['gpu_memory_margin'])),
        ),
    ]


def alert_rules(t):
    vjob, njob = _q(t['vllm_job']), _q(t['node_job'])
    who = '{{ $labels.host }}/{{ $labels.service }} ({{ $labels.model_name }})'
    gpu = 'GPU {{ $labels.gpu }} ({{ $labels.modelName }}) on {{ $labels.instance }}'
    critical = '|'.join(str(x) for x in CRITICAL_XIDS)
    return [
        _alert(
            'VllmEngineDown',
            'up{job=%s} == 0' % vjob,
            t['engine_down_for'],
            'critical',
            'vLLM engine not answering on {{ $labels.instance }}',
            "Prometheus cannot scrape /metrics of {{ $labels.host }}/{{ $labels.service }}: the engine or the "
            "front door is down (journalctl -u the service's unit).",
        ),
        _alert(
            'VllmEngineRestarted',
            'changes(process_start_time_seconds{job=%s}[15m]) > 0' % vjob,
            '',
            'warning',
            'vLLM engine restarted on {{ $labels.instance }}',
            'The engine process started again {{ $value }} time(s) in 15 minutes.',
        ),
        _alert(
            'VllmKvCacheNearlyFull',
            '%s:kv_cache_usage:ratio > %s' % (PREFIX, _num(t['kv_usage_ratio'])),
            t['kv_for'],
            'warning',
            'KV cache nearly full on %s' % who,
            'KV cache usage {{ $value | humanizePercentage }} for %s: new requests wait or preempt others.'
            % t['kv_for'],
        ),
        _alert(
            'VllmPreempting',
            '%s:num_preemptions:rate5m > %s' % (PREFIX, _num(t['preemptions_per_s'])),
            t['preemptions_for'],
            'warning',
            'vLLM is preempting requests on %s' % who,
            '{{ $value }} preemptions/s for %s: the KV cache is too small for the load.' % t['preemptions_for'],
        ),
        _alert(
            'VllmQueueTimeHigh',
            '%s:request_queue_time_seconds:p95_5m > %s' % (PREFIX, _num(t['queue_time_p95_s'])),
            '10m',
            'warning',
            'Requests queue too long on %s' % who,
            'Queue time p95 {{ $value | humanizeDuration }} for 10 minutes.',
        ),
        _alert(
            'GpuExporterDown',
            'airgap_gpu_exporter_up{job=%s} == 0' % njob,
            '5m',
            'warning',
            'NVML does not answer on {{ $labels.instance }}',
            'The GPU exporter reads nvml_state={{ $labels.nvml_state }} (driver not loaded, version mismatch).',
        ),
        _alert(
            'GpuExporterStale',
            'time() - airgap_gpu_exporter_last_run_timestamp_seconds{job=%s} > %s'
            % (njob, _num(t['gpu_exporter_stale_s'])),
            '5m',
            'warning',
            'GPU metrics stale on {{ $labels.instance }}',
            'airgap_gpu.prom last written {{ $value | humanizeDuration }} ago: check airgap-gpu-exporter.timer.',
        ),
        _alert(
            'GpuTemperatureHigh',
            'DCGM_FI_DEV_GPU_TEMP > %s' % _num(t['gpu_temp_c']),
            '5m',
            'warning',
            '%s is hot' % gpu,
            '{{ $value }} C for 5 minutes.',
        ),
        _alert(
            'GpuThrottled',
            'airgap_gpu_clock_throttle_reason{reason=~"%s"} == 1' % '|'.join(THROTTLE_BAD),
            '5m',
            'warning',
            '%s throttled: {{ $labels.reason }}' % gpu,
            'Clocks held down by {{ $labels.reason }} for 5 minutes (cooling or power supply).',
        ),
        # a count that grew, or an XID seen for the first time (a new series) on a host whose exporter was
        # already reporting 15 minutes ago (so a Prometheus restart does not re-announce old XIDs)
        _alert(
            'GpuXidError',
            'increase(airgap_gpu_xid_errors_total[15m]) > 0 or ((airgap_gpu_xid_errors_total '
            'unless airgap_gpu_xid_errors_total offset 15m) and on (instance) '
            '(airgap_gpu_exporter_up offset 15m))',
            '',
            'warning',
            '%s: XID {{ $labels.xid }}' % gpu,
            'The driver logged XID {{ $labels.xid }} (dmesg | grep Xid).',
        ),
        _alert(
            'GpuXidCritical',
            'airgap_gpu_xid_errors_total{xid=~"%s"} > 0' % critical,
            '',
            'critical',
            '%s needs a reset: XID {{ $labels.xid }}' % gpu,
            'XID {{ $labels.xid }} since boot: drain the host and reset the GPU or reboot.',
        ),
        _alert(
            'GpuEccUncorrectable',
            'increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[15m]) > 0',
            '',
            'critical',
            '%s: uncorrectable ECC errors' % gpu,
            '{{ $value }} double-bit errors in 15 minutes.',
        ),
        _alert(
            'GpuResetPending',
            'DCGM_FI_DEV_RETIRED_PENDING == 1 or airgap_gpu_row_remap_pending == 1 '
            'or DCGM_FI_DEV_ROW_REMAP_FAILURE == 1',
            '',
            'warning',
            '%s needs a reset' % gpu,
            'Pages are pending retirement, rows pending remapping, or remapping failed: reset the GPU '
            'when it can be drained.',
        ),
    ]


def _top_level(expr):
    """expr has no set operator (or, and, unless) outside brackets and strings."""
    depth = 0
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    flat = []
    for ch in text:
        if ch in '([{':
            depth += 1
        elif ch in ')]}':
            depth -= 1
        flat.append(ch if depth == 0 else ' ')
    return not re.search(r'\b(or|and|unless)\b', ''.join(flat))


def signals(expr, name=None):
    """The series an alert (name) or a filtering expression reads to decide: ALERT_SIGNALS[name], else the left
    side of `<signal> <op> <number>`; None when the expression is no such filter."""
    if name in ALERT_SIGNALS:
        return list(ALERT_SIGNALS[name])
    m = _FILTER.match(expr.strip())
    if m and _top_level(m.group('signal')) and _top_level(expr):
        return [m.group('signal').strip()]
    return None


def thresholds(overrides=None):
    t = dict(DEFAULTS)
    for key, value in (overrides or {}).items():
        if key not in DEFAULTS:
            raise ObserveError('unknown threshold %s (known: %s)' % (key, ', '.join(sorted(DEFAULTS))))
        if value is None:
            continue
        if isinstance(DEFAULTS[key], str):
            if not isinstance(value, str) or not value or (key.endswith('_for') and not re.match(r'^\d+[smh]$', value)):
                wants = 'duration like 5m' if key.endswith('_for') else 'job name'
                raise ObserveError('%s: %r is not a %s' % (key, value, wants))
        else:
            try:
                value = float(value)
            except (TypeError, ValueError):
                raise ObserveError('%s: %r is not a number' % (key, value))
            if value < 0:
                raise ObserveError('%s: %r is negative' % (key, value))
        t[key] = value
    return t


def service_thresholds(host, service, plan=None, loadcheck=None):
    """One service's inputs from its plan (vllm_plan_result: argv, gpu_memory_utilization) and its load check
    (loadcheck.json: figures.p95_ttft_ms); what is unknown stays None (the defaults apply)."""
    plan = plan or {}
    figures = (loadcheck or {}).get('figures') or loadcheck or {}
    seqs = argv_max_num_seqs(plan.get('argv')) if plan.get('argv') else None
    util = None
    argv = plan.get('argv') or []
    for i, arg in enumerate(argv):
        if arg == '--gpu-memory-utilization' and i + 1 < len(argv):
            util = argv[i + 1]
        elif str(arg).startswith('--gpu-memory-utilization='):
            util = str(arg).split('=', 1)[1]
    try:
        util = float(util) if util is not None else None
    except ValueError:
        util = None
    ttft = figures.get('p95_ttft_ms')
    return {
        'host': host,
        'service': service,
        'max_num_seqs': seqs or None,
        'ttft_p95_ms': float(ttft) if isinstance(ttft, (int, float)) and ttft > 0 else None,
        'gpu_memory_utilization': util,
    }


def base_rules(overrides=None):
    """Recording rules and the alerts whose limits are the same everywhere (files/prometheus/airgap-vllm.rules.yml)."""
    t = thresholds(overrides)
    return {
        'groups': [
            {'name': 'airgap-vllm.records', 'rules': recording_rules()},
            {'name': 'airgap-vllm.alerts', 'rules': alert_rules(t)},
        ]
    }


def plan_rules(overrides=None, services=None, group='airgap-vllm.plan'):
    """The alerts whose limits come from the plan and the load check: without services one rule each at the default
    limits (files/prometheus/airgap-vllm-plan-defaults.rules.yml), else one per service (a host's file)."""
    t = thresholds(overrides)
    if not services:
        return {'groups': [{'name': group, 'rules': service_alerts(t)}]}
    site = []
    seen = set()
    for s in services:
        if not s.get('host') or not s.get('service'):
            raise ObserveError('each service needs host and service: %r' % (s,))
        key = (s['host'], s['service'])
        if key in seen:
            raise ObserveError('service %s/%s given twice' % key)
        seen.add(key)
        for rule in service_alerts(t, s):
            if rule['alert'] == 'GpuMemoryOutOfPlan' and any(
                r['alert'] == 'GpuMemoryOutOfPlan' and r['expr'] == rule['expr'] for r in site
            ):
                continue  # one per host (the services of a host share its GPUs)
            site.append(rule)
    return {'groups': [{'name': group, 'rules': site}]}


def rules(overrides=None, services=None):
    """Everything in one rule file: base_rules + plan_rules."""
    return {'groups': base_rules(overrides)['groups'] + plan_rules(overrides, services)['groups']}


def scrape_targets(host, address, node_port=9100, services=None):
    """file_sd target groups: {'node': [...], 'vllm': [...]}. services: [{name, metrics_port}] (the front door's
    metrics listeners; a port of 0 has none). Labels host/service are what the site rules select on."""
    if not address:
        raise ObserveError('the scrape address of %s is empty' % host)
    out = {'node': [], 'vllm': []}
    if node_port:
        out['node'].append({'targets': ['%s:%d' % (_hostport(address), int(node_port))], 'labels': {'host': host}})
    for s in services or []:
        port = int(s.get('metrics_port') or 0)
        if port:
            out['vllm'].append(
                {'targets': ['%s:%d' % (_hostport(address), port)], 'labels': {'host': host, 'service': s['name']}}
            )
    return out


def _hostport(address):
    return '[%s]' % address if ':' in address and not address.startswith('[') else address


def service_inputs(host, services, instances=None, loadchecks=None, front=None, overrides=None):
    """Each service's rule inputs and metrics port: [{host, service, max_num_seqs, ttft_p95_ms,
    gpu_memory_utilization, metrics_port}].

    services: the host's resolved services (airgap.vllm.service_instances: name, port, settings); instances: what
    stage_state read returns under 'instances' (the plan of each service); loadchecks: {service: loadcheck.json
    as a mapping, or None}; front: None when the front door is off, else the host's vllm_front_* per-service
    values (their metrics ports are _front_settings.front_inputs's, the one rule); overrides: vllm_observe_services
    ([{name, ...}]: what the operator sets wins)."""
    plans = (instances or {}).get('plan') or {}
    ports = {}
    if front is not None:
        for svc in front_inputs(services, front)['services']:
            ports[svc['name']] = svc['metrics_port']
    by_name = {}
    for o in overrides or []:
        if not isinstance(o, dict) or not o.get('name'):
            raise ObserveError('vllm_observe_services: each entry needs a name: %r' % (o,))
        by_name[o['name']] = o
    out = []
    for svc in services or []:
        name = svc.get('name')
        plan = ((plans.get(name) or {}).get('facts') or {}).get('vllm_plan_result')
        item = service_thresholds(host, name, plan, (loadchecks or {}).get(name))
        item['metrics_port'] = ports.get(name, 0)
        for key in ('max_num_seqs', 'ttft_p95_ms', 'gpu_memory_utilization', 'metrics_port'):
            if by_name.get(name, {}).get(key) not in (None, ''):
                item[key] = by_name[name][key]
        out.append(item)
    unknown = sorted(set(by_name) - set(s.get('name') for s in services or []))
    if unknown:
        raise ObserveError('vllm_observe_services names services the host does not have: %s' % ', '.join(unknown))
    return out


def role_outputs(
    services,
    host,
    address,
    node_port,
    instances=None,
    loadchecks=None,
    front=None,
    overrides=None,
    # The filter's keyword (this function is the filter); thresholds() is not called here.
    thresholds=None,  # pylint: disable=redefined-outer-name
    dcgm_port=0,
):
    """What the vllm_observe role writes on the controller (the filter airgap.vllm.vllm_observe_outputs): {services,
    base_rules (at thresholds: one file for the site), plan_rules (this host's), targets (node, vllm and, with NVIDIA's
    DCGM exporter on dcgm_port, dcgm)}."""
    dcgm_port = int(dcgm_port or 0)
    inputs = service_inputs(host, services, instances, loadchecks, front, overrides)
    targets = scrape_targets(
        host, address, node_port, [{'name': s['service'], 'metrics_port': s['metrics_port']} for s in inputs]
    )
    targets['dcgm'] = scrape_targets(host, address, dcgm_port)['node'] if dcgm_port else []
    return {
        'services': inputs,
        'base_rules': base_rules(thresholds),
        'plan_rules': plan_rules(thresholds, inputs, group='airgap-vllm.plan.%s' % host),
        'targets': targets,
    }
