# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host facts the GPU roles decide on, Kylin-aware: a Kylin service pack is a name, never `V10` as a number; and
the probe the module airgap.vllm.host_info runs (files, Docker, RPMs, units, the driver and the next boot's kernel)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import gzip
import json
import lzma
import os
import platform
import re
import shlex
import time

from ansible_collections.airgap.vllm.plugins.module_utils.driver._boot_kernel import (
    BLS_DIR,
    DEFAULT_GRUB,
    GRUB_CFG,
    GRUBENV,
    KERNEL_SRC_DIR,
    MODULES_DIR,
    default_kernel,
    module_candidates,
    module_version,
    next_kernel_plan,
)
from ansible_collections.airgap.vllm.plugins.module_utils.driver._dev_char import read_dev_char
from ansible_collections.airgap.vllm.plugins.module_utils.common._docker import DockerCli, DockerError
from ansible_collections.airgap.vllm.plugins.module_utils.driver._driver_state import (
    dkms_versions,
    dnf_module_reset,
    installer_version,
    pending,
)
from ansible_collections.airgap.vllm.plugins.module_utils.driver._fabric_manager import (
    decision,
    keep_globs,
    normalize_setting,
)
from ansible_collections.airgap.vllm.plugins.module_utils.common._files import (
    free_space,
    path_state,
    paths_differing,
    read_text_report,
)
from ansible_collections.airgap.vllm.plugins.module_utils.driver._nvidia_rpms import (
    RPM_QUERY_FORMAT,
    driver_packages,
    parse_rpm_qa,
    version_release,
)
from ansible_collections.airgap.vllm.plugins.module_utils.host._nvml import collect
from ansible_collections.airgap.vllm.plugins.module_utils.host._pci import LSPCI_ARGS, pci_facts
from ansible_collections.airgap.vllm.plugins.module_utils.host._preflight import listening_ports
from ansible_collections.airgap.vllm.plugins.module_utils.common._unit_wait import (
    UNIT_RUN_PROPERTIES,
    UNIT_STATE_PROPERTIES,
    parse_show,
    run_started_at,
    started_and_enabled,
)


# Kylin V10 codenames, as in /etc/os-release VERSION and /etc/.productinfo
KYLIN_CODENAMES = {
    'tercel': 'SP1',
    'sword': 'SP2',
    'lance': 'SP3',
    'halberd': 'SP3',  # seen on some SP3 builds
}


def parse_os_release(text):
    """KEY=value lines of os-release(5) into a dict (shell quoting honoured)."""
    result = {}
    for line in (text or '').splitlines():
        line = line.strip()
        if not line or line.startswith('#') or '=' not in line:
            continue
        key, value = line.split('=', 1)
        try:
            parts = shlex.split(value)
        except ValueError:
            parts = [value.strip('"\'')]
        result[key.strip()] = parts[0] if parts else ''
    return result


def codename_from_version(version):
    """'V10 (Lance)' -> 'Lance'."""
    m = re.search(r'\(([^)]+)\)', version or '')
    return m.group(1).strip() if m else None


def kylin_service_pack(productinfo=None, distribution_release=None):
    """'SP3' from /etc/.productinfo ('release V10 (SP3) /(Lance)-x86_64-...'), else from the codename."""
    m = re.search(r'\bSP(\d+)\b', productinfo or '', re.IGNORECASE)
    if m:
        return 'SP%s' % m.group(1)
    names = [distribution_release]
    names.extend(re.findall(r'\(([A-Za-z]+)\)', productinfo or ''))
    for name in names:
        sp = KYLIN_CODENAMES.get((name or '').strip().lower())
        if sp:
            return sp
    return None


def is_kylin(os_release):
    return os_release.get('ID', '').lower() == 'kylin' or 'kylin' in os_release.get('NAME', '').lower()


def parse_docker_info(text):
    """`docker info --format '{{json .}}'` -> the engine facts the roles use."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError('docker info did not return a JSON object')
    runtimes = data.get('Runtimes') or {}
    return {
        'server_version': data.get('ServerVersion'),
        'runtimes': sorted(runtimes) if isinstance(runtimes, dict) else [],
        'default_runtime': data.get('DefaultRuntime'),
        'cgroup_driver': data.get('CgroupDriver'),
        'cgroup_version': data.get('CgroupVersion'),
        'storage_driver': data.get('Driver'),
        'docker_root_dir': data.get('DockerRootDir'),
        'server_errors': data.get('ServerErrors') or [],
        'logging_driver': data.get('LoggingDriver'),
        # None when the engine does not say (seccomp support unknown), else e.g. ['name=seccomp,profile=default'].
        'security_options': data.get('SecurityOptions') if isinstance(data.get('SecurityOptions'), list) else None,
    }


def host_facts(os_release_text, productinfo_text, kernel_release, python_version):
    osr = parse_os_release(os_release_text)
    release = codename_from_version(osr.get('VERSION'))
    kylin = is_kylin(osr)
    return {
        'distribution': osr.get('NAME'),
        'distribution_id': osr.get('ID'),
        'distribution_version': osr.get('VERSION_ID'),
        'distribution_release': release,
        'kylin': kylin,
        'kylin_sp': kylin_service_pack(productinfo_text, release) if kylin else None,
        'kernel_release': kernel_release,
        'python_version': python_version,
    }


MAX_FILE = 1024 * 1024


def docker_facts(module, docker_bin):
    docker = module.get_bin_path(docker_bin)
    if not docker:
        return {'installed': False, 'running': False, 'error': 'docker CLI %s not found' % docker_bin}
    try:
        rc, out, err = DockerCli(docker, timeout=60).call(['info', '--format', '{{json .}}'], check=False)
    except DockerError as e:
        return {'installed': True, 'running': False, 'error': str(e)}
    if rc != 0:
        return {'installed': True, 'running': False, 'error': (err or out).strip()}
    try:
        facts = parse_docker_info(out)
    except ValueError as e:
        return {'installed': True, 'running': False, 'error': 'unreadable docker info: %s' % e}
    if facts['server_version'] is None:
        return {'installed': True, 'running': False, 'error': '; '.join(facts['server_errors']) or 'no server'}
    facts.update(installed=True, running=True)
    return facts


def image_ids(module, docker_facts_, docker_bin, refs):
    """({ref: image ID or None}, error or None); no IDs when Docker is not running."""
    if not docker_facts_.get('running'):
        return {}, 'Docker is not running: %s' % (docker_facts_.get('error') or 'not asked (docker=false)')
    try:
        cli = DockerCli(module.get_bin_path(docker_bin), timeout=60)
        return dict((ref, cli.image_id(ref)) for ref in refs), None
    except DockerError as e:
        return {}, str(e)


def unit_facts(module, unit):
    """`systemctl show` of a unit with started_enabled, or None without systemctl."""
    systemctl = module.get_bin_path('systemctl')
    if not systemctl:
        return None
    argv = [systemctl, 'show', unit]
    for prop in UNIT_STATE_PROPERTIES + UNIT_RUN_PROPERTIES:
        argv += ['-p', prop]
    _rc, out, _err = module.run_command(argv)
    shown = parse_show(out)
    props = dict((k, v) for k, v in shown.items() if k in UNIT_STATE_PROPERTIES)
    props['started_enabled'] = started_and_enabled(props)
    props['started_at'] = run_started_at(shown, time.time(), time.monotonic())
    props['needs_daemon_reload'] = shown.get('NeedDaemonReload') == 'yes'
    return props


def installed_rpms(module):
    """({name: [version-release]}, error) from one rpm -qa."""
    rpm = module.get_bin_path('rpm')
    if not rpm:
        return {}, 'rpm not found'
    rc, out, err = module.run_command([rpm, '-qa', '--qf', RPM_QUERY_FORMAT])
    if rc != 0:
        return {}, 'rpm -qa failed (rc %d): %s' % (rc, (err or out).strip())
    return parse_rpm_qa(out), None


def read_file(module, path):
    """Text of a small file, None when absent or unreadable (warned)."""
    if not os.path.exists(path):
        return None
    try:
        with open(path, 'rb') as f:
            return f.read(MAX_FILE).decode('utf-8', 'replace')
    except (IOError, OSError) as e:
        module.warn('%s: %s' % (path, e))
        return None


def run_text(module, argv):
    """(rc, stdout, stderr) of a command, rc None when the program is not found."""
    path = module.get_bin_path(argv[0])
    if not path:
        return None, '', ''
    return module.run_command([path] + argv[1:])


def first_of(module, paths):
    """Content of the first existing path (globs allowed), None when none exists."""
    for pattern in paths:
        for path in sorted(glob.glob(pattern)):
            return read_file(module, path)
    return None


def built_module(kernel):
    """(version, path) of the nvidia.ko depmod would pick under /lib/modules/<kernel>, (None, None) without one."""
    paths = []
    for root, _dirs, files in os.walk(os.path.join(MODULES_DIR, kernel)):
        paths.extend(os.path.join(root, f) for f in files if f.startswith('nvidia.ko'))
    for path in module_candidates(paths):
        opener = lzma.open if path.endswith('.xz') else gzip.open if path.endswith('.gz') else open
        try:
            with opener(path, 'rb') as f:
                version = module_version(f.read())
        except (IOError, OSError, lzma.LZMAError) as e:
            version = None
            path = '%s (unreadable: %s)' % (path, e)
        if version:
            return version, path
    return None, None


def next_kernel_facts(module, spec, state):
    """The next boot's kernel, its nvidia module and module_utils/driver/_boot_kernel.py's plan for it."""
    args = [
        first_of(module, [GRUBENV, '/boot/efi/EFI/*/grubenv']),
        read_file(module, DEFAULT_GRUB),
        dict(
            (os.path.basename(p)[: -len('.conf')], read_file(module, p) or '')
            for p in sorted(glob.glob(os.path.join(BLS_DIR, '*.conf')))
        ),
        first_of(module, [GRUB_CFG, '/boot/efi/EFI/*/grub.cfg']),
    ]
    kernel, how = default_kernel(*args)
    if kernel is None and module.get_bin_path('grubby'):
        rc, out, _err = run_text(module, ['grubby', '--default-kernel'])
        kernel, how = default_kernel(*(args + [out if rc == 0 else None]))
    # The running kernel's module is the driver install's business (and a real nvidia.ko is tens of MB to read).
    version, path = built_module(kernel) if kernel and kernel != spec['kernel_release'] else (None, None)
    plan = next_kernel_plan(
        kernel,
        how,
        spec['kernel_release'],
        spec['version'],
        bool(kernel) and os.path.isdir(os.path.join(MODULES_DIR, kernel)),
        version,
        bool(kernel) and os.path.isfile(os.path.join(KERNEL_SRC_DIR, kernel, 'Makefile')),
        spec['version'] in state['dkms_versions'],
        spec['next_kernel'],
    )
    plan.update(module_version=version, module_path=path)
    return plan


def driver_facts(module, spec, installed, rpm_error, pci):
    fabric = decision(spec['fabric_manager'], pci)
    state = {
        'nvml': collect(driver_version_file=spec['version_file']),
        'rpm_error': rpm_error,
        'rpms': driver_packages(installed, keep_globs(spec['keep_rpms'], fabric['needed']), spec['extra_rpms']),
        'fabric_manager': fabric,
    }
    _rc, out, _err = run_text(module, ['dkms', 'status'])
    state['dkms_versions'] = dkms_versions(out)
    _rc, out, _err = run_text(module, ['nvidia-installer', '--version'])
    state['installed_version'] = installer_version(out)
    state['nouveau_loaded'] = os.path.isdir('/sys/module/nouveau')
    state['blacklist_text'] = read_file(module, spec['blacklist_file']) if spec['blacklist_file'] else None
    state['dnf_module_reset'] = dnf_module_reset(read_file(module, spec['dnf_module_file']))
    rc, out, err = run_text(module, ['nvidia-smi'])
    state['smi_rc'], state['smi_output'] = rc, ('%s %s' % (out, err)).strip()[:2000]
    state['pending'] = pending(state, spec['version'], spec['blacklist_content'] if spec['blacklist_file'] else None)
    state['converged'] = not state['pending']
    if spec['kernel_release']:
        state['next_kernel'] = next_kernel_facts(module, spec, state)
    return state


def probe(module):
    """What host_info returns: `module` is its AnsibleModule (params, run_command, get_bin_path, warn)."""
    p = module.params
    os_release, os_release_problem = read_text_report(p['os_release_path'])
    productinfo, productinfo_problem = read_text_report(p['productinfo_path'])
    for problem in (os_release_problem, productinfo_problem):
        if problem:
            module.warn(problem)
    result = host_facts(os_release, productinfo, p['kernel_release'] or platform.release(), platform.python_version())
    result['docker'] = docker_facts(module, p['docker_bin']) if p['docker'] else {'installed': None, 'running': None}
    if p['nvidia_driver']:
        p['nvidia_driver']['fabric_manager'] = normalize_setting(p['nvidia_driver']['fabric_manager'])
    if p['pci'] or (p['nvidia_driver'] and p['nvidia_driver']['fabric_manager'] == 'auto'):
        lspci = module.get_bin_path('lspci')  # PATH, then the sbin directories
        rc, out, err = module.run_command([lspci] + LSPCI_ARGS) if lspci else (None, '', '')
        result['pci'] = pci_facts(rc, out, err, lspci)
    if p['rpms'] or p['nvidia_driver']:
        installed, result['rpm_error'] = installed_rpms(module)
        if p['rpms']:
            result['rpms'] = dict((n, [version_release(v) for v in installed[n]]) for n in p['rpms'] if n in installed)
        if p['nvidia_driver']:
            result['nvidia_driver'] = driver_facts(
                module, p['nvidia_driver'], installed, result['rpm_error'], result.get('pci')
            )
    if p['files']:
        result['files'] = dict((path, read_file(module, path)) for path in p['files'])
    if p['images']:
        result['images'], result['images_error'] = image_ids(module, result['docker'], p['docker_bin'], p['images'])
    if p['disk']:
        result['disk'] = dict((path, free_space(path)) for path in p['disk'])
    if p['listening']:
        # Whole files (a busy host lists many connections before a listener): no read_file size cap.
        result['listening_ports'] = listening_ports(
            ''.join(read_text_report(path)[0] or '' for path in ('/proc/net/tcp', '/proc/net/tcp6'))
        )
    if p['dev_char']:
        result['dev_char'] = read_dev_char()
    if p['exists']:
        result['exists'] = dict((path, os.path.exists(path)) for path in p['exists'])
    if p['units']:
        result['units'] = dict((unit, unit_facts(module, unit)) for unit in p['units'])
    if p['paths']:
        result['paths'] = dict((want['path'], path_state(want['path'])) for want in p['paths'])
        result['paths_differing'] = paths_differing(result['paths'], p['paths'])
    return result
