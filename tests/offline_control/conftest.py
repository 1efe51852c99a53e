"""Fixtures the offline control node's test files share (pytest finds them by name, with no import)."""

import shutil
import subprocess

import pytest


@pytest.fixture(scope="module")
def needs_docker():
    if (
        not shutil.which("docker")
        or subprocess.run(
            ["docker", "info"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
        ).returncode
        != 0
    ):
        pytest.skip("needs Docker (the simulated host and the control node are containers)")
