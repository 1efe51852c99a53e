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


def test_the_site_ca_is_outside_the_checkout_where_the_readme_says():
    default = re.search(r"AIRGAP_SIM_PKI_DIR=\$\{AIRGAP_SIM_PKI_DIR:-\$HOME(/\.airgap-vllm/[^}]+)\}", SIMULATE).group(1)
    assert default in GROUP_VARS["vllm_front_pki_dir"]
    assert "AIRGAP_SIM_PKI_DIR" in GROUP_VARS["vllm_front_pki_dir"]
    assert "`~%s/`, **outside any checkout**" % default in README
    assert "build/pki" not in GROUP_VARS["vllm_front_pki_dir"]


def test_the_times_are_the_measured_ones():
    assert "~25 min" not in README
    assert "**14 min 28 s**" in README and "**55 s**" in README
