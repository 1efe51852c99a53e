# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host facts the GPU roles decide on, Kylin-aware: a Kylin service pack is a name, never `V10` as a number."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import shlex

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
