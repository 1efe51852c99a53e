# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every preflight decision: pure functions, unit-tested, called by the preflight role through the
airgap.vllm.preflight_verdicts filter (the role only gathers facts and reports).

Each check returns a record {'check', 'status' (ok, fail, n/a, skipped), 'detail', 'hint'}; ``evaluate``
runs the checks a pass asks for, marks the skipped ones, and keeps the hint only on a failure.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.airgap.vllm.plugins.module_utils.driver._dev_char import exposure as cgroup_reload_exposure
from ansible_collections.airgap.vllm.plugins.module_utils.driver._docker_daemon import runtime_listed
from ansible_collections.airgap.vllm.plugins.module_utils.common._version import at_least as version_at_least
from ansible_collections.airgap.vllm.plugins.module_utils.host._preflight_services import service_list

CHECKS = ('os', 'gpu_present', 'driver_version', 'nvml', 'gpu_memory', 'docker_runtime', 'disk', 'port')
# What each check reads, by probe of roles/preflight/tasks/probe.yml: a pass runs only the probes of its
# checks (a converged re-run runs two passes; every probe is a round trip to the host).
CHECK_PROBES = {
    'os': ('host',),
    'gpu_present': ('host', 'pci'),
    'driver_version': ('nvml',),
    'nvml': ('nvml',),
    'gpu_memory': ('nvml', 'host', 'own_containers'),
    'docker_runtime': ('host', 'toolkit'),
    'disk': ('disk',),
    'port': ('host', 'tcp', 'port_owners'),
}
KYLIN_SERVICE_PACKS = ('SP1', 'SP2', 'SP3')
BEST_EFFORT_DISTRIBUTIONS = ('RedHat', 'Rocky', 'AlmaLinux', 'CentOS', 'OracleLinux')
BEST_EFFORT_MAJORS = ('8', '9')

GIB = 1024**3


def _is_own(process, own_container_ids):
    cid = process.get('container_id') or ''
    return bool(cid) and any(cid.startswith(own) or own.startswith(cid) for own in own_container_ids if len(own) >= 12)


def gpu_memory_verdict(nvml, utilization, own_container_ids=(), gpu_indexes=None):
    """Is there room on each GPU for vLLM's share (total x utilization)?

    ``utilization``: one fraction for every GPU, or {NVML index: fraction} when services plan different ones.

    Memory held by our own service's container (``own_container_ids``: full or >= 12-char ids of the
    container this collection runs) counts as available: a re-run on a serving host replaces that
    container, it does not run beside it. ``gpu_indexes``: only these GPUs (default all).
    Returns {'status': 'ok'|'fail'|'n/a', 'detail': str, 'short': [indexes without room]}.
    """
    if not nvml or nvml.get('nvml_state') != 'ok':
        return {'status': 'n/a', 'detail': 'needs NVML (see the nvml check)', 'short': []}
    if isinstance(utilization, dict):
        per_gpu = dict((k, float(v)) for k, v in utilization.items())
        fallback = max(per_gpu.values()) if per_gpu else 1.0
    else:
        per_gpu, fallback = {}, float(utilization)
    own = [str(c) for c in own_container_ids or () if c]
    gpus = [g for g in nvml.get('gpus') or [] if gpu_indexes is None or g.get('index') in gpu_indexes]
    if not gpus:
        return {'status': 'fail', 'detail': 'NVML sees no GPU', 'short': []}
    short, parts = [], []
    for g in gpus:
        procs = g.get('processes') or []
        ours = sum(p.get('used_memory') or 0 for p in procs if _is_own(p, own))
        available = g['memory_free'] + ours
        utilization = per_gpu.get(g['index'], fallback)
        need = g['memory_total'] * utilization
        if available < need:
            short.append(g['index'])
        text = 'GPU%s %s: free %.1f GiB of %.1f GiB' % (
            g['index'],
            g.get('name', '?'),
            g['memory_free'] / GIB,
            g['memory_total'] / GIB,
        )
        if ours:
            text += ' (+%.1f GiB held by our own service, replaced on restart)' % (ours / GIB)
        text += ', need %.1f GiB (%s)' % (need / GIB, utilization)
        foreign = [p for p in procs if not _is_own(p, own)]
        if foreign:
            held = []
            for p in foreign:
                size = ('%.1f GiB' % (p['used_memory'] / GIB)) if p.get('used_memory') is not None else 'size unknown'
                cont = (', container ' + p['container_id'][:12]) if p.get('container_id') else ''
                held.append('pid %s %s (%s%s)' % (p.get('pid'), p.get('name') or '?', size, cont))
            text += '; held by ' + ', '.join(held)
        parts.append(text)
    return {'status': 'fail' if short else 'ok', 'detail': '; '.join(parts), 'short': short}


