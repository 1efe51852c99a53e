# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The front door's settings (issue 25), as pure functions: what the validate play refuses, what it warns about, and
the role's inputs.

- ``key_sha256()``: the only form in which the proxy knows a client key (a SHA-256 hex digest in a map file);
- ``check_settings()``: no TLS material and no opt-out, a client without a key, duplicate client names, a key used
  twice, bad limits, ports that collide;
- ``plan_service()``: each service's front port, total cap (the plan's ``--max-num-seqs``), clients and limits;
- ``front_inputs()`` / ``front_problems()`` / ``front_warnings()``: the role's per-service and host-wide inputs
  (``first_client_key()``: the key the role's own check asks with)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import ipaddress
import re

from ansible_collections.airgap.vllm.plugins.module_utils.front._expose import sources_problems
from ansible_collections.airgap.vllm.plugins.module_utils.front import _front_models as routing
from ansible_collections.airgap.vllm.plugins.module_utils.common._text import as_text as _text

_NAME_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}\Z")
_SHA_RE = re.compile(r"\A[0-9a-fA-F]{64}\Z")
TLS_MODES = ("generate", "files", "off")


class FrontError(Exception):
    """Refused settings; the message names the variable and the fix."""


class FrontPlanUnknown(FrontError):
    """A service has no plan yet (a first --check: the plan stage wrote nothing): nothing to size the cap from."""


def key_sha256(key):
    """The SHA-256 hex digest (lower case) of a client key: what the proxy's map holds, and what it computes from
    ``Authorization: Bearer <key>`` (``sha2(256),hex,lower``)."""
    return hashlib.sha256(_text(key).encode("utf-8")).hexdigest()


def _int(value, name, minimum=0):
    try:
        number = int(_text(value).strip())
    except ValueError:
        raise FrontError("%s must be an integer, not %r" % (name, value))
    if number < minimum:
        raise FrontError("%s must be at least %d, not %d" % (name, minimum, number))
    return number


def _port(value, name):
    number = _int(value, name, 0)
    if not 0 < number < 65536:
        raise FrontError("%s must be a TCP port (1-65535), not %r" % (name, value))
    return number


def client_problems(clients, where="vllm_front_clients"):
    """Problems (sentences) with a client list: each a mapping with a unique ``name`` and exactly one of ``key``
    (the secret, from ansible-vault) or ``key_sha256`` (its SHA-256 hex digest), limits non-negative integers,
    no key used by two clients (the proxy could not tell them apart)."""
    problems, names, hashes = [], {}, {}
    if clients in (None, ""):
        return problems
    if not isinstance(clients, list):
        return ["%s must be a list of {name, key or key_sha256, max_concurrent, rate_per_minute}" % where]
    for index, client in enumerate(clients):
        at = "%s[%d]" % (where, index)
        if not isinstance(client, dict):
            problems.append("%s must be a mapping with name and key (or key_sha256)" % at)
            continue
        name = _text(client.get("name")).strip()
        if not _NAME_RE.match(name):
            problems.append(
                "%s.name %r must be 1-64 letters, digits, '.', '_', '@' or '-' (it names the client in "
                "the access log)" % (at, name)
            )
        elif name in names:
            problems.append(
                "%s.name %r is also %s[%d]: one name per client (each its own key)" % (at, name, where, names[name])
            )
        else:
            names[name] = index
        key, digest = client.get("key"), client.get("key_sha256")
        if key in (None, "") and digest in (None, ""):
            problems.append(
                "%s (%s) has no key: give key (kept in ansible-vault) or key_sha256 (its SHA-256 hex "
                "digest, from: printf %%s KEY | sha256sum)" % (at, name or "?")
            )
            continue
        if key not in (None, "") and digest not in (None, ""):
            problems.append("%s (%s) has both key and key_sha256: give one" % (at, name or "?"))
            continue
        if key not in (None, ""):
            if len(_text(key)) < 16 or any(c.isspace() or c == "," for c in _text(key)):
                problems.append(
                    "%s (%s): a key must be at least 16 characters without spaces or commas" % (at, name or "?")
                )
                continue
            digest = key_sha256(key)
        elif not _SHA_RE.match(_text(digest)):
            problems.append("%s (%s).key_sha256 must be 64 hex digits" % (at, name or "?"))
            continue
        digest = _text(digest).lower()
        if digest in hashes:
            problems.append("%s (%s) has the same key as %s: one key per client" % (at, name or "?", hashes[digest]))
        else:
            hashes[digest] = "%s[%d]" % (where, index)
        models = client.get("models")
        if models not in (None, "") and (
            not isinstance(models, list) or not models or not all(isinstance(m, str) and m for m in models)
        ):
            problems.append("%s (%s).models must be a non-empty list of served model names" % (at, name or "?"))
        for limit in ("max_concurrent", "rate_per_minute"):
            if client.get(limit) not in (None, ""):
                try:
                    _int(client.get(limit), "%s.%s" % (at, limit))
                except FrontError as e:
                    problems.append(str(e))
    return problems


