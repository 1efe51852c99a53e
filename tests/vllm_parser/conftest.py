"""Shared fixture: the cached CPU venv holding the real vLLM 0.27.1 (built by setup-venv.sh)."""

import os
import runpy
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
# tests/unit/conftest.py makes the work tree importable as ansible_collections.airgap.vllm
runpy.run_path(os.path.join(ROOT, "tests", "unit", "conftest.py"))


@pytest.fixture(scope="session")
def venv_python():
    try:
        proc = subprocess.run(
            ["bash", os.path.join(HERE, "setup-venv.sh")],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            universal_newlines=True,
            timeout=3600,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip("vLLM 0.27.1 venv could not be built: %s" % exc)
    if proc.returncode != 0:
        pytest.skip("vLLM 0.27.1 venv could not be built:\n%s" % proc.stdout[-2000:])
    return os.path.join(proc.stdout.strip().splitlines()[-1], "bin", "python")
