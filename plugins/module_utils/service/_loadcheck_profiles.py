# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The load check's profiles: each one question about the deployment, asked through vLLM's own `vllm bench serve`
(random, long-context, shared-prefix, single-stream) or its OpenAI API (tools, needle), offline - what each sends
and how its answers are read (pure functions; the module airgap.vllm.vllm_load_check runs them)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import random
import re

from ansible_collections.airgap.vllm.plugins.module_utils.service._loadcheck import (
    bench_argv,
    LoadCheckError,
    option_value,
    token_ids,
)
from ansible_collections.airgap.vllm.plugins.module_utils.service._loadcheck_metrics import (
    finite,
    whole,
)


# --- profiles -------------------------------------------------------------------------------------
# Each profile is one question about the deployment, asked through vLLM's own `vllm bench serve`
# (random, long-context, shared-prefix, single-stream) or its OpenAI API (tools), offline.
PROFILES = ("random", "long-context", "shared-prefix", "tools", "single-stream", "needle")
# needle asks the model to read its whole context (a recall test, minutes at a long context on a slow engine): run
# when asked for.
DEFAULT_PROFILES = ("random", "long-context", "shared-prefix", "tools", "single-stream")

# What each profile sends unless the operator overrides it (vllm_service_loadcheck_profile_settings).
# None: derived from the serving engine (concurrency = --max-num-seqs; the long request = --max-model-len
# less its output; the shared prefix = 8 KV blocks, at least 2048 tokens).
PROFILE_DEFAULTS = {
    "random": {"num_prompts": 32, "input_len": 256, "output_len": 64, "concurrency": None},
    "long-context": {"num_prompts": 1, "input_len": None, "output_len": 16, "concurrency": 1},
    "shared-prefix": {
        "num_prompts": None,
        "prefix_len": None,
        "suffix_len": 128,
        "output_len": 32,
        "concurrency": None,
    },
    "tools": {"num_prompts": None, "output_len": 256, "concurrency": None},
    "single-stream": {"num_prompts": 3, "input_len": 2048, "output_len": 128, "concurrency": 1},
    # One request per depth (num_prompts depths, evenly spread), each a haystack of about context_len tokens (None:
    # the planned context less the answer) with one random fact in it; seed picks the facts (the module draws one).
    "needle": {
        "num_prompts": 3,
        "context_len": None,
        "output_len": 16,
        "concurrency": 1,
        "chars_per_token": 3,
        "seed": 1,
    },
}
# Tokens left between the long-context prompt and --max-model-len: the random dataset decodes and
# re-encodes its tokens (vllm/benchmarks/datasets/datasets.py RandomDataset: "Decode then re-encode/
# truncate"), which can land a few tokens off; a prompt over the limit is refused with HTTP 400.
LONG_CONTEXT_MARGIN = 64  # also room for a chat template or a BOS token, were one added
SHARED_PREFIX_BLOCKS = 8
SHARED_PREFIX_MIN = 2048
# The tools profile asks questions a tool answers (the README's example among them).
TOOL_QUESTIONS = (
    "What is the weather in Beijing? Use the tool.",
    "What is the weather in Beijing?",
    "How is the weather in Beijing today?",
    "Tell me the weather in Beijing.",
)
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def engine_settings(args):
    """What the promises need from the running `vllm serve` argv: context, concurrency, speculative
    tokens and their method, prefix caching, block size (None where the argv leaves vLLM's default)."""
    args = [str(a) for a in args or []]
    spec = option_value(args, "--speculative-config")
    method, num_spec = None, 0
    if spec:
        try:
            parsed = json.loads(spec)
            method = parsed.get("method")
            num_spec = int(parsed.get("num_speculative_tokens") or 0)
        except (ValueError, TypeError, AttributeError):
            method, num_spec = "unreadable", 0
    prefix = None
    if "--enable-prefix-caching" in args:
        prefix = True
    if "--no-enable-prefix-caching" in args:
        prefix = False
    ctx = option_value(args, "--max-model-len")
    block = option_value(args, "--block-size")
    return {
        "max_model_len": whole(ctx) if ctx else None,
        "max_num_seqs": whole(option_value(args, "--max-num-seqs")),
        "speculative_method": method,
        "num_speculative_tokens": num_spec,
        "prefix_caching": prefix,
        "block_size": whole(block) if block else None,
        "tools": "--enable-auto-tool-choice" in args,
        "reasoning": option_value(args, "--reasoning-parser") is not None,
    }


