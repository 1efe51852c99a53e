"""Smoke-test verdicts on answers shaped like vLLM 0.27.1's."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.service import _smoke as S
from ansible_collections.airgap.vllm.plugins.module_utils.service._smoke import smoke_verdict


def answer(message, finish="stop"):
    return {"choices": [{"message": message, "finish_reason": finish}]}


CALL = [{"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Beijing\"}"}}]


def test_tool_call_with_or_without_reasoning_passes():
    assert smoke_verdict(answer({"tool_calls": CALL}), True)["ok"]
    assert smoke_verdict(answer({"tool_calls": CALL, "reasoning": "The user wants the weather"}, "tool_calls"), True)[
        "ok"
    ]
    assert smoke_verdict(answer({"tool_calls": CALL, "reasoning_content": "old field"}), True)["ok"]


def test_cut_while_thinking_says_raise_max_tokens():
    v = smoke_verdict(answer({"content": None, "reasoning": "Let me think " * 50}, "length"), True, 64)
    assert not v["ok"] and "used all 64 tokens" in v["reason"] and "vllm_service_smoke_max_tokens" in v["reason"]
    assert "finish_reason=length" in v["answer"] and len(v["answer"]) < 1000


def test_unparsed_tool_call_points_at_the_parser():
    v = smoke_verdict(answer({"content": "<tool_call>\n<function=get_weather>"}), True)
    assert not v["ok"] and "vllm_plan_tool_call_parser" in v["reason"]


def test_no_tool_and_broken_bodies():
    assert "without calling" in smoke_verdict(answer({"content": "It is sunny."}), True)["reason"]
    assert smoke_verdict(answer({"content": "Hello"}), False)["ok"]
    assert not smoke_verdict(answer({"content": ""}), False)["ok"]
    assert not smoke_verdict({"error": "x"}, True)["ok"]
    assert not smoke_verdict(None, True)["ok"]
    assert not smoke_verdict(answer({"tool_calls": [{"function": {}}]}), True)["ok"]


# --- a pooling service: an embeddings or a rerank request, decided from the plan -------------------------------

EMBED_PLAN = {"ledger": {"pooling": {"task": "embed", "encoder_only": True}}}
RERANK_PLAN = {"ledger": {"pooling": {"task": "classify", "encoder_only": True}}}
CHAT_PLAN = {"ledger": {"pooling": None}}


def test_the_plan_says_what_the_service_serves():
    assert S.service_kind(EMBED_PLAN) == "embed" and S.service_kind(RERANK_PLAN) == "classify"
    assert S.service_kind(CHAT_PLAN) == "generate" and S.service_kind({}) == "generate"
    with pytest.raises(ValueError, match="pooling task"):
        S.service_kind({"ledger": {"pooling": {"task": "score"}}})


def test_each_kind_gets_its_own_request():
    embed = S.smoke_request(EMBED_PLAN, "bge-m3", 1024, True)
    assert embed["path"] == "/v1/embeddings" and embed["body"] == {"model": "bge-m3", "input": list(S.SMOKE_DOCUMENTS)}
    rerank = S.smoke_request(RERANK_PLAN, "rr", 1024, True)
    assert rerank["path"] == "/v1/rerank" and rerank["body"]["query"] and len(rerank["body"]["documents"]) == 2
    # No chat fields reach a pooling model (vLLM would refuse max_tokens or messages on these routes).
    assert not set(embed["body"]) & {"messages", "max_tokens", "tools"}
    chat = S.smoke_request(CHAT_PLAN, "chat", 64, True)
    assert chat["path"] == "/v1/chat/completions" and chat["body"]["max_tokens"] == 64
    assert chat["body"]["tool_choice"] == "auto" and chat["body"]["tools"][0]["function"]["name"] == "get_weather"
    assert "tools" not in S.smoke_request(CHAT_PLAN, "chat", 64, False)["body"]


def _embeddings(*vectors):
    return {
        "object": "list",
        "data": [{"index": i, "object": "embedding", "embedding": v} for i, v in enumerate(vectors)],
    }


@pytest.mark.parametrize(
    "response,reason",
    [
        (_embeddings([0.1, -0.2], [0.3, 0.4]), ""),
        (_embeddings([0.1, -0.2]), "one embedding per input"),
        (_embeddings([0.1, -0.2], [0.3]), "differ in length"),
        (_embeddings([0.1, float("nan")], [0.3, 0.4]), "not a finite number"),
        (_embeddings([0.0, 0.0], [0.0, 0.0]), "all zeros"),
        (_embeddings([0.1, "x"], [0.3, 0.4]), "not a finite number"),
        ({"error": {"message": "The model does not support Embeddings API"}}, "without embeddings"),
        (answer({"content": "hi"}), "without embeddings"),
    ],
)
def test_an_embeddings_answer(response, reason):
    v = S.service_smoke_verdict(response, "embed", False)
    assert v["ok"] == (reason == "") and reason in v["reason"]


def _rerank(*scores):
    return {"results": [{"index": i, "relevance_score": s, "document": {"text": "d"}} for i, s in enumerate(scores)]}


@pytest.mark.parametrize(
    "response,reason",
    [
        (_rerank(0.9, 0.1), ""),
        (_rerank(0.9), "one result per document"),
        ({"results": [{"index": 0, "relevance_score": 0.5}, {"index": 0, "relevance_score": 0.4}]}, "one result per"),
        (_rerank(0.9, math.inf), "not a finite number"),
        (_rerank(0.9, None), "not a finite number"),
        (_embeddings([0.1], [0.2]), "wants one result per document"),
        ({"object": "error", "message": "x"}, "without rerank results"),
    ],
)
def test_a_rerank_answer(response, reason):
    v = S.service_smoke_verdict(response, "classify", False)
    assert v["ok"] == (reason == "") and reason in v["reason"]


def test_a_chat_model_keeps_the_chat_verdict():
    assert S.service_smoke_verdict(answer({"tool_calls": CALL}), "generate", True)["ok"]
    assert not S.service_smoke_verdict(_embeddings([0.1], [0.2]), "generate", False)["ok"]
