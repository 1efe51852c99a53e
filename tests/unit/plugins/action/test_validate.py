# -*- coding: utf-8 -*-
"""The controller side of airgap.vllm.validate: reading the roles' argument specs."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible.errors import AnsibleError

from ansible_collections.airgap.vllm.plugins.action.validate import ROLES_DIR, load_role_options

ROLES = sorted(d for d in os.listdir(ROLES_DIR) if os.path.isfile(os.path.join(ROLES_DIR, d, "meta", "argument_specs.yml")))


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
    for role, options in load_role_options().items():
        assert all(name.startswith(role + "_") for name in options), role