def profile_settings(name, overrides, concurrency, max_model_len=None, block_size=None):
    """The settings one profile runs with: PROFILE_DEFAULTS, the operator's overrides, and what follows from
    the engine (concurrency, context, block size). Raises LoadCheckError for an unknown profile or a setting
    that cannot run (a long-context profile without a known context, a prompt that leaves no room)."""
    if name not in PROFILE_DEFAULTS:
        raise LoadCheckError("unknown load-check profile %r (known: %s)" % (name, ", ".join(PROFILES)))
    s = dict(PROFILE_DEFAULTS[name])
    extra = set((overrides or {}).keys()) - set(s)
    if extra:
        raise LoadCheckError(
            "profile %s has no setting %s (it takes %s)" % (name, ", ".join(sorted(extra)), ", ".join(sorted(s)))
        )
    s.update(dict((k, v) for k, v in (overrides or {}).items() if v is not None))
    conc = whole(concurrency) or 1
    if s["concurrency"] is None:
        s["concurrency"] = conc
    # The profiles that fill the context: the setting that fills it and the room left.
    fills = {"long-context": ("input_len", LONG_CONTEXT_MARGIN), "needle": ("context_len", NEEDLE_MARGIN)}
    if name in fills:
        key, margin = fills[name]
        if s[key] is None:
            if not max_model_len:
                raise LoadCheckError("%s needs the engine's --max-model-len (or %s)" % (name, key))
            s[key] = int(max_model_len) - int(s["output_len"]) - margin
        if max_model_len and int(s[key]) + int(s["output_len"]) > int(max_model_len):
            raise LoadCheckError(
                "%s: %s + %s tokens exceed --max-model-len %s" % (name, s[key], s["output_len"], max_model_len)
            )
    if name == "shared-prefix":
        if s["num_prompts"] is None:
            s["num_prompts"] = 4 * int(s["concurrency"])
        if s["prefix_len"] is None:
            s["prefix_len"] = max(SHARED_PREFIX_MIN, SHARED_PREFIX_BLOCKS * int(block_size or 16))
            if max_model_len:
                room = int(max_model_len) - int(s["suffix_len"]) - int(s["output_len"]) - LONG_CONTEXT_MARGIN
                s["prefix_len"] = max(1, min(s["prefix_len"], room))
    if name == "tools" and s["num_prompts"] is None:
        s["num_prompts"] = 2 * int(s["concurrency"])
    for key, value in s.items():
        number = whole(value)
        if number is None or number < 1:
            raise LoadCheckError("profile %s: %s must be a whole number of at least 1, not %r" % (name, key, value))
        s[key] = number
    return s


def profile_argv(name, facts, settings, result_dir, result_file):
    """`vllm bench serve` for a profile (None for `tools`, which goes through the OpenAI API)."""
    s = settings
    if name == "tools":
        return None
    if name == "random" or name == "single-stream":
        return bench_argv(
            facts, s["concurrency"], s["num_prompts"], s["input_len"], s["output_len"], result_dir, result_file
        )
    argv = bench_argv(
        facts, s["concurrency"], s["num_prompts"], s.get("input_len", 1), s["output_len"], result_dir, result_file
    )
    if name == "long-context":
        # (kept for running it through the bench by hand) The completions API: no chat template around the prompt;
        # bench_argv's random dataset is the profile's (its input_len and output_len).
        argv[argv.index("--backend") + 1] = "openai"
        argv[argv.index("--endpoint") + 1] = "/v1/completions"
        return argv
    # shared-prefix: vLLM's prefix_repetition dataset, one prefix shared by every request, in place of
    # --dataset-name random --random-input-len N --random-output-len N
    at = argv.index("--dataset-name")
    data = [
        "--dataset-name",
        "prefix_repetition",
        "--prefix-repetition-prefix-len",
        str(s["prefix_len"]),
        "--prefix-repetition-suffix-len",
        str(s["suffix_len"]),
        "--prefix-repetition-num-prefixes",
        "1",
        "--prefix-repetition-output-len",
        str(s["output_len"]),
    ]
    return argv[:at] + data + argv[at + 6 :]


# Profiles sent through the OpenAI API by a small client inside the container (the module's CLIENT): no
# `vllm bench serve` start-up (~10 s of importing vLLM each on the CPU engine) for a few requests; prompts are
# token ids (exact lengths, no tokenizer needed), streamed so the client times the first token and the rest.
API_PROFILES = ("long-context", "shared-prefix", "tools", "single-stream", "needle")


