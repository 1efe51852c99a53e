# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The front door (issue 25): HAProxy in front of the host's vLLM engines, as pure functions.

The engine stays on 127.0.0.1; HAProxy listens on the LAN addresses the operator names, one port per vLLM service
of the host, speaks TLS, and forwards only the routes ``ALLOWED_ROUTES`` names (exact raw path, no decoding, no
normalisation: ``/v1/../invocations``, ``%2e%2e``, ``//invocations``, ``/V1/...`` and any ``%`` are refused as
unknown paths). ``REFUSED_ROUTES`` lists every other route vLLM 0.27.1's server has, with the reason; a test
reads the real engine's ``/openapi.json`` and fails when a route is in neither (a new vLLM release cannot open one
silently). Keys of both dicts are the route paths as ``/openapi.json`` spells them.

What this file decides (one home):

- ``ALLOWED_ROUTES`` / ``REFUSED_ROUTES``: every route of the engine, allowed (with its methods) or refused;
- ``key_sha256()``: the only form in which the proxy knows a client key (a SHA-256 hex digest in a map file);
- ``check_settings()``: what the validate play refuses (no TLS material and no opt-out, a client without a key,
  duplicate client names, a key used twice, bad limits, ports that collide);
- ``plan_services()``: each service's front port, total cap (the plan's ``--max-num-seqs``), clients and limits;
- ``render()``: haproxy.cfg and its map files (client key hashes; the engine keys, root-only);
- ``haproxy_version()``/``version_ok()``: the host package's version (HAProxy >= 2.2: ``http-request return``,
  ``http-error``, ``ssl-load-extra-files``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import ipaddress
import json
import re

from ansible_collections.airgap.vllm.plugins.module_utils.front._expose import sources_problems
from ansible_collections.airgap.vllm.plugins.module_utils.front import _front_models as routing
from ansible_collections.airgap.vllm.plugins.module_utils.common._text import as_text as _text
from ansible_collections.airgap.vllm.plugins.module_utils.common._version import release

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

_POST = ("POST",)
_GET = ("GET",)

# path -> methods and why a site serves it. /health needs no key (load balancers, the fleet's health checks).
ALLOWED_ROUTES = {
    "/v1/chat/completions": {"methods": _POST, "reason": "OpenAI chat completions (tools, streaming)"},
    "/v1/completions": {"methods": _POST, "reason": "OpenAI text completions"},
    "/v1/models": {"methods": _GET, "reason": "OpenAI model list (clients ask which name to use)"},
    "/v1/responses": {"methods": _POST, "reason": "OpenAI Responses API"},
    "/health": {
        "methods": _GET,
        "key": False,
        "reason": "load balancers and monitoring: 200 when the engine is up, 503 when it died; no key",
    },
}

_ADMIN = "engine administration: changes or stops the serving engine; never from the network"
_DEV = "dev-mode route (VLLM_SERVER_DEV_MODE=1): engine internals; never from the network"
_POOLING = (
    "pooling-model task (embeddings, scores, classification): refused at a one-service door; at a door shared by "
    "several services (routed by model) it goes to a pooling service only (module_utils/front/_front_models.py)"
)
_UNGUARDED = "outside vLLM's --api-key prefixes (unauthenticated on the engine)"

