"""Tests against the real vLLM wheel (downloaded once from PyPI, cached in $AIRGAP_CACHE/wheels)."""

import importlib.util
import os

# tests/unit/conftest.py links the work tree as ansible_collections.airgap.vllm; reuse it, by path.
_spec = importlib.util.spec_from_file_location(
    "airgap_unit_conftest", os.path.join(os.path.dirname(__file__), "..", "unit", "conftest.py")
)
_spec.loader.exec_module(importlib.util.module_from_spec(_spec))


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: downloads or reads the real vLLM wheel (~300 MB, cached)")
