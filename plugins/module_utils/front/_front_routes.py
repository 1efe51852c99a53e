# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The front door's routes (issue 25): every route of vLLM's server, allowed (with its methods) or refused (with the
reason). Keys are the route paths as the engine's ``/openapi.json`` spells them; a test reads the real engine's
``/openapi.json`` and fails when a route is in neither (a new vLLM release cannot open one silently). The proxy
matches the exact raw path (no decoding, no normalisation: ``/v1/../invocations``, ``%2e%2e``, ``//invocations``,
``/V1/...`` and any ``%`` are refused as unknown paths)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


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