# Every other route of vLLM 0.27.1's API server (vllm/entrypoints/**: @router/@app routes, the Prometheus
# mount, FastAPI's own pages), whatever the model and mode.
REFUSED_ROUTES = {
    "/invocations": "SageMaker entry point: runs a chat or completion %s; clients use /v1/chat/completions"
    % _UNGUARDED,
    "/ping": "SageMaker health probe %s; load balancers use /health" % _UNGUARDED,
    "/tokenize": "tokenizer service %s: not an OpenAI route" % _UNGUARDED,
    "/detokenize": "tokenizer service %s: not an OpenAI route" % _UNGUARDED,
    "/tokenizer_info": "tokenizer configuration %s" % _UNGUARDED,
    "/version": "engine version %s: information for an attacker, not for clients" % _UNGUARDED,
    "/load": "engine load figure %s; monitoring reads /metrics on the metrics listener" % _UNGUARDED,
    "/metrics": "Prometheus metrics: served only on the front door's metrics listener (its own port, sources, token)",
    "/docs": "FastAPI's interactive documentation (names every route)",
    "/docs/oauth2-redirect": "FastAPI's documentation helper",
    "/redoc": "FastAPI's documentation",
    "/openapi.json": "the engine's route list (names every route)",
    "/ready": "readiness probe %s; /health is the one served" % _UNGUARDED,
    "/readyz": "readiness probe %s; /health is the one served" % _UNGUARDED,
    "/is_scaling_elastic_ep": "elastic expert parallelism state %s" % _UNGUARDED,
    "/scale_elastic_ep": "elastic expert parallelism: " + _ADMIN,
    "/generative_scoring": "generative scoring %s: not an OpenAI route this collection serves" % _UNGUARDED,
    "/v1/responses/{response_id}": (
        "a stored response by ID: responses are not partitioned by client, so one client "
        "could read another's; clients read the answer of their own POST"
    ),
    "/v1/responses/{response_id}/cancel": "cancels a background response by ID, any client's (not partitioned by client)",
    "/v1/chat/completions/batch": "many chats in one request: bypasses the per-request concurrency limits",
    "/v1/chat/completions/render": "prompt rendering (tokens of a chat): not needed by clients",
    "/v1/completions/render": "prompt rendering: not needed by clients",
    "/v1/chat/completions/derender": "token detokenising helper: not needed by clients",
    "/v1/completions/derender": "token detokenising helper: not needed by clients",
    "/v1/messages": "Anthropic Messages API: not served (OpenAI routes only)",
    "/v1/messages/count_tokens": "Anthropic token count: not served",
    "/v1/audio/transcriptions": "speech models only",
    "/v1/audio/translations": "speech models only",
    "/v1/load_lora_adapter": "runtime LoRA loading: " + _ADMIN,
    "/v1/unload_lora_adapter": "runtime LoRA unloading: " + _ADMIN,
    "/v1/embeddings": _POOLING,
    "/v1/score": _POOLING,
    "/v1/rerank": _POOLING,
    "/v2/embed": _POOLING,
    "/v2/rerank": _POOLING,
    "/score": _POOLING + " " + _UNGUARDED,
    "/rerank": _POOLING + " " + _UNGUARDED,
    "/classify": _POOLING + " " + _UNGUARDED,
    "/pooling": _POOLING + " " + _UNGUARDED,
    "/cohere/v2/chat": "Cohere-compatible chat: not served (OpenAI routes only)",
    "/inference/v1/generate": "token-in/token-out generation: not an OpenAI route",
    "/abort_requests": _ADMIN,
    "/pause": _DEV,
    "/resume": _DEV,
    "/is_paused": _DEV,
    "/sleep": _DEV,
    "/wake_up": _DEV,
    "/is_sleeping": _DEV,
    "/server_info": _DEV,
    "/collective_rpc": _DEV,
    "/get_world_size": _DEV,
    "/reset_prefix_cache": _DEV,
    "/reset_mm_cache": _DEV,
    "/reset_encoder_cache": _DEV,
    "/start_profile": _DEV,
    "/stop_profile": _DEV,
    "/init_weight_transfer_engine": _DEV,
    "/start_weight_update": _DEV,
    "/start_draft_weight_update": _DEV,
    "/update_weights": _DEV,
    "/finish_weight_update": _DEV,
    "/update_weight_version": _DEV,
    "/weight_info": _DEV,
    "/fault_tolerance/status": _DEV,
    "/fault_tolerance/apply": _DEV,
}

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


# ------------------------------------------------------------------------------------------------ routed by model

# Room for the request line and headers next to a whole body in one buffer (tune.bufsize, routed doors only).
ROUTED_HEADROOM = 65536


def _model_error(status, message, kind, code):
    body = json.dumps({"error": {"message": message, "type": kind, "param": "model", "code": code}}, sort_keys=True)
    return "http-request return status %d content-type application/json string %s" % (status, _q(body))


