# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The firewalld rich rules of a port for named sources, as pure functions (issue 14 item 6; issue 25).

One home of the firewalld rules: the front door (airgap.vllm.vllm_front_firewall) opens its ports with ``plan()``,
and the vllm_service role runs it with nothing wanted to remove the rules the retired whole-port metrics
exposure (``vllm_service_metrics_expose``, removed in issue 25; docs/monitoring.md's migration note) recorded on a
host. What this file decides:

- ``check_metrics()``/``publish_binding()``: the retired exposure's extra ``--publish`` (the guard,
  airgap.vllm.vllm_service_guard, still takes the option; the role no longer passes it);
- ``plan()``: one call per round of observations (the caller runs the read-only commands it lists in ``reads``,
  feeds the results back, then runs ``actions``): whether firewalld is managed, which zone, which rich rules, which
  firewall-cmd calls add or remove them (permanent and runtime, only where needed; with the daemon stopped, the
  recorded rules are removed from the permanent configuration by firewall-offline-cmd), what the host records as
  its own rules (so that a later run - or the uninstall - removes exactly those), a Prometheus file_sd target group
  and the warnings (Docker's DNAT bypasses firewalld's zone rules unless Docker's iptables integration is off).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import json

from ansible_collections.airgap.vllm.plugins.module_utils.common._text import as_text as _text

FIREWALLD_MODES = ("auto", "always", "never")
FIREWALL_CMD = "firewall-cmd"
FIREWALL_OFFLINE_CMD = "firewall-offline-cmd"
# firewall-cmd --query-*: 0 yes, 1 no; --state: 0 running, 252 not running.
QUERY_YES, QUERY_NO = 0, 1
WILDCARDS = ("0.0.0.0", "::", "[::]")
RECORD_VERSION = 1
DOC = "docs/monitoring.md"


class ExposeError(Exception):
    """Refused settings or an unreadable answer; the message says what to change."""


def _ip(address):
    """ipaddress object of an IP literal (brackets allowed around IPv6), else None."""
    text = _text(address).strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def is_wildcard(address):
    text = _text(address).strip()
    if text in WILDCARDS:
        return True
    ip = _ip(text)
    return ip is not None and ip.is_unspecified


def is_loopback(address):
    text = _text(address).strip()
    if text == "localhost":
        return True
    ip = _ip(text)
    return ip is not None and ip.is_loopback


def _host_port(address, port):
    """'10.0.0.5:8000', '[fd00::5]:8000' (a Docker publish / Prometheus target address)."""
    ip = _ip(address)
    text = str(ip) if ip is not None else _text(address).strip()
    return ("[%s]:%s" % (text, port)) if ip is not None and ip.version == 6 else "%s:%s" % (text, port)


def _port(value, name):
    try:
        port = int(_text(value).strip())
    except ValueError:
        port = None
    if port is None or not 0 < port < 65536:
        raise ExposeError("%s must be a TCP port (1-65535), not %r" % (name, value))
    return port


def check_metrics(
    expose, address, port, api_host="127.0.0.1", api_port=8000, has_api_keys=False, expose_to_network=False
):
    """Problems (a list of sentences, empty when acceptable) with the metrics exposure settings.

    The published port is the whole HTTP server, not /metrics alone: with no API keys set, every route
    would be open on that address, so that needs vllm_service_expose_to_network too.
    """
    if not expose:
        return []
    problems = []
    text = _text(address).strip()
    if not text:
        return [
            "vllm_service_metrics_expose is on but vllm_service_metrics_address is empty: name the LAN address of "
            "this host Prometheus scrapes (e.g. \"{{ ansible_facts['default_ipv4']['address'] }}\")"
        ]
    if _ip(text) is None:
        return [
            "vllm_service_metrics_address %r is not an IP address: Docker publishes on an address of the host, "
            "not a name" % (text,)
        ]
    if is_wildcard(text):
        if not expose_to_network:
            problems.append(
                "vllm_service_metrics_address %r publishes the port on every interface: name one address "
                "of this host, or set vllm_service_expose_to_network: true if the server is meant for "
                "the whole network" % (text,)
            )
    try:
        _port(port, "vllm_service_metrics_port")
    except ExposeError as e:
        problems.append(str(e))
    if not is_loopback(text) and not has_api_keys and not expose_to_network:
        problems.append(
            "vllm_service_metrics_address %r also serves the API (vLLM has /metrics on the API port) and "
            "vllm_service_api_keys is empty, so /v1 would be open there: set API keys, or set "
            "vllm_service_expose_to_network: true if an open API on that address is meant" % (text,)
        )
    return problems


def publish_binding(expose, address, port, container_port, api_host="127.0.0.1", api_port=8000):
    """The extra Docker publish 'ADDRESS:PORT:CONTAINER_PORT' for the metrics address, or None.

    None when exposure is off, or when the role's own publish (api_host:api_port) already covers it
    (the same address and port, or a wildcard API address on the same port): Docker refuses to publish
    one host address and port twice.
    """
    if not expose:
        return None
    port = _port(port, "vllm_service_metrics_port")
    api_port = _port(api_port, "vllm_service_port")
    container_port = _port(container_port, "the container port")
    if port == api_port:
        if is_wildcard(api_host):
            return None
        same = _ip(address) is not None and _ip(address) == _ip(api_host)
        if same or _text(address).strip() == _text(api_host).strip():
            return None
    return "%s:%d" % (_host_port(address, port), container_port)


# ---------------------------------------------------------------- firewalld


def source_address(source, where="vllm_service_metrics_sources"):
    """A source as firewalld's rich rule takes it: (family, 'ADDR' or 'NET/LEN')."""
    text = _text(source).strip()
    try:
        net = ipaddress.ip_network(text, strict=False)
    except (ValueError, TypeError):
        raise ExposeError(
            "%s: %r is not an IP address or network (CIDR): firewalld matches sources by address" % (where, source)
        )
    family = "ipv%d" % net.version
    if net.prefixlen == net.max_prefixlen:
        return family, str(net.network_address)
    return family, str(net)


def sources_problems(
    sources, expose_to_network=False, where="vllm_service_metrics_sources", opt_in="vllm_service_expose_to_network"
):
    """Problems (sentences) with the sources firewalld is to accept on a port (the one rule for the front door's
    client and metrics sources alike): each must be an address or a network, and a network of every address
    (0.0.0.0/0, ::/0) opens the port to the world, which only `opt_in` (None: nothing) says is meant."""
    if sources in (None, ""):
        return []
    if not isinstance(sources, (list, tuple)):
        return ["%s must be a list of IP addresses or networks, not %r" % (where, sources)]
    problems = []
    for source in sources:
        try:
            family, addr = source_address(source, where)
        except ExposeError as e:
            problems.append(str(e))
            continue
        if addr.endswith("/0") and not expose_to_network:
            problems.append(
                "%s: %r is every %s address: the port would be open to any network; name the networks "
                "that need it%s"
                % (where, source, family, ", or set %s: true if that is meant" % opt_in if opt_in else "")
            )
    return problems


def rich_rule(source, port):
    """The rich rule accepting TCP `port` from one source, in the form firewalld lists it."""
    family, addr = source_address(source)
    return 'rule family="%s" source address="%s" port port="%d" protocol="tcp" accept' % (family, addr, port)


def rich_rules(sources, port):
    """One rule per distinct source, in the order given."""
    out = []
    for source in sources or []:
        rule = rich_rule(source, port)
        if rule not in out:
            out.append(rule)
    return out


def interface_of(ip_addr_output):
    """The interface of `ip -o addr show to ADDRESS` ('2: eth0    inet 10.0.0.5/24 ...'), or None."""
    for line in _text(ip_addr_output).splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0].endswith(":") and fields[2] in ("inet", "inet6"):
            return fields[1].split("@", 1)[0]
    return None


