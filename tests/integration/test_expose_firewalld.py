"""tasks/expose.yml run by ansible-playbook against a throwaway Kylin test-world container (issue 14 item 6).

The image has no firewalld: a stand-in firewall-cmd (expose_firewalld/fake_firewall_cmd.py, test only) logs every call
and keeps runtime and permanent rules apart. Asserted: off calls nothing; --check asks only read-only questions; a
real run adds the rule (runtime + permanent) in the zone of the address, records it, writes the scrape target; a
second run changes nothing; turning it off removes exactly the recorded rules and the target; firewalld stopped;
the include uninstall.yml makes. Needs docker and the test world's airgap-test/kylin:v10sp3 image."""
import json
import os
import re
import shutil
import subprocess
import uuid

import pytest
import yaml

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
        r = docker("exec", "-i", name, "sh", "-c", "cat > /usr/local/sbin/firewall-cmd && chmod 755 /usr/local/sbin/firewall-cmd",
                   input='#!/bin/sh\nexec python3 /usr/local/sbin/fake_firewall_cmd.py "$@"\n')
        assert r.returncode == 0, r.stderr
        address = docker("inspect", "-f", "{{.NetworkSettings.IPAddress}}", name).stdout.strip()
        assert address, "the container has no address on the default bridge"
        yield {"name": name, "address": address}
    finally:
        docker("rm", "-f", name)


def set_firewalld(host, running=True, rules=None):
    state = {"running": running, "default_zone": "internal", "zones": ["internal", "public", "trusted", "docker"],
             "interfaces": {"public": ["eth0"], "docker": ["docker0"]},
             "rules": rules or {"runtime": {}, "permanent": {}}}
    r = docker("exec", "-i", host["name"], "sh", "-c", "cat > /etc/fake-firewalld/state.json; : > /var/log/fake-firewall-cmd.log",
               input=json.dumps(state))
    assert r.returncode == 0, r.stderr


def firewalld(host):
    state = json.loads(docker("exec", host["name"], "cat", "/etc/fake-firewalld/state.json").stdout)
    calls = [json.loads(line) for line in
             docker("exec", host["name"], "cat", "/var/log/fake-firewall-cmd.log").stdout.splitlines() if line]
    docker("exec", host["name"], "sh", "-c", ": > /var/log/fake-firewall-cmd.log")
    return state, calls


def changing(calls):
    return [c for c in calls if any(w.startswith(("--add-", "--remove-")) for w in c)]


def play(host, tmp_path, playbook="converge.yml", check=False, **extra):
    env = dict(os.environ)
    env["ANSIBLE_COLLECTIONS_PATH"] = os.pathsep.join([os.path.join(ROOT, "build", "collections"),
                                                       os.path.expanduser("~/.ansible/collections")])
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env["ANSIBLE_NOCOLOR"] = "1"
    env["ANSIBLE_STDOUT_CALLBACK"] = "default"
    env["ANSIBLE_CALLBACK_RESULT_FORMAT"] = "json"  # messages as JSON strings, never folded
    env["ANSIBLE_LOCAL_TEMP"] = str(tmp_path / "ansible-local")
    # The connection is the host's (an inventory variable): the scrape target is delegated to localhost.
    inventory = tmp_path / "inventory.ini"
    inventory.write_text("%s ansible_connection=community.docker.docker ansible_python_interpreter=/usr/bin/python3\n"
                         % host["name"])
    variables = {"vllm_service_metrics_scrape_dir": str(tmp_path / "reports")}
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


def on(host):
    return dict(vllm_service_metrics_expose=True, vllm_service_metrics_address=host["address"],
                vllm_service_metrics_sources=[PROM])


def rule(port=8000):
    return 'rule family="ipv4" source address="%s" port port="%d" protocol="tcp" accept' % (PROM, port)


def target_file(tmp_path, host):
    return tmp_path / "reports" / host["name"] / "vllm" / "prometheus-file-sd.yml"


def has_record(host):
    return docker("exec", host["name"], "test", "-f", RECORD).returncode == 0


def test_off_calls_nothing_and_changes_nothing(host, tmp_path):
    set_firewalld(host)
    r = play(host, tmp_path)
    assert r["rc"] == 0 and r["changed"] == 0, r["out"][-3000:]
    state, calls = firewalld(host)
    assert calls == [] and state["rules"] == {"runtime": {}, "permanent": {}}
    assert not target_file(tmp_path, host).exists()


