"""The airgap.vllm Grafana dashboard, built with grafanalib (pinned in tests/requirements-ci.txt).

Connected side only: tests/observability/build_assets.py writes roles/vllm_observe/files/grafana/airgap-vllm.json
from build(); the bundle carries that JSON, targets never run this. One dashboard for one host and the fleet:
the `host` variable (multi-value, All = the fleet). Every expression is checked by
tests/observability/test_dashboard.py (parses in promtool, names only metrics vLLM 0.27.1 or our GPU exporter
write, or our recording rules).
"""

import json

from grafanalib.core import GridPos, RowPanel, Stat, Table, Target, Template, Templating, Time, TimeSeries, Dashboard
from grafanalib._gen import DashboardEncoder

DS = '${datasource}'
HOST = 'host=~"$host"'
UID = 'airgap-vllm'


def _targets(*exprs):
    return [Target(expr=expr, legendFormat=legend, refId=chr(ord('A') + i)) for i, (expr, legend) in enumerate(exprs)]


def _ts(title, exprs, unit='', x=0, y=0, w=8, h=8, description=None):
    return TimeSeries(
        title=title,
        dataSource=DS,
        targets=_targets(*exprs),
        unit=unit,
        gridPos=GridPos(h=h, w=w, x=x, y=y),
        description=description,
    )


def _row(title, y):
    return RowPanel(title=title, gridPos=GridPos(h=1, w=24, x=0, y=y))


