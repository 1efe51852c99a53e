"""The rules and the dashboard against a real Prometheus that scrapes a real deployment (molecule/shared/observe.yml).

    live_check.py start  --config prometheus.yml --data DIR --state STATE.json   # Prometheus on a free loopback port
    live_check.py stop   --state STATE.json                                      # that process, and only it
    live_check.py ready  --url URL --job vllm --job node [--timeout S]           # every target of each job up
    live_check.py check  --url URL --rules FILE... --dashboard JSON --host HOST [--engine-args JSON] [--timeout S]
    live_check.py alert  --url URL --name ALERT --state firing|gone [--label k=v ...] [--timeout S]

`check` evaluates every expression of the rule files (as Prometheus loaded them) and of the dashboard (panel targets,
$host = HOST; the host variable's label_values query) and fails naming each one that returns no series. The rule:

- a recording rule or a dashboard expression returns at least one series - except that
- an alert, and a dashboard expression that ends in a filter (`X == 1`), is quiet on a healthy deployment by design:
  it passes when the series it reads to decide exist (_observe.signals: its left side, or ALERT_SIGNALS);
- "n/a", printed with its reason, only where the deployment itself says the input cannot exist: a GPU figure the
  exporter reports as not answered by NVML for every GPU of the host (airgap_gpu_metric_unavailable), or vLLM's
  vllm:spec_decode_* families on an engine started without --speculative-config (--engine-args: its argv).
Anything else without a series fails, with the missing input series named (recorded series followed to their inputs).
Standard library only (the controller's python3)."""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from promql import metric_names  # noqa: E402

# vLLM families that exist only with an engine feature on: (prefix, the argv flag that turns it on, what it is)
FEATURE_FAMILIES = (('vllm:spec_decode_', '--speculative-config', 'speculative decoding (MTP / draft model)'),)


class QueryError(RuntimeError):
    pass


def _get(url, path, params=None, timeout=10):
    query = ('?' + urllib.parse.urlencode(params)) if params else ''
    try:
        with urllib.request.urlopen(url.rstrip('/') + path + query, timeout=timeout) as r:
            answer = json.loads(r.read().decode())
    except urllib.error.HTTPError as e:  # 400/422: Prometheus's word on a bad expression
        raise QueryError('%s %s: %s' % (path, params, e.read().decode(errors='replace')[:500]))
    if answer.get('status') != 'success':
        raise RuntimeError('%s%s: %s' % (path, query, answer))
    return answer['data']


def query(url, expr):
    return _get(url, '/api/v1/query', {'query': expr})['result']


def emit(**kw):
    print(json.dumps(kw, sort_keys=True))
    sys.stdout.flush()


# ------------------------------------------------------------------------------------------------ Prometheus process
def _free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cmd_start(args):
    binary = shutil.which('prometheus')
    if not binary:
        sys.exit("prometheus is missing: apt-get install prometheus (Debian's package; .ci/setup installs it)")
    port = _free_port()
    url = 'http://127.0.0.1:%d' % port
    log = open(args.log or os.path.join(os.path.dirname(os.path.abspath(args.state)), 'prometheus.log'), 'a')
    proc = subprocess.Popen(
        [
            binary,
            '--config.file=' + args.config,
            '--storage.tsdb.path=' + args.data,
            '--storage.tsdb.retention.time=2h',
            '--web.listen-address=127.0.0.1:%d' % port,
        ],
        stdout=log,
        stderr=log,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    with open(args.state, 'w') as f:
        json.dump({'pid': proc.pid, 'url': url, 'log': log.name}, f)
    deadline = time.time() + args.timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit('Prometheus exited (%s): %s' % (proc.returncode, _tail(log.name)))
        try:
            with urllib.request.urlopen(url + '/-/ready', timeout=2) as r:
                if r.status == 200:
                    emit(started=True, pid=proc.pid, url=url)
                    return 0
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.5)
    sys.exit('Prometheus not ready in %ss: %s' % (args.timeout, _tail(log.name)))