def _record(check, status, detail, hint=''):
    return {'check': check, 'status': status, 'detail': detail, 'hint': hint if status == 'fail' else ''}


# ------------------------------------------------------------------------------------------------ os
def os_check(host, distribution, major_version, allow_best_effort=True):
    """Kylin V10 SP1-SP3 always; RHEL-family 8-9 and openEuler when best effort is allowed."""
    kylin_ok = bool(host.get('kylin')) and host.get('kylin_sp') in KYLIN_SERVICE_PACKS
    best_effort = (
        bool(allow_best_effort)
        and not host.get('kylin')
        and (
            (distribution in BEST_EFFORT_DISTRIBUTIONS and str(major_version) in BEST_EFFORT_MAJORS)
            or distribution == 'openEuler'
        )
    )
    release = host.get('distribution_release')
    words = [
        host.get('distribution'),
        host.get('distribution_version'),
        '(%s)' % release if release else '',
        host.get('kylin_sp') or '',
    ]
    detail = ' '.join(w for w in words if w) + (' (best effort)' if best_effort else '')
    detail += ', kernel %s, Python %s' % (host.get('kernel_release'), host.get('python_version'))
    hint = 'Supported: Kylin Linux Advanced Server V10 SP1-SP3%s.' % (
        ', and (best effort) RHEL/Rocky/AlmaLinux 8-9 and openEuler' if allow_best_effort else ''
    )
    return _record('os', 'ok' if (kylin_ok or best_effort) else 'fail', detail, hint)


# --------------------------------------------------------------------------------------- gpu_present
def gpu_present_check(pci):
    """The PCI probe's GPUs (module_utils/host/_pci.py through host_info pci=true)."""
    pci = pci or {}
    gpus = pci.get('summary') or []
    if gpus:
        detail = '%d NVIDIA GPU(s): %s' % (len(gpus), '; '.join(gpus))
    elif pci.get('error'):
        detail = pci['error']
    else:
        detail = 'no PCI device of vendor 10de with a display class'
    return _record(
        'gpu_present',
        'ok' if gpus else 'fail',
        detail,
        'No NVIDIA GPU found by lspci (pciutils): check the card is seated and powered, or that pciutils is installed.',
    )


# ------------------------------------------------------------------------------------ driver, nvml
def driver_version_check(nvml, minimum):
    """A mismatched host still tells which driver is installed: the library's version."""
    nvml = nvml or {}
    version = nvml.get('driver_version') or nvml.get('library_version') or ''
    detail = ('driver %s' % version) if version else 'no NVIDIA driver found'
    detail += ' (need >= %s%s)' % (
        minimum,
        (', kernel module %s' % nvml['kernel_module_version']) if nvml.get('kernel_module_version') else '',
    )
    return _record(
        'driver_version',
        'ok' if version_at_least(version, minimum) else 'fail',
        detail,
        'Install NVIDIA driver %s or newer from the offline bundle (nvidia_driver role).' % minimum,
    )


def select_gpus(gpus, selection):
    """(selected, unknown): the NVML GPUs named by index ("0") or UUID ("GPU-..."); an empty selection is all."""
    gpus = list(gpus or [])
    if not selection:
        return gpus, []
    selected, unknown = [], []
    for wanted in selection:
        key = str(wanted).strip()
        match = [g for g in gpus if str(g.get('index')) == key or (g.get('uuid') or '').lower() == key.lower()]
        if not match:
            unknown.append(key)
        for g in match:
            if g not in selected:
                selected.append(g)
    return selected, unknown