def zone_of(interface, active_zones_output):
    """The zone `firewall-cmd --get-active-zones` binds `interface` to, or None."""
    zone = None
    for line in _text(active_zones_output).splitlines():
        if line and not line[0].isspace():
            zone = line.strip().split()[0] if line.strip() else None
        elif zone and line.strip().startswith("interfaces:"):
            if interface in line.split(":", 1)[1].split():
                return zone
    return None


def _json(value):
    """A JSON document's data from its text - or the data itself: Ansible's templating turns a variable holding
    JSON text into the mapping it spells. None when empty or not JSON."""
    if isinstance(value, (dict, list)):
        return value
    text = _text(value).strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def docker_iptables(daemon_json):
    """Whether Docker manages iptables (its default) per /etc/docker/daemon.json (its text or data; empty: no file)."""
    data = _json(daemon_json)
    return not (isinstance(data, dict) and data.get("iptables") is False)


def read_record(value):
    """{'zone', 'rules'} the host recorded as added by this role (its text or data), or {} (none, or unreadable)."""
    data = _json(value)
    if not isinstance(data, dict) or not isinstance(data.get("rules"), list) or not data.get("zone"):
        return {}
    rules = [r for r in data["rules"] if isinstance(r, str) and r.startswith("rule ")]
    return {"zone": str(data["zone"]), "rules": rules} if rules else {}