def _streamed(model, prompt, output_len):
    return {
        "model": model,
        "prompt": prompt,
        "max_tokens": int(output_len),
        "min_tokens": int(output_len),
        "ignore_eos": True,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


# --- needle: a random fact at several depths of the planned context, recalled or not ------------------------------
# The field notes' proof that fp8 KV loses nothing a long context holds (3 of 3 at 31K and 54K tokens). The haystack is
# plain sentences; its length is counted in characters (no tokenizer here): chars_per_token 3 is below what English
# text takes (about 4), so the prompt stays under the context, and the engine's own prompt_tokens says how long it was.
NEEDLE_MARGIN = 256  # the question, and a tokenizer that splits the haystack finer than chars_per_token says
NEEDLE_NAMES = ("Ada", "Boris", "Chen", "Dara", "Emeka", "Farah", "Goran", "Hana", "Ivo", "Jun", "Kofi", "Lena")
_HAYSTACK = (
    "The grass is green and the sky is blue. ",
    "A river runs past the old mill on its way to the sea. ",
    "Every morning the baker opens the shop at six. ",
    "The library keeps its maps in a cool, dry room. ",
    "Trains leave the station on the hour and at half past. ",
    "The orchard has apple trees, pear trees and two walnut trees. ",
    "In winter the lake freezes and children skate on it. ",
    "The clock in the square was repaired last spring. ",
)


def needle_facts(seed, count):
    """[{"name", "number", "depth"}] of a needle run: a different name and a six-digit number per request, the depths
    spread evenly through the context ((i + 0.5) / count), all decided by the seed."""
    rng = random.Random(int(seed))
    names = rng.sample(NEEDLE_NAMES, min(int(count), len(NEEDLE_NAMES)))
    names += ["%s%d" % (NEEDLE_NAMES[i % len(NEEDLE_NAMES)], i) for i in range(len(names), int(count))]
    return [
        {"name": names[i], "number": str(rng.randint(100000, 999999)), "depth": round((i + 0.5) / int(count), 3)}
        for i in range(int(count))
    ]


def needle_prompt(fact, context_len, chars_per_token):
    """The haystack of about context_len tokens with the fact's sentence at its depth, and the question at the end."""
    size = int(context_len) * int(chars_per_token)
    sentence = "The magic number of %s is %s. " % (fact["name"], fact["number"])
    question = "\nQuestion: what is the magic number of %s?\nAnswer: the magic number of %s is" % (
        fact["name"],
        fact["name"],
    )
    room = max(0, size - len(sentence) - len(question))
    parts, length, i = [], 0, 0
    while length < room:
        parts.append(_HAYSTACK[i % len(_HAYSTACK)])
        length += len(parts[-1])
        i += 1
    at = int(round(len(parts) * float(fact["depth"])))
    return "".join(parts[:at]) + sentence + "".join(parts[at:]) + question


def needle_requests(model, settings):
    """(facts, completions bodies) of the needle profile: one greedy completion per fact, not streamed."""
    s = settings
    facts = needle_facts(s["seed"], s["num_prompts"])
    return facts, [
        {
            "model": model,
            "prompt": needle_prompt(f, s["context_len"], s["chars_per_token"]),
            "max_tokens": int(s["output_len"]),
            "temperature": 0,
        }
        for f in facts
    ]


def needle_outcome(facts, answers, duration_s=None):
    """What the needle profile found, from the engine's answers (completions JSON or {"error": text}, in the order of
    the facts): per depth whether the answer holds the fact's number, and the prompt's length as the engine counted it
    (usage.prompt_tokens; None when it did not say)."""
    depths = []
    for fact, answer in zip(facts or [], answers or []):
        answer = answer if isinstance(answer, dict) else {"error": "no answer"}
        choices = answer.get("choices") or []
        text = str((choices[0] or {}).get("text") or "") if choices else ""
        depths.append(
            {
                "depth": fact["depth"],
                "recalled": not answer.get("error") and re.search(r"\b%s\b" % fact["number"], text) is not None,
                "prompt_tokens": whole((answer.get("usage") or {}).get("prompt_tokens")),
                "answer": text.strip()[:80],
                "error": str(answer["error"])[:200] if answer.get("error") else "",
            }
        )
    return {
        "requests": len(depths),
        "recalled": sum(1 for d in depths if d["recalled"]),
        "failed": sum(1 for d in depths if d["error"]),
        "min_prompt_tokens": min([d["prompt_tokens"] for d in depths if d["prompt_tokens"]] or [None])
        if depths
        else None,
        "depths": depths,
        "duration_s": finite(duration_s),
    }


def api_requests(name, model, settings, vocab_size):
    """(path, bodies) of an API profile: completions of token-id prompts (long-context: one prompt of the set
    length; shared-prefix: one prefix for all, each its own suffix; single-stream: prompts that share nothing),
    or chat requests with a tool (tools)."""
    s = settings
    if name == "tools":
        return "/v1/chat/completions", tool_requests(model, s)
    if name == "long-context":
        return "/v1/completions", [
            _streamed(model, token_ids(s["input_len"], 1, vocab_size), s["output_len"])
            for _i in range(s["num_prompts"])
        ]
    if name == "shared-prefix":
        prefix = token_ids(s["prefix_len"], 7, vocab_size)
        return "/v1/completions", [
            _streamed(model, prefix + token_ids(s["suffix_len"], 100 + i, vocab_size), s["output_len"])
            for i in range(s["num_prompts"])
        ]
    if name == "single-stream":
        return "/v1/completions", [
            _streamed(model, token_ids(s["input_len"], 1000 + i, vocab_size), s["output_len"])
            for i in range(s["num_prompts"])
        ]
    if name == "needle":
        return "/v1/completions", needle_requests(model, s)[1]
    raise LoadCheckError("profile %s is not sent through the API" % name)


def api_result(records, duration_s, peak_in_flight=None):
    """The client's per-request timings as the figures `vllm bench serve` saves (completed, failed, mean TTFT and
    TPOT in ms, token totals, output throughput), so that bench_figures and summarize read both alike.
    records: [{"ttft": s, "e2e": s, "prompt_tokens": n, "completion_tokens": n} or {"error": text}]."""
    ok = [r for r in records or [] if isinstance(r, dict) and not r.get("error") and r.get("ttft") is not None]
    errors = [str(r.get("error")) for r in records or [] if isinstance(r, dict) and r.get("error")]
    ttfts = [float(r["ttft"]) * 1000.0 for r in ok]
    tpots = [
        (float(r["e2e"]) - float(r["ttft"])) * 1000.0 / (int(r["completion_tokens"]) - 1)
        for r in ok
        if whole(r.get("completion_tokens")) and int(r["completion_tokens"]) > 1
    ]
    out_tokens = sum(int(r.get("completion_tokens") or 0) for r in ok)
    duration = finite(duration_s)
    return {
        "completed": len(ok),
        "failed": len(records or []) - len(ok),
        "errors": errors,
        "duration": duration,
        "mean_ttft_ms": sum(ttfts) / len(ttfts) if ttfts else None,
        "mean_tpot_ms": sum(tpots) / len(tpots) if tpots else None,
        "p95_ttft_ms": sorted(ttfts)[int(0.95 * (len(ttfts) - 1))] if ttfts else None,
        "total_input_tokens": sum(int(r.get("prompt_tokens") or 0) for r in ok),
        "total_output_tokens": out_tokens,
        "output_throughput": out_tokens / duration if duration else None,
        "max_concurrent_requests": peak_in_flight,
        "stream_intervals": [
            [r["first"], r["last"]]
            for r in ok
            if finite(r.get("first")) is not None and finite(r.get("last")) is not None
        ],
    }


def tool_requests(model, settings):
    """Chat bodies of the tools profile: a tool on offer, greedy, the questions in turn."""
    out = []
    for i in range(int(settings["num_prompts"])):
        out.append(
            {
                "model": model,
                "temperature": 0,
                "max_tokens": int(settings["output_len"]),
                "tools": [WEATHER_TOOL],
                "tool_choice": "auto",
                "messages": [{"role": "user", "content": TOOL_QUESTIONS[i % len(TOOL_QUESTIONS)]}],
            }
        )
    return out


def tool_call_of(answer):
    """(name, arguments dict or None, reasoning text or None, content) of a chat completion's first choice;
    name None when the server parsed no tool call. vLLM 0.27.1's reasoning field is `reasoning`
    (older servers: `reasoning_content`)."""
    try:
        msg = answer["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        return None, None, None, None
    reasoning = msg.get("reasoning") or msg.get("reasoning_content")
    calls = msg.get("tool_calls") or []
    if not calls:
        return None, None, reasoning, msg.get("content")
    fn = (calls[0] or {}).get("function") or {}
    try:
        args = json.loads(fn.get("arguments") or "{}")
        if not isinstance(args, dict):
            args = None
    except ValueError:
        args = None
    return fn.get("name"), args, reasoning, msg.get("content")


def tool_outcome(answers, errors=0, duration_s=None):
    """Share of tool requests the server answered with a parsed tool call whose arguments are JSON."""
    parsed = with_reasoning = 0
    names = {}
    for answer in answers or []:
        name, args, reasoning, _content = tool_call_of(answer)
        if name and args is not None:
            parsed += 1
            names[name] = names.get(name, 0) + 1
        if reasoning:
            with_reasoning += 1
    sent = len(answers or []) + int(errors or 0)
    return {
        "requests": sent,
        "completed": len(answers or []),
        "failed": int(errors or 0),
        "tool_calls_parsed": parsed,
        "with_reasoning": with_reasoning,
        "tool_names": names,
        "parse_rate": (parsed / float(sent)) if sent else None,
        "duration_s": duration_s,
    }
