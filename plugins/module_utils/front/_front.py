# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The front door (issue 25): HAProxy in front of the host's vLLM engines, as pure functions.

The engine stays on 127.0.0.1; HAProxy listens on the LAN addresses the operator names, one port per vLLM service
of the host, speaks TLS, and forwards only the routes the engine's allowlist names. This file renders the
configuration; each decision it formats has one home beside it:

- ``_front_routes.py``: ``ALLOWED_ROUTES`` / ``REFUSED_ROUTES``, every route of the engine, allowed or refused;
- ``_front_settings.py``: the settings' checks and warnings, ``key_sha256()``, ``plan_service()`` and the role's
  inputs;
- ``_front_haproxy.py``: the HAProxy pieces (errors, binds, client gate, maps, fingerprint, the package's version);
- ``_front_models.py`` and ``_front_routed.py``: one port for several services, routed by the request's model;
- here: ``render()`` (haproxy.cfg and its map files: client key hashes; the engine keys, root-only),
  ``render_fleet()`` (one front over the hosts' front doors) and ``fleet_members()`` (the hosts it balances over).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import re

from ansible_collections.airgap.vllm.plugins.module_utils.common._text import as_text as _text
from ansible_collections.airgap.vllm.plugins.module_utils.front._front_haproxy import (
    CONFIG_FILE,
    ENGINE_MAP,
    ERRORS,
    FINGERPRINT_HEADER,
    HAPROXY_ERRORS,
    SETTLE_FILE,
    _FP_SLOT,
    _bind,
    _client_gate,
    _head,
    _listener_settings,
    _return,
    _seconds,
    client_map,
    config_fingerprint,
    metrics_map,
    settle_lua,
)
from ansible_collections.airgap.vllm.plugins.module_utils.front._front_routed import ROUTED_HEADROOM, _routed
from ansible_collections.airgap.vllm.plugins.module_utils.front._front_routes import ALLOWED_ROUTES
from ansible_collections.airgap.vllm.plugins.module_utils.front._front_settings import FrontError, _int, _port


def render(settings):
    """{file name: {'content', 'mode', 'secret'}} for the proxy's configuration directory.

    settings: addresses (bind addresses), tls (bool), conf_dir (the proxy's view of the directory), services
    (plan_service results), metrics_sources, max_body_bytes, queue_timeout, request_timeout, stream_timeout,
    hard_stop_after (seconds), user (host mode: the user the workers run as after reading the files as root). The
    engine keys go to engine.map (0600); the client maps hold
    hashes only."""
    s, conf, tls, addresses = _listener_settings(settings)
    body = _int(s.get("max_body_bytes", 8388608), "vllm_front_max_body_bytes", 1)
    queue = _seconds(s.get("queue_timeout", 5), "vllm_front_queue_timeout")
    request = _seconds(s.get("request_timeout", 15), "vllm_front_request_timeout")
    stream = _seconds(s.get("stream_timeout", 3600), "vllm_front_stream_timeout")
    hard_stop = _seconds(s.get("hard_stop_after") or s.get("stream_timeout", 3600), "vllm_front_hard_stop_after")
    services = s.get("services") or []
    if not services:
        raise FrontError("no service to put a front door in front of")
    msources = [str(ipaddress.ip_network(_text(x).strip(), strict=False)) for x in s.get("metrics_sources") or []]

    cfg = _head(
        "roles/vllm_front",
        hard_stop,
        (["    user %s" % _text(s["user"]), "    group %s" % _text(s["user"])] if s.get("user") else [])
        + ["    tune.ssl.default-dh-param 2048", "    lua-load %s/%s" % (conf, SETTLE_FILE)],
        # client, method, path only (%HPO: no query string), status, bytes, total time (ms) - never a header.
        "%ci front=%f client=%[var(txn.client_name)] %HM %HPO %ST %B %Tt",
        ["http-buffer-request"],
        request,
        stream,
        queue,
        [],
        sorted(set(ERRORS) & set(HAPROXY_ERRORS)),
    )
    files = {}
    ports = {}
    for svc in services:
        ports.setdefault(svc["front_port"], []).append(svc)
    for port in sorted(p for p in ports if len(ports[p]) > 1):
        cfg += _routed(ports[port], port, s, conf, tls, addresses, body, files)
    if any(len(group) > 1 for group in ports.values()):
        # The whole body in the buffer, for req.body (json_query): bodies up to the front's limit.
        cfg[cfg.index("global") + 1 : cfg.index("global") + 1] = ["    tune.bufsize %d" % (body + ROUTED_HEADROOM)]
    for svc in services:
        if len(ports[svc["front_port"]]) > 1:
            continue
        name = svc["name"]
        cmap = "%s/clients-%s.map" % (conf, name)
        table = "clients_%s" % name
        cfg += [
            "",
            "# ---- service %s: engine 127.0.0.1:%d, total cap %d" % (name, svc["engine_port"], svc["cap"]),
            "frontend front_%s" % name,
        ]
        cfg += _bind(addresses, svc["front_port"], tls, conf)
        cfg += [
            # Which configuration the worker answering runs (a digest of every file of it, no secret in clear): the
            # role waits after a reload until /health carries the new one (config_fingerprint).
            "    http-response set-header %s %s" % (FINGERPRINT_HEADER, _FP_SLOT),
            "    http-request set-var(txn.client_name) str(-)",
            # Origin-form only: the engine gets exactly the path matched here.
            "    " + _return(400, " unless { url_beg / }"),
        ]
        # Exact raw path: no decoding, no normalisation; anything else (%, //, .., case) is unknown.
        allowed = sorted(ALLOWED_ROUTES)
        cfg.append("    acl route_known path -m str %s" % " ".join(allowed))
        cfg.append("    " + _return(404, " unless route_known"))
        for path in allowed:
            methods = ALLOWED_ROUTES[path]["methods"]
            cfg.append(
                "    %s if { path -m str %s } !{ method %s }"
                % (_return(405, " hdr Allow %s" % ",".join(methods)), path, " ".join(methods))
            )
        # /health answers without a key (load balancers); every other allowed route needs one.
        keyless = sorted(p for p in ALLOWED_ROUTES if ALLOWED_ROUTES[p].get("key") is False)
        cfg += [
            "    acl keyless path -m str %s" % " ".join(keyless),
        ]
        cfg += _client_gate(s, cmap, body, table)
        cfg += [
            # The engine's own key, which clients never see (root-only engine.map).
            "    http-request del-header authorization",
        ]
        if svc.get("engine_key"):
            cfg.append(
                '    http-request set-header Authorization "Bearer %%[str(%s),map(%s/%s)]"' % (name, conf, ENGINE_MAP)
            )
        cfg += [
            "    use_backend health_%s if keyless" % name,
            "    default_backend engine_%s" % name,
            "",
            "backend %s" % table,
            "    stick-table type string len 64 size 10k expire 120s store http_req_rate(60s)",
            "",
            "backend engine_%s" % name,
            # The total cap: at most the plan's --max-num-seqs requests at the engine; the rest wait in the queue for
            # timeout queue at most, then 503 at once.
            "    server engine 127.0.0.1:%d maxconn %d" % (svc["engine_port"], svc["cap"]),
            "",
            "backend health_%s" % name,
            "    http-request set-path /health",
            "    server engine 127.0.0.1:%d maxconn 8" % svc["engine_port"],
        ]
        if svc.get("metrics_port"):
            mfile = "%s/metrics-%s.map" % (conf, name)
            cfg += ["", "frontend metrics_%s" % name]
            cfg += _bind(addresses, svc["metrics_port"], tls, conf)
            cfg.append("    http-request set-var(txn.client_name) str(metrics)")
            if msources:
                cfg.append("    " + _return(403, " unless { src %s }" % " ".join(msources)))
            cfg.append("    " + _return(404, " unless { path -m str /metrics }"))
            cfg.append("    " + _return(405, " hdr Allow GET unless { method GET }"))
            if svc["metrics_hashes"]:
                cfg += [
                    "    acl auth_one req.fhdr_cnt(authorization) eq 1",
                    "    acl auth_bearer req.fhdr(authorization) -i -m beg \"Bearer \"",
                    "    http-request set-var(txn.token) req.fhdr(authorization),bytes(7),sha2(256),hex,lower,map(%s) "
                    "if auth_one auth_bearer" % mfile,
                    "    " + _return(401, " hdr WWW-Authenticate Bearer unless { var(txn.token) -m found }"),
                ]
                files["metrics-%s.map" % name] = {"content": metrics_map(svc), "mode": "0600", "secret": False}
            cfg += [
                "    http-request del-header authorization",
                "    default_backend metrics_%s" % name,
                "",
                "backend metrics_%s" % name,
                "    server engine 127.0.0.1:%d maxconn 4" % svc["engine_port"],
            ]
        files["clients-%s.map" % name] = {"content": client_map(svc), "mode": "0600", "secret": False}
    keys = ["%s %s" % (svc["name"], svc["engine_key"]) for svc in services if svc.get("engine_key")]
    for svc in services:
        key = svc.get("engine_key") or ""
        if any(c.isspace() for c in key) or '"' in key or "'" in key:
            raise FrontError(
                "the engine key of service %s holds spaces or quotes: the proxy cannot send it" % svc["name"]
            )
    files[SETTLE_FILE] = {"content": settle_lua(), "mode": "0600", "secret": False}
    files[ENGINE_MAP] = {
        "content": "# service -> the engine's own API key (root only)\n" + "".join(k + "\n" for k in keys),
        "mode": "0600",
        "secret": True,
    }
    text = "\n".join(cfg) + "\n"
    fingerprint = config_fingerprint(dict(files, **{CONFIG_FILE: {"content": text}}))
    files[CONFIG_FILE] = {"content": text.replace(_FP_SLOT, fingerprint), "mode": "0600", "secret": False}
    return files


# ------------------------------------------------------------------------------------------------ the fleet


_MISSING = object()


def _item(container, key):
    """container[key] as the role's Jinja read it: a key a mapping lacks (or no mapping at all) is missing; a value
    present is itself, even empty or null."""
    if not hasattr(type(container), "keys"):
        return _MISSING
    try:
        return container[key]
    except (KeyError, IndexError, TypeError):
        return _MISSING


def _first(*values):
    for value in values:
        if value is not _MISSING:
            return value
    return _MISSING


def fleet_members(members, names, hostvars):
    """The fleet balancer's members [{name, address}] (vllm_front's ``__vllm_front_fleet_members``).

    members: C(vllm_front_fleet_members), taken as it is when it names any; else every host of ``names`` (the
    group vllm_servers, in its order), addressed by its hostvars (Ansible's ``hostvars``: a mapping by host name):
    its first C(vllm_front_addresses) entry, else its default IPv4 address (``ansible_facts.default_ipv4.address``:
    the facts of the rollout), else its C(ansible_host), else its name. Only a missing value falls through: one
    present is taken as it is, even empty."""
    if members:
        return members
    out = []
    for name in names or []:
        host = _first(_item(hostvars, name), {})
        addresses = _first(_item(host, "vllm_front_addresses"), [])
        if not isinstance(addresses, list):
            raise FrontError(
                "vllm_front_addresses of host %s must be a list of IP addresses, not %r" % (name, addresses)
            )
        if addresses:
            address = addresses[0]
        else:
            ipv4 = _first(_item(_first(_item(host, "ansible_facts"), {}), "default_ipv4"), {})
            address = _first(_item(ipv4, "address"), _item(host, "ansible_host"), name)
        out.append({"name": name, "address": address})
    return out


def render_fleet(settings):
    """haproxy.cfg of a fleet balancer (inventory group vllm_front): one listener per service port, TLS with its own
    certificate, balancing by least connections over the members' front doors (TLS, verified against the site CA),
    active health checks on /health (a draining or dead member is out within two checks; requests in flight on it
    are not cut by the balancer). Keys, routes and limits stay the members' (each member checks every request).

    settings: addresses, services [{name, front_port, member_port (default front_port)}], members [{name (the DNS
    name in its certificate: the inventory name with the generated certificates), address}], tls (bool), conf_dir,
    stream_timeout, request_timeout, check_interval (seconds)."""
    s, conf, tls, addresses = _listener_settings(settings)
    stream = _seconds(s.get("stream_timeout", 3600), "vllm_front_stream_timeout")
    request = _seconds(s.get("request_timeout", 15), "vllm_front_request_timeout")
    inter = _int(s.get("check_interval", 2), "vllm_front_fleet_check_interval", 1)
    members = s.get("members") or []
    if not members:
        raise FrontError("the fleet balancer has no member hosts (vllm_front_fleet_members)")
    cfg = _head(
        "roles/vllm_front fleet",
        stream,
        [],
        "%ci fleet=%f member=%s %HM %HPO %ST %B %Tt",
        [],
        request,
        stream,
        "5s",
        # A member that fails mid-request: try another one for requests that never reached it.
        ["    retries 2", "    option redispatch"],
        (502, 503, 504),
    )
    for svc in s.get("services") or []:
        name, port = svc["name"], _port(svc["front_port"], "vllm_front_port")
        member_port = _port(svc.get("member_port") or port, "the members' front port")
        cfg += ["", "frontend fleet_%s" % name]
        cfg += _bind(addresses, port, tls, conf)
        cfg += [
            "    default_backend members_%s" % name,
            "",
            "backend members_%s" % name,
            "    balance leastconn",
            "    option httpchk GET /health",
            "    http-check expect status 200",
            "    default-server check inter %ds fall 2 rise 2 ssl verify required ca-file %s/ca.crt" % (inter, conf)
            if tls
            else "    default-server check inter %ds fall 2 rise 2" % inter,
        ]
        for m in members:
            address = _text(m["address"]).strip()
            ip = None
            try:
                ip = ipaddress.ip_address(address.strip("[]"))
            except ValueError:
                pass
            host = "[%s]" % ip if ip is not None and ip.version == 6 else address
            # The member's certificate carries its inventory name (vllm_front_pki): verify that name.
            verify = " verifyhost %s" % _text(m["name"]) if tls else ""
            cfg.append("    server %s %s:%d%s" % (_SAFE_NAME.sub("_", _text(m["name"])), host, member_port, verify))
    return "\n".join(cfg) + "\n"


_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]")
