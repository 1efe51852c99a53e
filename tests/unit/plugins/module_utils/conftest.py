"""Fixtures the planner's per-module tests share (test__plan_kv.py, test__plan_model.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_model import describe_model

FIXTURE = os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "models", "qwen3.x-27b-fp8")
)


@pytest.fixture(scope="module")
def shape():
    """The model shape of the fixture checkpoint (tests/fixtures/models/qwen3.x-27b-fp8): a Qwen3.5-style hybrid,
    16 full-attention and 48 linear (GDN) layers, one MTP layer, a vision tower."""
    with open(os.path.join(FIXTURE, "config.json")) as fh:
        return describe_model(json.load(fh))
