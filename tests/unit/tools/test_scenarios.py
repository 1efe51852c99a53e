"""tests/scenarios.yml, the one map of which scenario proves which file (tests/lanes.py; issue 40)."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", ".."))

import lanes  # noqa: E402


def test_the_map_covers_every_scenario_role_playbook_and_module():
    assert lanes.check() == []


def test_a_scenario_missing_from_the_map_and_a_role_left_uncovered_are_named():
    smap = lanes.load_map()
    del smap["front"]
    problems = lanes.check(smap)
    assert "molecule/front is in no entry of tests/scenarios.yml" in problems
    assert any(
        p.startswith("roles/vllm_front/templates/vllm-front.service.j2 is covered by no scenario") for p in problems
    )
    assert any(p.startswith("plugins/modules/vllm_front_config.py is called by no file") for p in problems)


def test_a_long_proof_in_its_own_lane_is_out_of_the_chain_and_a_wrong_lane_is_named():
    smap = lanes.load_map()
    chain = lanes.chain(smap)
    assert "release_day" in smap and "release_day" not in chain
    assert "serve" in chain and "release" in chain
    assert len(chain) == len([n for n, s in smap.items() if s.get("lane") != "own"])
    smap["front"]["lane"] = "slow"
    assert "tests/scenarios.yml: front has lane 'slow' (known: own)" in lanes.check(smap)


def test_run_all_takes_the_chain_for_molecule_and_any_scenario_by_name():
    smap = {"serve": {}, "front": {"served": True}, "walk": {"lane": "own"}}
    # No step named (CI: bash tests/run-all) and `molecule`: the chain, never a scenario of its own lane.
    assert lanes.chain(smap) == lanes.chain(smap, ["molecule"]) == ["serve", "front"]
    assert lanes.chain(smap, ["molecule:walk"]) == ["walk"]
    assert lanes.chain(smap, ["unit", "molecule:front"]) == ["front"]
    assert lanes.chain(smap, ["unit"]) == []
    assert lanes.chain(smap, ["molecule", "molecule:walk"]) == ["serve", "front", "walk"]
    text = open(os.path.join(HERE, "..", "..", "run-all")).read()
    assert 'python3 tests/lanes.py chain ${selected[@]+"${selected[@]}"}' in text
    out = subprocess.run(
        [sys.executable, os.path.join(HERE, "..", "..", "lanes.py"), "chain"],
        stdout=subprocess.PIPE,
        universal_newlines=True,
        check=True,
    ).stdout.split()
    assert "serve" in out and not [n for n in out if (lanes.load_map()[n] or {}).get("lane") == "own"]


def test_a_role_folder_selects_its_scenarios_and_unit_tests():
    tests, scenarios = lanes.select(["roles/vllm_front"])
    assert scenarios == ["front"]
    assert "tests/unit/plugins/modules/test_vllm_front_config.py" in tests
    tests, scenarios = lanes.select(["roles/vllm_service/"])
    assert scenarios == ["day2", "replan", "serve"]


def test_a_helper_selects_the_scenarios_of_the_roles_calling_its_nearest_users():
    tests, scenarios = lanes.select(["plugins/module_utils/front/_front.py"])
    assert "front" in scenarios and "serve" not in scenarios
    assert "tests/unit/plugins/module_utils/test__front.py" in tests


def test_a_test_file_selects_itself():
    tests, scenarios = lanes.select(["tests/unit/tools/test_budget.py"])
    assert tests == ["tests/unit/tools/test_budget.py"] and scenarios == []


def test_the_pool_starts_serve_first_then_the_longest():
    smap = lanes.load_map()
    pool = lanes.Pool(["front", "preflight", "serve", "release"], smap, 2, None, "/tmp")
    assert pool.queue[0] == "serve" and pool.queue[1] == "release" and pool.queue[-1] == "preflight"


def test_a_served_scenario_waits_for_serve_when_there_is_no_served_host(monkeypatch):
    smap = lanes.load_map()
    monkeypatch.setattr(lanes, "have_served", lambda: False)
    pool = lanes.Pool(["front", "preflight", "serve"], smap, 2, None, "/tmp")
    assert pool._next() == "serve"
    pool.running.add("serve")
    assert pool._next() == "preflight"  # front must wait
    assert pool._next() is None
    pool.running.discard("serve")  # serve ended without a served host: front runs and fails with the reason
    assert pool._next() == "front"
    assert pool._next() == ""


def test_the_readmes_dry_run_line_says_what_it_would_run():
    import re
    import subprocess

    root = os.path.join(HERE, "..", "..", "..")
    readme = open(os.path.join(root, "README.md")).read()
    line = re.search(r"^bash tests/prove --dry-run \S+", readme, re.M).group(0)
    out = subprocess.run(line, shell=True, cwd=root, stdout=subprocess.PIPE, universal_newlines=True, check=True)
    assert "scenarios:  day2 replan serve" in out.stdout, out.stdout
