"""No playbook of a molecule scenario's run hides another's variable with a registered one.

A registered variable (and a set_fact) is a host variable for the rest of the ansible-playbook run, across every
imported playbook, and it outranks play and task ``vars:``. side_effect.yml imports front.yml, release_check.yml,
observe.yml, day2.yml, services.yml and uninstall_check.yml into one run: release_check.yml's ``register:
__refused`` once hid side_effect.yml's own ``vars: __refused`` (a red CI, an assertion false on a record that held
the value), and observe.yml's ``register: __health`` hid release_check.yml's URL of that name (a /health probe
that got status -1). Both failed only in the order side_effect runs them.

The rule checked: within one scenario, a name that some playbook registers or sets as a fact is not also a
``vars:`` name (play, block or task level) of a playbook in that scenario, unless the same file both sets it and
defines it (a file's own pattern, read in its own order)."""

import os

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MOLECULE = os.path.join(ROOT, "molecule")
SET_FACT = ("ansible.builtin.set_fact", "set_fact")


def _walk(node, path, registered, defined):
    if isinstance(node, dict):
        if isinstance(node.get("register"), str):
            registered.setdefault(node["register"], set()).add(path)
        for key in SET_FACT:
            if isinstance(node.get(key), dict):
                for name in node[key]:
                    if name != "cacheable":
                        registered.setdefault(name, set()).add(path)
        if isinstance(node.get("vars"), dict):
            for name in node["vars"]:
                defined.setdefault(name, set()).add(path)
        for value in node.values():
            _walk(value, path, registered, defined)
    elif isinstance(node, list):
        for item in node:
            _walk(item, path, registered, defined)


def _scenario_names(scenario):
    registered, defined = {}, {}
    folder = os.path.join(MOLECULE, scenario)
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".yml") or name == "molecule.yml":
            continue
        with open(os.path.join(folder, name)) as f:
            _walk(yaml.safe_load(f), name, registered, defined)
    return registered, defined


def _collisions(registered, defined):
    out = []
    for name in sorted(set(registered) & set(defined)):
        # Allowed only where one and the same file both sets it and defines it.
        if not (registered[name] == defined[name] and len(defined[name]) == 1):
            out.append(
                "%s: registered/set in %s, vars: in %s" % (name, sorted(registered[name]), sorted(defined[name]))
            )
    return out


SCENARIOS = sorted(d for d in os.listdir(MOLECULE) if os.path.isfile(os.path.join(MOLECULE, d, "molecule.yml")))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_no_registered_name_hides_a_vars_name(scenario):
    assert _collisions(*_scenario_names(scenario)) == []


def test_the_rule_finds_the_collision_that_broke_ci():
    registered, defined = {}, {}
    _walk(
        yaml.safe_load("- tasks:\n    - command: x\n      register: __refused\n"),
        "release_check.yml",
        registered,
        defined,
    )
    _walk(
        yaml.safe_load("- tasks:\n    - assert: {that: [x]}\n      vars: {__refused: y}\n"),
        "side_effect.yml",
        registered,
        defined,
    )
    assert _collisions(registered, defined) == [
        "__refused: registered/set in ['release_check.yml'], vars: in ['side_effect.yml']"
    ]
    # One file's own pattern (set_fact and a vars: default of the same name in one file) is its own business.
    registered, defined = {}, {}
    _walk(
        yaml.safe_load("- vars: {__lan: []}\n  tasks:\n    - set_fact: {__lan: [1]}\n"),
        "front.yml",
        registered,
        defined,
    )
    assert _collisions(registered, defined) == []