def _unknown_gpus_text(unknown, gpus, variable='preflight_gpus', owners=None):
    """owners: {GPU as named: [service names]} to say which service names each unknown GPU."""
    owners = owners or {}
    named = ['%s (%s)' % (u, ', '.join(owners[u])) if owners.get(u) else u for u in unknown]
    return '%s names %s, which NVML does not see (present: %s)' % (
        variable,
        ', '.join(named),
        ', '.join('%s %s' % (g.get('index'), g.get('uuid')) for g in gpus) or 'none',
    )


def _unknown_gpus_hint(variable='preflight_gpus'):
    if variable == 'preflight_services':
        return 'Name GPUs by index (nvidia-smi -L) or UUID in each service\'s gpus, or leave them empty for all.'
    return 'Name GPUs by index (nvidia-smi -L) or UUID in preflight_gpus, or leave it empty for all.'


def nvml_check(nvml, selection=(), variable='preflight_gpus', owners=None):
    nvml = nvml or {}
    ok = nvml.get('nvml_state') == 'ok'
    parts = ['nvml_state %s' % nvml.get('nvml_state')]
    if nvml.get('nvml_error'):
        parts[0] += ' (%s)' % nvml['nvml_error'].get('name')
    if nvml.get('kernel_module_version'):
        parts.append('kernel module %s' % nvml['kernel_module_version'])
    if nvml.get('library_version'):
        parts.append('library %s' % nvml['library_version'])
    hint = nvml.get('hint') or ''
    status = 'ok' if ok else 'fail'
    if ok:
        parts.append('%s GPU(s), CUDA %s' % (nvml.get('gpu_count'), nvml.get('cuda_version')))
        selected, unknown = select_gpus(nvml.get('gpus'), selection)
        if selection:
            parts.append('selected %s' % (', '.join(str(g.get('index')) for g in selected) or 'none'))
        if unknown:
            status = 'fail'
            parts.append(_unknown_gpus_text(unknown, nvml.get('gpus') or [], variable, owners))
            hint = _unknown_gpus_hint(variable)
    return _record('nvml', status, ', '.join(parts), hint)


def gpu_memory_check(
    nvml, utilization, own_container_ids=(), selection=(), every_gpu=False, variable='preflight_gpus', owners=None
):
    """gpu_memory_verdict on the selected GPUs (all when the selection is empty or ``every_gpu``: a service
    that takes every GPU; the GPUs named in ``selection`` must still exist)."""
    nvml = nvml or {}
    hint = (
        'Free the GPU memory: stop the processes and containers listed (docker stop <container>, '
        'systemctl stop <service>), or lower preflight_gpu_memory_utilization to match vLLM\'s '
        '--gpu-memory-utilization.'
    )
    indexes = None
    if selection and nvml.get('nvml_state') == 'ok':
        selected, unknown = select_gpus(nvml.get('gpus'), selection)
        if unknown:
            return _record(
                'gpu_memory',
                'fail',
                _unknown_gpus_text(unknown, nvml.get('gpus') or [], variable, owners),
                _unknown_gpus_hint(variable),
            )
        if not every_gpu:
            indexes = [g.get('index') for g in selected]
    verdict = gpu_memory_verdict(nvml, utilization, own_container_ids, indexes)
    return _record('gpu_memory', verdict['status'], verdict['detail'], hint)


