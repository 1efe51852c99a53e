"""airgap.vllm.validate's module side: a stub that documents the action plugin and refuses to run alone.

What it can get wrong: run as a module it must fail saying why (not pass silently, checking nothing),
and its options must be the ones the action plugin accepts and its DOCUMENTATION lists."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import yaml

from ansible_collections.airgap.vllm.plugins.action import validate as A
from ansible_collections.airgap.vllm.plugins.modules import validate as M


def test_run_as_a_module_it_fails_saying_it_runs_on_the_controller(run_module):
    r = run_module(M, roles=["preflight"])
    assert r["failed"] is True
    assert "runs on the controller (its action plugin)" in r["msg"]
    r = run_module(M, check_mode=True)
    assert r["failed"] is True, "check mode must not turn the refusal into a pass"


def test_bad_arguments_are_refused_by_type(run_module):
    r = run_module(M, roles="preflight", skip=["x"], manage_driver="perhaps")
    assert r["failed"] is True and "manage_driver" in r["msg"]


def test_options_are_the_action_plugins_and_the_documented_ones():
    documented = yaml.safe_load(M.DOCUMENTATION)["options"]
    assert set(documented) == set(A.ActionModule._VALID_ARGS)
    for name, spec in documented.items():
        assert spec.get("description"), name
