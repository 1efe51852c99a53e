# -*- coding: utf-8 -*-
"""The controller side of airgap.vllm.validate: reading the roles' argument specs."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import os

import pytest

from ansible.errors import AnsibleError

from ansible_collections.airgap.vllm.plugins.action.validate import ROLES_DIR, load_role_options

_spec = importlib.util.spec_from_file_location(
    "check_argument_specs", os.path.join(os.path.dirname(__file__), "..", "..", "..", "check_argument_specs.py")
)
SPECS_CHECK = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(SPECS_CHECK)

ROLES = sorted(
    d for d in os.listdir(ROLES_DIR) if os.path.isfile(os.path.join(ROLES_DIR, d, "meta", "argument_specs.yml"))
)


def test_every_role_is_read():
    options = load_role_options()
    assert sorted(options) == ROLES
    assert options["vllm_plan"]["vllm_plan_concurrency"]["type"] == "int"
    assert options["bundle"]["bundle_source"]["choices"] == ["controller", "target"]


def test_a_subset_and_an_unknown_role():
    assert sorted(load_role_options(roles=["gpu_free", "preflight"])) == ["gpu_free", "preflight"]
    with pytest.raises(AnsibleError, match="no role nosuchrole"):
        load_role_options(roles=["nosuchrole"])


def test_every_option_is_prefixed_with_its_role():
    # The role's name, or the prefix tests/check_argument_specs.py names for it (uninstall: airgap_vllm_uninstall).
    for role, options in load_role_options().items():
        assert all(name.startswith(SPECS_CHECK.role_prefix(role) + "_") for name in options), role