def _tail(path, n=3000):
    try:
        with open(path) as f:
            return f.read()[-n:]
    except OSError:
        return ''


def cmd_stop(args):
    try:
        with open(args.state) as f:
            state = json.load(f)
    except (OSError, ValueError):
        emit(stopped=False, why='no state file %s' % args.state)
        return 0
    pid = int(state['pid'])
    try:  # the process start left, by its command line (never a reused pid)
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            cmdline = f.read()
        ours = b'prometheus' in cmdline and ('127.0.0.1:' + state['url'].rsplit(':', 1)[1]).encode() in cmdline
    except OSError:
        ours = False
    if not ours:
        emit(stopped=False, why='process %d is gone' % pid)
        return 0
    os.kill(pid, signal.SIGTERM)
    for _i in range(40):
        if not os.path.exists('/proc/%d' % pid) or _zombie(pid):
            break
        time.sleep(0.5)
    else:
        os.kill(pid, signal.SIGKILL)
    emit(stopped=True, pid=pid)
    return 0


def _zombie(pid):
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().split(')')[-1].split()[0] == 'Z'
    except OSError:
        return True


# ------------------------------------------------------------------------------------------------------- targets up
def cmd_ready(args):
    deadline = time.time() + args.timeout
    last = None
    while time.time() < deadline:
        try:
            active = _get(args.url, '/api/v1/targets', {'state': 'active'})['activeTargets']
        except (OSError, RuntimeError) as e:
            active, last = [], str(e)
        by_job = {}
        for t in active:
            by_job.setdefault(t['labels'].get('job'), []).append(t)
        if all(by_job.get(j) and all(t['health'] == 'up' for t in by_job[j]) for j in args.job):
            emit(ready=True, targets=[(t['labels'].get('job'), t['scrapeUrl']) for t in active])
            return 0
        last = [(t['labels'].get('job'), t['scrapeUrl'], t['health'], t.get('lastError')) for t in active] or last
        time.sleep(1)
    sys.exit('targets not up in %ss: %s' % (args.timeout, last))


# ---------------------------------------------------------------------------------------------- every expression
def _load_rules(paths):
    import yaml  # the controller runs Ansible: PyYAML is there

    rules = []
    for path in paths:
        with open(path) as f:
            doc = yaml.safe_load(f) or {}
        for group in doc.get('groups') or []:
            for rule in group.get('rules') or []:
                rules.append(dict(rule, file=os.path.basename(path)))
    return rules


def _dashboard(path, host):
    with open(path) as f:
        data = json.load(f)
    value = re.escape(host).replace('\\', '\\\\')  # a regex inside a PromQL string: its backslashes doubled
    out = []
    for panel in data.get('panels', []):
        for target in panel.get('targets', []) or []:
            if target.get('expr'):
                out.append((panel.get('title', ''), target['expr'].replace('$host', value)))
    variables = []
    for var in data.get('templating', {}).get('list', []):
        m = re.match(r'^label_values\((.+),\s*(\w+)\)$', str(var.get('query') or ''))
        if m:
            variables.append((var['name'], m.group(1), m.group(2)))
    return out, variables