def _models_answer(models):
    """GET /v1/models of a routed door: the served names (static, from the plans), OpenAI's list shape."""
    return json.dumps(
        {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "vllm", "root": m} for m in models]},
        sort_keys=True,
    )


def _routed(group, port, s, conf, tls, addresses, body, files):
    """haproxy.cfg lines of ONE frontend on `port` for the services of `group` (several), routed by the `model` of the
    request body; the decisions come from module_utils/front/_front_models.py (route_plan)."""
    door = "routed_%d" % port
    clients, seen = [], {}
    for svc in group:
        for c in svc["clients"]:
            if c["sha256"] in seen:
                if seen[c["sha256"]]["name"] != c["name"]:
                    raise FrontError(
                        "one key names two clients at the door on port %d: %s and %s"
                        % (port, seen[c["sha256"]]["name"], c["name"])
                    )
                continue
            seen[c["sha256"]] = c
            clients.append(c)
    try:
        plan = routing.route_plan(group, clients)
    except routing.RouteError as e:
        raise FrontError("front door on port %d: %s" % (port, e))
    cmap = "%s/clients-%s.map" % (conf, door)
    mmap = "%s/models-%s.map" % (conf, door)
    amap = "%s/access-%s.map" % (conf, door)
    table = "clients_%s" % door
    first = group[0]["name"]
    cfg = [
        "",
        "# ---- services %s: one door routed by model (module_utils/front/_front_models.py)"
        % ", ".join(svc["name"] for svc in group),
        "frontend front_%s" % door,
    ]
    cfg += _bind(addresses, port, tls, conf)
    cfg += [
        "    http-response set-header %s %s" % (FINGERPRINT_HEADER, _FP_SLOT),
        "    http-request set-var(txn.client_name) str(-)",
        "    " + _return(400, " unless { url_beg / }"),
    ]
    allowed = sorted(set(ALLOWED_ROUTES) | set(routing.MODEL_ROUTES))
    cfg.append("    acl route_known path -m str %s" % " ".join(allowed))
    cfg.append("    " + _return(404, " unless route_known"))
    for path in allowed:
        methods = ALLOWED_ROUTES[path]["methods"] if path in ALLOWED_ROUTES else _POST
        cfg.append(
            "    %s if { path -m str %s } !{ method %s }"
            % (_return(405, " hdr Allow %s" % ",".join(methods)), path, " ".join(methods))
        )
    keyless = sorted(p for p in ALLOWED_ROUTES if ALLOWED_ROUTES[p].get("key") is False)
    cfg.append("    acl keyless path -m str %s" % " ".join(keyless))
    cfg += _client_gate(s, cmap, body, table)
    cfg += []
    # GET /v1/models: the names this client may use, rendered from the plans.
    for c in sorted(clients, key=lambda c: c["name"]):
        cfg.append(
            "    http-request return status 200 content-type application/json string %s "
            "if { path -m str /v1/models } { var(txn.client_name) -m str %s }"
            % (_q(_models_answer(plan["access"][c["name"]])), c["name"])
        )
    cfg += [
        "    acl model_route path -m str %s" % " ".join(routing.MODEL_ROUTES),
        # The model is read from the whole body only (a part could name another model further on).
        "    http-request set-var(txn.body_len) req.body_len if model_route",
        "    http-request set-var(txn.body_short) req.hdr_val(content-length),sub(txn.body_len) if model_route",
        "    "
        + _model_error(
            413,
            "Request body larger than the buffer of the front door: the model could not be read",
            "invalid_request_error",
            "body_too_large",
        )
        + " if model_route { var(txn.body_short) -m int gt 0 }",
        "    http-request set-var(txn.model) req.body,json_query('$.model') if model_route",
        "    "
        + _model_error(
            400,
            "The request names no model: send the `model` field (GET /v1/models lists them)",
            "invalid_request_error",
            "model_missing",
        )
        + " if model_route !{ var(txn.model) -m found }",
        "    http-request set-var(txn.service) var(txn.model),map(%s) if model_route" % mmap,
        "    "
        + _model_error(
            404,
            "The model does not exist at this front door (GET /v1/models lists the models you may use)",
            "invalid_request_error",
            "model_not_found",
        )
        + " if model_route !{ var(txn.service) -m found }",
        "    http-request set-var(txn.access) var(txn.client_name),concat(|,txn.model,),map(%s) if model_route" % amap,
        "    "
        + _model_error(
            403,
            "This key may not use this model (GET /v1/models lists the models you may use)",
            "permission_error",
            "model_not_allowed",
        )
        + " if model_route !{ var(txn.access) -m found }",
    ]
    for svc in group:
        refused = plan["refused"][svc["name"]]
        if refused:
            cfg.append(
                "    "
                + _model_error(
                    400,
                    "This model does not serve this route (%s serves: %s)"
                    % (svc["kind"], " ".join(plan["routes"][svc["name"]])),
                    "invalid_request_error",
                    "route_not_served",
                )
                + " if { var(txn.service) -m str %s } { path -m str %s }" % (svc["name"], " ".join(refused))
            )
    cfg.append("    http-request del-header authorization")
    for svc in group:
        if svc.get("engine_key"):
            cfg.append(
                '    http-request set-header Authorization "Bearer %%[str(%s),map(%s/%s)]" if { var(txn.service) -m str %s }'
                % (svc["name"], conf, ENGINE_MAP, svc["name"])
            )
    # /health: the first service's engine (the door answers when it does).
    cfg.append("    use_backend health_%s if keyless" % first)
    for svc in group:
        cfg.append("    use_backend engine_%s if { var(txn.service) -m str %s }" % (svc["name"], svc["name"]))
    cfg += [
        "",
        "backend %s" % table,
        "    stick-table type string len 64 size 10k expire 120s store http_req_rate(60s)",
    ]
    for svc in group:
        cfg += [
            "",
            "backend engine_%s" % svc["name"],
            "    server engine 127.0.0.1:%d maxconn %d" % (svc["engine_port"], svc["cap"]),
        ]
    cfg += [
        "",
        "backend health_%s" % first,
        "    http-request set-path /health",
        "    server engine 127.0.0.1:%d maxconn 8" % group[0]["engine_port"],
    ]
    caps = {}
    for svc in group:
        for c in svc["clients"]:
            caps[c["sha256"]] = max(caps.get(c["sha256"], 0), c["max_concurrent"])
    files["clients-%s.map" % door] = {
        "content": client_map({"clients": [dict(c, max_concurrent=caps[c["sha256"]]) for c in clients]}),
        "mode": "0600",
        "secret": False,
    }
    files["models-%s.map" % door] = {
        "content": "# served model name -> service\n"
        + "".join("%s %s\n" % (m, plan["models"][m]) for m in sorted(plan["models"])),
        "mode": "0600",
        "secret": False,
    }
    files["access-%s.map" % door] = {
        "content": "# client|model -> ok (the models each client may use)\n"
        + "".join("%s|%s ok\n" % (n, m) for n in sorted(plan["access"]) for m in plan["access"][n]),
        "mode": "0600",
        "secret": False,
    }
    return cfg


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


def front_inputs(services, host_values, argvs=None):
    """What the role passes on: {'services': [...], 'engine_keys': {service: key}, 'check': [...]}.

    services: the host's resolved services (airgap.vllm.service_instances: name, port, settings); host_values: the
    host's vllm_front_* values of PER_SERVICE and vllm_service_api_keys; argvs: {service: the planned argv}.
    A service without its own vllm_front_port takes the host's plus its index (8443, 8444, ...), and the same for a
    metrics port. 'services' holds key hashes only (client keys are hashed here, on the controller); 'check' is the
    same list with the keys, for check_settings()."""
    host = host_values or {}
    argvs = argvs or {}
    out, engine_keys, check = [], {}, []
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
    return {"services": out, "engine_keys": engine_keys, "check": check}


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


# ------------------------------------------------------------------------------------------------ the fleet


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
