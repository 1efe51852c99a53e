"""Shared planner helpers (plugins/module_utils/planner/_plan_common.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_common as CM


def test_parse_size():
    assert CM.parse_size("200K") == 204800 and CM.parse_size("200k") == 200000
    assert CM.parse_size(131072) == 131072
    with pytest.raises(CM.TargetsError):
        CM.parse_size("lots")
