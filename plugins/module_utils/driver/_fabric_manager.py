# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fabric Manager on NVSwitch systems: does the host need it, which RPM, and did it set up the fabric?

HGX/DGX baseboards wire their GPUs to NVSwitches, not to each other; until NVIDIA's Fabric Manager
(`nv-fabricmanager`, unit `nvidia-fabricmanager.service`, RPM `nvidia-fabric-manager`) has programmed the switches,
CUDA on those GPUs fails with cudaErrorSystemNotReady. It is lockstep-versioned with the driver: it aborts when the
loaded driver is another version ("fabric manager NVIDIA GPU driver interface version X don't match with driver
version Y"), and on a host without NVSwitches it refuses to start ("... [NV_WARN_NOTHING_TO_DO]").

The decisions here, pure, for host_info (the probe: needed, and which installed RPMs the driver clean-up keeps),
airgap.vllm.validate (a bundle without the RPM for a host that needs it) and airgap.vllm.driver_fabric_manager (the
verification after the start).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

SETTINGS = ('auto', 'true', 'false')
PACKAGE = 'nvidia-fabric-manager'
UNIT = 'nvidia-fabricmanager.service'
# The driver clean-up keeps these on a host that needs Fabric Manager (older names: nvidia-fabricmanager-<branch>).
KEEP_GLOBS = (PACKAGE + '*', 'nvidia-fabricmanager*', 'libnvidia-nscq*')
# RPMs that may travel in the bundle's fabricmanager artifacts beside FM itself: never the one the role installs.
OTHER_RPMS = (PACKAGE + '-devel', 'libnvidia-nscq')
# What FM writes when it has set up the fabric (its log and syslog), and the line it starts each run's log with.
SUCCESS_LINE = 'Successfully configured all the available NVSwitches to route GPU NVLink traffic'
START_LINE = re.compile(r'Fabric Manager version \S+ is running')
_TRUE = ('true', 'yes', 'on', '1', 'y', 't')
_FALSE = ('false', 'no', 'off', '0', 'n', 'f')


def normalize_setting(value):
    """'auto', 'true' or 'false' from the variable as YAML gives it (a boolean or a string); ValueError otherwise."""
    if isinstance(value, bool):
        return 'true' if value else 'false'
    text = ('%s' % ('auto' if value is None else value)).strip().lower()
    if text == 'auto':
        return 'auto'
    if text in _TRUE:
        return 'true'
    if text in _FALSE:
        return 'false'
    raise ValueError('nvidia_driver_fabric_manager must be auto, true or false, not %r' % (value,))


# An explicit setting's reason goes on with what lspci shows (%d: the NVSwitches found), said only when it found any.
_EXPLICIT_NOTE = {
    'true': ' (lspci shows %d NVSwitch(es))',
    'false': ' although lspci shows %d NVSwitch(es): the GPUs get no NVLink fabric',
}


def decision(setting, pci):
    """{'needed': True/False/None, 'reason': str, 'nvswitches': [summary lines]} for one host.

    setting: nvidia_driver_fabric_manager (normalized or not); pci: host_info's `pci` result ({'error',
    'nvswitches', 'nvswitch_summary'}) or None when the bus was not read. needed is None when auto cannot tell
    (lspci failed): the caller fails, since guessing wrong either way breaks the host (no FM on an NVSwitch
    system: no CUDA; FM on a host without NVSwitches: a unit that never starts).
    """
    setting = normalize_setting(setting)
    pci = pci or {}
    found = list(pci.get('nvswitch_summary') or [])
    if setting in _EXPLICIT_NOTE:
        return dict(
            needed=setting == 'true',
            nvswitches=found,
            reason='nvidia_driver_fabric_manager is %s%s'
            % (setting, _EXPLICIT_NOTE[setting] % len(found) if found else ''),
        )
    if pci.get('error') or 'nvswitches' not in pci:
        return dict(
            needed=None,
            nvswitches=[],
            reason=(
                'cannot tell whether this is an NVSwitch system: %s; set nvidia_driver_fabric_manager to true or false'
                % (pci.get('error') or 'the PCI bus was not read')
            ),
        )
    if found:
        return dict(
            needed=True,
            nvswitches=found,
            reason='lspci shows %d NVSwitch(es) (vendor 10de, class 0680): %s' % (len(found), ', '.join(found)),
        )
    return dict(needed=False, nvswitches=[], reason='lspci shows no NVSwitch (vendor 10de, class 0680)')


def keep_globs(keep, needed):
    """The driver clean-up's keep patterns: the operator's, plus Fabric Manager's when the host needs it (the role
    installs and upgrades it with the driver; a host without NVSwitches loses an old one with the packaged driver)."""
    out = list(keep or [])
    if needed:
        out.extend(g for g in KEEP_GLOBS if g not in out)
    return out


def rpm_file_name(version, arch='x86_64'):
    """NVIDIA's RHEL 8 file name of the Fabric Manager RPM of a driver version."""
    return '%s-%s-1.%s.rpm' % (PACKAGE, version, arch)


def pick_rpm(paths, version):
    """The bundle path of the Fabric Manager RPM (not -devel) of `version` among staged paths, or None."""
    want = re.compile(r'(^|/)%s-%s-[^/-]+\.[^/.]+\.rpm$' % (re.escape(PACKAGE), re.escape(str(version))))
    for path in sorted(paths or []):
        if want.search(path):
            return path
    return None


def pick_entry(entries, version):
    """The `fabricmanager` artifact entry ({'path', 'version', ...}) that holds the Fabric Manager RPM of `version`,
    or None: the one whose file name is NVIDIA's for that version (pick_rpm), else, for a renamed file, the first
    whose `version` is that version and whose name is not one of the RPMs that travel beside it (-devel, NSCQ).

    The one rule for both readers of the bundle: airgap.vllm.validate (the manifest's entries, bundle_entry_problem)
    and the nvidia_driver role (the bundle role's staged entries, rpm_choice), so they cannot disagree on a file.
    """
    entries = [e for e in entries or [] if isinstance(e, dict)]
    by_name = pick_rpm([e.get('path') or '' for e in entries], version)
    if by_name:
        return [e for e in entries if (e.get('path') or '') == by_name][0]
    for e in entries:
        name = (e.get('path') or '').rstrip('/').rsplit('/', 1)[-1]
        if name and '%s' % e.get('version', '') == '%s' % version and not name.startswith(OTHER_RPMS):
            return e
    return None


def rpm_choice(setting, staged, version, stage_dir):
    """{'path', 'file_name', 'source', 'package', 'unit'} of the Fabric Manager RPM the nvidia_driver role installs.

    setting: nvidia_driver_fabric_manager_rpm ('' or None: derive it); staged: the bundle role's `bundle_staged`
    fact (kind to entries) or None; stage_dir: the directory the bundle stages artifacts to. path is the setting when
    set (source 'setting'), else the staged entry pick_entry finds ('staged'), else <stage_dir>/rpm_file_name(version)
    ('default'); file_name is NVIDIA's name of the RPM of `version`, for messages; package and unit are the RPM's
    package name and the unit it ships (PACKAGE, UNIT: the role installs, starts and removes them by these names).
    """
    names = dict(file_name=rpm_file_name(version), package=PACKAGE, unit=UNIT)
    if setting not in (None, ''):
        return dict(names, path='%s' % setting, source='setting')
    entry = pick_entry((staged or {}).get('fabricmanager') or [], version)
    if entry and entry.get('path'):
        return dict(names, path=entry['path'], source='staged')
    return dict(names, path='%s/%s' % (('%s' % stage_dir).rstrip('/'), names['file_name']), source='default')


def bundle_entry_problem(entries, version):
    """None when the manifest's `fabricmanager` entries carry the Fabric Manager RPM of `version` (pick_entry), else
    what is there (for validate's message). entries: manifest entries ({'kind', 'path', 'version'})."""
    fm = [e for e in entries or [] if e.get('kind') == 'fabricmanager']
    if pick_entry(fm, version):
        return None
    have = sorted(set(e.get('path', '').rsplit('/', 1)[-1] for e in fm))
    return 'it carries %s' % (', '.join(have) if have else 'no fabricmanager artifact')


# ---------------------------------------------------------------- verification


def parse_smi_fabric(text):
    """Each GPU's Fabric section of `nvidia-smi -q`: [{'gpu': bus id, 'state': str, 'status': str}] in order.

    nvidia-smi prints, per `GPU 00000000:18:00.0` block, `    Fabric` then `        State   : Completed` and
    `        Status  : Success` (N/A where the GPU has no fabric to register with, or NVML cannot say: pre-Hopper).
    """
    out = []
    gpu = None
    in_fabric = False
    fabric_indent = 0
    for line in (text or '').splitlines():
        m = re.match(r'^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$', line)
        if m:
            gpu = {'gpu': m.group(1), 'state': None, 'status': None}
            out.append(gpu)
            in_fabric = False
            continue
        if gpu is None or not line.strip():
            continue
        indent = len(line) - len(line.lstrip(' '))
        if line.strip() == 'Fabric':
            in_fabric, fabric_indent = True, indent
            continue
        if in_fabric and indent <= fabric_indent:
            in_fabric = False
        if in_fabric and indent == fabric_indent + 4 and ':' in line:
            key, _sep, value = line.strip().partition(':')
            key = key.strip().lower()
            if key in ('state', 'status'):
                gpu[key] = value.strip()
    return out


def last_run_log(text):
    """The part of FM's log written by its last start (each start logs 'Fabric Manager version X is running ...'),
    or '' when no start is in it."""
    text = text or ''
    starts = list(START_LINE.finditer(text))
    return text[starts[-1].start() :] if starts else ''


def report(unit_state, gpus, log_text, unit=UNIT, log_file='/var/log/fabricmanager.log'):
    """{'ok': bool, 'final': bool, 'completed': [...], 'pending': [...], 'failed': [...], 'unsupported': [...],
    'msg': str} from the unit's ActiveState, parse_smi_fabric() and FM's log.

    ok: the unit is active and every GPU's fabric State is Completed with Status Success; where NVML cannot say
    (every GPU N/A: A100 and older report no fabric state) the last start's log line that all NVSwitches were
    configured stands for it. final: waiting longer cannot change the answer (a failed unit, a Completed state
    with an error status).
    """
    gpus = gpus or []
    completed, pending, failed, unsupported = [], [], [], []
    for g in gpus:
        state, status = g.get('state') or 'N/A', g.get('status') or 'N/A'
        name = 'GPU %s' % g.get('gpu')
        if state == 'Completed' and status == 'Success':
            completed.append(name)
        elif state == 'Completed':
            failed.append('%s (State Completed, Status %s)' % (name, status))
        elif state in ('N/A', 'Not Supported'):
            unsupported.append(name)
        else:
            pending.append('%s (State %s)' % (name, state))
    empty = dict(completed=completed, pending=pending, failed=failed, unsupported=unsupported)
    see = 'see systemctl status %s, journalctl -u %s and %s' % (unit, unit, log_file)
    if unit_state != 'active':
        return dict(
            empty,
            ok=False,
            final=unit_state == 'failed',
            msg='%s is %s, not active: %s' % (unit, unit_state or 'unknown', see),
        )
    if not gpus:
        return dict(empty, ok=False, final=False, msg='nvidia-smi -q lists no GPU: the fabric cannot be verified')
    if failed:
        return dict(empty, ok=False, final=True, msg='Fabric registration failed on %s: %s' % (', '.join(failed), see))
    if pending:
        return dict(
            empty,
            ok=False,
            final=False,
            msg='Fabric registration not complete on %s (%d of %d GPU(s) '
            'Completed): %s' % (', '.join(pending), len(completed), len(gpus), see),
        )
    if unsupported and not completed:
        if SUCCESS_LINE in last_run_log(log_text):
            return dict(
                empty,
                ok=True,
                final=True,
                msg=(
                    '%s active; NVML reports no fabric state on these GPUs (pre-Hopper), and its last start logged: %s'
                    % (unit, SUCCESS_LINE)
                ),
            )
        return dict(
            empty,
            ok=False,
            final=False,
            msg=(
                'NVML reports no fabric state on %d GPU(s) and %s has no line "%s" since its last start: %s'
                % (len(unsupported), log_file, SUCCESS_LINE, see)
            ),
        )
    if unsupported:
        return dict(
            empty,
            ok=False,
            final=True,
            msg='Fabric state Completed on %s but not reported for %s: %s'
            % (', '.join(completed), ', '.join(unsupported), see),
        )
    return dict(
        empty,
        ok=True,
        final=True,
        msg='%s active; fabric State Completed, Status Success on all %d GPU(s)' % (unit, len(completed)),
    )
