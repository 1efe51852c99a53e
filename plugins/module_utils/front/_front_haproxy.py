# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The front door's HAProxy text (issue 25): the pieces ``render()`` (``_front.py``) and the routed frontend
(``_front_routed.py``) assemble: the OpenAI-shaped error answers, binds, timeouts, the global and defaults sections,
the client gate (key, limits), the map files, the settle script, the configuration's fingerprint, and the host
package's version (HAProxy >= 2.2: ``http-request return``, ``http-error``, ``ssl-load-extra-files``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import ipaddress
import json
import re

from ansible_collections.airgap.vllm.plugins.module_utils.common._text import as_text as _text
from ansible_collections.airgap.vllm.plugins.module_utils.common._version import release
from ansible_collections.airgap.vllm.plugins.module_utils.front._front_settings import FrontError, _int

MIN_HAPROXY = (2, 2)
# The proxy's view of its configuration directory (the official image's layout; the host's package uses
# /etc/haproxy). Every file the configuration names lives there.
CONTAINER_CONF_DIR = "/usr/local/etc/haproxy"
CONFIG_FILE = "haproxy.cfg"
ENGINE_MAP = "engine.map"
SETTLE_FILE = "settle.lua"
# A client at its concurrency limit that starts its next request the moment the last one ended (docs/performance.md,
# finding 5): that request's stream has sent its last bytes but is not closed yet, so it still counts in sc_trackers.
# An over-limit request waits for such a stream to close - polled every SETTLE_STEP_MS, SETTLE_MS at most - before
# its 429; a client really over its limit gets the 429 that much later.
SETTLE_MS = 250
SETTLE_STEP_MS = 5
CERT_FILE = "server.pem"  # HAProxy >= 2.2 loads server.pem.key beside it (ssl-load-extra-files default)
DOC = "docs/clients.md"
FINGERPRINT_HEADER = "X-Airgap-Front-Config"
_FP_SLOT = "@FINGERPRINT@"


# ------------------------------------------------------------------------------------------------ rendering

# Unlimited rate: larger than any 60 s request count a stick table will hold.
_NO_RATE = 1000000000


def _error_body(status, message, kind, code):
    """An error body shaped like vLLM's (OpenAI's): {"error": {"message", "type", "param", "code"}}."""
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}}, sort_keys=True)


ERRORS = {
    400: ("Bad request: the front door takes origin-form HTTP/1.1 requests", "BadRequestError"),
    401: (
        "Invalid or missing API key: send exactly one Authorization: Bearer <your key> header (see %s)" % DOC,
        "AuthenticationError",
    ),
    403: ("Forbidden", "PermissionDeniedError"),
    404: ("Not found: this route is not served by the front door", "NotFoundError"),
    405: ("Method not allowed on this route", "MethodNotAllowedError"),
    411: ("Length required: send the request body with a Content-Length header", "LengthRequiredError"),
    413: ("Request body too large", "RequestTooLargeError"),
    429: ("Too many requests: the concurrency or rate limit of this client is reached; retry later", "RateLimitError"),
    408: ("Request timeout: the request did not arrive in time", "RequestTimeoutError"),
    500: ("Internal error of the front door", "InternalServerError"),
    502: ("The engine is not answering (starting, restarting or stopped)", "BadGatewayError"),
    503: ("Server busy: every engine slot is taken; retry later", "ServiceUnavailableError"),
    504: ("The engine did not answer in time", "GatewayTimeoutError"),
}


# The statuses HAProxy itself answers with (http-error takes only these).
HAPROXY_ERRORS = (400, 403, 408, 413, 429, 500, 502, 503, 504)


def _q(text):
    """A single-quoted HAProxy string (no single quote may appear inside)."""
    text = _text(text)
    if "'" in text:
        raise FrontError("cannot quote %r for haproxy.cfg" % text)
    return "'%s'" % text


def _return(status, extra=""):
    message, kind = ERRORS[status]
    return "http-request return status %d content-type application/json string %s%s" % (
        status,
        _q(_error_body(status, message, kind, status)),
        extra,
    )


def _bind(addresses, port, tls, conf_dir):
    out = []
    for a in addresses:
        ip = ipaddress.ip_address(_text(a).strip().strip("[]"))
        host = ("[%s]" % ip) if ip.version == 6 else str(ip)
        if ip.is_unspecified:
            host = "[::]" if ip.version == 6 else ""
        line = "    bind %s:%d" % (host, port)
        if ip.version == 6 and ip.is_unspecified:
            line += " v4v6"
        if tls:
            line += " ssl crt %s/%s ssl-min-ver TLSv1.2" % (conf_dir, CERT_FILE)
        out.append(line)
    return out


