"""Fabric Manager: who needs it, which RPM, and what proves it set up the NVLink fabric."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import os

import pytest
import yaml

from ansible_collections.airgap.vllm.plugins.module_utils.driver._fabric_manager import (
    KEEP_GLOBS,
    PACKAGE,
    SUCCESS_LINE,
    UNIT,
    bundle_entry_problem,
    decision,
    keep_globs,
    last_run_log,
    normalize_setting,
    parse_smi_fabric,
    pick_entry,
    pick_rpm,
    report,
    rpm_choice,
    rpm_file_name,
)
from ansible_collections.airgap.vllm.plugins.module_utils.driver._nvidia_rpms import driver_packages

HGX = {
    'error': None,
    'nvswitches': [{}, {}],
    'nvswitch_summary': [
        '0000:05:00.0 GH100 [H100 NVSwitch] [10de:22a3]',
        '0000:06:00.0 GH100 [H100 NVSwitch] [10de:22a3]',
    ],
}
PCIE = {'error': None, 'nvswitches': [], 'nvswitch_summary': []}


@pytest.mark.parametrize(
    'value,want',
    [
        (True, 'true'),
        (False, 'false'),
        ('auto', 'auto'),
        (' AUTO ', 'auto'),
        ('yes', 'true'),
        ('off', 'false'),
        (None, 'auto'),
    ],
)
def test_settings_as_yaml_gives_them(value, want):
    assert normalize_setting(value) == want


def test_a_setting_that_is_none_of_the_three_is_refused():
    with pytest.raises(ValueError, match='auto, true or false'):
        normalize_setting('sometimes')


def test_auto_manages_fabric_manager_on_an_nvswitch_system_only():
    hgx = decision('auto', HGX)
    assert hgx['needed'] is True and '2 NVSwitch(es)' in hgx['reason'] and 'class 0680' in hgx['reason']
    # A PCIe server (the driver scenario's RTX 6000 Ada host): no Fabric Manager at all.
    plain = decision('auto', PCIE)
    assert plain['needed'] is False and plain['reason'] == 'lspci shows no NVSwitch (vendor 10de, class 0680)'


def test_auto_cannot_decide_without_the_bus():
    failed = decision('auto', {'error': 'lspci not found (install pciutils)', 'nvswitches': []})
    assert failed['needed'] is None and 'lspci not found' in failed['reason']
    assert 'set nvidia_driver_fabric_manager to true or false' in failed['reason']
    assert decision('auto', None)['needed'] is None


def test_the_operator_forces_it_either_way():
    assert decision(True, PCIE)['needed'] is True
    assert decision('true', None)['needed'] is True
    forced_off = decision(False, HGX)
    assert forced_off['needed'] is False and 'no NVLink fabric' in forced_off['reason']


def test_the_driver_clean_up_keeps_fabric_manager_only_where_it_is_needed():
    installed = dict(
        (n, ['3:570.172.08-1.x86_64'])
        for n in ('nvidia-driver', 'nvidia-fabric-manager', 'nvidia-fabric-manager-devel', 'libnvidia-nscq')
    )
    assert keep_globs(['x*'], False) == ['x*']
    assert keep_globs(['x*'], True) == ['x*'] + list(KEEP_GLOBS)
    assert driver_packages(installed, keep_globs([], True)) == ['nvidia-driver']
    # A host without NVSwitches loses an old Fabric Manager with the packaged driver, as before.
    assert 'nvidia-fabric-manager' in driver_packages(installed, keep_globs([], False))


def test_rpm_names_as_nvidia_ships_them():
    assert rpm_file_name('580.65.06') == 'nvidia-fabric-manager-580.65.06-1.x86_64.rpm'
    paths = [
        'artifacts/fm/nvidia-fabric-manager-devel-580.65.06-1.x86_64.rpm',
        'artifacts/fm/nvidia-fabric-manager-570.172.08-1.x86_64.rpm',
        'artifacts/fm/nvidia-fabric-manager-580.65.06-1.x86_64.rpm',
    ]
    assert pick_rpm(paths, '580.65.06') == 'artifacts/fm/nvidia-fabric-manager-580.65.06-1.x86_64.rpm'
    assert pick_rpm(paths[:2], '580.65.06') is None
    assert pick_rpm(['artifacts/nvidia-fabric-manager-580.65.06-1.x86_64.rpm'], '580.65') is None


def test_bundle_entries_with_and_without_the_rpm():
    good = [{'kind': 'fabricmanager', 'path': 'artifacts/' + rpm_file_name('580.65.06'), 'version': '580.65.06'}]
    assert bundle_entry_problem(good, '580.65.06') is None
    assert bundle_entry_problem(good, '590.10.01') == 'it carries nvidia-fabric-manager-580.65.06-1.x86_64.rpm'
    assert bundle_entry_problem([{'kind': 'driver', 'path': 'artifacts/x.run'}], '580.65.06') == (
        'it carries no fabricmanager artifact'
    )


FM = 'nvidia-fabric-manager-580.65.06-1.x86_64.rpm'


def test_a_renamed_rpm_is_found_by_its_version_by_the_role_and_by_validate_alike():
    """Issue 32: the role (bundle_staged) and validate (the manifest) pick with the one pick_entry."""
    renamed = {'kind': 'fabricmanager', 'path': 'artifacts/fm-580.rpm', 'version': '580.65.06'}
    assert pick_entry([renamed], '580.65.06') == renamed
    assert bundle_entry_problem([renamed], '580.65.06') is None
    staged = {'fabricmanager': [dict(renamed, path='/stage/artifacts/fm-580.rpm')]}
    assert rpm_choice('', staged, '580.65.06', '/stage/artifacts')['path'] == '/stage/artifacts/fm-580.rpm'
    # Renamed and of another version: neither takes it.
    other = dict(renamed, version='570.172.08')
    assert pick_entry([other], '580.65.06') is None
    assert bundle_entry_problem([other], '580.65.06') == 'it carries fm-580.rpm'
    assert rpm_choice('', {'fabricmanager': [other]}, '580.65.06', '/s')['source'] == 'default'


def test_nvidias_file_name_wins_over_a_version_label_and_devel_or_nscq_never_count():
    named = {'path': 'artifacts/fm/' + FM, 'version': 'wrong-label'}
    devel = {'path': 'artifacts/fm/nvidia-fabric-manager-devel-580.65.06-1.x86_64.rpm', 'version': '580.65.06'}
    nscq = {'path': 'artifacts/fm/libnvidia-nscq-580-580.65.06-1.x86_64.rpm', 'version': '580.65.06'}
    assert pick_entry([devel, nscq, named], '580.65.06') == named
    assert pick_entry([devel, nscq], '580.65.06') is None
    assert pick_entry(None, '580.65.06') is None


def test_the_roles_rpm_is_the_setting_else_the_staged_one_else_the_default_name():
    staged = {'fabricmanager': [{'path': '/stage/artifacts/' + FM, 'version': '580.65.06'}]}
    assert rpm_choice('/opt/my.rpm', staged, '580.65.06', '/stage/artifacts') == dict(
        path='/opt/my.rpm', file_name=FM, source='setting', package=PACKAGE, unit=UNIT
    )
    assert rpm_choice('', staged, '580.65.06', '/stage/artifacts') == dict(
        path='/stage/artifacts/' + FM, file_name=FM, source='staged', package=PACKAGE, unit=UNIT
    )
    for nothing in (None, {}, {'fabricmanager': []}):
        assert rpm_choice(None, nothing, '580.65.06', '/stage/artifacts/') == dict(
            path='/stage/artifacts/' + FM, file_name=FM, source='default', package=PACKAGE, unit=UNIT
        )


# `nvidia-smi -q` of an HGX H100 (its shape; other sections cut), a GPU registering and an A100 (no fabric state).
SMI = """
==============NVSMI LOG==============

