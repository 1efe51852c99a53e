"""vllm_front_config and vllm_front_firewall as Ansible runs them: files, modes, reload only on change, check mode."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible.module_utils import basic

from ansible_collections.airgap.vllm.plugins.module_utils.front._front_settings import key_sha256
from ansible_collections.airgap.vllm.plugins.modules import vllm_front_config as M
from ansible_collections.airgap.vllm.plugins.modules import vllm_front_firewall as FW

KEY = "sk-alice-0123456789abcdef"


def services(*clients):
    return [
        dict(
            name="vllm",
            port=8000,
            front_port=8443,
            argv=["m", "--max-num-seqs", "8"],
            clients=[dict(name=n, key_sha256=key_sha256(k)) for n, k in clients],
        )
    ]


def test_write_then_converged_then_revoke(run_module, tmp_path):
    d = str(tmp_path / "front")
    args = dict(
        dir=d,
        settings=dict(addresses=["10.0.0.5"], tls=True),
        services=services(("alice", KEY)),
        engine_keys={"vllm": "sk-engine-secret"},
    )
    r = run_module(M, check_mode=True, **args)
    assert r["changed"] and r["reload"] and not os.path.exists(d)
    r = run_module(M, **args)
    assert (
        r["changed"]
        and r["reload"]
        and sorted(r["files"]) == ["clients-vllm.map", "engine.map", "haproxy.cfg", "settle.lua"]
    )
    assert r["services"] == [
        dict(name="vllm", front_port=8443, engine_port=8000, cap=8, clients=["alice"], metrics_port=0)
    ]
    assert "sk-engine-secret" not in json.dumps(r)
    for name in os.listdir(d):
        assert oct(os.stat(os.path.join(d, name)).st_mode & 0o777) == "0o600"
    assert KEY not in open(os.path.join(d, "clients-vllm.map")).read()
    r = run_module(M, **args)
    assert not r["changed"] and not r["reload"]
    # revoking alice: only the map changes
    args["services"] = services(("bob", "sk-bob-0123456789abcdef"))
    r = run_module(M, **args)
    # the map, and the configuration for its fingerprint header (the role waits for it after the reload)
    assert r["reload"] and r["files"] == ["clients-vllm.map", "haproxy.cfg"]


def test_removed_service_files_go(run_module, tmp_path):
    d = tmp_path
    (d / "clients-old.map").write_text("x")
    (d / "server.pem").write_text("cert")
    r = run_module(M, dir=str(d), settings=dict(tls=False), services=services())
    assert "clients-old.map" in r["files"] and not (d / "clients-old.map").exists() and (d / "server.pem").exists()


def test_bad_input_fails(run_module, tmp_path):
    svc = services()
    svc[0]["argv"] = []
    r = run_module(M, dir=str(tmp_path), settings={}, services=svc)
    assert r["failed"] and "--max-num-seqs" in r["msg"]


class FakeFirewalld(object):
    def __init__(self):
        self.rules = set()
        self.calls = []

    def __call__(self, argv, **kw):
        self.calls.append(argv)
        if argv[1:] == ["--state"]:
            return 0, "running\n", ""
        if argv[1:] == ["--get-default-zone"]:
            return 0, "public\n", ""
        if argv[1:] == ["--get-active-zones"]:
            return 0, "public\n  interfaces: eth0\n", ""
        if argv[0] == "ip":
            return 0, "2: eth0    inet 10.0.0.5/24 brd 10.0.0.255 scope global eth0\n", ""
        layer = "permanent" if "--permanent" in argv else "runtime"
        verb, rule = argv[-1][2:].split("=", 1)
        key = (layer, rule)
        if verb == "query-rich-rule":
            return (0 if key in self.rules else 1), "", ""
        if verb == "add-rich-rule":
            self.rules.add(key)
        elif verb == "remove-rich-rule":
            self.rules.discard(key)
        return 0, "success", ""


def test_firewall_opens_exactly_the_ports_and_removes_them(run_module, monkeypatch, tmp_path):
    fw = FakeFirewalld()
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kw: fw(argv, **kw))
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **kw: "/usr/bin/" + name)
    record = str(tmp_path / "rec.json")
    args = dict(
        ports=[8443],
        metrics_ports=[9443],
        address="10.0.0.5",
        sources=["10.0.0.0/24"],
        metrics_sources=["10.9.0.7"],
        record_file=record,
    )
    r = run_module(FW, **args)
    assert r["changed"] and r["firewalld"] == "managed"
    assert {rule for _zone, rule in fw.rules} == {
        'rule family="ipv4" source address="10.0.0.0/24" port port="8443" protocol="tcp" accept',
        'rule family="ipv4" source address="10.9.0.7" port port="9443" protocol="tcp" accept',
    }
    assert len(fw.rules) == 4 and r["warnings_text"] == []
    r = run_module(FW, **args)
    assert not r["changed"]
    r = run_module(FW, ports=[], record_file=record)
    assert r["changed"] and fw.rules == set() and not os.path.exists(record)


def test_firewall_without_firewalld_installed(run_module, monkeypatch, tmp_path):
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **kw: None)
    r = run_module(FW, ports=[8443], sources=["10.0.0.0/24"], record_file=str(tmp_path / "r.json"))
    assert not r["changed"] and r["firewalld"] == "not running" and r["warnings_text"]


def test_a_first_check_before_any_plan_says_what_it_would_do_and_a_real_run_refuses(run_module, tmp_path):
    d = str(tmp_path / "front")
    svcs = services(("alice", KEY))
    svcs[0]["argv"] = []  # the plan stage has not run on this host yet
    args = dict(dir=d, settings=dict(addresses=["10.0.0.5"], tls=True), services=svcs)
    r = run_module(M, check_mode=True, **args)
    assert r["changed"] and not r.get("failed") and "once the plan exists" in r["msg"] and not os.path.exists(d)
    r = run_module(M, **args)
    assert r["failed"] and "--max-num-seqs is unknown" in r["msg"]


def test_a_shared_port_writes_the_routed_maps_and_they_go_with_it(run_module, tmp_path):
    d = tmp_path / "front"
    shared = [
        dict(
            name="chat",
            port=8000,
            front_port=8443,
            argv=["--max-num-seqs", "8", "--served-model-name", "qwen"],
            clients=[dict(name="alice", key_sha256=key_sha256(KEY), models=["qwen"])],
        ),
        dict(
            name="embed",
            port=8001,
            front_port=8443,
            argv=["--runner", "pooling", "--max-num-seqs", "8", "--served-model-name", "bge"],
            clients=[dict(name="alice", key_sha256=key_sha256(KEY), models=["qwen"])],
        ),
    ]
    r = run_module(M, dir=str(d), settings=dict(tls=False), services=shared)
    routed = ["access-routed_8443.map", "clients-routed_8443.map", "models-routed_8443.map"]
    assert sorted(n for n in r["files"] if "routed" in n) == routed
    assert (d / "access-routed_8443.map").read_text().splitlines()[1:] == ["alice|qwen ok"]
    # Back to one service per port: the routed maps are removed.
    r = run_module(M, dir=str(d), settings=dict(tls=False), services=services(("alice", KEY)))
    assert all(n in r["files"] for n in routed) and not any((d / n).exists() for n in routed)