def _seconds(value, name):
    return "%ds" % _int(value, name, 1)


def _listener_settings(settings):
    """(settings, conf_dir, tls, bind addresses) as the front door and the fleet balancer read them."""
    s = settings or {}
    return (
        s,
        _text(s.get("conf_dir") or CONTAINER_CONF_DIR).rstrip("/"),
        bool(s.get("tls", True)),
        s.get("addresses") or ["0.0.0.0"],
    )


def _head(writer, hard_stop, global_extra, log_format, options, request, stream, queue, defaults_extra, errors):
    """The `global` and `defaults` sections of a haproxy.cfg: the front door's and the fleet balancer's."""
    cfg = (
        [
            "# Written by airgap.vllm (%s, plugins/module_utils/front/_front.py): changes are overwritten." % writer,
            "global",
            "    log stdout format raw local0",
            # In-flight streams finish on the old worker after a reload (SIGUSR2), for this long at most.
            "    hard-stop-after %s" % hard_stop,
            "    ssl-default-bind-options ssl-min-ver TLSv1.2 no-tls-tickets",
        ]
        + list(global_extra)
        + [
            "",
            "defaults",
            "    mode http",
            "    log global",
            '    log-format "%s"' % log_format,
            "    option dontlognull",
        ]
        + ["    option %s" % o for o in options]
        + [
            "    timeout connect 5s",
            # Slow clients: the headers (and a body up to the buffer size) within this time.
            "    timeout http-request %s" % request,
            "    timeout http-keep-alive 10s",
            # Long generations stream (SSE) for minutes: not cut by the proxy, never buffered.
            "    timeout client %s" % stream,
            "    timeout server %s" % stream,
            "    timeout tunnel %s" % stream,
            "    timeout queue %s" % queue,
        ]
        + list(defaults_extra)
    )
    for status in errors:
        message, kind = ERRORS[status]
        cfg.append(
            "    http-error status %d content-type application/json string %s"
            % (status, _q(_error_body(status, message, kind, status)))
        )
    return cfg


def settle_lua():
    """settle.lua: the HAProxy action `lua.airgap_settle` - wait while the client's streams (sc_trackers of sc0) are
    more than its limit (txn.client_conc), SETTLE_MS at most, so that a finished stream that is still being closed
    is counted as finished. It only waits; the 429 rule after it decides."""
    return "\n".join(
        [
            "-- Written by airgap.vllm (roles/vllm_front, plugins/module_utils/front/_front.py): changes are overwritten.",
            "-- A client at its concurrency limit that starts its next request the moment the last one ended: that",
            "-- stream has sent its last bytes but is not closed yet and still counts. Wait for it (%d ms at most)."
            % SETTLE_MS,
            'core.register_action("airgap_settle", { "http-req" }, function(txn)',
            '  local limit = tonumber(txn:get_var("txn.client_conc")) or 0',
            "  local waited = 0",
            "  while waited < %d and (tonumber(txn.f:sc_trackers(0)) or 0) > limit do" % SETTLE_MS,
            "    core.msleep(%d)" % SETTLE_STEP_MS,
            "    waited = waited + %d" % SETTLE_STEP_MS,
            "  end",
            "end, 0)",
            "",
        ]
    )


def client_map(service):
    """clients-<service>.map: '<sha256 of the key> <name>|<max concurrent>|<rate per minute>' per line."""
    lines = ["# client key SHA-256 -> name|max_concurrent|rate_per_minute (keys themselves are never stored)"]
    for c in sorted(service["clients"], key=lambda c: c["sha256"]):
        lines.append("%s %s|%d|%d" % (c["sha256"], c["name"], c["max_concurrent"], c["rate_per_minute"] or _NO_RATE))
    return "\n".join(lines) + "\n"


def metrics_map(service):
    lines = ["# metrics token SHA-256 -> ok"]
    lines += ["%s ok" % h for h in service["metrics_hashes"]]
    return "\n".join(lines) + "\n"