def panels():
    who = '{{host}}/{{service}}'
    gpu = '{{host}} GPU {{gpu}}'
    p = [
        _row('Engine', 0),
        Stat(
            title='Engines up',
            dataSource=DS,
            gridPos=GridPos(h=4, w=4, x=0, y=1),
            targets=_targets(('sum(up{job="vllm",%s})' % HOST, 'up')),
            reduceCalc='lastNotNull',
        ),
        Stat(
            title='Engine restarts (24h)',
            dataSource=DS,
            gridPos=GridPos(h=4, w=4, x=4, y=1),
            targets=_targets(('sum(changes(process_start_time_seconds{job="vllm",%s}[24h]))' % HOST, 'restarts')),
            reduceCalc='lastNotNull',
        ),
        Stat(
            title='GPUs seen by NVML',
            dataSource=DS,
            gridPos=GridPos(h=4, w=4, x=8, y=1),
            targets=_targets(('sum(airgap_gpu_count{%s})' % HOST, 'GPUs')),
            reduceCalc='lastNotNull',
        ),
        Table(
            title='Engine configuration (vllm:cache_config_info)',
            dataSource=DS,
            gridPos=GridPos(h=4, w=12, x=12, y=1),
            targets=[
                Target(
                    expr='max by (host, service, model_name, block_size, cache_dtype, num_gpu_blocks, '
                    'gpu_memory_utilization, enable_prefix_caching) (vllm:cache_config_info{%s})' % HOST,
                    format='table',
                    instant=True,
                    refId='A',
                )
            ],
        ),
        _ts(
            'Requests running / waiting',
            [
                ('airgap_vllm:num_requests_running:max{%s}' % HOST, 'running ' + who),
                ('airgap_vllm:num_requests_waiting:max{%s}' % HOST, 'waiting ' + who),
            ],
            x=0,
            y=5,
        ),
        _ts('Request rate', [('airgap_vllm:request_success:rate5m{%s}' % HOST, who)], unit='reqps', x=8, y=5),
        _ts(
            'Token throughput',
            [
                ('airgap_vllm:prompt_tokens:rate5m{%s}' % HOST, 'prompt ' + who),
                ('airgap_vllm:generation_tokens:rate5m{%s}' % HOST, 'generated ' + who),
            ],
            unit='short',
            x=16,
            y=5,
        ),
        _row('Latency (p95 against the load-check baseline)', 13),
        _ts(
            'Time to first token',
            [
                ('airgap_vllm:time_to_first_token_seconds:p50_5m{%s}' % HOST, 'p50 ' + who),
                ('airgap_vllm:time_to_first_token_seconds:p95_5m{%s}' % HOST, 'p95 ' + who),
                ('airgap_vllm:time_to_first_token_seconds:p99_5m{%s}' % HOST, 'p99 ' + who),
            ],
            unit='s',
            x=0,
            y=14,
        ),
        _ts(
            'Time per output token',
            [
                ('airgap_vllm:request_time_per_output_token_seconds:p50_5m{%s}' % HOST, 'p50 ' + who),
                ('airgap_vllm:request_time_per_output_token_seconds:p95_5m{%s}' % HOST, 'p95 ' + who),
                ('airgap_vllm:inter_token_latency_seconds:p95_5m{%s}' % HOST, 'ITL p95 ' + who),
            ],
            unit='s',
            x=8,
            y=14,
        ),
        _ts(
            'Queue time and end-to-end',
            [
                ('airgap_vllm:request_queue_time_seconds:p95_5m{%s}' % HOST, 'queue p95 ' + who),
                ('airgap_vllm:e2e_request_latency_seconds:p95_5m{%s}' % HOST, 'e2e p95 ' + who),
            ],
            unit='s',
            x=16,
            y=14,
        ),
        _row('KV cache and speculative decoding', 22),
        _ts('KV cache usage', [('airgap_vllm:kv_cache_usage:ratio{%s}' % HOST, who)], unit='percentunit', x=0, y=23),
        _ts('Preemptions', [('airgap_vllm:num_preemptions:rate5m{%s}' % HOST, who)], unit='ops', x=6, y=23, w=6),
        _ts(
            'Prefix cache hit rate',
            [('airgap_vllm:prefix_cache_hit:ratio5m{%s}' % HOST, who)],
            unit='percentunit',
            x=12,
            y=23,
            w=6,
        ),
        _ts(
            'MTP / draft acceptance',
            [('airgap_vllm:spec_decode_acceptance:ratio5m{%s}' % HOST, who)],
            unit='percentunit',
            x=18,
            y=23,
            w=6,
        ),
        _row('GPU (NVML textfile exporter or DCGM exporter)', 31),
        _ts('Temperature', [('DCGM_FI_DEV_GPU_TEMP{%s}' % HOST, gpu)], unit='celsius', x=0, y=32, w=6),
        _ts('Power', [('DCGM_FI_DEV_POWER_USAGE{%s}' % HOST, gpu)], unit='watt', x=6, y=32, w=6),
        _ts('SM clock', [('DCGM_FI_DEV_SM_CLOCK{%s}' % HOST, gpu)], unit='MHz', x=12, y=32, w=6),
        _ts('Utilization', [('DCGM_FI_DEV_GPU_UTIL{%s}' % HOST, gpu)], unit='percent', x=18, y=32, w=6),
        _ts(
            'Memory used (plan: gpu_memory_utilization)',
            [('airgap_vllm:gpu_fb_used:ratio{%s}' % HOST, gpu)],
            unit='percentunit',
            x=0,
            y=40,
            w=8,
        ),
        _ts(
            'Throttle reasons active',
            [('airgap_gpu_clock_throttle_reason{%s} == 1' % HOST, gpu + ' {{reason}}')],
            x=8,
            y=40,
            w=8,
        ),
        _ts(
            'XID, ECC and pending resets',
            [
                ('DCGM_FI_DEV_XID_ERRORS{%s}' % HOST, 'last XID ' + gpu),
                ('increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{%s}[1h])' % HOST, 'DBE/h ' + gpu),
                # pages on cards before Ampere, rows from Ampere on (an H200 answers only the rows)
                ('DCGM_FI_DEV_RETIRED_PENDING{%s}' % HOST, 'retire pending ' + gpu),
                ('airgap_gpu_row_remap_pending{%s}' % HOST, 'row remap pending ' + gpu),
            ],
            x=16,
            y=40,
            w=8,
        ),
    ]
    return p


def build():
    dashboard = Dashboard(
        title='airgap.vllm - engines and GPUs',
        uid=UID,
        tags=['airgap-vllm', 'vllm'],
        timezone='browser',
        time=Time('now-6h', 'now'),
        refresh='30s',
        panels=panels(),
        templating=Templating(
            list=[
                Template(name='datasource', label='Prometheus', type='datasource', query='prometheus'),
                Template(
                    name='host',
                    label='Host',
                    dataSource=DS,
                    query='label_values(vllm:num_requests_running, host)',
                    includeAll=True,
                    multi=True,
                    allValue='.*',
                    default='All',
                ),
            ]
        ),
    ).auto_panel_ids()
    data = json.loads(json.dumps(dashboard.to_json_data(), cls=DashboardEncoder))
    for variable in data['templating']['list']:
        if variable['name'] == 'host':  # Grafana's own spelling of "All" selected
            variable['current'] = {'selected': True, 'text': ['All'], 'value': ['$__all']}
    return data


def expressions(data):
    """Every PromQL expression of the dashboard (panel targets and query variables)."""
    out = []
    for panel in data.get('panels', []):
        for target in panel.get('targets', []) or []:
            if target.get('expr'):
                out.append(target['expr'])
    return out