class Judge:
    def __init__(self, url, host, rules, engine_args):
        self.url, self.host = url, host
        self.recorded = dict((r['record'], r['expr']) for r in rules if 'record' in r)
        self.engine_args = engine_args
        self._present = {}

    def present(self, name):
        if name not in self._present:
            self._present[name] = bool(query(self.url, 'count({__name__="%s"})' % name))
        return self._present[name]

    def missing_inputs(self, expr, seen=None):
        """Leaf series names the expression reads that have no series (recorded series followed to their inputs)."""
        seen = seen or set()
        out = set()
        for name in metric_names(expr):
            if name in seen:
                continue
            seen.add(name)
            if name in self.recorded and not self.present(name):
                out |= self.missing_inputs(self.recorded[name], seen) or {name}
            elif name not in self.recorded and not self.present(name):
                out.add(name)
        return out

    def why_absent(self, name):
        """The deployment's own word that the series cannot exist, or None."""
        for prefix, flag, what in FEATURE_FAMILIES:
            if name.startswith(prefix) and self.engine_args is not None:
                if not any(str(a).split('=', 1)[0] == flag for a in self.engine_args):
                    return 'the engine runs without %s (no %s in its argv)' % (what, flag)
                return None
        gpus = query(self.url, 'sum(airgap_gpu_count{host="%s"})' % self.host)
        said = query(self.url, 'count(airgap_gpu_metric_unavailable{host="%s",metric="%s"} == 1)' % (self.host, name))
        if gpus and said and float(said[0]['value'][1]) >= float(gpus[0]['value'][1]) > 0:
            return 'NVML does not answer it on any GPU of %s (airgap_gpu_metric_unavailable)' % self.host
        return None

    def judge(self, expr, signals=None):
        """(verdict, series count, detail): ok, quiet (signals have series), n/a (reason), EMPTY (missing inputs)."""
        n = len(query(self.url, expr))
        if n:
            return 'ok', n, ''
        if signals:
            counts = [len(query(self.url, s)) for s in signals]
            if all(counts):
                return (
                    'quiet',
                    sum(counts),
                    'reads %s' % '; '.join('%s (%d series)' % sc for sc in zip(signals, counts)),
                )
        missing = set()
        for e in [expr] + list(signals or []):
            missing |= self.missing_inputs(e)
        if not missing:
            return 'EMPTY', 0, 'every series it reads exists, yet it returns none'
        reasons = dict((m, self.why_absent(m)) for m in sorted(missing))
        unexplained = [m for m, why in reasons.items() if not why]
        if unexplained:
            return 'EMPTY', 0, 'no series of: %s' % ', '.join(unexplained)
        return 'n/a', 0, '; '.join('%s: %s' % kv for kv in sorted(reasons.items()))


def _signals(expr, name=None):
    sys.path.insert(0, HERE)
    import build_assets

    build_assets._collection_path()
    from ansible_collections.airgap.vllm.plugins.module_utils.observe import _observe

    return _observe.signals(expr, name)


def cmd_check(args):
    rules = _load_rules(args.rules)
    engine_args = json.loads(args.engine_args) if args.engine_args else None
    judge = Judge(args.url, args.host, rules, engine_args)
    panels, variables = _dashboard(args.dashboard, args.host) if args.dashboard else ([], [])

    # Prometheus loaded every rule of the files, and evaluates each without error
    loaded = [r for g in _get(args.url, '/api/v1/rules')['groups'] for r in g['rules']]
    broken = ['%s: %s' % (r['name'], r.get('lastError')) for r in loaded if r.get('health') != 'ok']
    failures = []
    if len(loaded) != len(rules) or broken:
        failures.append('rules: Prometheus loaded %d of %d; unhealthy: %s' % (len(loaded), len(rules), broken))

    items = []
    for r in rules:
        if 'record' in r:
            items.append(('record', r['record'], r['expr'], None))
        else:
            items.append(('alert', r['alert'], r['expr'], tuple(_signals(r['expr'], r['alert']) or ())))
    for title, expr in panels:
        items.append(('panel', title, expr, tuple(_signals(expr) or ())))
    deadline = time.time() + args.timeout
    pending = items
    results = {}
    while True:  # a series can lag one evaluation behind its inputs: ask again until the deadline
        judge._present = {}
        for item in pending:
            try:
                results[item] = judge.judge(item[2], item[3])
            except QueryError as e:
                results[item] = ('ERROR', 0, str(e))
        pending = [i for i in pending if results[i][0] in ('EMPTY', 'ERROR')]
        if not pending or time.time() >= deadline:
            break
        time.sleep(2)
    for item in items:
        kind, name, expr, dummy = item
        verdict, n, detail = results[item]
        emit(kind=kind, name=name, expr=expr, verdict=verdict, series=n, detail=detail)
        if verdict in ('EMPTY', 'ERROR'):
            failures.append(
                '%s %s: %s (%s): %s' % (kind, name, 'no series' if verdict == 'EMPTY' else 'error', detail, expr)
            )
    for name, metric, label in variables:
        values = sorted(
            set(s['metric'].get(label, '') for s in query(args.url, 'count by (%s) (%s)' % (label, metric)))
        )
        ok = args.host in values
        emit(
            kind='variable',
            name=name,
            expr='label_values(%s, %s)' % (metric, label),
            verdict='ok' if ok else 'EMPTY',
            series=len(values),
            detail='values %s' % values,
        )
        if not ok:
            failures.append('dashboard variable %s: %s not among %s' % (name, args.host, values))
    counts = {}
    for item in items:
        counts[results[item][0]] = counts.get(results[item][0], 0) + 1
    notes = [
        '%s %s: %s (%s)' % (i[0], i[1], results[i][0], results[i][2])
        for i in items
        if results[i][0] in ('quiet', 'n/a')
    ]
    emit(summary=True, expressions=len(items), verdicts=counts, notes=notes, failures=failures)
    return 1 if failures else 0