def _client_gate(s, cmap, body, table):
    """The lines every door of a front port runs before routing: drain, the client by its key, the body's length,
    the client's concurrency and rate (one home for a one-service door and a routed one)."""
    gate = []
    if s.get("draining"):
        # Drained for a rollout: the fleet's balancers see /health fail and send new requests elsewhere;
        # requests in flight here finish.
        gate.append(
            "    "
            + _return(503, " if { path -m str /health }").replace(
                ERRORS[503][0], "Draining: this host is being updated; the fleet sends requests elsewhere"
            )
        )
    gate += [
        # Exactly one Authorization header, 'Bearer <key>' (scheme in any case); its hash names the client. fhdr,
        # not hdr: hdr splits a header at commas, so two values in one header would count once and hash a part.
        "    acl auth_one req.fhdr_cnt(authorization) eq 1",
        "    acl auth_bearer req.fhdr(authorization) -i -m beg \"Bearer \"",
        "    http-request set-var(txn.client) req.fhdr(authorization),bytes(7),sha2(256),hex,lower,map(%s) "
        "if !keyless auth_one auth_bearer" % cmap,
        "    " + _return(401, " hdr WWW-Authenticate Bearer if !keyless !{ var(txn.client) -m found }"),
        "    http-request set-var(txn.client_name) var(txn.client),field(1,|) if !keyless",
        "    http-request set-var(txn.client_conc) var(txn.client),field(2,|) if !keyless",
        "    http-request set-var(txn.client_rate) var(txn.client),field(3,|) if !keyless",
        # The body: a length, within the limit (a chunked upload has no length to check).
        "    " + _return(411, " if METH_POST !{ req.hdr_cnt(content-length) eq 1 }"),
        "    " + _return(413, " if { req.hdr_val(content-length) gt %d }" % body),
        # Per-client counters: requests in flight (trackers) and requests in the last 60 s.
        "    http-request track-sc0 var(txn.client_name) table %s if !keyless" % table,
        "    http-request set-var(txn.conc_over) sc_trackers(0),sub(txn.client_conc)",
        # Over: a stream of the client that has just ended may still be closing; count it once it is (settle.lua).
        "    http-request lua.airgap_settle if !keyless { var(txn.conc_over) -m int gt 0 }",
        "    http-request set-var(txn.conc_over) sc_trackers(0),sub(txn.client_conc) "
        "if !keyless { var(txn.conc_over) -m int gt 0 }",
        "    http-request set-var(txn.rate_over) sc_http_req_rate(0),sub(txn.client_rate)",
        "    " + _return(429, " hdr Retry-After 1 if !keyless { var(txn.conc_over) -m int gt 0 }"),
        "    " + _return(429, " hdr Retry-After 10 if !keyless { var(txn.rate_over) -m int gt 0 }"),
    ]
    return gate


def config_fingerprint(files):
    """The digest the proxy's workers send in FINGERPRINT_HEADER: SHA-256 (first 16 hex) over every file's name
    and content, the configuration taken with its fingerprint slot. A reload is done when /health carries it."""
    h = hashlib.sha256()
    for name in sorted(files):
        content = _text(files[name].get("content"))
        if name == CONFIG_FILE:
            content = re.sub(r"(set-header %s )[0-9a-f]{16}" % FINGERPRINT_HEADER, r"\g<1>" + _FP_SLOT, content)
        h.update(("%s\0%s\0" % (name, content)).encode("utf-8"))
    return h.hexdigest()[:16]


# ------------------------------------------------------------------------------------------------ host package


def haproxy_version(text):
    """(major, minor, patch) from `haproxy -v` ('HAProxy version 2.6.12-1+deb12u4 2026/10/17 - ...'), or None."""
    return release(_text(text), after=r"(?:HA-?Proxy|haproxy) version ")


def version_ok(text):
    """(ok, sentence) for the host's HAProxy (host mode), from `haproxy -vv`: its version, and Lua (settle.lua)."""
    version = haproxy_version(text)
    if version is None:
        return False, "haproxy -vv did not say a version (%r): install HAProxy >= %d.%d" % (
            (_text(text).strip()[:80],) + MIN_HAPROXY
        )
    if version[:2] < MIN_HAPROXY:
        return False, (
            "the host's HAProxy is %d.%d.%d; the front door needs >= %d.%d (http-request return, http-error): "
            "install a newer package or use vllm_front_mode: container" % (version + MIN_HAPROXY)
        )
    if not re.search(r"^Built with Lua version|\+LUA\b", _text(text), re.M):
        return False, (
            "the host's HAProxy %d.%d.%d is built without Lua; the front door's per-client limits need it (%s): "
            "install a package built with Lua or use vllm_front_mode: container" % (version + (SETTLE_FILE,))
        )
    return True, "HAProxy %d.%d.%d" % version