def dump_record(record):
    if not record or not record.get("rules"):
        return ""
    return (
        json.dumps(
            {"version": RECORD_VERSION, "zone": record["zone"], "rules": record["rules"]}, indent=1, sort_keys=True
        )
        + "\n"
    )


def _fw(permanent, *words):
    return [FIREWALL_CMD] + (["--permanent"] if permanent else []) + list(words)


def _query(zone, rule, permanent):
    return _fw(permanent, "--zone=%s" % zone, "--query-rich-rule=%s" % rule)


def _change(verb, zone, rule, permanent):
    return _fw(permanent, "--zone=%s" % zone, "--%s-rich-rule=%s" % (verb, rule))


def _offline_argv(verb, zone, rule):
    """firewall-offline-cmd's argv (0 yes / 1 no for --query-*, like firewall-cmd)."""
    return [FIREWALL_OFFLINE_CMD, "--zone=%s" % zone, "--%s-rich-rule=%s" % (verb, rule)]


def _offline(verb, zone, rule):
    """The command that edits firewalld's permanent configuration while firewalld is stopped."""
    return "firewall-offline-cmd --zone=%s --%s-rich-rule='%s'" % (zone, verb, rule)


def scrape_targets(address, port, service, host):
    """Prometheus file_sd target group for the service: the published address and port, labelled."""
    port = _port(port, "vllm_service_metrics_port")
    return [
        {
            "targets": [_host_port(address, port)],
            "labels": {"service": _text(service), "host": _text(host), "port": str(port)},
        }
    ]


def _results(observed):
    """{key: {'rc', 'stdout', 'stderr'}} from registered loop results (item.key) or plain mappings."""
    out = {}
    for r in observed or []:
        if not isinstance(r, dict):
            continue
        item = r.get("item") if isinstance(r.get("item"), dict) else r
        key = item.get("key")
        if key is None or r.get("skipped"):
            continue
        rc = r.get("rc")
        out[key] = {
            "rc": rc if rc is not None else (2 if r.get("failed") else None),
            "stdout": _text(r.get("stdout")),
            "stderr": _text(r.get("stderr") or r.get("msg")),
        }
    return out


def _read(key, argv):
    return {"key": key, "argv": argv}


