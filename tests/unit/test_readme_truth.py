"""The README says what a fresh clone's `bash tests/simulate` does (issue 42): where it writes the bundle, the reports
and the site CA, and that the simulated inventory enables the front door - each read here from the code that decides
it (tests/simulate, inventories/simulated), so that a change to one without the other fails."""

import os
import re

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _read(*parts):
    with open(os.path.join(ROOT, *parts)) as handle:
        return handle.read()


README = _read("README.md")
SIMULATE = _read("tests", "simulate")
GROUP_VARS = yaml.safe_load(_read("inventories", "simulated", "group_vars", "vllm_servers.yml"))
HOSTS = yaml.safe_load(_read("inventories", "simulated", "hosts.yml"))


def test_the_front_door_is_on_in_the_simulation_and_the_readme_says_so():
    assert GROUP_VARS["vllm_front_enabled"] is True
    assert "**enables the front door**" in README
    for client in GROUP_VARS["vllm_front_clients"]:
        assert "`%s`" % client["name"] in README, client["name"]


def test_the_bundle_and_the_reports_are_where_the_readme_says():
    assert 'export AIRGAP_TEST_BUNDLE="$PWD/build/simulated-bundle"' in SIMULATE
    assert GROUP_VARS["vllm_service_report_fetch_dir"].endswith("'AIRGAP_TEST_BUNDLE') | dirname }}/reports")
    host = next(iter(HOSTS["all"]["children"]["vllm_servers"]["hosts"]))
    assert "`build/simulated-bundle/`" in README
    assert "`build/reports/%s/`" % host in README
    assert "`build/reports/%s/front-ca.crt`" % host in README


def test_a_green_run_checks_its_reports_and_keeps_the_picture_as_png():
    """Issue 42: report.json and report.md agree, and the memory picture is looked at as a PNG beside the report."""
    assert 'python3 tests/report_check.py "build/reports/$name"' in SIMULATE
    assert "`memory.png`" in README and "`tests/report_check.py`" in README


def test_the_site_ca_is_outside_the_checkout_where_the_readme_says():
    default = re.search(r"AIRGAP_SIM_PKI_DIR=\$\{AIRGAP_SIM_PKI_DIR:-\$HOME(/\.airgap-vllm/[^}]+)\}", SIMULATE).group(1)
    assert default in GROUP_VARS["vllm_front_pki_dir"]
    assert "AIRGAP_SIM_PKI_DIR" in GROUP_VARS["vllm_front_pki_dir"]
    assert "`~%s/`, **outside any checkout**" % default in README
    assert "build/pki" not in GROUP_VARS["vllm_front_pki_dir"]


def test_the_offline_control_tests_take_the_site_ca_where_tests_simulate_keeps_it():
    """tests/offline_control starts its new control nodes with the CA of the machine that converged tests/simulate's
    host: the same default folder, or the front door refuses them (it still looked in build/pki)."""
    default = re.search(r"AIRGAP_SIM_PKI_DIR=\$\{AIRGAP_SIM_PKI_DIR:-\$HOME(/\.airgap-vllm/[^}]+)\}", SIMULATE).group(1)
    ssh = _read("tests", "offline_control", "test_site_over_ssh.py")
    assert 'os.environ.get("AIRGAP_SIM_PKI_DIR") or "~%s"' % default in ssh
    assert "os.path.dirname(BUNDLE), \"pki\"" not in ssh


def test_the_times_are_the_measured_ones():
    assert "~25 min" not in README
    assert "**14 min 28 s**" in README and "**55 s**" in README


def test_every_scenario_on_the_simulated_inventory_keeps_its_own_site_ca():
    """A molecule scenario with the simulated inventory's settings keeps its site CA in its own folder (served.sh saves
    and restores it with the served host), not in the machine's ~/.airgap-vllm/simulated/pki: a restored host would
    otherwise serve a CA that folder lacks, and the front door stage refuses it (vllm_front_pki's ca_decision)."""
    scenarios = os.path.join(ROOT, "molecule")
    using = []
    for name in sorted(os.listdir(scenarios)):
        path = os.path.join(scenarios, name, "molecule.yml")
        if not os.path.exists(path):
            continue
        config = yaml.safe_load(_read("molecule", name, "molecule.yml"))
        provisioner = config.get("provisioner") or {}
        links = (provisioner.get("inventory") or {}).get("links") or {}
        if "inventories/simulated/group_vars" in str(links.get("group_vars")):
            using.append(name)
            env = provisioner.get("env") or {}
            assert env.get("AIRGAP_SIM_PKI_DIR") == "${MOLECULE_EPHEMERAL_DIRECTORY}/pki", name
    assert "serve" in using and "front" in using
