"""Opt-in Prometheus access to /metrics (issue 14 item 6): the publish, the firewalld plan, the scrape target.

The firewalld tests drive plan() the way tasks/expose.yml does - rounds of read-only questions answered by a
small firewalld model, then the changes applied to it - and check what ends up in firewalld and on record."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.front import _expose as e

LAN = "10.20.0.15"
PROM = "10.20.0.2"
RULE = 'rule family="ipv4" source address="10.20.0.2" port port="8000" protocol="tcp" accept'
IP_ADDR = (
    "2: eth0    inet 10.20.0.15/24 brd 10.20.0.255 scope global eth0\\       valid_lft forever preferred_lft forever\n"
)
ACTIVE = "docker\n  interfaces: docker0\ninternal (default)\n  interfaces: eth1\npublic\n  interfaces: eth0\n  sources: 10.9.0.0/16\n"


class Firewalld(object):
    """firewall-cmd as far as expose.yml uses it: state, zones, query/add/remove rich rules, runtime + permanent."""

    def __init__(self, running=True, default_zone="internal", active=ACTIVE, ip_addr=IP_ADDR, rules=(), offline=True):
        self.running = running
        self.offline = offline
        self.default_zone = default_zone
        self.active = active
        self.ip_addr = ip_addr
        self.rules = {"runtime": set(rules), "permanent": set(rules)}  # {(zone, rule)}
        self.calls = []

    def run(self, argv):
        self.calls.append(list(argv))
        if argv[0] == "ip":
            return 0, self.ip_addr if argv[-1] == LAN else "", ""
        if argv[0] == "firewall-offline-cmd":
            if self.running or not self.offline:
                return 127, "", "firewall-offline-cmd: not installed\n"
            zone, (verb, rule) = argv[1].split("=", 1)[1], argv[2][2:].split("=", 1)
            if verb == "query-rich-rule":
                return (0, "yes\n", "") if (zone, rule) in self.rules["permanent"] else (1, "no\n", "")
            assert verb == "remove-rich-rule", argv
            self.rules["permanent"].discard((zone, rule))
            return 0, "success\n", ""
        assert argv[0] == "firewall-cmd"
        if argv[1:] == ["--state"]:
            return (0, "running\n", "") if self.running else (252, "", "not running\n")
        if not self.running:
            return 252, "", "FirewallD is not running\n"
        if argv[1:] == ["--get-default-zone"]:
            return 0, self.default_zone + "\n", ""
        if argv[1:] == ["--get-active-zones"]:
            return 0, self.active, ""
        words = argv[1:]
        layer = "runtime"
        if words[0] == "--permanent":
            layer, words = "permanent", words[1:]
        zone = words[0].split("=", 1)[1]
        verb, rule = words[1][2:].split("=", 1)
        key = (zone, rule)
        if verb == "query-rich-rule":
            return (0, "yes\n", "") if key in self.rules[layer] else (1, "no\n", "")
        if verb == "add-rich-rule":
            self.rules[layer].add(key)
        elif verb == "remove-rich-rule":
            self.rules[layer].discard(key)
        else:
            raise AssertionError(argv)
        return 0, "success\n", ""


def settings(**kw):
    s = dict(
        expose=True,
        address=LAN,
        port=8000,
        sources=[PROM],
        firewalld="auto",
        zone="",
        service="vllm",
        host="gpu1",
        record="",
        daemon_json="",
    )
    s.update(kw)
    return s


def converge(fw, s, check=False):
    """plan() rounds as expose.yml runs them (at most 3 rounds of reads), then the actions (not in check)."""
    observed = []
    p = e.plan(s, [])
    rounds = 0
    while p["reads"]:
        rounds += 1
        assert rounds <= 3, "expose.yml asks three rounds at most"
        for read in p["reads"]:
            rc, out, err = fw.run(read["argv"])
            observed.append({"item": read, "rc": rc, "stdout": out, "stderr": err, "changed": False})
        p = e.plan(s, observed)
    reads = list(fw.calls)
    if not check:
        for argv in p["actions"]:
            rc, _o, _e = fw.run(argv)
            assert rc == 0
    p["read_calls"] = reads
    return p


def changing(calls):
    return [c for c in calls if any(w.startswith(("--add-", "--remove-")) for w in c)]


# ---------------------------------------------------------------- off: nothing anywhere


def test_off_and_nothing_recorded_asks_nothing_and_changes_nothing():
    fw = Firewalld()
    p = converge(fw, settings(expose=False))
    assert fw.calls == [] and p["actions"] == [] and p["scrape"] == [] and p["record"] == {}
    assert p["firewalld"] == "off" and p["record_text"] == ""


@pytest.mark.parametrize("mode", ["auto", "always", "never"])
def test_off_never_calls_firewalld_whatever_the_mode(mode):
    fw = Firewalld()
    converge(fw, settings(expose=False, firewalld=mode, address="", sources=[]))
    assert fw.calls == []


# ---------------------------------------------------------------- on: the rule in the zone of the address


def test_on_adds_the_rule_runtime_and_permanent_in_the_zone_of_the_address_and_records_it():
    fw = Firewalld()
    p = converge(fw, settings())
    assert p["zone"] == "public"  # eth0 holds 10.20.0.15; public binds eth0 (not the default zone internal)
    assert p["rules"] == [RULE]
    assert changing(fw.calls) == [
        ["firewall-cmd", "--zone=public", "--add-rich-rule=" + RULE],
        ["firewall-cmd", "--permanent", "--zone=public", "--add-rich-rule=" + RULE],
    ]
    assert fw.rules == {"runtime": {("public", RULE)}, "permanent": {("public", RULE)}}
    assert json.loads(p["record_text"]) == {"version": 1, "zone": "public", "rules": [RULE]}
    assert p["summary"] == ["add (runtime) in zone public: " + RULE, "add (permanent) in zone public: " + RULE]


def test_second_run_changes_nothing():
    fw = Firewalld()
    first = converge(fw, settings())
    fw.calls = []
    second = converge(fw, settings(record=first["record_text"]))
    assert second["actions"] == [] and second["summary"] == [] and changing(fw.calls) == []
    assert second["record_text"] == first["record_text"]


def test_only_the_missing_layer_is_added():
    fw = Firewalld()
    first = converge(fw, settings())
    fw.rules["runtime"].clear()  # a firewall-cmd --reload of a rule someone added runtime only, or the like
    fw.calls = []
    p = converge(fw, settings(record=first["record_text"]))
    assert p["actions"] == [["firewall-cmd", "--zone=public", "--add-rich-rule=" + RULE]]


def test_check_mode_asks_only_read_only_questions():
    fw = Firewalld()
    p = converge(fw, settings(), check=True)
    assert changing(fw.calls) == [] and len(p["actions"]) == 2
    for call in fw.calls:
        assert call[0] == "ip" or any(
            w in ("--state", "--get-active-zones", "--get-default-zone") or w.startswith("--query-") for w in call
        )


def test_day2_turning_exposure_off_removes_exactly_the_recorded_rules():
    operators = ("public", 'rule family="ipv4" source address="10.1.1.1" port port="22" protocol="tcp" accept')
    fw = Firewalld(rules=[operators])
    first = converge(fw, settings())
    fw.calls = []
    p = converge(fw, settings(expose=False, record=first["record_text"]))
    assert changing(fw.calls) == [
        ["firewall-cmd", "--zone=public", "--remove-rich-rule=" + RULE],
        ["firewall-cmd", "--permanent", "--zone=public", "--remove-rich-rule=" + RULE],
    ]
    assert fw.rules == {"runtime": {operators}, "permanent": {operators}}
    assert p["record"] == {} and p["record_text"] == "" and p["scrape"] == []
    fw.calls = []
    again = converge(fw, settings(expose=False, record=p["record_text"]))
    assert fw.calls == [] and again["actions"] == []


def test_a_rule_that_was_there_before_is_not_recorded_as_ours_and_stays_when_turned_off():
    fw = Firewalld(rules=[("public", RULE)])
    p = converge(fw, settings())
    assert p["actions"] == [] and p["record"] == {} and p["record_text"] == ""
    converge(fw, settings(expose=False, record=p["record_text"]))
    assert ("public", RULE) in fw.rules["permanent"]


def test_changed_sources_port_and_zone_move_the_rules():
    fw = Firewalld()
    first = converge(fw, settings(sources=[PROM, "10.30.0.0/24"]))
    assert len(first["rules"]) == 2
    fw.calls = []
    p = converge(fw, settings(sources=["10.30.0.0/24"], port=9000, zone="trusted", record=first["record_text"]))
    new = 'rule family="ipv4" source address="10.30.0.0/24" port port="9000" protocol="tcp" accept'
    assert fw.rules["permanent"] == {("trusted", new)} and fw.rules["runtime"] == {("trusted", new)}
    assert json.loads(p["record_text"])["rules"] == [new] and p["zone"] == "trusted"
    assert [c for c in fw.calls if "--get-active-zones" in c] == [], "a named zone needs no zone lookup"
    # removals come before additions
    kinds = [("remove" if any("--remove-" in w for w in a) else "add") for a in p["actions"]]
    assert kinds == sorted(kinds, key=lambda k: k != "remove")


def test_an_interface_in_no_zone_gets_the_default_zone():
    fw = Firewalld(active="public\n  interfaces: eth9\n")
    assert converge(fw, settings())["zone"] == "internal"


def test_ipv6_source_and_network_rules():
    assert (
        e.rich_rule("fd00::2", 8000)
        == 'rule family="ipv6" source address="fd00::2" port port="8000" protocol="tcp" accept'
    )
    assert (
        e.rich_rule("10.0.0.7/24", 1)
        == 'rule family="ipv4" source address="10.0.0.0/24" port port="1" protocol="tcp" accept'
    )
    assert e.rich_rules(["10.0.0.1", "10.0.0.1/32", "10.0.0.2"], 80) == [
        e.rich_rule("10.0.0.1", 80),
        e.rich_rule("10.0.0.2", 80),
    ]


# ---------------------------------------------------------------- firewalld absent, modes, refusals


def test_firewalld_not_running_in_auto_changes_nothing_and_says_the_port_is_open():
    fw = Firewalld(running=False)
    p = converge(fw, settings(daemon_json='{"iptables": false}'))
    assert fw.calls == [["firewall-cmd", "--state"]] and p["actions"] == [] and p["firewalld"] == "not running"
    assert any("open to every host" in w for w in p["warnings"])
    assert p["scrape"], "the scrape target does not depend on firewalld"


def test_firewalld_stopped_the_recorded_rules_go_by_firewall_offline_cmd():
    record = e.dump_record({"zone": "public", "rules": [RULE, RULE.replace("10.20.0.2", "10.20.0.3")]})
    fw = Firewalld(running=False, rules=[("public", RULE)])
    p = converge(fw, settings(expose=False, record=record))
    assert fw.rules["permanent"] == set() and p["record_text"] == "" and p["warnings"] == []
    assert [c for c in fw.calls if "--remove-rich-rule=" + RULE in c] == [
        ["firewall-offline-cmd", "--zone=public", "--remove-rich-rule=" + RULE]
    ], "only the rule that is there"
    assert p["summary"] == ["remove (permanent, firewalld stopped) from zone public: " + RULE]
    # Converged: asked, nothing to do.
    fw.calls = []
    p = converge(fw, settings(expose=False, record=record))
    assert p["actions"] == [] and all(
        c[0] == "firewall-offline-cmd" or c == ["firewall-cmd", "--state"] for c in fw.calls
    )


def test_firewalld_not_running_with_rules_on_record_says_how_to_remove_them():
    record = e.dump_record({"zone": "public", "rules": [RULE]})
    p = converge(Firewalld(running=False, offline=False), settings(expose=False, record=record))
    assert p["record_text"] == record, "kept, to remove the rules once firewalld runs"
    assert any("firewall-offline-cmd --zone=public --remove-rich-rule='%s'" % RULE in w for w in p["warnings"])


def test_always_fails_when_firewalld_is_not_running():
    with pytest.raises(e.ExposeError, match="not running"):
        converge(Firewalld(running=False), settings(firewalld="always"))


def test_never_makes_no_firewalld_call_and_warns():
    fw = Firewalld()
    p = converge(fw, settings(firewalld="never", sources=[]))
    assert fw.calls == [] and p["scrape"] and any("DOCKER-USER" in w for w in p["warnings"])


def test_managed_without_sources_is_refused():
    with pytest.raises(e.ExposeError, match="vllm_service_metrics_sources is empty"):
        converge(Firewalld(), settings(sources=[]))


def test_a_source_that_is_a_name_is_refused():
    with pytest.raises(e.ExposeError, match="not an IP address or network"):
        converge(Firewalld(), settings(sources=["prometheus.lan"]))


def test_an_address_not_on_the_host_is_refused():
    with pytest.raises(e.ExposeError, match="not an address of this host"):
        converge(Firewalld(ip_addr=""), settings())


def test_an_unexpected_query_failure_is_an_error_not_an_absent_rule():
    class Broken(Firewalld):
        def run(self, argv):
            if any(w.startswith("--query-") for w in argv):
                self.calls.append(list(argv))
                return 112, "", "Error: INVALID_ZONE: nope\n"
            return Firewalld.run(self, argv)

    with pytest.raises(e.ExposeError, match="INVALID_ZONE"):
        converge(Broken(), settings(zone="nope"))


def test_unknown_mode_is_refused():
    with pytest.raises(e.ExposeError, match="one of auto, always, never"):
        e.plan(settings(firewalld="sometimes"))


def test_loopback_address_needs_no_firewall_and_scrapes_loopback():
    fw = Firewalld()
    p = converge(fw, settings(address="127.0.0.1", sources=[]))
    assert fw.calls == [] and p["scrape"][0]["targets"] == ["127.0.0.1:8000"]


def test_wildcard_address_uses_the_default_zone_without_an_interface_lookup():
    fw = Firewalld()
    p = converge(fw, settings(address="0.0.0.0"))
    assert p["zone"] == "internal" and not [c for c in fw.calls if c[0] == "ip"]


# ---------------------------------------------------------------- warnings: what firewalld does not do


def test_docker_iptables_on_is_said_plainly():
    p = converge(Firewalld(), settings(daemon_json='{"runtimes": {}}'))
    assert any("DNAT" in w and "DOCKER-USER" in w for w in p["warnings"])
    p = converge(Firewalld(), settings(daemon_json='{"iptables": false}'))
    assert p["warnings"] == []


@pytest.mark.parametrize(
    "text,expected",
    [
        ("", True),
        ("{", True),
        ('{"iptables": true}', True),
        ('{"iptables": false}', False),
        ("[]", True),
        ({"iptables": False}, False),
        ({}, True),
        (None, True),
    ],
)
def test_docker_iptables(text, expected):
    assert e.docker_iptables(text) is expected


# ---------------------------------------------------------------- parsing


def test_interface_and_zone_parsing():
    assert e.interface_of(IP_ADDR) == "eth0"
    assert e.interface_of("7: eth0@if8    inet 172.17.0.2/16 brd 172.17.255.255 scope global eth0\n") == "eth0"
    assert e.interface_of("") is None
    assert e.zone_of("eth0", ACTIVE) == "public" and e.zone_of("eth1", ACTIVE) == "internal"
    assert e.zone_of("eth7", ACTIVE) is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        "[]",
        '{"zone": "public"}',
        '{"zone": "", "rules": ["rule x"]}',
        '{"zone": "public", "rules": ["--add-port=1/tcp"]}',
    ],
)
def test_a_damaged_record_is_no_record(text):
    assert e.read_record(text) == {}


def test_a_record_templated_into_a_mapping_is_still_the_record():
    # set_fact turns a variable holding JSON text into the mapping: found by the playbook test, kept here.
    text = e.dump_record({"zone": "public", "rules": [RULE]})
    assert e.read_record(json.loads(text)) == e.read_record(text) == {"zone": "public", "rules": [RULE]}
    fw = Firewalld()
    first = converge(fw, settings())
    fw.calls = []
    second = converge(fw, settings(record=json.loads(first["record_text"])))
    assert second["record"] == first["record"] and second["actions"] == []


# ---------------------------------------------------------------- the publish and its guard


def test_publish_binding():
    assert e.publish_binding(False, LAN, 8000, 8000) is None
    assert e.publish_binding(True, LAN, 8000, 8000) == "10.20.0.15:8000:8000"
    assert e.publish_binding(True, LAN, 9100, 8001, "127.0.0.1", 8000) == "10.20.0.15:9100:8001"
    assert e.publish_binding(True, "fd00::15", 8000, 8000) == "[fd00::15]:8000:8000"
    # covered by the role's own publish: Docker refuses the same address and port twice
    assert e.publish_binding(True, LAN, 8000, 8000, LAN, 8000) is None
    assert e.publish_binding(True, "127.0.0.1", 8000, 8000, "127.0.0.1", 8000) is None
    assert e.publish_binding(True, LAN, 8000, 8000, "0.0.0.0", 8000) is None
    assert e.publish_binding(True, LAN, 9000, 8000, "0.0.0.0", 8000) == "10.20.0.15:9000:8000"


@pytest.mark.parametrize(
    "kw,needle",
    [
        (dict(address=""), "vllm_service_metrics_address is empty"),
        (dict(address="gpu1.lan"), "not an IP address"),
        (dict(address="0.0.0.0"), "every interface"),
        (dict(address="::"), "every interface"),
        (dict(port=0), "TCP port"),
        (dict(port="http"), "TCP port"),
        (dict(has_api_keys=False), "vllm_service_api_keys is empty"),
    ],
)
def test_check_metrics_refusals(kw, needle):
    args = dict(expose=True, address=LAN, port=8000, has_api_keys=True)
    args.update(kw)
    problems = e.check_metrics(**args)
    assert any(needle in p for p in problems), problems


def test_check_metrics_accepts():
    assert e.check_metrics(False, "", None) == []
    assert e.check_metrics(True, LAN, 8000, has_api_keys=True) == []
    assert e.check_metrics(True, "127.0.0.1", 8000) == [], "loopback: no keys needed"
    assert e.check_metrics(True, "0.0.0.0", 8000, expose_to_network=True) == []


def test_scrape_target_group():
    assert e.scrape_targets(LAN, "8000", "vllm-a", "gpu1") == [
        {"targets": ["10.20.0.15:8000"], "labels": {"service": "vllm-a", "host": "gpu1", "port": "8000"}}
    ]


@pytest.mark.parametrize("wide", ["0.0.0.0/0", "::/0", "0.0.0.0/0.0.0.0"])
def test_a_source_of_every_address_is_refused_unless_expose_to_network(wide):
    problems = e.sources_problems([PROM, wide])
    assert len(problems) == 1 and repr(wide) in problems[0] and "vllm_service_expose_to_network" in problems[0]
    assert e.sources_problems([PROM, wide], expose_to_network=True) == []
    with pytest.raises(e.ExposeError, match="is every ipv"):
        e.plan(settings(sources=[wide]))
    for opted in (True, "True", "true"):
        assert e.plan(settings(sources=[wide], expose_to_network=opted))["reads"]
    for opted in (False, "False", ""):
        with pytest.raises(e.ExposeError):
            e.plan(settings(sources=[wide], expose_to_network=opted))


@pytest.mark.parametrize("bad", [None, 5, ["10.0.0.1", None], ["x"], [{"a": 1}], "10.0.0.1"])
def test_odd_sources_are_sentences_not_tracebacks(bad):
    problems = e.sources_problems(bad)
    assert bad is None or problems, bad
    assert all(isinstance(p, str) for p in problems)
