"""tasks/expose_removal.yml run by ansible-playbook against a throwaway Kylin test-world container (issue 25 item 6).

The whole-port metrics exposure of earlier releases is removed; a host that had it keeps its firewalld rules on
record (metrics-firewalld.json) and a file_sd target on the controller until the service stage (or the uninstall)
removes them. The image has no firewalld: a stand-in firewall-cmd / firewall-offline-cmd
(expose_firewalld/fake_firewall_cmd.py, test only) logs every call and keeps runtime and permanent rules apart.
Asserted: nothing recorded calls nothing; --check asks only read-only questions; a real run removes exactly the
recorded rules (runtime + permanent; an operator's own rule stays), the record and the target, and says so pointing
to docs/monitoring.md; a second run calls nothing; firewalld stopped: firewall-offline-cmd removes them from the
permanent configuration; the include uninstall.yml makes. Needs docker and the test world's airgap-test/kylin:v10sp3
image."""

import json
import os
import sys
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
CASE = os.path.join(HERE, "expose_firewalld")
PROM = "10.20.0.2"
RECORD = "/etc/airgap-vllm/vllm/metrics-firewalld.json"
sys.path.insert(0, os.path.join(ROOT, "tests"))

from systemd_container import KYLIN_IMAGE as IMAGE, docker, needs_image, play_on_container  # noqa: E402

pytestmark = [needs_image(IMAGE)]


@pytest.fixture(scope="module")
def host():
    name = "airgap-expose-" + uuid.uuid4().hex[:8]
    r = docker("run", "-d", "--name", name, IMAGE, "sleep", "infinity")
    assert r.returncode == 0, r.stderr
    try:
        for cmd in (["mkdir", "-p", "/etc/fake-firewalld", "/usr/local/sbin", "/etc/airgap-vllm/vllm"],):
            assert docker("exec", name, *cmd).returncode == 0
        r = docker("cp", os.path.join(CASE, "fake_firewall_cmd.py"), name + ":/usr/local/sbin/fake_firewall_cmd.py")
        assert r.returncode == 0, r.stderr
        for cmd, flag in (("firewall-cmd", ""), ("firewall-offline-cmd", "--offline ")):
            wrapper = '#!/bin/sh\nexec python3 /usr/local/sbin/fake_firewall_cmd.py %s"$@"\n' % flag
            script = "cat > /usr/local/sbin/{0} && chmod 755 /usr/local/sbin/{0}".format(cmd)
            r = docker("exec", "-i", name, "sh", "-c", script, input=wrapper)
            assert r.returncode == 0, r.stderr
        address = docker("inspect", "-f", "{{.NetworkSettings.IPAddress}}", name).stdout.strip()
        assert address, "the container has no address on the default bridge"
        yield {"name": name, "address": address}
    finally:
        docker("rm", "-f", name)


def set_firewalld(host, running=True, rules=None):
    state = {
        "running": running,
        "default_zone": "internal",
        "zones": ["internal", "public", "trusted", "docker"],
        "interfaces": {"public": ["eth0"], "docker": ["docker0"]},
        "rules": rules or {"runtime": {}, "permanent": {}},
    }
    r = docker(
        "exec",
        "-i",
        host["name"],
        "sh",
        "-c",
        "cat > /etc/fake-firewalld/state.json; : > /var/log/fake-firewall-cmd.log",
        input=json.dumps(state),
    )
    assert r.returncode == 0, r.stderr


def firewalld(host):
    state = json.loads(docker("exec", host["name"], "cat", "/etc/fake-firewalld/state.json").stdout)
    calls = [
        json.loads(line)
        for line in docker("exec", host["name"], "cat", "/var/log/fake-firewall-cmd.log").stdout.splitlines()
        if line
    ]
    docker("exec", host["name"], "sh", "-c", ": > /var/log/fake-firewall-cmd.log")
    return state, calls


def changing(calls):
    return [c for c in calls if any(w.startswith(("--add-", "--remove-")) for w in c)]


def play(host, tmp_path, playbook="converge.yml", check=False, **extra):
    # The connection is the host's (an inventory variable): the scrape target is delegated to localhost.
    variables = {"vllm_service_report_fetch_dir": str(tmp_path / "reports")}
    variables.update(extra)
    return play_on_container(host["name"], os.path.join(CASE, playbook), tmp_path, check=check, variables=variables)


def said(text, result):
    return json.dumps(text)[1:-1] in result["out"]


def rule(port=8000):
    return 'rule family="ipv4" source address="%s" port port="%d" protocol="tcp" accept' % (PROM, port)


