# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The systemd-cgroup daemon-reload hazard of GPU containers (issue 46), and NVIDIA's remedy: pure functions.

On a Docker daemon with the systemd cgroup driver, ``systemctl daemon-reload`` makes systemd rewrite the device
rules of every running container's scope from what it can resolve under /dev/char; the NVIDIA device nodes have
no /dev/char/<major>:<minor> link, so running GPU containers lose them ("Failed to initialize NVML: Unknown
Error"; NVIDIA/nvidia-container-toolkit issues 48 and 251). NVIDIA's documented remedy (toolkit >= 1.12.0):
``nvidia-ctk system create-dev-char-symlinks --create-all`` now, and at boot through a udev rule on the nvidia
driver (NVIDIA/nvidia-docker issue 1671, the notice). The cgroupfs driver is not exposed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.airgap.vllm.plugins.module_utils.common._version import at_least

# The first toolkit that has `nvidia-ctk system create-dev-char-symlinks`.
MIN_TOOLKIT = '1.12.0'
# Where NVIDIA says to install the rule.
RULE_PATH = '/lib/udev/rules.d/71-nvidia-dev-char.rules'
MARKER = '# airgap.vllm.nvidia_toolkit: /dev/char links of the NVIDIA device nodes (systemd cgroup driver)'
# NVIDIA's rule, word for word but for the path to nvidia-ctk (NVIDIA/nvidia-docker issue 1671).
RULE_COMMENT = '# This will create /dev/char symlinks to all device nodes'
RULE_LINE = 'ACTION=="add", DEVPATH=="/bus/pci/drivers/nvidia", RUN+="%s system create-dev-char-symlinks --create-all"'
DEV = '/dev'
DEV_CHAR = '/dev/char'


def rule_text(nvidia_ctk='/usr/bin/nvidia-ctk'):
    """The udev rule file's content: our marker, then NVIDIA's rule."""
    if not nvidia_ctk.startswith('/') or '"' in nvidia_ctk or '\n' in nvidia_ctk:
        raise ValueError('nvidia-ctk must be an absolute path without quotes (udev runs it by path): %r' % nvidia_ctk)
    return '%s\n%s\n%s\n' % (MARKER, RULE_COMMENT, RULE_LINE % nvidia_ctk)


def missing_links(nodes, links):
    """The NVIDIA device nodes that have no /dev/char link pointing at them.

    nodes: [{'path': '/dev/nvidia0', 'major': 195, 'minor': 0, 'real': its resolved path (default path)}], the
    character devices named nvidia*;
    links: {'195:0': '/dev/nvidia0' (the link's resolved target) or None (absent)}.
    Returns the nodes' paths, sorted.
    """
    out = []
    for node in nodes or []:
        key = '%d:%d' % (int(node['major']), int(node['minor']))
        target = (links or {}).get(key)
        if target != node.get('real', node['path']):
            out.append(node['path'])
    return sorted(out)


def read_dev_char(dev=DEV, dev_char=DEV_CHAR):
    """Read the host: the nvidia* character devices under `dev` (and dev/nvidia-caps) and their dev_char links.

    Returns {'nodes': [...], 'links': {...}, 'missing': [...]} (see missing_links)."""
    nodes = []
    for base in (dev, os.path.join(dev, 'nvidia-caps')):
        try:
            names = sorted(os.listdir(base))
        except OSError:
            continue
        for name in names:
            if base == dev and not name.startswith('nvidia'):
                continue
            path = os.path.join(base, name)
            try:
                st = os.stat(path)
            except OSError:
                continue
            if not (st.st_mode & 0o170000) == 0o020000:  # S_IFCHR
                continue
            nodes.append(
                {
                    'path': path,
                    'major': os.major(st.st_rdev),
                    'minor': os.minor(st.st_rdev),
                    'real': os.path.realpath(path),
                }
            )
    links = {}
    for node in nodes:
        key = '%d:%d' % (node['major'], node['minor'])
        link = os.path.join(dev_char, key)
        links[key] = os.path.realpath(link) if os.path.lexists(link) and os.path.exists(link) else None
    return {'nodes': nodes, 'links': links, 'missing': missing_links(nodes, links)}


def exposure(docker, toolkit_version):
    """Is this host exposed to the hazard, and what is the remedy?

    docker: host_info's docker facts (running, cgroup_driver, cgroup_version); toolkit_version: the installed
    nvidia-container-toolkit version-release ('1.17.8-1'), '' or None when not installed.
    Returns {'status': 'exposed' | 'safe' | 'unknown', 'remedy': bool (the toolkit stage applies NVIDIA's remedy),
    'detail': text, 'error': text ('' unless the remedy cannot be applied)}.
    """
    docker = docker or {}
    driver = (docker.get('cgroup_driver') or '').strip().lower()
    version = (toolkit_version or '').split('-')[0]
    if not docker.get('running'):
        return {
            'status': 'unknown',
            'remedy': False,
            'error': '',
            'detail': 'Docker not running: its cgroup driver is unknown',
        }
    if driver != 'systemd':
        return {
            'status': 'safe',
            'remedy': False,
            'error': '',
            'detail': 'Docker cgroup driver %s: a systemctl daemon-reload leaves GPU containers their devices'
            % (driver or 'unknown'),
        }
    detail = (
        'Docker cgroup driver systemd (cgroup v%s), toolkit %s: a systemctl daemon-reload takes the GPUs '
        'from running GPU containers ("Failed to initialize NVML: Unknown Error") unless every NVIDIA '
        'device node has a /dev/char link' % (docker.get('cgroup_version') or '?', toolkit_version or 'none')
    )
    if version and not at_least(version, MIN_TOOLKIT):
        return {
            'status': 'exposed',
            'remedy': False,
            'detail': detail,
            'error': 'nvidia-container-toolkit %s has no `nvidia-ctk system create-dev-char-symlinks` '
            '(from %s); install a newer toolkit or set Docker\'s exec-opts '
            'native.cgroupdriver=cgroupfs' % (toolkit_version, MIN_TOOLKIT),
        }
    return {'status': 'exposed', 'remedy': True, 'detail': detail, 'error': ''}


def remedy_plan(docker, toolkit_version, dev_char, nvidia_ctk='/usr/bin/nvidia-ctk'):
    """What the toolkit stage does about the hazard.

    dev_char: read_dev_char's answer (host_info's dev_char). Returns exposure() plus 'missing' (the device nodes
    without a link), 'links' (bool: run create-dev-char-symlinks now), 'rule' (bool: install NVIDIA's udev rule
    so the links come back at boot), 'argv' (the nvidia-ctk command line) and 'content' (the rule file).
    """
    verdict = dict(exposure(docker, toolkit_version))
    want = verdict['remedy']
    missing = (dev_char or {}).get('missing') or []
    verdict['missing'] = list(missing)
    verdict['links'] = bool(want and missing)
    verdict['rule'] = want
    verdict['argv'] = [nvidia_ctk, 'system', 'create-dev-char-symlinks', '--create-all']
    verdict['content'] = rule_text(nvidia_ctk)
    return verdict
