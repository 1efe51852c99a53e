# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Is the smoke-test answer what a working server returns? And if not, why, in words an operator can act on."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible_collections.airgap.vllm.plugins.module_utils.common._text import as_text


def _text(value, limit=300):
    text = as_text(value)
    return text if len(text) <= limit else text[:limit] + "..."


def smoke_verdict(response, tools_offered, max_tokens=None):
    """{"ok": bool, "reason": str, "answer": str} for one /v1/chat/completions response.

    A reasoning model may think before it calls the tool: the call counts with or without reasoning text
    (`reasoning` in vLLM 0.27.1, `reasoning_content` in older releases), and an answer cut at max_tokens
    while thinking is named as such rather than as a broken server.
    """
    choices = (response or {}).get("choices") if isinstance(response, dict) else None
    if not choices:
        return {
            "ok": False,
            "answer": _text(response),
            "reason": "the server answered without any choice (not an OpenAI chat completion)",
        }
    choice = choices[0] or {}
    message = choice.get("message") or {}
    calls = message.get("tool_calls") or []
    thoughts = message.get("reasoning") or message.get("reasoning_content") or ""
    content = message.get("content") or ""
    answer = "finish_reason=%s; tool_calls=%s; content=%r; reasoning=%r" % (
        choice.get("finish_reason"),
        _text([c.get("function") for c in calls if isinstance(c, dict)]),
        _text(content),
        _text(thoughts),
    )
    if not tools_offered:
        if content or thoughts:
            return {"ok": True, "reason": "", "answer": answer}
        return {"ok": False, "answer": answer, "reason": "the server returned an empty message"}
    if calls:
        fn = (calls[0] or {}).get("function") or {}
        if fn.get("name"):
            return {"ok": True, "reason": "", "answer": answer}
        return {
            "ok": False,
            "answer": answer,
            "reason": "the tool call has no function name (tool call parser mismatch?)",
        }
    if choice.get("finish_reason") == "length":
        return {
            "ok": False,
            "answer": answer,
            "reason": "the model used all %s tokens before calling the tool (still thinking): raise "
            "vllm_service_smoke_max_tokens" % (max_tokens if max_tokens else "its"),
        }
    if "<tool_call>" in content or "<tool_call>" in thoughts or "<function=" in content:
        return {
            "ok": False,
            "answer": answer,
            "reason": "the model wrote a tool call as text that the server did not parse: check the tool call "
            "parser (vllm_plan_tool_call_parser) against the model's chat template",
        }
    return {
        "ok": False,
        "answer": answer,
        "reason": "tools were offered with tool_choice auto but the model answered without calling one",
    }


# What a service serves, from its plan (the ledger's pooling decision, _plan_pooling): a chat model answers a chat
# completion; an embedding model an embeddings request; a reranker (a cross-encoder, sequence classification) a
# rerank request. Neither pooling model has a chat template or generates a token.
KINDS = ("generate", "embed", "classify")
SMOKE_QUERY = "Where is the Forbidden City?"
SMOKE_DOCUMENTS = ("The Forbidden City is in the centre of Beijing.", "Tomatoes need warm weather to ripen.")
SMOKE_PROMPT = "What is the weather in Beijing? Use the tool."


def service_kind(plan):
    """'generate', 'embed' or 'classify' for the service planned by ``plan`` (vllm_launch_plan's result); a service
    without a plan (the engine's argv given by hand) is taken as generative."""
    ledger = plan.get("ledger") if isinstance(plan, dict) else None
    pooling = ledger.get("pooling") if isinstance(ledger, dict) else None
    if not pooling:
        return "generate"
    task = pooling.get("task") if isinstance(pooling, dict) else None
    if task not in KINDS[1:]:
        raise ValueError("the plan's pooling task is %r: wants one of %s" % (task, ", ".join(KINDS[1:])))
    return task


def smoke_request(plan, model, max_tokens, tools):
    """The smoke test's request for the service: {'kind', 'path' (on the engine), 'body'}. A chat completion (with
    a tool offered when ``tools``, auto tool choice being on) for a generative model; for an embedding model one
    embeddings request of two inputs; for a reranker one rerank request of a query and two documents."""
    kind = service_kind(plan)
    if kind == "embed":
        return {"kind": kind, "path": "/v1/embeddings", "body": {"model": model, "input": list(SMOKE_DOCUMENTS)}}
    if kind == "classify":
        body = {"model": model, "query": SMOKE_QUERY, "documents": list(SMOKE_DOCUMENTS)}
        return {"kind": kind, "path": "/v1/rerank", "body": body}
    body = {"model": model, "max_tokens": int(max_tokens), "messages": [{"role": "user", "content": SMOKE_PROMPT}]}
    if tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather of a city",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                },
            }
        ]
        body["tool_choice"] = "auto"
    return {"kind": kind, "path": "/v1/chat/completions", "body": body}


def _finite(value):
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and not math.isnan(value)
        and not math.isinf(value)
    )


def pooling_verdict(response, kind):
    """{"ok", "reason", "answer"} for the answer to smoke_request()'s embeddings or rerank request: an embedding of
    finite numbers (not all zero, all of one length) for each input; a finite relevance score for each document,
    each document once."""
    if not isinstance(response, dict) or "error" in response or "data" not in response and "results" not in response:
        return {
            "ok": False,
            "answer": _text(response),
            "reason": "the server answered without %s" % ("embeddings" if kind == "embed" else "rerank results"),
        }
    if kind == "embed":
        data = response.get("data") or []
        vectors = [d.get("embedding") if isinstance(d, dict) else None for d in data]
        lengths = sorted(set(len(v) for v in vectors if isinstance(v, list)))
        answer = "%d embedding(s) of %s numbers" % (len(vectors), "/".join(map(str, lengths)) or "no")
        if len(vectors) != len(SMOKE_DOCUMENTS) or not all(isinstance(v, list) and v for v in vectors):
            reason = "wants one embedding per input (%d), each a list of numbers" % len(SMOKE_DOCUMENTS)
        elif len(lengths) != 1:
            reason = "the embeddings differ in length (%s)" % answer
        elif not all(_finite(x) for v in vectors for x in v):
            reason = "an embedding holds something that is not a finite number"
        elif not any(x for v in vectors for x in v):
            reason = "every embedding is all zeros"
        else:
            return {"ok": True, "reason": "", "answer": answer}
        return {"ok": False, "reason": reason, "answer": answer}
    results = response.get("results") or []
    scores = dict((r.get("index"), r.get("relevance_score")) for r in results if isinstance(r, dict) and "index" in r)
    answer = "rerank scores %s" % _text(sorted(scores.items(), key=lambda kv: str(kv[0])))
    if sorted(scores, key=str) != list(range(len(SMOKE_DOCUMENTS))) or len(results) != len(SMOKE_DOCUMENTS):
        return {"ok": False, "answer": answer, "reason": "wants one result per document (%d)" % len(SMOKE_DOCUMENTS)}
    if not all(_finite(s) for s in scores.values()):
        return {"ok": False, "answer": answer, "reason": "a relevance score is not a finite number"}
    return {"ok": True, "reason": "", "answer": answer}


def service_smoke_verdict(response, kind, tools_offered, max_tokens=None):
    """The smoke test's verdict for a service of ``kind`` (service_kind()): smoke_verdict() for a chat model,
    pooling_verdict() for an embedding model or a reranker."""
    if kind == "generate":
        return smoke_verdict(response, tools_offered, max_tokens)
    return pooling_verdict(response, kind)