def _address_problems(addresses, where):
    problems = []
    if not isinstance(addresses, list):
        return ["%s must be a list of IP addresses" % where]
    for a in addresses:
        try:
            ipaddress.ip_address(_text(a).strip().strip("[]"))
        except ValueError:
            problems.append("%s: %r is not an IP address (HAProxy binds addresses, not names)" % (where, a))
    return problems


def _source_problems(sources, where):
    # One rule for every source list firewalld opens a port to (_expose): addresses or networks, never 0.0.0.0/0.
    return sources_problems(sources, where=where, opt_in=None)


def tls_mode(settings):
    """'off' (vllm_front_tls false), 'files' (the operator's certificate and key) or 'generate' (site CA)."""
    if not settings.get("tls", True):
        return "off"
    if _text(settings.get("tls_cert")).strip() or _text(settings.get("tls_key")).strip():
        return "files"
    return "generate" if settings.get("tls_generate", True) else "none"


def check_settings(settings):
    """Every problem (sentence) with a host's front door settings; [] when it may be deployed.

    settings: enabled, mode, tls, tls_cert, tls_key, tls_generate, addresses, sources, metrics_sources, services
    (each: name, port (engine), front_port, metrics_port, clients, metrics_tokens, max_concurrent)."""
    s = settings or {}
    if not s.get("enabled"):
        return []
    problems = []
    if _text(s.get("mode") or "container") not in ("container", "host"):
        problems.append("vllm_front_mode must be container or host, not %r" % (s.get("mode"),))
    mode = tls_mode(s)
    if mode == "none":
        problems.append(
            "vllm_front_tls is on but there is no TLS material: name the certificate and key "
            "(vllm_front_tls_cert, vllm_front_tls_key), let the collection make a site CA "
            "(vllm_front_tls_generate: true), or opt out with vllm_front_tls: false (plain HTTP: keys "
            "cross the network readable)"
        )
    elif mode == "files" and not (_text(s.get("tls_cert")).strip() and _text(s.get("tls_key")).strip()):
        problems.append("vllm_front_tls_cert and vllm_front_tls_key go together: name both files")
    problems += _address_problems(s.get("addresses") or [], "vllm_front_addresses")
    problems += _source_problems(s.get("sources") or [], "vllm_front_sources")
    problems += _source_problems(s.get("metrics_sources") or [], "vllm_front_metrics_sources")
    used = {}
    for svc in s.get("services") or []:
        name = _text(svc.get("name"))
        problems += client_problems(svc.get("clients"), "vllm_front_clients (service %s)" % name)
        problems += client_problems(svc.get("metrics_tokens"), "vllm_front_metrics_tokens (service %s)" % name)
        for key, label in (("front_port", "vllm_front_port"), ("metrics_port", "vllm_front_metrics_port")):
            value = svc.get(key)
            if key == "metrics_port" and value in (None, "", 0, "0"):
                continue
            try:
                port = _port(value, "%s (service %s)" % (label, name))
            except FrontError as e:
                problems.append(str(e))
                continue
            shared = key == "front_port" and used.get(port, "").startswith("vllm_front_port of")
            if _text(port) == _text(svc.get("port")):
                problems.append(
                    "%s %d (service %s) is the engine's own port: the front door needs its own" % (label, port, name)
                )
            elif shared:
                # Several services on one front port: one door routed by model (module_utils/front/_front_models.py).
                continue
            elif port in used:
                problems.append(
                    "%s %d (service %s) is also %s: one port per listener" % (label, port, name, used[port])
                )
            else:
                used[port] = "%s of service %s" % (label, name)
        for limit in ("max_concurrent", "client_max_concurrent", "client_rate_per_minute"):
            if svc.get(limit) not in (None, ""):
                try:
                    _int(svc.get(limit), "vllm_front_%s (service %s)" % (limit, name))
                except FrontError as e:
                    problems.append(str(e))
        if svc.get("metrics_port") not in (None, "", 0, "0") and not (
            s.get("metrics_sources") or svc.get("metrics_tokens")
        ):
            problems.append(
                "vllm_front_metrics_port (service %s) needs vllm_front_metrics_sources (Prometheus's "
                "addresses) or vllm_front_metrics_tokens: /metrics would be open to every client that "
                "reaches the port" % name
            )
    return problems