# ------------------------------------------------------------------------------------ docker runtime
def docker_runtime_check(toolkit_installed, docker, toolkit_version=None):
    """Docker's nvidia runtime, and (in the detail) the daemon-reload exposure of its cgroup driver
    (module_utils/driver/_dev_char.py): with the systemd driver the nvidia_toolkit stage applies NVIDIA's remedy."""
    docker = docker or {}
    if not toolkit_installed:
        status, detail = 'n/a', 'container toolkit not installed yet'
    elif not docker.get('running'):
        status, detail = 'fail', 'Docker not running: %s' % docker.get('error')
    else:
        runtimes = docker.get('runtimes') or []
        # The nvidia_toolkit role's test too (its converged check and restart, module_utils/driver/_docker_daemon.py).
        status = 'ok' if runtime_listed(runtimes) else 'fail'
        detail = 'Docker %s, runtimes %s (default %s)' % (
            docker.get('server_version'),
            ', '.join(runtimes),
            docker.get('default_runtime'),
        )
    if docker.get('running'):
        reload_risk = cgroup_reload_exposure(docker, toolkit_version)
        detail += '; %s%s' % (
            reload_risk['detail'],
            ' (the nvidia_toolkit stage adds the links and NVIDIA\'s udev rule)' if reload_risk['remedy'] else '',
        )
    return _record(
        'docker_runtime',
        status,
        detail,
        'Register the runtime: nvidia-ctk runtime configure --runtime=docker, then restart docker '
        '(nvidia_toolkit role).',
    )


# ---------------------------------------------------------------------------------------------- disk
def parse_df(rc, stdout):
    """(free bytes, mount) from `df -B1 --output=avail,target <path> | tail -n 1`; (-1, '?') when unreadable."""
    fields = (stdout or '').split()
    if rc != 0 or len(fields) != 2 or not fields[0].isdigit():
        return -1, fields[1] if len(fields) == 2 else '?'
    return int(fields[0]), fields[1]


def disk_measurements(facts, settings):
    """facts['disk_free'] ({path: {'free', 'mount'}}, host_info disk) for each of settings['disk_requirements'],
    else facts['disk'] (one df per required path)."""
    free = facts.get('disk_free')
    if free is None:
        return facts.get('disk')
    return [
        dict(req, **(free.get(req['path']) or {'free': -1, 'mount': '?'}))
        for req in settings.get('disk_requirements') or []
    ]


def disk_check(measurements):
    """measurements: one df per required path, {'path', 'min_free_gb', 'rc', 'stdout'} or a loop result
    ({'item': {'path', 'min_free_gb'}, 'rc', 'stdout'})."""
    rows, low = [], []
    for m in measurements or []:
        req = m.get('item') or m
        free, mount = (m['free'], m['mount']) if 'free' in m else parse_df(m.get('rc', 1), m.get('stdout'))
        need = int(float(req['min_free_gb']) * GIB)
        text = '%s (on %s): %s GiB free, need %.1f' % (
            req['path'],
            mount,
            ('%.1f' % (free / GIB)) if free >= 0 else 'unknown',
            need / GIB,
        )
        if free < need:
            low.append(req['path'])
            text += ' LOW'
        rows.append(text)
    return _record(
        'disk',
        'fail' if low else 'ok',
        '; '.join(rows) or 'no path to check',
        'Free disk space for the vLLM image and the model, or point the image/model paths at a larger filesystem.',
    )


# ---------------------------------------------------------------------------------------------- port
def listening_ports(proc_net_tcp):
    """Local TCP ports in LISTEN state (0A) in /proc/net/tcp and tcp6 text: no ss/netstat needed."""
    if isinstance(proc_net_tcp, (list, tuple)):  # host_info listening: the ports already
        return sorted(int(p) for p in proc_net_tcp)
    ports = set()
    for line in (proc_net_tcp or '').splitlines():
        fields = line.split()
        if len(fields) > 3 and fields[3] == '0A' and ':' in fields[1]:
            try:
                ports.add(int(fields[1].rsplit(':', 1)[1], 16))
            except ValueError:
                continue
    return sorted(ports)


