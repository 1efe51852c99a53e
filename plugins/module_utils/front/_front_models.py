# -*- coding: utf-8 -*-
# Copyright: (c) airgap.vllm contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One front door for several services, routed by the `model` of the request (issue 44, item 3).

Services that share one front port are served by ONE HAProxy frontend: the proxy reads the `model` field of the JSON
body (option http-buffer-request + req.body,json_query('$.model'), HAProxy >= 2.5; the whole body must be buffered)
and sends the request to the service whose --served-model-name lists it. The decisions live here, as data the
template (plugins/module_utils/front/_front.py render) only formats:

- which model goes to which service (a model served twice is refused: the proxy could not choose);
- which routes each service serves: generative services the OpenAI generation routes, pooling services
  (--runner pooling, or --convert embed|classify) the pooling routes; a route towards a service that does not serve
  it is refused at the door (400, OpenAI-shaped) and never reaches the engine;
- which models each client may use (a client's optional `models` list; none: every model of the door);
- /v1/models: a static answer per client rendered from the plans (the union of the services' served names that the
  client may use): the names are fixed by the plans, so no request needs to fan out to every engine.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

GENERATE_ROUTES = ("/v1/chat/completions", "/v1/completions", "/v1/responses")
POOLING_ROUTES = ("/v1/embeddings", "/v1/score", "/v1/rerank", "/pooling", "/classify")
MODEL_ROUTES = GENERATE_ROUTES + POOLING_ROUTES
_MODEL_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_./:@+-]{0,199}\Z")


class RouteError(ValueError):
    """The services of one front door cannot be routed by model."""


def _flag(argv, name):
    """The values after `name` (or in `name=value`) in an engine argv, [] when absent."""
    argv = [str(a) for a in argv or []]
    for i, arg in enumerate(argv):
        if arg == name:
            out = []
            for nxt in argv[i + 1 :]:
                if nxt.startswith("--"):
                    break
                out.append(nxt)
            return out
        if arg.startswith(name + "="):
            return [arg.split("=", 1)[1]]
    return []


def served_models(svc):
    """The names a service answers to: the plan's --served-model-name, else its `model` (vLLM's own default)."""
    names = _flag(svc.get("argv"), "--served-model-name")
    if not names and svc.get("model"):
        names = [str(svc["model"])]
    return names


def service_kind(svc):
    """'pooling' when the plan runs the pooling runner (--runner pooling, --convert embed|classify), else 'generate'."""
    runner = (_flag(svc.get("argv"), "--runner") or [svc.get("runner") or ""])[0]
    convert = (_flag(svc.get("argv"), "--convert") or [svc.get("convert") or ""])[0]
    if runner == "pooling" or convert in ("embed", "classify"):
        return "pooling"
    return "generate"


def service_routes(kind):
    return POOLING_ROUTES if kind == "pooling" else GENERATE_ROUTES


def route_plan(services, clients):
    """The routed door of `services` (each {name, models, kind}) for `clients` (each {name, models (optional)}):
    {models: {model: service}, routes: {service: [paths]}, refused: {service: [model routes it does not serve]},
    access: {client: [models]}}. RouteError when a model is served twice, a service serves no name, or a client
    is limited to a model the door does not serve."""
    models, routes, refused = {}, {}, {}
    for svc in services:
        names = svc.get("models") or []
        if not names:
            raise RouteError("service %s serves no model name: the front door cannot route to it" % svc["name"])
        for model in names:
            if not _MODEL_RE.match(model):
                raise RouteError(
                    "service %s: served model name %r cannot be routed (letters, digits and . _ / : @ + - only)"
                    % (svc["name"], model)
                )
            if model in models:
                raise RouteError(
                    "model %r is served by both %s and %s: give each service its own --served-model-name"
                    % (model, models[model], svc["name"])
                )
            models[model] = svc["name"]
        mine = service_routes(svc.get("kind"))
        routes[svc["name"]] = list(mine)
        refused[svc["name"]] = [p for p in MODEL_ROUTES if p not in mine]
    access = {}
    for client in clients:
        wanted = client.get("models")
        if wanted in (None, ""):
            access[client["name"]] = sorted(models)
            continue
        if not isinstance(wanted, list) or not wanted:
            raise RouteError("client %s: models must be a non-empty list of served model names" % client["name"])
        unknown = sorted(set(str(m) for m in wanted) - set(models))
        if unknown:
            raise RouteError(
                "client %s is limited to %s, which no service of this front door serves (served: %s)"
                % (client["name"], ", ".join(unknown), ", ".join(sorted(models)))
            )
        access[client["name"]] = sorted(set(str(m) for m in wanted))
    return {"models": models, "routes": routes, "refused": refused, "access": access}