# ------------------------------------------------------------------------------------------------------------ alerts
def cmd_alert(args):
    want = dict(kv.split('=', 1) for kv in args.label or [])
    deadline = time.time() + args.timeout
    t0 = time.time()
    seen = []
    while time.time() < deadline:
        try:
            alerts = _get(args.url, '/api/v1/alerts')['alerts']
        except (OSError, RuntimeError) as e:
            alerts = []
            seen = str(e)
        mine = [
            a
            for a in alerts
            if a['labels'].get('alertname') == args.name and all(a['labels'].get(k) == v for k, v in want.items())
        ]
        firing = [a for a in mine if a['state'] == 'firing']
        if (args.state == 'firing' and firing) or (args.state == 'gone' and not mine):
            emit(
                alert=args.name,
                state=args.state,
                after_s=round(time.time() - t0, 1),
                labels=(firing[0]['labels'] if firing else want),
                activeAt=(firing[0].get('activeAt') if firing else None),
            )
            return 0
        seen = [(a['labels'], a['state']) for a in mine] or seen
        time.sleep(1)
    sys.exit('%s not %s in %ss (labels %s); last seen: %s' % (args.name, args.state, args.timeout, want, seen))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    sub = p.add_subparsers(dest='cmd')
    s = sub.add_parser('start')
    s.add_argument('--config', required=True)
    s.add_argument('--data', required=True)
    s.add_argument('--state', required=True)
    s.add_argument('--log')
    s.add_argument('--timeout', type=float, default=60)
    s = sub.add_parser('stop')
    s.add_argument('--state', required=True)
    s = sub.add_parser('ready')
    s.add_argument('--url', required=True)
    s.add_argument('--job', action='append', required=True)
    s.add_argument('--timeout', type=float, default=60)
    s = sub.add_parser('check')
    s.add_argument('--url', required=True)
    s.add_argument('--rules', nargs='+', required=True)
    s.add_argument('--dashboard')
    s.add_argument('--host', required=True)
    s.add_argument('--engine-args', help="the engine container's argv as a JSON list")
    s.add_argument('--timeout', type=float, default=30)
    s = sub.add_parser('alert')
    s.add_argument('--url', required=True)
    s.add_argument('--name', required=True)
    s.add_argument('--state', choices=('firing', 'gone'), required=True)
    s.add_argument('--label', action='append')
    s.add_argument('--timeout', type=float, default=120)
    args = p.parse_args(argv)
    if not args.cmd:
        p.error('a command: start, stop, ready, check, alert')
    return {'start': cmd_start, 'stop': cmd_stop, 'ready': cmd_ready, 'check': cmd_check, 'alert': cmd_alert}[args.cmd](
        args
    )


if __name__ == '__main__':
    sys.exit(main())
