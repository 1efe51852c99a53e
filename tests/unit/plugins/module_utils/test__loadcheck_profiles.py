"""Load-check profiles: the engine's settings from its argv, each profile's settings and its `vllm bench serve` argv,
the API requests and their results."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.service import _loadcheck as L
from ansible_collections.airgap.vllm.plugins.module_utils.service import _loadcheck_metrics as LM
from ansible_collections.airgap.vllm.plugins.module_utils.service import _loadcheck_profiles as LP

from .test__loadcheck import ARGS as SERVED
from .test__loadcheck_metrics import fixture

# The served engine of test__loadcheck (its first 7 words), with the settings the profiles read.
ARGS = SERVED[:7] + [
    "--max-model-len",
    "16384",
    "--enable-prefix-caching",
    "--speculative-config",
    '{"method":"mtp","num_speculative_tokens":3}',
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "qwen3_coder",
    "--reasoning-parser",
    "qwen3",
]


def test_engine_settings_from_the_argv():
    e = LP.engine_settings(ARGS)
    assert e["max_model_len"] == 16384 and e["max_num_seqs"] == 4
    assert e["speculative_method"] == "mtp" and e["num_speculative_tokens"] == 3
    assert e["prefix_caching"] is True and e["tools"] and e["reasoning"]
    assert LP.engine_settings(["/m", "--speculative-config", "{not json"])["num_speculative_tokens"] == 0
    assert LP.engine_settings(["/m", "--no-enable-prefix-caching"])["prefix_caching"] is False


def test_profile_settings_follow_the_engine():
    assert LP.profile_settings("long-context", {}, 4, 16384)["input_len"] == 16384 - 16 - LP.LONG_CONTEXT_MARGIN
    sp = LP.profile_settings("shared-prefix", {}, 4, 16384, 1600)
    assert sp["num_prompts"] == 16 and sp["prefix_len"] == 8 * 1600  # 8 hybrid blocks: a prefix that can hit
    assert LP.profile_settings("shared-prefix", {}, 4, 16384, 16)["prefix_len"] == LP.SHARED_PREFIX_MIN
    assert LP.profile_settings("shared-prefix", {}, 4, 4096, 1600)["prefix_len"] < 4096  # never over the context
    assert LP.profile_settings("tools", {}, 4)["num_prompts"] == 8
    assert LP.profile_settings("random", {"num_prompts": 16}, 4)["concurrency"] == 4
    assert LP.profile_settings("single-stream", {}, 4)["concurrency"] == 1


@pytest.mark.parametrize(
    "name,over,ctx",
    [
        ("nope", {}, 16384),
        ("random", {"prompts": 3}, 16384),  # no such setting
        ("random", {"num_prompts": 0}, 16384),
        ("random", {"num_prompts": float("nan")}, 16384),
        ("long-context", {}, None),  # context unknown
        ("long-context", {"input_len": 16384}, 16384),  # over the limit
    ],
)
def test_profile_settings_refused(name, over, ctx):
    with pytest.raises(L.LoadCheckError):
        LP.profile_settings(name, over, 4, ctx)


def test_profile_argv_uses_vllms_own_datasets_offline():
    facts = L.serving_facts(ARGS)
    lc = LP.profile_argv("long-context", facts, LP.profile_settings("long-context", {}, 4, 16384), "/tmp", "r.json")
    assert lc[lc.index("--endpoint") + 1] == "/v1/completions" and lc[lc.index("--backend") + 1] == "openai"
    assert lc[lc.index("--random-input-len") + 1] == str(16384 - 16 - LP.LONG_CONTEXT_MARGIN)
    assert lc[lc.index("--max-concurrency") + 1] == "1" and lc[lc.index("--tokenizer") + 1] == ARGS[0]
    sp = LP.profile_argv("shared-prefix", facts, LP.profile_settings("shared-prefix", {}, 4, 16384), "/tmp", "r.json")
    assert sp[sp.index("--dataset-name") + 1] == "prefix_repetition"
    assert sp[sp.index("--prefix-repetition-num-prefixes") + 1] == "1"
    assert "--random-input-len" not in sp and "--save-result" in sp and "--max-concurrency" in sp
    assert LP.profile_argv("tools", facts, {}, "/tmp", "r.json") is None
    ss = LP.profile_argv("single-stream", facts, LP.profile_settings("single-stream", {}, 4), "/tmp", "r.json")
    assert ss[ss.index("--max-concurrency") + 1] == "1"


def test_api_requests_are_exact_token_prompts():
    lc = LP.profile_settings("long-context", {}, 4, 16384)
    path, bodies = LP.api_requests("long-context", "m", lc, 1024)
    assert path == "/v1/completions" and len(bodies) == 1
    body = bodies[0]
    assert len(body["prompt"]) == lc["input_len"] and body["ignore_eos"] and body["stream"]
    assert body["stream_options"] == {"include_usage": True} and body["max_tokens"] == body["min_tokens"] == 16
    assert all(128 <= t < 512 for t in body["prompt"])  # the middle of the vocabulary: no special tokens
    sp = LP.profile_settings("shared-prefix", {}, 4, 16384, 16)
    _path, bodies = LP.api_requests("shared-prefix", "m", sp, 151936)
    prefixes = set(tuple(b["prompt"][: sp["prefix_len"]]) for b in bodies)
    suffixes = set(tuple(b["prompt"][sp["prefix_len"] :]) for b in bodies)
    assert len(bodies) == 16 and len(prefixes) == 1 and len(suffixes) == 16
    _path, bodies = LP.api_requests("single-stream", "m", LP.profile_settings("single-stream", {}, 4), 1024)
    assert len(set(b["prompt"][0] for b in bodies)) == len(bodies) or len(set(tuple(b["prompt"]) for b in bodies)) == 3
    path, bodies = LP.api_requests("tools", "m", LP.profile_settings("tools", {}, 2), None)
    assert path == "/v1/chat/completions" and bodies[0]["tools"][0]["function"]["name"] == "get_weather"
    with pytest.raises(L.LoadCheckError):
        LP.api_requests("random", "m", {}, 1024)
    assert L.token_ids(5, 3, 1024) == L.token_ids(5, 3, 1024) != L.token_ids(5, 4, 1024)


def test_api_result_reads_like_the_bench():
    recs = [
        {"ttft": 0.5, "e2e": 1.5, "prompt_tokens": 1000, "completion_tokens": 101},
        {"ttft": 0.3, "e2e": 1.3, "prompt_tokens": 1000, "completion_tokens": 101},
        {"error": "HTTPError: 400"},
    ]
    r = LP.api_result(recs, 2.0, 2)
    assert r["completed"] == 2 and r["failed"] == 1 and r["errors"] == ["HTTPError: 400"]
    assert r["mean_ttft_ms"] == pytest.approx(400.0) and r["mean_tpot_ms"] == pytest.approx(10.0)
    f = LM.bench_figures(r)
    assert f["decode_tok_s"] == pytest.approx(100.0) and f["prefill_tok_s"] == pytest.approx(2500.0)
    s = L.summarize(r, 2, 3)
    assert not s["ok"] and "1 of 3 requests failed: HTTPError: 400" in s["problems"][0]
    assert LP.api_result([], None)["completed"] == 0


def test_vocab_size_of_config():
    assert L.vocab_size_of('{"vocab_size": 1024}') == 1024
    assert L.vocab_size_of('{"text_config": {"vocab_size": 248320}}') == 248320
    assert L.vocab_size_of("not json") is None and L.vocab_size_of("[]") is None


def test_tool_answer_of_the_real_engine():
    answer = json.loads(fixture("tool-answer-0.27.1-cpu.json"))
    name, args, reasoning, _content = LP.tool_call_of(answer)
    assert name == "get_weather" and args == {"city": "Beijing"} and "Beijing" in reasoning
    out = LP.tool_outcome([answer, {"choices": [{"message": {"content": "sunny"}}]}], errors=1)
    assert out["requests"] == 3 and out["tool_calls_parsed"] == 1 and out["parse_rate"] == pytest.approx(1 / 3.0)
    bad = {"choices": [{"message": {"tool_calls": [{"function": {"name": "x", "arguments": "{oops"}}]}}]}
    assert LP.tool_outcome([bad])["tool_calls_parsed"] == 0