Driver Version                            : 580.65.06
Attached GPUs                             : 3
GPU 00000000:18:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
    Fabric
        State                             : Completed
        Status                            : Success
        CliqueId                          : 0
        ClusterUUID                       : 00000000-0000-0000-0000-000000000000
        Health
            Summary                       : Healthy
            State                         : Ignored
    Processes                             : None
GPU 00000000:2A:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
    Fabric
        State                             : In Progress
        Status                            : N/A
GPU 00000000:3A:00.0
    Product Name                          : NVIDIA A100-SXM4-80GB
    Fabric
        State                             : N/A
        Status                            : N/A
"""


def test_parse_each_gpus_fabric_section_only():
    assert parse_smi_fabric(SMI) == [
        {'gpu': '00000000:18:00.0', 'state': 'Completed', 'status': 'Success'},
        {'gpu': '00000000:2A:00.0', 'state': 'In Progress', 'status': 'N/A'},
        {'gpu': '00000000:3A:00.0', 'state': 'N/A', 'status': 'N/A'},
    ]
    assert parse_smi_fabric('') == [] and parse_smi_fabric(None) == []


def test_every_gpu_completed_and_the_unit_active_is_proof():
    gpus = parse_smi_fabric(SMI)[:1]
    ok = report('active', gpus, '')
    assert ok['ok'] and ok['final'] and ok['completed'] == ['GPU 00000000:18:00.0']
    assert 'Completed, Status Success on all 1 GPU(s)' in ok['msg']


def test_registration_in_progress_waits_and_an_error_status_is_final():
    pending = report('active', parse_smi_fabric(SMI)[:2], '')
    assert not pending['ok'] and not pending['final'] and 'In Progress' in pending['msg']
    failed = report('active', [{'gpu': 'x', 'state': 'Completed', 'status': 'Insufficient Resources'}], '')
    assert not failed['ok'] and failed['final'] and 'Status Insufficient Resources' in failed['msg']


def test_a_unit_that_is_not_active_fails_naming_where_to_look():
    failed = report('failed', parse_smi_fabric(SMI)[:1], '')
    assert not failed['ok'] and failed['final']
    assert failed['msg'].startswith('nvidia-fabricmanager.service is failed, not active: see systemctl status')
    starting = report('activating', [], '')
    assert not starting['ok'] and not starting['final']


LOG_OK = (
    "[Dec 02 2026 11:14:22] [INFO] [tid 1] Fabric Manager version 535.1 is running with the following ...\n"
    "[Dec 02 2026 11:14:22] [INFO] [tid 2] " + SUCCESS_LINE + ". NVLink Peer-to-Peer support will be ...\n"
)
LOG_FAILED_AFTER = LOG_OK + (
    "[Dec 02 2026 11:20:00] [INFO] [tid 3] Fabric Manager version 535.2 is running with the following ...\n"
    "[Dec 02 2026 11:20:00] [ERROR] [tid 3] fabric manager NVIDIA GPU driver interface version 535.2 don't match "
    "with driver version 535.1. Please update with matching NVIDIA driver package.\n"
)


def test_pre_hopper_gpus_are_proven_by_the_last_starts_log_line():
    a100 = parse_smi_fabric(SMI)[2:]
    assert last_run_log(LOG_FAILED_AFTER).startswith('Fabric Manager version 535.2 is running')
    assert last_run_log('no start logged') == ''
    assert report('active', a100, LOG_OK)['ok']
    stale = report('active', a100, LOG_FAILED_AFTER)
    assert not stale['ok'] and SUCCESS_LINE in stale['msg']
    assert not report('active', a100, '')['ok']


def test_mixed_reporting_gpus_are_not_proof():
    mixed = report('active', [parse_smi_fabric(SMI)[0], parse_smi_fabric(SMI)[2]], LOG_OK)
    assert not mixed['ok'] and mixed['final'] and 'not reported for GPU 00000000:3A:00.0' in mixed['msg']


ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))
DOC_NAMES = ('DOCUMENTATION', 'EXAMPLES', 'RETURN')


def _yaml_strings(node):
    if isinstance(node, dict):
        for key, value in node.items():
            yield '%s' % key
            yield from _yaml_strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _yaml_strings(value)
    elif isinstance(node, str):
        yield node


def _code_strings(path):
    """String constants of a Python file that are code, not docstrings or DOCUMENTATION/EXAMPLES/RETURN."""
    with open(path) as f:
        tree = ast.parse(f.read())
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skip.add(id(first.value))
        if isinstance(node, ast.Assign) and any(getattr(t, 'id', None) in DOC_NAMES for t in node.targets):
            skip.add(id(node.value))
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip
    ]


def test_the_package_and_unit_names_have_one_home():
    """The Fabric Manager package (and its unit) are spelled in _fabric_manager.py alone: the role takes them from
    the filter fabric_manager_rpm (rpm_choice), no other plugin code and no role task, variable or template writes them
    (descriptions and comments may name them). The unit is also a value of the operator's
    nvidia_driver_holder_units default (defaults/main.yml = argument_specs: a list the operator replaces), left to it."""
    assert rpm_choice('', None, '580.65.06', '/s')['package'] == PACKAGE == 'nvidia-fabric-manager'
    assert rpm_choice('/x.rpm', None, '580.65.06', '/s')['unit'] == UNIT == 'nvidia-fabricmanager.service'
    assert rpm_file_name('580.65.06').startswith(PACKAGE + '-')
    names = (PACKAGE, UNIT)
    found = []
    for dirpath, _dirs, files in os.walk(os.path.join(ROOT, 'plugins')):
        for name in files:
            path = os.path.join(dirpath, name)
            if name.endswith('.py') and not path.endswith(os.path.join('module_utils', 'driver', '_fabric_manager.py')):
                found += ['%s: %r' % (path, t) for t in _code_strings(path) if any(n in t for n in names)]
    roles = os.path.join(ROOT, 'roles')
    for role in sorted(os.listdir(roles)):
        for sub in ('tasks', 'vars', 'defaults', 'handlers', 'templates'):
            for dirpath, _dirs, files in os.walk(os.path.join(roles, role, sub)):
                for name in files:
                    path = os.path.join(dirpath, name)
                    with open(path) as f:
                        text = f.read()
                    if name.endswith(('.yml', '.yaml')):
                        texts = list(_yaml_strings(yaml.safe_load(text)))
                    else:
                        texts = [line for line in text.splitlines() if not line.lstrip().startswith('#')]
                    here = (PACKAGE,) if sub == 'defaults' else names
                    found += ['%s: %r' % (path, t) for t in texts if any(n in t for n in here)]
    assert found == []
