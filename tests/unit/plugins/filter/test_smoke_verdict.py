"""airgap.vllm.smoke_verdict as vllm_service's verify.yml calls it: the uri result of the smoke-test chat
completion (its JSON body, or no body at all when the request failed) and whether tools were offered."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


EXPR = (
    "{{ smoke.json | default({'error': (smoke.status | default('') | string) ~ ' ' ~ (smoke.msg | default('no answer'))})"
    " | airgap.vllm.smoke_verdict('--enable-auto-tool-choice' in argv, max_tokens | int) }}"
)
TOOLS = ["/models/qwen", "--enable-auto-tool-choice", "--tool-call-parser", "qwen3_xml"]
PLAIN = ["/models/qwen"]
CALL = [
    {
        "id": "chatcmpl-tool-1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Beijing\"}"},
    }
]


def body(message, finish="stop"):
    return {
        "json": {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "qwen",
            "choices": [{"index": 0, "message": dict({"role": "assistant"}, **message), "finish_reason": finish}],
        },
        "status": 200,
    }


def test_a_tool_call_with_reasoning_passes(render):
    v = render(
        EXPR,
        smoke=body({"content": None, "reasoning": "The user wants the weather.", "tool_calls": CALL}, "tool_calls"),
        argv=TOOLS,
        max_tokens="1024",
    )
    assert v["ok"] is True and v["reason"] == ""


def test_a_plain_answer_passes_when_no_tool_was_offered(render):
    v = render(EXPR, smoke=body({"content": "Hello! How can I help?"}), argv=PLAIN, max_tokens=1024)
    assert v["ok"] is True


def test_an_answer_without_the_tool_fails_and_shows_what_came_back(render):
    v = render(EXPR, smoke=body({"content": "It is sunny in Beijing."}), argv=TOOLS, max_tokens=1024)
    assert v["ok"] is False and "without calling" in v["reason"]
    assert "It is sunny in Beijing." in v["answer"]


def test_thinking_cut_at_max_tokens_names_the_setting(render):
    v = render(
        EXPR, smoke=body({"content": None, "reasoning": "Let me think. " * 40}, "length"), argv=TOOLS, max_tokens=64
    )
    assert v["ok"] is False and "64" in v["reason"] and "vllm_service_smoke_max_tokens" in v["reason"]


def test_a_failed_request_without_a_body_fails_with_its_status(render):
    v = render(EXPR, smoke={"status": 401, "msg": "HTTP Error 401: Unauthorized"}, argv=TOOLS, max_tokens=1024)
    assert v["ok"] is False
    assert "401" in v["answer"] or "401" in v["reason"]