def warnings(settings):
    """What the validate play warns about (sentences)."""
    s = settings or {}
    if s.get("enabled") and tls_mode(s) == "off":
        return [
            "vllm_front_tls is false: the front door speaks plain HTTP, so every client key and every prompt "
            "crosses the network readable by anyone on the path. Use it only on a network you trust."
        ]
    return []


def max_num_seqs(argv):
    """The engine's --max-num-seqs from its argv (the plan's concurrency), or None."""
    argv = [_text(a) for a in argv or []]
    for i, arg in enumerate(argv):
        if arg == "--max-num-seqs" and i + 1 < len(argv):
            return _int(argv[i + 1], "--max-num-seqs", 1)
        if arg.startswith("--max-num-seqs="):
            return _int(arg.split("=", 1)[1], "--max-num-seqs", 1)
    return None


def plan_service(svc):
    """One service's front: name, front_port, engine_port, cap (total concurrency: vllm_front_max_concurrent,
    else the plan's --max-num-seqs), clients [{name, sha256, max_concurrent, rate_per_minute}], metrics_port (0:
    none), metrics_hashes, engine_key (may be empty: an engine without keys)."""
    name = _text(svc.get("name"))
    if not _NAME_RE.match(name):
        raise FrontError("service name %r cannot name a front door" % name)
    problems = client_problems(svc.get("clients"), "vllm_front_clients (service %s)" % name)
    problems += client_problems(svc.get("metrics_tokens"), "vllm_front_metrics_tokens (service %s)" % name)
    if problems:
        raise FrontError("; ".join(problems))
    cap = _int(svc.get("max_concurrent") or 0, "vllm_front_max_concurrent")
    if not cap:
        cap = max_num_seqs(svc.get("argv")) or 0
    if not cap:
        raise FrontPlanUnknown(
            "service %s: no total concurrency cap: the plan's --max-num-seqs is unknown (run the plan "
            "stage) and vllm_front_max_concurrent is not set" % name
        )
    default_conc = _int(svc.get("client_max_concurrent") or 0, "vllm_front_client_max_concurrent") or cap
    default_rate = _int(svc.get("client_rate_per_minute") or 0, "vllm_front_client_rate_per_minute")
    clients = []
    for c in svc.get("clients") or []:
        digest = key_sha256(c["key"]) if c.get("key") not in (None, "") else _text(c["key_sha256"]).lower()
        conc = _int(c.get("max_concurrent") or 0, "max_concurrent") or default_conc
        clients.append(
            {
                "name": _text(c["name"]).strip(),
                "sha256": digest,
                "max_concurrent": min(conc, cap),
                "rate_per_minute": _int(c.get("rate_per_minute") or 0, "rate_per_minute") or default_rate,
                # The served model names this client may use at a door routed by model (None: all of them).
                "models": c.get("models") or None,
            }
        )
    tokens = [
        key_sha256(t["key"]) if t.get("key") not in (None, "") else _text(t["key_sha256"]).lower()
        for t in svc.get("metrics_tokens") or []
    ]
    metrics_port = svc.get("metrics_port")
    return {
        "name": name,
        "front_port": _port(svc.get("front_port"), "vllm_front_port (service %s)" % name),
        "engine_port": _port(svc.get("port"), "vllm_service_port (service %s)" % name),
        "cap": cap,
        "clients": clients,
        "metrics_port": 0 if metrics_port in (None, "", 0, "0") else _port(metrics_port, "vllm_front_metrics_port"),
        "metrics_hashes": sorted(set(tokens)),
        "engine_key": _text(svc.get("engine_key")),
        # A door shared by several services routes by these (module_utils/front/_front_models.py).
        "models": routing.served_models(svc),
        "kind": routing.service_kind(svc),
    }


