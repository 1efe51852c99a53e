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
import re
import shutil
import subprocess
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
CASE = os.path.join(HERE, "expose_firewalld")
IMAGE = os.environ.get("AIRGAP_KYLIN_IMAGE", "airgap-test/kylin:v10sp3")
PROM = "10.20.0.2"
RECORD = "/etc/airgap-vllm/vllm/metrics-firewalld.json"


def docker(*args, **kw):
    check = kw.pop("check", False)
    return subprocess.run(["docker"] + list(args), capture_output=True, text=True, check=check, **kw)


def _image_present():
    return shutil.which("docker") and docker("image", "inspect", IMAGE).returncode == 0


pytestmark = [pytest.mark.skipif(not _image_present(), reason="needs docker and the test world image " + IMAGE)]


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
        r = docker(
            "exec",
            "-i",
            name,
            "sh",
            "-c",
            "cat > /usr/local/sbin/firewall-cmd && chmod 755 /usr/local/sbin/firewall-cmd",
            input='#!/bin/sh\nexec python3 /usr/local/sbin/fake_firewall_cmd.py "$@"\n',
        )
        assert r.returncode == 0, r.stderr
        r = docker(
            "exec",
            "-i",
            name,
            "sh",
            "-c",
            "cat > /usr/local/sbin/firewall-offline-cmd && chmod 755 /usr/local/sbin/firewall-offline-cmd",
            input='#!/bin/sh\nexec python3 /usr/local/sbin/fake_firewall_cmd.py --offline "$@"\n',
        )
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
    env = dict(os.environ)
    env["ANSIBLE_COLLECTIONS_PATH"] = os.pathsep.join(
        [os.path.join(ROOT, "build", "collections"), os.path.expanduser("~/.ansible/collections")]
    )
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env["ANSIBLE_NOCOLOR"] = "1"
    env["ANSIBLE_STDOUT_CALLBACK"] = "default"
    env["ANSIBLE_CALLBACK_RESULT_FORMAT"] = "json"  # messages as JSON strings, never folded
    env["ANSIBLE_LOCAL_TEMP"] = str(tmp_path / "ansible-local")
    # The connection is the host's (an inventory variable): the scrape target is delegated to localhost.
    inventory = tmp_path / "inventory.ini"
    inventory.write_text(
        "%s ansible_connection=community.docker.docker ansible_python_interpreter=/usr/bin/python3\n" % host["name"]
    )
    variables = {"vllm_service_report_fetch_dir": str(tmp_path / "reports")}
    variables.update(extra)
    varfile = tmp_path / "vars.json"
    varfile.write_text(json.dumps(variables))
    cmd = ["ansible-playbook", "-i", str(inventory), os.path.join(CASE, playbook), "-e", "@" + str(varfile)]
    if check:
        cmd.append("--check")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600, check=False)
    out = r.stdout + r.stderr
    m = re.search(r"ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", out)
    assert m, out[-4000:]
    return {"rc": r.returncode, "out": out, "changed": int(m.group(2)), "failed": int(m.group(4))}


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
