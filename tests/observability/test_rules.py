"""The rules and the dashboard the bundle carries: promtool check/test, expressions parse, metric names exist.

promtool comes from Debian's `prometheus` package (.ci/setup installs it); without it these tests FAIL."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import build_assets  # noqa: E402

build_assets._collection_path()

from ansible_collections.airgap.vllm.plugins.module_utils.observe import _gpu_health, _observe  # noqa: E402
from promql import metric_names  # noqa: E402,F401 (test_prometheus imports it from here)

# Prometheus's own series and prometheus_client's process collector (served by the engine's /metrics)
OTHER = {'up', 'process_start_time_seconds'}


@pytest.fixture(scope='module')
def promtool():
    path = shutil.which('promtool')
    assert path, "promtool is missing: apt-get install prometheus (Debian's package; .ci/setup does it)"
    return path


def _run(argv, cwd=None):
    proc = subprocess.run(
        argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False
    )
    return proc.returncode, proc.stdout


def vllm_names():
    names = set()
    with open(os.path.join(HERE, 'fixtures', 'vllm-0.27.1-metrics.txt')) as f:
        for line in f:
            if line.startswith('#') or not line.strip():
                continue
            name, kind = line.split()
            names.update(
                {
                    'counter': [name + '_total'],
                    'gauge': [name],
                    'histogram': [name + '_bucket', name + '_sum', name + '_count'],
                }[kind]
            )
    return names


def recorded_names(doc):
    return {r['record'] for g in doc['groups'] for r in g['rules'] if 'record' in r}


def all_rule_exprs(doc):
    return [r['expr'] for g in doc['groups'] for r in g['rules']]


def static_rules():
    docs = []
    for path in (build_assets.RULES, build_assets.PLAN_RULES):
        with open(path) as f:
            docs.append(yaml.safe_load(f))
    return {'groups': [g for d in docs for g in d['groups']]}


def dashboard():
    with open(build_assets.DASHBOARD) as f:
        return json.load(f)


def test_committed_files_are_what_the_builders_make():
    """Edit _observe.py or dashboard.py, then run tests/observability/build_assets.py."""
    assert build_assets.main(['--check']) == 0


def test_static_rules_pass_promtool_check(promtool):
    rc, out = _run([promtool, 'check', 'rules', build_assets.RULES, build_assets.PLAN_RULES])
    assert rc == 0, out
    assert out.count('SUCCESS') == 2


def test_static_rules_unit_tests(promtool):
    rc, out = _run([promtool, 'test', 'rules', 'rules_test.yml'], cwd=HERE)
    assert rc == 0, out


def test_every_alert_has_a_promtool_test():
    with open(os.path.join(HERE, 'rules_test.yml')) as f:
        tested = set(re.findall(r'alertname: (\w+)', f.read()))
    alerts = {r['alert'] for g in static_rules()['groups'] for r in g['rules'] if 'alert' in r}
    assert alerts - tested == set()


def _known(doc):
    return vllm_names() | set(_gpu_health.METRIC_NAMES) | recorded_names(doc) | OTHER


def test_rules_name_only_metrics_that_exist():
    doc = static_rules()
    unknown = {}
    for expr in all_rule_exprs(doc):
        missing = metric_names(expr) - _known(doc)
        if missing:
            unknown[expr] = sorted(missing)
    assert unknown == {}


def test_dashboard_names_only_metrics_that_exist():
    import dashboard as builder

    doc = static_rules()
    exprs = builder.expressions(dashboard())
    assert len(exprs) >= 25
    unknown = dict((e, sorted(metric_names(e) - _known(doc))) for e in exprs if metric_names(e) - _known(doc))
    assert unknown == {}
    # the host variable's query reads a vLLM gauge too
    host = [t for t in dashboard()['templating']['list'] if t['name'] == 'host'][0]
    assert re.match(r'label_values\((vllm:\w+), host\)', host['query']).group(1) in vllm_names()


def test_metric_names_extraction():
    assert metric_names(
        'sum by (job, le) (rate(vllm:x_bucket{host=~"a|b"}[5m])) / on (instance) up offset 15m > bool 0.95'
    ) == {'vllm:x_bucket', 'up'}
    assert metric_names('time() - airgap_gpu_exporter_last_run_timestamp_seconds{job="node"} > 120') == {
        'airgap_gpu_exporter_last_run_timestamp_seconds'
    }


def test_every_dashboard_expression_parses(promtool, tmp_path):
    """promtool parses each expression as a recording rule ($host and Grafana's intervals filled in)."""
    import dashboard as builder

    exprs = builder.expressions(dashboard())
    rules = [
        {
            'record': 'airgap_vllm_dashboard_check:%d' % i,
            'expr': e.replace('$host', '.*').replace('$__rate_interval', '5m'),
        }
        for i, e in enumerate(exprs)
    ]
    path = tmp_path / 'dashboard-exprs.yml'
    path.write_text(yaml.safe_dump({'groups': [{'name': 'dashboard', 'rules': rules}]}))
    rc, out = _run([promtool, 'check', 'rules', str(path)])
    assert rc == 0, out


SITE_TEST = """
rule_files: [base.rules.yml, site.rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'vllm:num_requests_waiting{job="vllm",instance="gpu1:9443",host="gpu1",service="vllm",model_name="m"}'
        values: '100x10'
      - series: 'vllm:num_requests_waiting{job="vllm",instance="gpu2:9443",host="gpu2",service="vllm",model_name="m"}'
        values: '100x10'
      - series: 'vllm:time_to_first_token_seconds_bucket{job="vllm",instance="gpu1:9443",host="gpu1",service="vllm",model_name="m",le="2"}'
        values: '0+10x20'
      - series: 'vllm:time_to_first_token_seconds_bucket{job="vllm",instance="gpu1:9443",host="gpu1",service="vllm",model_name="m",le="+Inf"}'
        values: '0+10x20'
    alert_rule_test:
      - eval_time: 8m   # gpu1 plans 64 at once: 100 waiting is a growing queue; gpu2 (no plan known) uses 256
        alertname: VllmQueueGrowing
        exp_alerts:
          - exp_labels: {severity: warning, job: vllm, instance: "gpu1:9443", host: gpu1, service: vllm, model_name: m}
            exp_annotations:
              summary: vLLM queue longer than the planned batch on gpu1/vllm (m)
              description: 100 requests waiting for 5 minutes; the plan runs at most 64 at once (max_num_seqs x 1).
      - eval_time: 15m  # p95 1.9 s: over gpu1's baseline 800 ms x 2
        alertname: VllmTtftOverBaseline
        exp_alerts:
          - exp_labels: {severity: warning, job: vllm, instance: "gpu1:9443", host: gpu1, service: vllm, model_name: m}
            exp_annotations:
              summary: Time to first token p95 over the baseline on gpu1/vllm (m)
              description: "TTFT p95 1.9s for 10 minutes; the limit is the load check's p95 800ms x 2."
"""


def test_site_rules_use_the_plan(promtool, tmp_path):
    services = [
        _observe.service_thresholds(
            'gpu1', 'vllm', {'argv': ['serve', '--max-num-seqs', '64']}, {'figures': {'p95_ttft_ms': 800}}
        ),
        _observe.service_thresholds('gpu2', 'vllm', None, None),
    ]
    (tmp_path / 'base.rules.yml').write_text(yaml.safe_dump(_observe.base_rules()))
    (tmp_path / 'site.rules.yml').write_text(yaml.safe_dump(_observe.plan_rules(services=services)))
    (tmp_path / 'site_test.yml').write_text(SITE_TEST)
    rc, out = _run([promtool, 'check', 'rules', 'base.rules.yml', 'site.rules.yml'], cwd=str(tmp_path))
    assert rc == 0, out
    rc, out = _run([promtool, 'test', 'rules', 'site_test.yml'], cwd=str(tmp_path))
    assert rc == 0, out