def target_file(tmp_path, host):
    return tmp_path / "reports" / host["name"] / "vllm" / "prometheus-file-sd.yml"


def has_record(host):
    return docker("exec", host["name"], "test", "-f", RECORD).returncode == 0


def earlier_release(host, tmp_path, running=True, operator_rules=()):
    """What an earlier release's vllm_service_metrics_expose left: the rule (runtime + permanent) on record, the target."""
    rules = [rule()] + list(operator_rules)
    set_firewalld(host, running=running, rules={"runtime": {"public": rules}, "permanent": {"public": rules}})
    record = json.dumps({"version": 1, "zone": "public", "rules": [rule()]})
    assert docker("exec", "-i", host["name"], "sh", "-c", "cat > " + RECORD, input=record).returncode == 0
    target = target_file(tmp_path, host)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text('[{"targets": ["%s:8000"]}]\n' % host["address"])


def test_nothing_recorded_calls_nothing_and_changes_nothing(host, tmp_path):
    set_firewalld(host)
    r = play(host, tmp_path)
    assert r["rc"] == 0 and r["changed"] == 0, r["out"][-3000:]
    state, calls = firewalld(host)
    assert calls == [] and state["rules"] == {"runtime": {}, "permanent": {}}


def test_check_run_real_run_and_second_run(host, tmp_path):
    mine = 'rule family="ipv4" source address="10.20.0.9" port port="22" protocol="tcp" accept'
    earlier_release(host, tmp_path, operator_rules=[mine])
    # --check: only read-only questions, nothing removed, the changes reported.
    r = play(host, tmp_path, check=True)
    assert r["rc"] == 0 and r["changed"] > 0, r["out"][-3000:]
    assert said("Would remove (check mode):", r) and said("remove (permanent) from zone public: " + rule(), r)
    state, calls = firewalld(host)
    assert changing(calls) == [] and calls, calls
    assert has_record(host) and target_file(tmp_path, host).exists()

    # Real run: exactly the recorded rule, runtime and permanent; the record and the target go; the run says so.
    r = play(host, tmp_path)
    assert r["rc"] == 0 and r["changed"] > 0, r["out"][-3000:]
    state, calls = firewalld(host)
    assert calls == [
        ["--state"],
        ["--zone=public", "--query-rich-rule=" + rule()],
        ["--permanent", "--zone=public", "--query-rich-rule=" + rule()],
        ["--zone=public", "--remove-rich-rule=" + rule()],
        ["--permanent", "--zone=public", "--remove-rich-rule=" + rule()],
    ], calls
    assert state["rules"] == {"runtime": {"public": [mine]}, "permanent": {"public": [mine]}}, "the operator's stays"
    assert not has_record(host) and not target_file(tmp_path, host).exists()
    for text in (
        "Removed:",
        "vllm_service_metrics_expose",
        "vllm_front_metrics_port",
        "vllm_front_metrics_sources",
        "vllm_front_metrics_tokens",
        "docs/monitoring.md",
        str(target_file(tmp_path, host)),
    ):
        assert said(text, r), text

    # Second run: nothing recorded, nothing asked.
    r = play(host, tmp_path)
    assert r["rc"] == 0 and r["changed"] == 0 and firewalld(host)[1] == [], r["out"][-3000:]


def test_firewalld_stopped_the_rule_goes_by_firewall_offline_cmd(host, tmp_path):
    earlier_release(host, tmp_path, running=False)
    r = play(host, tmp_path)
    assert r["rc"] == 0 and r["changed"] > 0, r["out"][-3000:]
    state, calls = firewalld(host)
    assert calls == [
        ["--state"],
        ["--offline", "--zone=public", "--query-rich-rule=" + rule()],
        ["--offline", "--zone=public", "--remove-rich-rule=" + rule()],
    ], calls
    assert state["rules"]["permanent"] == {"public": []} and not has_record(host)
    assert said("remove (permanent, firewalld stopped) from zone public: " + rule(), r)


def test_uninstall_include_removes_the_recorded_rules(host, tmp_path):
    earlier_release(host, tmp_path)
    r = play(
        host,
        tmp_path,
        playbook="uninstall.yml",
        rm_name="vllm",
        rm_dir="/etc/airgap-vllm/vllm",
        vllm_service_config_dir="/nonexistent",
    )
    assert r["rc"] == 0, r["out"][-3000:]
    state, calls = firewalld(host)
    assert len(changing(calls)) == 2 and state["rules"]["permanent"] == {"public": []}
    assert not has_record(host) and not target_file(tmp_path, host).exists()