def port_check(port, proc_net_tcp, publishers, own_name, our_names=(), label=''):
    """Free, or held by our own container (a re-run replaces it); otherwise name who holds it.

    ``our_names``: the container names of every service this run manages; the port published by another
    one of them is a failure naming it (two services cannot take turns on one port). ``label``: the service
    the port is for, shown before the detail when a host runs several.
    """
    port = int(port)
    busy = port in listening_ports(proc_net_tcp)
    publishers = [p for p in publishers or [] if p]
    siblings = [p for p in publishers if p != own_name and p in (our_names or ())]
    hint = "Stop what listens on TCP %d (ss -ltnp 'sport = :%d') or choose another port." % (port, port)
    if not busy:
        status, detail = 'ok', 'port %d free' % port
    elif own_name in publishers:
        status, detail = 'ok', 'port %d held by our container %s' % (port, own_name)
    elif siblings:
        status = 'fail'
        detail = 'port %d held by our other service %s, not by %s' % (port, ', '.join(siblings), own_name)
        hint = 'Give each service the port it runs on in preflight_services, or stop %s first (systemctl stop %s).' % (
            siblings[0],
            siblings[0],
        )
    elif publishers:
        status, detail = 'fail', 'port %d in use by container(s) %s' % (port, ', '.join(publishers))
    else:
        status, detail = 'fail', 'port %d in use by a process outside Docker' % port
    return _record('port', status, ('%s: %s' % (label, detail)) if label else detail, hint)


def gpu_utilizations(nvml_gpus, services, default):
    """{NVML index: the fraction vLLM may take of it}: the highest of the services that use that GPU (a
    service without gpus uses all), each at its own gpu_memory_utilization or ``default``; a plain float
    (``default``) when no service sets its own, as with one service."""
    if not any(s.get('gpu_memory_utilization') is not None for s in services):
        return float(default)
    out = {}
    for service in services:
        own = service.get('gpu_memory_utilization')
        fraction = float(default) if own is None else float(own)
        used = list(nvml_gpus or []) if not service['gpus'] else select_gpus(nvml_gpus, service['gpus'])[0]
        for g in used:
            out[g.get('index')] = max(out.get(g.get('index'), 0.0), fraction)
    return out


def gpu_selection(services):
    """(named, every_gpu): the GPUs the services name, in order without repeats, and whether one of them
    takes every GPU (an empty gpus): then free memory is checked on all of them."""
    named = []
    for service in services:
        for g in service['gpus']:
            if g not in named:
                named.append(g)
    return named, any(not service['gpus'] for service in services)


def _loop_map(results):
    """{str(item): stdout lines} from a registered loop over ports or names (skipped items: [])."""
    out = {}
    if isinstance(results, dict):
        return dict((str(k), [v for v in (lines or []) if v]) for k, lines in results.items())
    for r in results or []:
        if isinstance(r, dict) and 'item' in r:
            lines = r.get('stdout_lines')
            if lines is None:
                lines = (r.get('stdout') or '').splitlines()
            out[str(r['item'])] = [line.strip() for line in lines if line and line.strip()]
    return out