def test_on_check_run_real_run_and_second_run(host, tmp_path):
    set_firewalld(host)
    # --check: only read-only questions, nothing added, nothing recorded, the changes reported.
    r = play(host, tmp_path, check=True, **on(host))
    assert r["rc"] == 0 and r["changed"] > 0, r["out"][-3000:]
    assert said("Would change (check mode):", r) and said("add (runtime) in zone public: " + rule(), r)
    assert said("add (permanent) in zone public: " + rule(), r)
    state, calls = firewalld(host)
    assert changing(calls) == [] and calls, calls
    assert state["rules"] == {"runtime": {}, "permanent": {}}
    assert not has_record(host) and not target_file(tmp_path, host).exists()

    # Real run: the exact changes, runtime and permanent, in the zone of the address's interface (eth0: public).
    r = play(host, tmp_path, **on(host))
    assert r["rc"] == 0 and r["changed"] > 0, r["out"][-3000:]
    state, calls = firewalld(host)
    assert calls == [
        ["--state"],
        ["--get-active-zones"], ["--get-default-zone"],
        ["--zone=public", "--query-rich-rule=" + rule()],
        ["--permanent", "--zone=public", "--query-rich-rule=" + rule()],
        ["--zone=public", "--add-rich-rule=" + rule()],
        ["--permanent", "--zone=public", "--add-rich-rule=" + rule()],
    ], calls
    assert state["rules"] == {"runtime": {"public": [rule()]}, "permanent": {"public": [rule()]}}
    record = json.loads(docker("exec", host["name"], "cat", RECORD).stdout)
    assert record == {"version": 1, "zone": "public", "rules": [rule()]}
    text = target_file(tmp_path, host).read_text()
    assert text.startswith("#"), "ansible_managed header"
    assert yaml.safe_load(text) == [{"targets": ["%s:8000" % host["address"]],
                                     "labels": {"service": "vllm", "host": host["name"], "port": "8000"}}]
    # Docker's DNAT is said plainly (the container has no daemon.json: Docker's default, iptables on).
    assert "DOCKER-USER" in r["out"]

    # Second run: nothing changes, only questions.
    r = play(host, tmp_path, **on(host))
    assert r["rc"] == 0 and r["changed"] == 0, r["out"][-3000:]
    state, calls = firewalld(host)
    assert changing(calls) == [] and state["rules"]["permanent"] == {"public": [rule()]}

    # Day 2: a new port moves the rule (old one removed, new one added), then off removes it and the target.
    r = play(host, tmp_path, vllm_service_metrics_port=9100, **on(host))
    assert r["rc"] == 0, r["out"][-3000:]
    state, calls = firewalld(host)
    assert changing(calls) == [
        ["--zone=public", "--remove-rich-rule=" + rule()],
        ["--permanent", "--zone=public", "--remove-rich-rule=" + rule()],
        ["--zone=public", "--add-rich-rule=" + rule(9100)],
        ["--permanent", "--zone=public", "--add-rich-rule=" + rule(9100)]], calls
    r = play(host, tmp_path, check=True)
    assert r["rc"] == 0 and r["changed"] > 0 and said("Would change (check mode):", r)
    assert said("remove (permanent) from zone public: " + rule(9100), r)
    assert changing(firewalld(host)[1]) == []
    r = play(host, tmp_path)
    assert r["rc"] == 0 and r["changed"] > 0, r["out"][-3000:]
    state, calls = firewalld(host)
    assert changing(calls) == [["--zone=public", "--remove-rich-rule=" + rule(9100)],
                               ["--permanent", "--zone=public", "--remove-rich-rule=" + rule(9100)]]
    assert state["rules"] == {"runtime": {"public": []}, "permanent": {"public": []}}
    assert not has_record(host) and not target_file(tmp_path, host).exists()
    r = play(host, tmp_path)
    assert r["rc"] == 0 and r["changed"] == 0 and firewalld(host)[1] == []


def test_an_operators_rule_is_left_alone(host, tmp_path):
    set_firewalld(host, rules={"runtime": {"public": [rule()]}, "permanent": {"public": [rule()]}})
    r = play(host, tmp_path, **on(host))
    assert r["rc"] == 0 and not has_record(host), r["out"][-3000:]
    assert changing(firewalld(host)[1]) == []
    r = play(host, tmp_path)
    state, calls = firewalld(host)
    assert calls == [] and state["rules"]["permanent"] == {"public": [rule()]}


def test_firewalld_stopped(host, tmp_path):
    set_firewalld(host, running=False)
    r = play(host, tmp_path, **on(host))
    assert r["rc"] == 0, r["out"][-3000:]
    assert firewalld(host)[1] == [["--state"]]
    assert target_file(tmp_path, host).exists(), "the scrape target does not depend on firewalld"
    r = play(host, tmp_path, vllm_service_metrics_firewalld="always", **on(host))
    assert r["rc"] != 0 and "firewalld is not running" in r["out"]
    set_firewalld(host)
    r = play(host, tmp_path, vllm_service_metrics_firewalld="never", **on(host))
    assert r["rc"] == 0 and firewalld(host)[1] == []
    play(host, tmp_path)  # off again: the target goes


def test_refusals_name_the_setting(host, tmp_path):
    set_firewalld(host)
    r = play(host, tmp_path, **{**on(host), "vllm_service_metrics_sources": []})
    assert r["rc"] != 0 and "vllm_service_metrics_sources is empty" in r["out"]
    r = play(host, tmp_path, **{**on(host), "vllm_service_metrics_address": "10.99.99.99"})
    assert r["rc"] != 0 and "not an address of this host" in r["out"]
    assert changing(firewalld(host)[1]) == []


def test_uninstall_include_removes_the_recorded_rules(host, tmp_path):
    set_firewalld(host)
    r = play(host, tmp_path, **on(host))
    assert r["rc"] == 0 and has_record(host), r["out"][-3000:]
    firewalld(host)
    r = play(host, tmp_path, playbook="uninstall.yml", rm_name="vllm", rm_dir="/etc/airgap-vllm/vllm",
             vllm_service_config_dir="/nonexistent")
    assert r["rc"] == 0, r["out"][-3000:]
    state, calls = firewalld(host)
    assert len(changing(calls)) == 2 and state["rules"]["permanent"] == {"public": []}
    assert not has_record(host) and not target_file(tmp_path, host).exists()
