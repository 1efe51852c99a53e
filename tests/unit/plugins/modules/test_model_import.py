"""model_import as Ansible runs it: validate_only (the vllm_model verify step) and its required options."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.airgap.vllm.plugins.modules import model_import as M

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
MAKE_MODEL = os.path.join(ROOT, "tests", "world", "fake-model", "make_model.py")
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "models", "qwen3.x-27b-fp8", "config.json")


@pytest.fixture
def models(tmp_path):
    subprocess.run([sys.executable, MAKE_MODEL, str(tmp_path / "m"), FIXTURE], check=True)
    return str(tmp_path)


def test_validate_only_reads_and_changes_nothing(run_module, models):
    r = run_module(M, models_dir=models, name="m", validate_only=True)
    assert not r.get("failed") and not r["changed"] and not r["imported"] and r["shards"] >= 1
    assert r["architectures"]


def test_an_architectures_only_config_is_valid_and_an_empty_one_is_not(run_module, models):
    path = os.path.join(models, "m", "config.json")
    cfg = json.load(open(path))
    cfg.pop("model_type", None)
    json.dump(cfg, open(path, "w"))
    r = run_module(M, models_dir=models, name="m", validate_only=True)
    assert not r.get("failed") and r["model_type"] is None
    json.dump({"hidden_size": 8}, open(path, "w"))
    r = run_module(M, models_dir=models, name="m", validate_only=True)
    assert r["failed"] and "neither model_type nor architectures" in r["msg"]


def test_an_import_still_needs_src_and_sha256(run_module, models):
    r = run_module(M, models_dir=models, name="m")
    assert r["failed"] and "src" in r["msg"] and "sha256" in r["msg"]