# ------------------------------------------------------------------------------------------------ role inputs

# The host's front door variables a service of airgap_vllm_services may set for itself (its own port, clients,
# limits); the rest (mode, addresses, TLS, sources) is one per host.
PER_SERVICE = (
    "vllm_front_port",
    "vllm_front_clients",
    "vllm_front_max_concurrent",
    "vllm_front_client_max_concurrent",
    "vllm_front_client_rate_per_minute",
    "vllm_front_metrics_port",
    "vllm_front_metrics_tokens",
)


def _hashed(clients):
    out = []
    for c in clients or []:
        c = dict(c)
        if c.get("key") not in (None, ""):
            c["key_sha256"] = key_sha256(c.pop("key"))
        else:
            c.pop("key", None)
            c["key_sha256"] = _text(c.get("key_sha256")).lower()
        out.append(c)
    return out


def first_client_key(clients):
    """The key of the first client that has one (not a key_sha256 only), or '': the role's own check asks through the
    front door with it (vllm_front's verify.yml)."""
    for client in clients or []:
        key = client.get("key") if isinstance(client, dict) else None
        if key:
            return _text(key)
    return ""


def front_inputs(services, host_values, argvs=None):
    """What the role passes on: {'services': [...], 'engine_keys': {service: key}, 'client_keys': {service: key},
    'check': [...]}.

    services: the host's resolved services (airgap.vllm.service_instances: name, port, settings); host_values: the
    host's vllm_front_* values of PER_SERVICE and vllm_service_api_keys; argvs: {service: the planned argv}.
    A service without its own vllm_front_port takes the host's plus its index (8443, 8444, ...), and the same for a
    metrics port. 'services' holds key hashes only (client keys are hashed here, on the controller); 'client_keys'
    each service's first client key (first_client_key: its own clients, else the host's); 'check' is the same list
    with the keys, for check_settings()."""
    host = host_values or {}
    argvs = argvs or {}
    out, engine_keys, client_keys, check = [], {}, {}, []
    for index, svc in enumerate(services or []):
        own = svc.get("settings") or {}

        def value(name, default=None, own=own):
            return own[name] if name in own else host.get(name, default)

        port = own.get("vllm_front_port")
        if port in (None, ""):
            port = _int(host.get("vllm_front_port") or 8443, "vllm_front_port", 1) + index
        metrics = own.get("vllm_front_metrics_port")
        if metrics in (None, ""):
            metrics = _int(host.get("vllm_front_metrics_port") or 0, "vllm_front_metrics_port")
            metrics = metrics + index if metrics else 0
        keys = value("vllm_service_api_keys") or []
        item = {
            "name": _text(svc.get("name")),
            "port": svc.get("port"),
            "front_port": port,
            "metrics_port": metrics,
            "argv": list(argvs.get(svc.get("name")) or []),
            "max_concurrent": value("vllm_front_max_concurrent", 0),
            "client_max_concurrent": value("vllm_front_client_max_concurrent", 0),
            "client_rate_per_minute": value("vllm_front_client_rate_per_minute", 0),
        }
        check.append(
            dict(
                item, clients=value("vllm_front_clients") or [], metrics_tokens=value("vllm_front_metrics_tokens") or []
            )
        )
        out.append(
            dict(
                item,
                clients=_hashed(value("vllm_front_clients")),
                metrics_tokens=_hashed(value("vllm_front_metrics_tokens")),
            )
        )
        engine_keys[item["name"]] = _text(keys[0]) if keys else ""
        client_keys[item["name"]] = first_client_key(value("vllm_front_clients"))
    return {"services": out, "engine_keys": engine_keys, "client_keys": client_keys, "check": check}