def plan(settings, observed=None):
    """The whole exposure plan from the settings and what the read-only commands answered so far.

    settings: expose, address, port, sources, expose_to_network (sources of every address allowed),
    firewalld (auto|always|never), zone (empty: the zone of the
    address's interface, else firewalld's default zone), service, host, record (text of the host's record
    of its own rules, empty if none), daemon_json (text of /etc/docker/daemon.json, empty if none).
    observed: results of earlier ``reads`` (each with the read's ``key``; rc, stdout, stderr).

    Returns reads (commands still to run, read-only: empty once everything is known), firewalld ('managed',
    'not running', 'off', 'unknown'), zone, rules, actions (firewall-cmd argv lists that change something:
    removals first), record (what the host records after the actions; {} = no record), record_text,
    scrape (file_sd target group, [] when off), summary (one sentence per change), warnings.
    Raises ExposeError for refused settings and for a firewall-cmd that fails in an unexpected way.
    """
    s = dict(settings or {})
    expose = bool(s.get("expose"))
    mode = _text(s.get("firewalld") or "auto")
    if mode not in FIREWALLD_MODES:
        raise ExposeError(
            "vllm_service_metrics_firewalld must be one of %s, not %r" % (", ".join(FIREWALLD_MODES), mode)
        )
    address = _text(s.get("address")).strip()
    seen = _results(observed)
    record = read_record(s.get("record"))
    out = {
        "reads": [],
        "firewalld": "off",
        "zone": None,
        "rules": [],
        "actions": [],
        "record": record,
        "record_text": dump_record(record),
        "scrape": [],
        "summary": [],
        "warnings": [],
    }

    port = None
    desired = []
    if expose:
        problems = check_metrics(True, address, s.get("port"), has_api_keys=True, expose_to_network=True)
        if problems:
            raise ExposeError("; ".join(problems))
        port = _port(s.get("port"), "vllm_service_metrics_port")
        out["scrape"] = scrape_targets(address, port, s.get("service"), s.get("host"))
        if not is_loopback(address):
            opted = _text(s.get("expose_to_network")).strip().lower() in ("true", "yes", "on", "1", "y")
            problems = sources_problems(s.get("sources"), opted)
            if problems:
                raise ExposeError("; ".join(problems))
            desired = rich_rules(s.get("sources"), port)
    wanted = expose and not is_loopback(address)
    if mode == "never" or not (wanted or record):
        if record and mode == "never":
            out["warnings"].append(
                "vllm_service_metrics_firewalld is never: the rules an earlier run added in zone %s stay (%s)"
                % (record["zone"], "; ".join(record["rules"]))
            )
        if wanted and mode == "never":
            out["warnings"].append(_docker_warning(s, managed=False))
        return _done(out, record)

    # Is firewalld running?
    if "state" not in seen:
        out["firewalld"] = "unknown"
        out["reads"] = [_read("state", [FIREWALL_CMD, "--state"])]
        return out
    if seen["state"]["rc"] != 0:
        if mode == "always" and wanted:
            raise ExposeError(
                "vllm_service_metrics_firewalld is always but firewalld is not running on this host "
                "(firewall-cmd --state: %s): start firewalld, or set it to auto or never"
                % ((seen["state"]["stdout"] or seen["state"]["stderr"]).strip() or "rc %s" % seen["state"]["rc"])
            )
        out["firewalld"] = "not running"
        if record and not wanted:
            # Removal only (day 2 off, uninstall, the migration): firewall-offline-cmd edits the permanent
            # configuration while the daemon is stopped (there is no runtime layer to change).
            queries = [
                _read("offline query %s %s" % (record["zone"], r), _offline_argv("query", record["zone"], r))
                for r in record["rules"]
            ]
            missing = [q for q in queries if q["key"] not in seen]
            if missing:
                out["reads"] = missing
                return out
            answers = [seen[q["key"]]["rc"] for q in queries]
            if all(rc in (QUERY_YES, QUERY_NO) for rc in answers):
                for r, rc in zip(record["rules"], answers):
                    if rc == QUERY_YES:
                        out["actions"].append(_offline_argv("remove", record["zone"], r))
                        out["summary"].append(
                            "remove (permanent, firewalld stopped) from zone %s: %s" % (record["zone"], r)
                        )
                return _done(out, {})
        if record:
            out["warnings"].append(
                "firewalld is not running: the rules an earlier run added in zone %s could not be checked or removed; "
                "they stay in its permanent configuration (remove them with: %s)"
                % (record["zone"], "; ".join(_offline("remove", record["zone"], r) for r in record["rules"]))
            )
        if wanted:
            out["warnings"].append(_docker_warning(s, managed=False))
        return _done(out, record)
    out["firewalld"] = "managed"

    # Which zone?
    zone = None
    if wanted:
        if not desired:
            raise ExposeError(
                "vllm_service_metrics_sources is empty: name the Prometheus servers' addresses (or "
                "networks) firewalld accepts on port %d, or set vllm_service_metrics_firewalld: never "
                "(see %s)" % (port, DOC)
            )
        zone = _text(s.get("zone")).strip() or None
        if zone is None:
            # A wildcard address has no one interface: firewalld's default zone.
            keys = ("default_zone",) if is_wildcard(address) else ("address", "zones", "default_zone")
            needed = [k for k in keys if k not in seen]
            if needed:
                out["reads"] = [
                    r
                    for r in (
                        _read("address", ["ip", "-o", "addr", "show", "to", address]),
                        _read("zones", [FIREWALL_CMD, "--get-active-zones"]),
                        _read("default_zone", [FIREWALL_CMD, "--get-default-zone"]),
                    )
                    if r["key"] in needed
                ]
                return out
            interface = None if is_wildcard(address) else interface_of(seen["address"]["stdout"])
            if interface is None and not is_wildcard(address):
                raise ExposeError(
                    "vllm_service_metrics_address %s is not an address of this host (ip -o addr show to %s "
                    "lists nothing): name one of its addresses" % (address, address)
                )
            zone = zone_of(interface, seen["zones"]["stdout"]) if interface else None
            if zone is None:
                if seen["default_zone"]["rc"] != 0 or not seen["default_zone"]["stdout"].strip():
                    raise ExposeError(
                        "firewall-cmd --get-default-zone failed: %s"
                        % (seen["default_zone"]["stderr"].strip() or seen["default_zone"]["rc"])
                    )
                zone = seen["default_zone"]["stdout"].strip().split()[0]
    out["zone"] = zone
    out["rules"] = desired

    # Which of the rules are there, runtime and permanent?
    keep = set((zone, r) for r in desired)
    stale = [(record["zone"], r) for r in record.get("rules", []) if (record["zone"], r) not in keep] if record else []
    wanted_pairs = [(zone, r) for r in desired]
    queries = []
    for z, r in stale + wanted_pairs:
        for permanent in (False, True):
            key = "query %s %s %s" % ("permanent" if permanent else "runtime", z, r)
            queries.append(_read(key, _query(z, r, permanent)))
    missing = [q for q in queries if q["key"] not in seen]
    if missing:
        out["reads"] = missing
        return out

    def present(q):
        res = seen[q["key"]]
        if res["rc"] == QUERY_YES:
            return True
        if res["rc"] == QUERY_NO:
            return False
        raise ExposeError(
            "%s failed (rc %s): %s" % (" ".join(q["argv"]), res["rc"], (res["stderr"] or res["stdout"]).strip())
        )

    removals, additions = [], []
    added = set()
    for q in queries:
        z, r = q["argv"][-2].split("=", 1)[1], q["argv"][-1].split("=", 1)[1]
        permanent = "--permanent" in q["argv"]
        layer = "permanent" if permanent else "runtime"
        if (z, r) in keep:
            if not present(q):
                additions.append(_change("add", z, r, permanent))
                out["summary"].append("add (%s) in zone %s: %s" % (layer, z, r))
                added.add(r)
        elif present(q):
            removals.append(_change("remove", z, r, permanent))
            out["summary"].append("remove (%s) from zone %s: %s" % (layer, z, r))
    out["actions"] = removals + additions
    mine = set(record.get("rules", [])) if record and record.get("zone") == zone else set()
    new_rules = [r for r in desired if r in mine or r in added]
    if wanted:
        out["warnings"].append(_docker_warning(s, managed=True))
    return _done(out, {"zone": zone, "rules": new_rules} if new_rules else {})


def _done(out, record):
    out["record"] = record
    out["record_text"] = dump_record(record)
    out["warnings"] = [w for w in out["warnings"] if w]
    return out


def _docker_warning(settings, managed):
    """What the firewall does not do on this host (None when it does what the rule says)."""
    iptables = docker_iptables(settings.get("daemon_json"))
    address = _text(settings.get("address")).strip()
    if iptables:
        return (
            "Docker manages iptables on this host: it DNATs the port published on %s to the container before "
            "firewalld's zone rules (INPUT) see the traffic, so %s; every host that can route to %s reaches the "
            "port. Restrict sources in Docker's DOCKER-USER chain or upstream, or run Docker with "
            "\"iptables\": false (see %s)"
            % (
                address,
                "the rich rules document the intent but do not filter it"
                if managed
                else "no firewalld rule would filter it",
                address,
                DOC,
            )
        )
    if not managed:
        return (
            "no firewalld rule is managed for %s (vllm_service_metrics_firewalld or firewalld not running): the "
            "port is open to every host that can route to it unless another firewall filters it" % address
        )
    return None