# ------------------------------------------------------------------------------------------ evaluate
def evaluate(facts, settings):
    """Every check of this pass, in CHECKS order (the port check: one record per service).

    facts: host (host_info with pci), distribution, distribution_major_version, nvml (nvml_info),
    toolkit_installed, toolkit_version (for the daemon-reload exposure of docker_runtime), disk_free
    ({path: {'free', 'mount'}} of host_info disk, for settings['disk_requirements'])
    or disk ([{'path', 'min_free_gb', 'rc', 'stdout'}]), listening_ports (host_info listening) or proc_net_tcp
    (the text of /proc/net/tcp and tcp6), and Docker's answers:
    own_containers (the registered loop of ``docker ps --quiet --filter name=^/<name>$`` over container
    names, or {name: [ids]}), port_owners (the registered loop of ``docker ps --filter publish=<port>
    --format {{.Names}}`` over ports, or {port: [names]}); still read: own_container_ids (ids counted as ours
    whatever their name) and port_publishers (the publishers of ``settings['port']``).
    settings: checks, skip_checks, allow_best_effort_os, min_driver_version, gpu_memory_utilization,
    disk_requirements ([{path, min_free_gb}], with disk_free), services ([{name, port, gpus}], see service_list),
    or when empty gpus, port, service_container_name.
    """
    host = facts.get('host') or {}
    nvml = facts.get('nvml') or {}
    several = bool(settings.get('services'))
    variable = 'preflight_services' if several else 'preflight_gpus'
    wanted = settings.get('checks')
    wanted = CHECKS if wanted is None else wanted
    skip = settings.get('skip_checks') or []
    unknown = [c for c in list(wanted) + list(skip) if c not in CHECKS]
    if unknown:
        raise ValueError('unknown preflight check(s) %s; known: %s' % (', '.join(unknown), ', '.join(CHECKS)))
    services = service_list(settings)
    selection, every_gpu = gpu_selection(services)
    owners = {}
    if several:
        for service in services:
            for g in service['gpus']:
                owners.setdefault(g, []).append(service['name'])
    by_name = _loop_map(facts.get('own_containers'))
    own_ids = [str(c) for c in facts.get('own_container_ids') or [] if c]
    for service in services:
        own_ids.extend(c for c in by_name.get(str(service['name']), []) if c not in own_ids)
    by_port = _loop_map(facts.get('port_owners'))
    our_names = [s['name'] for s in services]

    def ports():
        records = []
        for service in services:
            key = str(service['port']).strip()
            publishers = by_port.get(key)
            if publishers is None and key == str(settings.get('port')).strip():
                publishers = facts.get('port_publishers')
            listening = facts.get('listening_ports')
            records.append(
                port_check(
                    service['port'],
                    facts.get('proc_net_tcp') if listening is None else listening,
                    publishers,
                    service['name'],
                    our_names,
                    service['name'] if several else '',
                )
            )
        return records

    deciders = {
        'os': lambda: os_check(
            host,
            facts.get('distribution'),
            facts.get('distribution_major_version'),
            settings.get('allow_best_effort_os', True),
        ),
        'gpu_present': lambda: gpu_present_check(host.get('pci')),
        'driver_version': lambda: driver_version_check(nvml, settings['min_driver_version']),
        'nvml': lambda: nvml_check(nvml, selection, variable, owners),
        'gpu_memory': lambda: gpu_memory_check(
            nvml,
            gpu_utilizations(nvml.get('gpus'), services, settings['gpu_memory_utilization']),
            own_ids,
            selection,
            every_gpu,
            variable,
            owners,
        ),
        'docker_runtime': lambda: docker_runtime_check(
            facts.get('toolkit_installed'), host.get('docker'), facts.get('toolkit_version')
        ),
        'disk': lambda: disk_check(disk_measurements(facts, settings)),
        'port': ports,
    }
    records = []
    for check in CHECKS:
        if check not in wanted:
            continue
        if check in skip:
            records.append(_record(check, 'skipped', 'skipped by preflight_skip_checks'))
            continue
        verdict = deciders[check]()
        records.extend(verdict if isinstance(verdict, list) else [verdict])
    return records


def probes_for(checks, skip_checks=()):
    """The probes a pass needs: the union of CHECK_PROBES over its checks, less the skipped ones, sorted.

    checks None means every check (as in evaluate); an unknown name raises ValueError.
    """
    wanted = CHECKS if checks is None else checks
    unknown = [c for c in list(wanted) + list(skip_checks or ()) if c not in CHECKS]
    if unknown:
        raise ValueError('unknown preflight check(s) %s; known: %s' % (', '.join(unknown), ', '.join(CHECKS)))
    return sorted(set(p for c in wanted if c not in (skip_checks or ()) for p in CHECK_PROBES[c]))


def summary_lines(records):
    """The report table: header, then one line per check."""
    lines = ['%-15s %-8s %s' % ('CHECK', 'STATUS', 'DETAIL')]
    for r in records:
        lines.append('%-15s %-8s %s' % (r['check'], r['status'].upper(), ' '.join(r['detail'].split())))
    return lines


def failure_message(records):
    """One message naming every failing check and its fix; '' when none failed."""
    failed = [r for r in records if r['status'] == 'fail']
    if not failed:
        return ''
    return 'Preflight failed %d check(s): %s' % (
        len(failed),
        ' | '.join(
            '[%s] %s -- fix: %s' % (r['check'], ' '.join(r['detail'].split()), ' '.join(r['hint'].split()))
            for r in failed
        ),
    )