def check_host(values, services):
    """check_settings() for one host from its variables: values = the host's vllm_front_* variables (without the
    prefix: enabled, mode, tls, tls_cert, tls_key, tls_generate, addresses, sources, metrics_sources) plus
    host_values for front_inputs() under 'host'; services = its resolved services (name, port, settings)."""
    values = dict(values or {})
    if not values.get("enabled"):
        return []
    try:
        inputs = front_inputs(services, values.get("host") or {})
    except FrontError as exc:
        return [str(exc)]
    return check_settings(dict(values, services=inputs["check"]))


HOST_WIDE = ("enabled", "mode", "tls", "tls_cert", "tls_key", "tls_generate", "addresses", "sources", "metrics_sources")


def front_problems(get, services=None):
    """[(variable, sentence)] for the validate play (module_utils/common/_validate.py calls this, the rules live here).

    get(name): the host's effective value of a variable; services: the host's resolved services ([{'name', 'port',
    'settings'}]; None: the one service of vllm_service_name and vllm_service_port)."""
    if not _truthy(get("vllm_front_enabled")):
        return []
    if not services:
        services = [{"name": get("vllm_service_name") or "vllm", "port": get("vllm_service_port"), "settings": {}}]
    values = dict((k, get("vllm_front_" + k)) for k in HOST_WIDE)
    values["enabled"] = True
    values["tls"] = _truthy(values["tls"]) if values["tls"] is not None else True
    values["tls_generate"] = _truthy(values["tls_generate"]) if values["tls_generate"] is not None else True
    values["host"] = dict((n, get(n)) for n in PER_SERVICE + ("vllm_service_api_keys",))
    out = []
    for sentence in check_host(values, services):
        match = re.search(r"\bvllm_front_[a-z_]+", sentence)
        out.append((match.group(0) if match else "vllm_front_enabled", sentence))
    return out


def front_warnings(get):
    """The validate play's warnings about the front door (plain HTTP)."""
    if not _truthy(get("vllm_front_enabled")):
        return []
    tls = get("vllm_front_tls")
    out = warnings({"enabled": True, "tls": True if tls is None else _truthy(tls)})
    if _truthy(get("vllm_service_metrics_expose")):
        out.append(
            "vllm_service_metrics_expose publishes the whole engine port beside the front door (vLLM guards only "
            "/v1 with its key: /invocations answers there without one); use vllm_front_metrics_port instead and "
            "turn it off (docs/monitoring.md, migrating)"
        )
    return out


def _truthy(value):
    if isinstance(value, bool):
        return value
    return _text(value).strip().lower() in ("1", "true", "yes", "on", "y")
