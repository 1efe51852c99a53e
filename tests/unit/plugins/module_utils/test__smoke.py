"""Smoke-test verdicts on answers shaped like vLLM 0.27.1's."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.airgap.vllm.plugins.module_utils._smoke import smoke_verdict


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
