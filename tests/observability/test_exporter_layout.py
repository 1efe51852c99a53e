"""The GPU exporter as the vllm_observe role lays it out on a host (vars/main.yml's lists, files/airgap-gpu-exporter):
it runs from its own copy of the collection's code, with no collection installed, and writes the textfile."""

import json
import os
import shutil
import subprocess
import sys
import uuid

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLE = os.path.join(ROOT, 'roles', 'vllm_observe')


KYLIN_IMAGE = 'airgap-test/kylin:v10sp3'


def install_layout(tmp_path):
    """What tasks/install.yml puts on a host, under tmp_path/observe."""
    with open(os.path.join(ROLE, 'vars', 'main.yml')) as f:
        role_vars = yaml.safe_load(f)
    install = tmp_path / 'observe'
    (install / 'bin').mkdir(parents=True)
    for package in role_vars['__vllm_observe_packages']:
        (install / 'lib' / package).mkdir(parents=True, exist_ok=True)
        (install / 'lib' / package / '__init__.py').write_text('')
    lib = install / 'lib' / 'ansible_collections' / 'airgap' / 'vllm' / 'plugins' / 'module_utils'
    for name in role_vars['__vllm_observe_module_utils']:
        shutil.copy(os.path.join(ROOT, 'plugins', 'module_utils', name), str(lib / name))
    shutil.copy(os.path.join(ROLE, 'files', 'airgap-gpu-exporter'), str(install / 'bin' / 'airgap-gpu-exporter'))
    return install


def test_exporter_runs_from_the_installed_layout(tmp_path):
    install = install_layout(tmp_path)
    textfiles = tmp_path / 'textfile'
    textfiles.mkdir()
    env = {'PATH': os.environ.get('PATH', ''), 'PYTHONNOUSERSITE': '1'}  # no PYTHONPATH: nothing but the copy
    proc = subprocess.run(
        [
            sys.executable,
            '-S',
            str(install / 'bin' / 'airgap-gpu-exporter'),
            str(textfiles),
            '--library',
            str(tmp_path / 'no-libnvidia-ml.so.1'),
            '--no-xid',
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        universal_newlines=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert 'NVML: absent' in proc.stderr
    text = (textfiles / 'airgap_gpu.prom').read_text()
    assert 'airgap_gpu_exporter_up{nvml_state="absent"} 0' in text
    assert 'airgap_gpu_exporter_last_run_timestamp_seconds ' in text


def _docker_ok():
    return (
        shutil.which('docker')
        and subprocess.run(
            ['docker', 'info'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
        ).returncode
        == 0
    )


@pytest.mark.skipif(not _docker_ok(), reason='docker is not available')
def test_exporter_on_the_simulated_kylin_host(tmp_path):
    """The test world's Kylin image with its stand-in NVIDIA driver (libnvidia-ml answering from
    /etc/fake-nvidia/state.json): the exporter, as installed, writes that GPU's figures."""
    if (
        subprocess.run(
            ['docker', 'image', 'inspect', KYLIN_IMAGE],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        ).returncode
        != 0
    ):
        pytest.fail('image %s missing: run bash tests/world/build.sh' % KYLIN_IMAGE)
    install = install_layout(tmp_path)
    out = tmp_path / 'out'
    out.mkdir()
    os.chmod(str(out), 0o777)
    name = 'observe-test-%s' % uuid.uuid4().hex[:10]
    script = (
        'python3 /opt/observe/bin/airgap-gpu-exporter /out --no-xid && cat /etc/fake-nvidia/state.json >/out/state.json'
    )
    proc = subprocess.run(
        [
            'docker',
            'run',
            '--rm',
            '--network',
            'none',
            '--name',
            name,
            '-v',
            '%s:/opt/observe:ro' % install,
            '-v',
            '%s:/out' % out,
            KYLIN_IMAGE,
            'bash',
            '-c',
            script,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        universal_newlines=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    state = json.loads((out / 'state.json').read_text())
    text = (out / 'airgap_gpu.prom').read_text()
    assert 'airgap_gpu_exporter_up{nvml_state="ok"} 1' in text
    assert 'airgap_gpu_count %d' % len(state['gpus']) in text
    g = state['gpus'][0]
    line = [x for x in text.splitlines() if x.startswith('DCGM_FI_DEV_FB_FREE{gpu="0"')][0]
    assert 'UUID="%s"' % g['uuid'] in line and 'modelName="%s"' % g['name'] in line
    assert int(line.rsplit(' ', 1)[1]) == (g['memory_total'] - g.get('memory_used', 0)) // (1024 * 1024)
