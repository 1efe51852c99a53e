# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Is the smoke-test answer what a working server returns? And if not, why, in words an operator can act on."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.airgap.vllm.plugins.module_utils._text import as_text


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
