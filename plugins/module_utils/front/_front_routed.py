# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One front port for several services, routed by the request's ``model`` (issue 44, item 3): the HAProxy frontend
that carries out ``_front_models.route_plan`` (which model goes where, which routes each service serves, which
models each client may use) and answers ``/v1/models`` per client from the plans."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.airgap.vllm.plugins.module_utils.front import _front_models as routing
from ansible_collections.airgap.vllm.plugins.module_utils.front._front_haproxy import (
    ENGINE_MAP,
    FINGERPRINT_HEADER,
    _FP_SLOT,
    _bind,
    _client_gate,
    _q,
    _return,
    client_map,
)
from ansible_collections.airgap.vllm.plugins.module_utils.front._front_routes import ALLOWED_ROUTES, _POST
from ansible_collections.airgap.vllm.plugins.module_utils.front._front_settings import FrontError

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
