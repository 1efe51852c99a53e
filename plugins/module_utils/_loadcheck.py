# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The load check: vLLM's own `vllm bench serve` at the planned concurrency, offline, from inside the
serving container, and what its result means (pure functions; the module airgap.vllm.vllm_load_check runs it).

Result keys are those vLLM 0.27.1 writes with --save-result (vllm/benchmarks/serve.py: completed,
failed, output_throughput, max_concurrent_requests, p<N>_<metric>_ms for --metric-percentiles)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import random
import re

PERCENTILES = (50, 95)
METRICS = ("ttft", "tpot", "itl", "e2el")
# Per-request lists the result carries; the report keeps the figures, not every sample or text.
BULKY = ("input_lens", "output_lens", "ttfts", "itls", "start_times", "generated_texts", "errors", "stream_intervals")


class LoadCheckError(Exception):
    """The container's command line or the bench's result cannot be read."""


# Exit status of coreutils `timeout` when the command ran out of time.
TIMED_OUT = (124,)
KILL_AFTER = 30


def _whole(value):
    """`value` as an int when it is a whole number (bool is not), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value == int(value) else None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _finite(value):
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def settings_problems(
    num_prompts, input_len, output_len, concurrency=None, timeout=900, ttft_p95_max_ms=None, tpot_p95_max_ms=None
):
    """What is wrong with the load check's settings (one sentence each; [] when it can run).

    At least one prompt (0 prompts would "pass" without a request), whole lengths and a timeout of at least 1,
    a concurrency of at least 1 when given, thresholds that are finite and above 0 when given (NaN compares
    false with every latency, so a NaN threshold would never warn)."""
    problems = []
    for name, value, low in (
        ("num_prompts", num_prompts, 1),
        ("input_len", input_len, 1),
        ("output_len", output_len, 1),
        ("timeout", timeout, 1),
    ):
        number = _whole(value)
        if number is None or number < low:
            problems.append("%s must be a whole number of at least %d, not %r" % (name, low, value))
    if concurrency is not None:
        number = _whole(concurrency)
        if number is None or number < 1:
            problems.append("concurrency must be a whole number of at least 1, not %r" % (concurrency,))
    for name, value in (("ttft_p95_max_ms", ttft_p95_max_ms), ("tpot_p95_max_ms", tpot_p95_max_ms)):
        if value is None:
            continue
        number = _finite(value)
        if number is None or number <= 0:
            problems.append("%s must be a finite number of milliseconds above 0 (or unset), not %r" % (name, value))
    return problems


def timed(argv, timeout):
    """argv under coreutils `timeout` inside the container: the bench stops (TERM, then KILL after
    KILL_AFTER seconds) when `timeout` seconds pass, so no request keeps running after the check gave up."""
    return ["timeout", "--kill-after=%d" % KILL_AFTER, "%d" % int(timeout)] + list(argv)


def option_value(args, name):
    """Value of ``--name VALUE`` or ``--name=VALUE`` in an argv, else None."""
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def serving_facts(args):
    """What the bench needs from the running `vllm serve` argv (the container's Args)."""
    args = [str(a) for a in args or []]
    if args[:1] == ["serve"]:
        args = args[1:]
    if not args or args[0].startswith("-"):
        raise LoadCheckError("the container does not run `vllm serve MODEL_DIR ...`: %r" % args[:3])
    model = args[0]
    names = option_value(args, "--served-model-name")
    return {
        "model_dir": model,
        "served_model_name": names or model,
        "port": int(option_value(args, "--port") or 8000),
        "max_num_seqs": int(option_value(args, "--max-num-seqs") or 0) or None,
    }


def bench_argv(facts, concurrency, num_prompts, input_len, output_len, result_dir, result_file):
    """`vllm bench serve` against the server from inside its own container: random prompts, the model
    directory as tokenizer (offline), the planned concurrency, percentiles 50 and 95 saved as JSON."""
    return [
        "vllm",
        "bench",
        "serve",
        "--backend",
        "openai-chat",
        "--endpoint",
        "/v1/chat/completions",
        "--base-url",
        "http://127.0.0.1:%d" % facts["port"],
        "--model",
        facts["served_model_name"],
        "--tokenizer",
        facts["model_dir"],
        "--dataset-name",
        "random",
        "--random-input-len",
        str(int(input_len)),
        "--random-output-len",
        str(int(output_len)),
        "--num-prompts",
        str(int(num_prompts)),
        "--max-concurrency",
        str(int(concurrency)),
        "--ignore-eos",
        "--percentile-metrics",
        ",".join(METRICS),
        "--metric-percentiles",
        ",".join(str(p) for p in PERCENTILES),
        "--save-result",
        "--save-detailed",
        "--result-dir",
        result_dir,
        "--result-filename",
        result_file,
        "--disable-tqdm",
    ]


def peak_running(metrics_text):
    """Sum over engines of the vllm:num_requests_running gauge in one /metrics scrape."""
    total, seen = 0.0, False
    for line in (metrics_text or "").splitlines():
        m = re.match(r"^vllm:num_requests_running(?:\{[^}]*\})? ([0-9.eE+-]+)$", line)
        if m:
            total += float(m.group(1))
            seen = True
    return total if seen else None


def _num(result, key):
    v = result.get(key)
    return float(v) if isinstance(v, (int, float)) else None


def summarize(result, concurrency, num_prompts, ttft_p95_max_ms=None, tpot_p95_max_ms=None, peak_running_seen=None):
    """Figures, problems (requests that failed: the deployment fails) and warnings (latency over
    the operator's thresholds; with no thresholds there are none)."""
    if not isinstance(result, dict) or not isinstance(result.get("completed"), int):
        raise LoadCheckError("the bench result has no 'completed' count: not vllm bench serve output")
    wrong = settings_problems(num_prompts, 1, 1, concurrency, 1, ttft_p95_max_ms, tpot_p95_max_ms)
    if wrong:
        raise LoadCheckError("; ".join(wrong))
    failed = int(result.get("failed") or 0)
    figures = {
        "requests": int(num_prompts),
        "completed": result["completed"],
        "failed": failed,
        "concurrency": int(concurrency),
        "duration_s": _num(result, "duration"),
        "output_tokens_per_s": _num(result, "output_throughput"),
        "request_throughput": _num(result, "request_throughput"),
        "peak_concurrent_requests": result.get("max_concurrent_requests"),
        "peak_running_in_metrics": peak_running_seen,
        "streaming_at_once": streaming_at_once(stream_intervals(result)),
    }
    for metric in METRICS:
        for p in PERCENTILES:
            figures["p%d_%s_ms" % (p, metric)] = _num(result, "p%d_%s_ms" % (p, metric))
    problems, warnings = [], []
    errors = [e for e in result.get("errors") or [] if e]
    if failed or result["completed"] < int(num_prompts):
        problems.append(
            "%d of %d requests failed%s"
            % (
                max(failed, int(num_prompts) - result["completed"]),
                int(num_prompts),
                (": " + errors[0].strip().splitlines()[-1][:300]) if errors else "",
            )
        )
    for label, key, limit in (("TTFT", "p95_ttft_ms", ttft_p95_max_ms), ("TPOT", "p95_tpot_ms", tpot_p95_max_ms)):
        if limit is not None and figures[key] is not None and figures[key] > float(limit):
            warnings.append("%s p95 %.1f ms is over the threshold of %s ms" % (label, figures[key], limit))
    return {"figures": figures, "problems": problems, "warnings": warnings, "ok": not problems}


def compact(result):
    """The saved result without the per-request lists (what goes to the host's report directory)."""
    return dict((k, v) for k, v in result.items() if k not in BULKY)


def render(summary):
    f = summary["figures"]

    def ms(key):
        return "-" if f.get(key) is None else "%.0f" % f[key]

    lines = [
        "load check: %d requests at concurrency %d: %d ok, %d failed (peak %s running in /metrics, %s streaming "
        "at once at the client)"
        % (
            f["requests"],
            f["concurrency"],
            f["completed"],
            f["failed"],
            "?" if f["peak_running_in_metrics"] is None else "%g" % f["peak_running_in_metrics"],
            "?" if f.get("streaming_at_once") is None else "%d" % f["streaming_at_once"],
        ),
        "  TTFT p50/p95 %s/%s ms, TPOT p50/p95 %s/%s ms, output %s tokens/s"
        % (
            ms("p50_ttft_ms"),
            ms("p95_ttft_ms"),
            ms("p50_tpot_ms"),
            ms("p95_tpot_ms"),
            "-" if f["output_tokens_per_s"] is None else "%.1f" % f["output_tokens_per_s"],
        ),
    ]
    lines += ["  WARNING: " + w for w in summary["warnings"]]
    lines += ["  FAILED: " + p for p in summary["problems"]]
    return "\n".join(lines)


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
        "max_model_len": _whole(ctx) if ctx else None,
        "max_num_seqs": _whole(option_value(args, "--max-num-seqs")),
        "speculative_method": method,
        "num_speculative_tokens": num_spec,
        "prefix_caching": prefix,
        "block_size": _whole(block) if block else None,
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
    conc = _whole(concurrency) or 1
    if s["concurrency"] is None:
        s["concurrency"] = conc
    if name == "long-context":
        if s["input_len"] is None:
            if not max_model_len:
                raise LoadCheckError("long-context needs the engine's --max-model-len (or input_len)")
            s["input_len"] = int(max_model_len) - int(s["output_len"]) - LONG_CONTEXT_MARGIN
        if max_model_len and int(s["input_len"]) + int(s["output_len"]) > int(max_model_len):
            raise LoadCheckError(
                "long-context: %s + %s tokens exceed --max-model-len %s"
                % (s["input_len"], s["output_len"], max_model_len)
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
    if name == "needle":
        if s["context_len"] is None:
            if not max_model_len:
                raise LoadCheckError("needle needs the engine's --max-model-len (or context_len)")
            s["context_len"] = int(max_model_len) - int(s["output_len"]) - NEEDLE_MARGIN
        if max_model_len and int(s["context_len"]) + int(s["output_len"]) > int(max_model_len):
            raise LoadCheckError(
                "needle: %s + %s tokens exceed --max-model-len %s" % (s["context_len"], s["output_len"], max_model_len)
            )
    for key, value in s.items():
        number = _whole(value)
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
    at = argv.index("--dataset-name")
    head, tail = argv[:at], argv[at + 6 :]  # drop --dataset-name random --random-input-len N --random-output-len N
    if name == "long-context":
        # (kept for running it through the bench by hand) The completions API: no chat template around the prompt.
        head[head.index("--backend") + 1] = "openai"
        head[head.index("--endpoint") + 1] = "/v1/completions"
        data = [
            "--dataset-name",
            "random",
            "--random-input-len",
            str(s["input_len"]),
            "--random-output-len",
            str(s["output_len"]),
        ]
    else:  # shared-prefix: vLLM's prefix_repetition dataset, one prefix shared by every request
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
    return head + data + tail


# Profiles sent through the OpenAI API by a small client inside the container (the module's CLIENT): no
# `vllm bench serve` start-up (~10 s of importing vLLM each on the CPU engine) for a few requests; prompts are
# token ids (exact lengths, no tokenizer needed), streamed so the client times the first token and the rest.
API_PROFILES = ("long-context", "shared-prefix", "tools", "single-stream", "needle")


def token_ids(count, seed, vocab_size):
    """`count` pseudo-random token ids from the middle of the vocabulary (clear of special tokens at either end),
    the same for the same seed: a shared prefix is the same ids, other prompts differ from the first id."""
    vocab = max(64, int(vocab_size or 1024))
    low, span = vocab // 8, vocab // 2 - vocab // 8
    x = (int(seed) * 2654435761 + 97) % 2147483648
    out = []
    for _step in range(int(count)):
        x = (1103515245 * x + 12345) % 2147483648
        out.append(low + (x >> 8) % span)
    return out


def vocab_size_of(config_text):
    """vocab_size of a model's config.json text (top level or text_config), None when unreadable."""
    try:
        config = json.loads(config_text or "")
    except ValueError:
        return None
    if not isinstance(config, dict):
        return None
    size = config.get("vocab_size") or (config.get("text_config") or {}).get("vocab_size")
    return _whole(size)


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
                "prompt_tokens": _whole((answer.get("usage") or {}).get("prompt_tokens")),
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
        "duration_s": _finite(duration_s),
    }


def needle_row(figures, ctx):
    """The needle promise: the fact recalled at every depth. MET only with the engine's own evidence - every request
    answered and counted by the engine (usage.prompt_tokens) - else "not witnessed"; MISSED when an answered depth
    lost the fact. None when the profile did not run (it runs when asked for)."""
    if not figures:
        return None
    n, got = figures.get("requests") or 0, figures.get("recalled") or 0
    expected = "recalled at every depth (%d of %d)" % (n, n)
    where = ", ".join("%.0f %%" % (100.0 * d["depth"]) for d in figures.get("depths") or [])
    counted = [d for d in figures.get("depths") or [] if d.get("prompt_tokens") and not d.get("error")]
    source = "field notes: fp8 KV recalled 3 of 3 at 31K and 54K tokens"
    if not n or figures.get("failed") or len(counted) < n:
        why = [d["error"] for d in figures.get("depths") or [] if d.get("error")][:1]
        return _row(
            "needle_recall",
            "a fact anywhere in the context is recalled",
            expected,
            "%d of %d answered with the engine's prompt count" % (len(counted), n),
            "not witnessed",
            "the engine did not answer every needle request%s: run the needle profile again"
            % ((" (%s)" % why[0]) if why else ""),
            source,
        )
    measured = "%d of %d at depths %s of %d prompt tokens (the engine's count; planned context %s)" % (
        got,
        n,
        where,
        figures.get("min_prompt_tokens") or 0,
        ctx if ctx else "-",
    )
    ok = got == n
    return _row(
        "needle_recall",
        "a fact anywhere in the context is recalled",
        expected,
        measured,
        "MET" if ok else "MISSED",
        ""
        if ok
        else "the model lost a fact its context held: compare with --kv-cache-dtype auto (fp8 KV without calibrated "
        "scales can lose it) and keep the context within what the model was trained for",
        source,
    )


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
        if _whole(r.get("completion_tokens")) and int(r["completion_tokens"]) > 1
    ]
    out_tokens = sum(int(r.get("completion_tokens") or 0) for r in ok)
    duration = _finite(duration_s)
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
            if _finite(r.get("first")) is not None and _finite(r.get("last")) is not None
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


# --- vLLM's own counters ----------------------------------------------------------------------------
# vLLM 0.27.1 v1/metrics/loggers.py (prometheus_client text): every series carries model_name and engine
# labels; counters are written NAME_total (and NAME_created); per-position acceptance has a `position`
# label (spec_decode/metrics.py:253). Values are floats ("12.0").
COUNTERS = (
    "prefix_cache_queries",
    "prefix_cache_hits",
    "spec_decode_num_drafts",
    "spec_decode_num_draft_tokens",
    "spec_decode_num_accepted_tokens",
    "num_preemptions",
    "prompt_tokens",
    "generation_tokens",
)
GAUGES = ("kv_cache_usage_perc", "num_requests_running", "num_requests_waiting")
_SAMPLE = re.compile(r'^vllm:([a-z_]+?)(_total)?(\{[^}]*\})? ([0-9.eE+-]+|NaN|[+-]Inf)$')
_POSITION = re.compile(r'position="(\d+)"')


def parse_counters(metrics_text):
    """The counters and gauges the promises read, summed over engines (None where the scrape has none);
    ``accepted_per_pos`` maps position -> accepted tokens."""
    out = dict((k, None) for k in COUNTERS + GAUGES)
    out["accepted_per_pos"] = {}
    for line in (metrics_text or "").splitlines():
        m = _SAMPLE.match(line)
        if not m:
            continue
        name, total, labels, value = m.group(1), m.group(2), m.group(3) or "", m.group(4)
        value = _finite(value)
        if value is None:
            continue
        if name == "spec_decode_num_accepted_tokens_per_pos" and total:
            pos = _POSITION.search(labels)
            if pos:
                key = int(pos.group(1))
                out["accepted_per_pos"][key] = out["accepted_per_pos"].get(key, 0.0) + value
            continue
        if (name in COUNTERS and total) or (name in GAUGES and not total):
            out[name] = (out[name] or 0.0) + value
    return out


def counter_delta(before, after):
    """What happened between two scrapes: counter differences and the rates vLLM's own dashboards
    compute from them (spec_decode/metrics.py: acceptance = accepted / draft tokens; mean acceptance
    length = 1 + accepted / drafts; per position = accepted at that position / drafts)."""
    before, after = before or {}, after or {}
    d = {}
    for key in COUNTERS:
        a, b = after.get(key), before.get(key)
        d[key] = None if a is None else a - (b or 0.0)
    pos_after, pos_before = after.get("accepted_per_pos") or {}, before.get("accepted_per_pos") or {}
    d["accepted_per_pos"] = dict((p, v - pos_before.get(p, 0.0)) for p, v in sorted(pos_after.items()))
    q, h = d["prefix_cache_queries"], d["prefix_cache_hits"]
    d["prefix_cache_hit_rate"] = (h / q) if q and h is not None else None
    drafts, tokens, acc = (
        d["spec_decode_num_drafts"],
        d["spec_decode_num_draft_tokens"],
        d["spec_decode_num_accepted_tokens"],
    )
    d["spec_acceptance_rate"] = (acc / tokens) if tokens and acc is not None else None
    d["spec_mean_accepted_length"] = (1.0 + acc / drafts) if drafts and acc is not None else None
    d["spec_acceptance_per_pos"] = (
        [round(v / drafts, 4) for _p, v in sorted(d["accepted_per_pos"].items())] if drafts else []
    )
    return d


def stream_intervals(result):
    """[(first token, last token)] in seconds of each request that streamed, from a bench result saved with
    --save-detailed (start_times + ttfts + itls, errors empty) or from api_result ("stream_intervals")."""
    if not isinstance(result, dict):
        return []
    if isinstance(result.get("stream_intervals"), list):
        return [tuple(x) for x in result["stream_intervals"] if isinstance(x, (list, tuple)) and len(x) == 2]
    starts, ttfts, itls = result.get("start_times"), result.get("ttfts"), result.get("itls")
    if not (isinstance(starts, list) and isinstance(ttfts, list) and isinstance(itls, list)):
        return []
    errors = result.get("errors") if isinstance(result.get("errors"), list) else [None] * len(starts)
    out = []
    for start, ttft, gaps, error in zip(starts, ttfts, itls, errors + [None] * (len(starts) - len(errors))):
        start, ttft = _finite(start), _finite(ttft)
        if error or start is None or not ttft or not isinstance(gaps, list):
            continue
        first = start + ttft
        out.append((first, first + sum(_finite(g) or 0.0 for g in gaps)))
    return out


def streaming_at_once(intervals):
    """The most requests that were streaming at one instant: the largest number of [first token, last token]
    intervals that share a point. The client's view: it says how long the sampled /metrics gauge had to see
    them (streaming_span), never that the engine ran them (the concurrency promise takes the engine's own
    vllm:num_requests_running for that). None without intervals."""
    spans = []
    for first, last in intervals or []:
        first, last = _finite(first), _finite(last)
        if first is not None and last is not None and last >= first:
            spans.append((first, last))
    if not spans:
        return None
    return max(sum(1 for a, b in spans if a <= t <= b) for t, _end in spans)


def streaming_span(intervals, count):
    """The longest time in seconds during which at least ``count`` of the intervals overlapped (0.0 when they never
    did, None without intervals or count): how long a state lasted that a sampled gauge had to catch."""
    spans = []
    for first, last in intervals or []:
        first, last = _finite(first), _finite(last)
        if first is not None and last is not None and last >= first:
            spans.append((first, last))
    if not spans or not count:
        return None
    # starts before ends at the same instant: streams that touch count as overlapping (as streaming_at_once)
    events = sorted([(a, 0) for a, _b in spans] + [(b, 1) for _a, b in spans])
    best, open_, since = 0.0, 0, None
    for t, kind in events:
        if kind == 0:
            open_ += 1
            if open_ == count:
                since = t
        else:
            if open_ == count and since is not None:
                best = max(best, t - since)
            open_ -= 1
    return best


def bench_figures(result):
    """Throughput figures of one bench result: decode tok/s one user sees (1000 / mean TPOT), prefill tok/s
    (prompt tokens / mean TTFT), the longest prompt sent (total_input_tokens / completed when all alike)."""
    if not isinstance(result, dict):
        return {}
    completed = _whole(result.get("completed")) or 0
    tpot, ttft = _finite(result.get("mean_tpot_ms")), _finite(result.get("mean_ttft_ms"))
    inputs = _finite(result.get("total_input_tokens"))
    outputs = _finite(result.get("total_output_tokens"))
    prompt = inputs / completed if inputs is not None and completed else None
    intervals = stream_intervals(result)
    at_once = streaming_at_once(intervals)
    return {
        "completed": completed,
        "failed": _whole(result.get("failed")) or 0,
        "duration_s": _finite(result.get("duration")),
        "decode_tok_s": 1000.0 / tpot if tpot else None,
        "prefill_tok_s": prompt / (ttft / 1000.0) if prompt and ttft else None,
        "mean_prompt_tokens": prompt,
        "mean_output_tokens": outputs / completed if outputs is not None and completed else None,
        "output_tokens_per_s": _finite(result.get("output_throughput")),
        "mean_ttft_ms": ttft,
        "mean_tpot_ms": tpot,
        "peak_concurrent_requests": _whole(result.get("max_concurrent_requests")),
        "streaming_at_once": at_once,
        "streaming_at_once_s": streaming_span(intervals, at_once),
    }


# --- promises ---------------------------------------------------------------------------------------
# What a good deployment of this model gives, from the field notes (Kylin V10 SP3, RTX 6000 Ada 48 GB,
# Qwen3.x-27B-FP8, vLLM 0.27.1, fp8 KV + MTP 3): prefix cache 80-90 % in steady agent traffic, MTP pays
# while its mean accepted length stays >= 2.5 (acceptance 56-70 %, length 2.7-3.1), single-stream decode
# 40-48 tok/s, four streams ~36 tok/s each, prefill 2400+ tok/s, no preemption. Every one is a variable.
DEFAULT_THRESHOLDS = {
    "prefix_cache_hit_rate": 0.80,
    "mtp_accepted_length": 2.5,
    "tool_call_parse_rate": 1.0,
    "single_stream_decode_tok_s": 40.0,
    "per_stream_decode_tok_s": 36.0,
    "prefill_tok_s": 2400.0,
    "context_fill": 0.95,
}
STATUSES = ("MET", "MISSED", "not witnessed", "not measured")
# The profiles that run the planned concurrency, whose /metrics samples may witness it.
CONCURRENCY_PROFILES = ("random", "shared-prefix", "tools")
# The sampler must have read vllm:num_requests_running at least this often (seconds between two reads, the start
# and the end of the profile included) for its peak to count: then a run of 1 s at the planned concurrency cannot
# fall between two reads, and a peak below it is the engine's own "no". Sparser, the promise is "not witnessed".
WITNESS_GAP_S = 0.5


def threshold_problems(thresholds):
    """Thresholds that cannot be compared with (one sentence each): finite numbers >= 0, rates <= 1."""
    problems = []
    for key, value in (thresholds or {}).items():
        if key not in DEFAULT_THRESHOLDS:
            problems.append("unknown promise threshold %s (known: %s)" % (key, ", ".join(sorted(DEFAULT_THRESHOLDS))))
            continue
        number = _finite(value)
        if number is None or number < 0 or (key.endswith(("_rate", "_fill")) and number > 1):
            problems.append(
                "promise threshold %s must be a finite number >= 0%s, not %r"
                % (key, " and <= 1" if key.endswith(("_rate", "_fill")) else "", value)
            )
    return problems


def _row(key, promise, expected, measured, status, advice="", source=""):
    return {
        "key": key,
        "promise": promise,
        "expected": expected,
        "measured": measured,
        "status": status,
        "advice": advice,
        "source": source,
    }


def _pct(x):
    return "-" if x is None else "%.0f %%" % (100.0 * x)


def _mtp_zero(tradeoff):
    for row in (tradeoff or {}).get("speculative") or []:
        if row.get("num_speculative_tokens") == 0:
            return row
    return None


def _witnessed(record):
    """Could this profile's /metrics samples have seen the planned requests running at once? (bool, why not)."""
    sampling = record.get("sampling") or {}
    gap, reads = _finite(sampling.get("max_gap_s")), _whole(sampling.get("samples")) or 0
    if record.get("peak_running") is None or not reads:
        return False, "no /metrics read"
    if gap is None or gap > WITNESS_GAP_S:
        return False, "/metrics read only every %s s (at most %g s sees a run of 1 s)" % (
            "?" if gap is None else "%.2f" % gap,
            WITNESS_GAP_S,
        )
    span = _finite((record.get("figures") or {}).get("streaming_at_once_s"))
    if span is not None and span <= gap:
        return False, "the streams overlapped for %.2f s, under the %.2f s between two reads" % (span, gap)
    return True, ""


def concurrency_row(conc, records):
    """The concurrency promise: MET only when the engine's own vllm:num_requests_running, sampled over a profile's
    run, reached the planned concurrency and no request failed. MISSED when requests failed, or when the samples
    were close enough to see it (_witnessed) and the gauge stayed below. "not witnessed" when the samples could not
    have seen it; the client's overlapping streams are reported beside, never as the proof. records: profile name ->
    {"figures", "peak_running", "sampling": {"samples", "max_gap_s"}}."""
    promise = "the planned requests run at once"
    peaks = dict((n, r["peak_running"]) for n, r in records.items() if r.get("peak_running") is not None)
    streams = [
        (r.get("figures") or {}).get("streaming_at_once")
        for r in records.values()
        if (r.get("figures") or {}).get("streaming_at_once") is not None
    ]
    failed = sum(int((r.get("figures") or {}).get("failed") or 0) for r in records.values())
    ran = [n for n, r in records.items() if r.get("figures")]
    if not conc or not ran:
        return _row(
            "concurrency", promise, conc, None, "not measured", "run the random or shared-prefix profile", "plan"
        )
    gaps = [
        _finite((r.get("sampling") or {}).get("max_gap_s"))
        for r in records.values()
        if _finite((r.get("sampling") or {}).get("max_gap_s")) is not None
    ]
    seen = []
    if peaks:
        seen.append(
            "engine: peak %g running in /metrics (%s%s)"
            % (
                max(peaks.values()),
                ", ".join("%s %g" % (n, peaks[n]) for n in sorted(peaks)),
                "; read at least every %.2f s" % max(gaps) if gaps else "",
            )
        )
    else:
        seen.append("engine: /metrics not read")
    if streams:
        best = max(streams)
        spans = [
            _finite((r.get("figures") or {}).get("streaming_at_once_s"))
            for r in records.values()
            if (r.get("figures") or {}).get("streaming_at_once") == best
        ]
        spans = [x for x in spans if x is not None]
        seen.append(
            "client: %d streaming at once%s (not the engine's evidence)"
            % (best, " for %.2f s" % max(spans) if spans else "")
        )
    seen.append("%d failed" % failed)
    measured = "; ".join(seen)

    def verdict(status, advice=""):
        return _row("concurrency", promise, "%d" % conc, measured, status, advice, "plan")

    if failed:
        return verdict("MISSED", "requests failed: see the load check's errors")
    if peaks and max(peaks.values()) >= conc:
        return verdict("MET")
    if not peaks:
        return verdict(
            "not measured", "give the load check metrics_url: only the engine's vllm:num_requests_running proves it"
        )
    why = dict((n, _witnessed(r)) for n, r in records.items() if r.get("figures"))
    if any(ok for ok, _why in why.values()):
        return verdict(
            "MISSED",
            "requests queued: not enough KV cache for all at once at that length, or the profile was too short to "
            "fill the slots (raise its num_prompts)",
        )
    return verdict(
        "not witnessed",
        "the engine's /metrics could not see it: %s; run a longer profile (more num_prompts, a longer output_len)"
        % "; ".join("%s: %s" % (n, w) for n, (_ok, w) in sorted(why.items())),
    )


def promises(plan, engine, profiles, thresholds=None, tradeoff=None):
    """The promises table: each planned or expected figure against what the load check measured.

    plan: planned figures (max_model_len, concurrency, num_speculative_tokens, prefix_caching) from the
    deployment report, else the engine's argv (engine_settings). profiles: name -> {"figures": bench_figures
    or tool_outcome, "delta": counter_delta, "peak_running": float, "peak_kv_usage": float, "sampling": {"samples",
    "max_gap_s"}}. Returns rows with status MET (by the engine's own counters or the requests' outcome), MISSED,
    "not witnessed" (the /metrics samples could not have seen it) or "not measured", and the advice that follows."""
    t = dict(DEFAULT_THRESHOLDS)
    t.update(dict((k, float(v)) for k, v in (thresholds or {}).items() if v is not None))
    plan, engine, profiles = plan or {}, engine or {}, profiles or {}
    ctx = plan.get("max_model_len") or engine.get("max_model_len")
    conc = plan.get("concurrency") or engine.get("max_num_seqs")
    spec = plan.get("num_speculative_tokens")
    if spec is None:
        spec = engine.get("num_speculative_tokens") or 0
    rows = []

    def fig(name):
        return (profiles.get(name) or {}).get("figures") or {}

    def delta(name):
        return (profiles.get(name) or {}).get("delta") or {}

    # context: one request of the planned context is admitted and finishes without preemption
    lc = fig("long-context")
    if not lc:
        rows.append(
            _row(
                "context",
                "a request of the planned context is admitted and finishes",
                ctx,
                None,
                "not measured",
                "run the long-context profile",
                "plan",
            )
        )
    else:
        used = (lc.get("mean_prompt_tokens") or 0) + (lc.get("mean_output_tokens") or 0)
        pre = delta("long-context").get("num_preemptions")
        ok = lc.get("completed") and not lc.get("failed") and ctx and used >= t["context_fill"] * ctx and not pre
        measured = "%d of %s tokens, %s, %s preemption(s)" % (
            used,
            ctx or "?",
            "finished" if lc.get("completed") and not lc.get("failed") else "FAILED",
            "?" if pre is None else "%d" % pre,
        )
        advice = (
            ""
            if ok
            else (
                "the planned context does not serve: vLLM preempted or refused the long request; the deployment "
                "report's re-plan and trade-off table give the longest context that fits (vllm_plan_context)"
                if lc.get("failed") or pre
                else "the prompt sent was shorter than %.0f %% of the context: raise the long-context input_len"
                % (100 * t["context_fill"])
            )
        )
        rows.append(
            _row(
                "context",
                "a request of the planned context is admitted and finishes",
                "%s tokens" % ctx,
                measured,
                "MET" if ok else "MISSED",
                advice,
                "plan",
            )
        )
    # concurrency: the planned number of requests ran at once, none failed, by the engine's own gauge
    rows.append(concurrency_row(conc, dict((n, profiles.get(n) or {}) for n in CONCURRENCY_PROFILES)))
    # prefix-cache hit rate in the shared-prefix profile
    sp = delta("shared-prefix")
    rate = sp.get("prefix_cache_hit_rate")
    if plan.get("prefix_caching") is False or engine.get("prefix_caching") is False:
        rows.append(
            _row(
                "prefix_cache_hit_rate",
                "shared prefixes hit the prefix cache",
                ">= %s" % _pct(t["prefix_cache_hit_rate"]),
                "prefix caching is off",
                "MISSED",
                "agents share a long system prompt and tool definitions: turn prefix caching on "
                "(vllm_plan_enable_prefix_caching: true)",
                "field notes: 80-90 % in steady agent traffic",
            )
        )
    elif rate is None:
        rows.append(
            _row(
                "prefix_cache_hit_rate",
                "shared prefixes hit the prefix cache",
                ">= %s" % _pct(t["prefix_cache_hit_rate"]),
                None,
                "not measured",
                "run the shared-prefix profile",
                "field notes: 80-90 % in steady agent traffic",
            )
        )
    else:
        ok = rate >= t["prefix_cache_hit_rate"]
        rows.append(
            _row(
                "prefix_cache_hit_rate",
                "shared prefixes hit the prefix cache",
                ">= %s" % _pct(t["prefix_cache_hit_rate"]),
                "%s (%d of %d prompt tokens)"
                % (_pct(rate), sp.get("prefix_cache_hits") or 0, sp.get("prefix_cache_queries") or 0),
                "MET" if ok else "MISSED",
                ""
                if ok
                else "keep the system prompt and tool definitions byte-identical and first; do not "
                "switch reasoning_effort/enable_thinking within a session (it rewrites the system prefix and "
                "the whole prompt is prefilled again); a shared prefix shorter than a few KV blocks cannot hit",
                "field notes: 80-90 % in steady agent traffic",
            )
        )
    # speculative decoding: mean accepted length over the whole check
    total = (profiles.get("_all") or {}).get("delta") or {}
    # Natural questions and answers (the tools profile) say more about real traffic than random tokens do: its
    # counters when it drafted, else the whole check's.
    spec_src, spec_where = total, "whole check, synthetic prompts"
    if delta("tools").get("spec_mean_accepted_length") is not None:
        spec_src, spec_where = delta("tools"), "tools profile"
    length, acc = spec_src.get("spec_mean_accepted_length"), spec_src.get("spec_acceptance_rate")
    if not spec:
        rows.append(
            _row(
                "mtp_accepted_length",
                "speculative decoding pays (mean accepted length)",
                ">= %.1f" % t["mtp_accepted_length"],
                "no speculative decoding planned",
                "not measured",
                "",
                "field notes: AL >= 2.5 pays",
            )
        )
    elif length is None:
        rows.append(
            _row(
                "mtp_accepted_length",
                "speculative decoding pays (mean accepted length)",
                ">= %.1f" % t["mtp_accepted_length"],
                None,
                "not measured",
                "no drafts counted: run a profile that decodes",
                "field notes: AL >= 2.5 pays",
            )
        )
    else:
        ok = length >= t["mtp_accepted_length"]
        advice = ""
        if not ok:
            zero = _mtp_zero(tradeoff)
            advice = "speculation costs more than it gives on this traffic: set vllm_plan_num_speculative_tokens: 0"
            if zero:
                advice += " (the trade-off table's MTP 0 row: %s tokens x %s requests, %s blocks of %s)" % (
                    zero.get("all_fit_len") or "none",
                    (tradeoff or {}).get("concurrency"),
                    zero.get("blocks"),
                    zero.get("block_size"),
                )
            advice += "; the load check's prompts are synthetic: read the same counters over your own traffic"
        per_pos = ", ".join("%.0f %%" % (100 * p) for p in spec_src.get("spec_acceptance_per_pos") or [])
        rows.append(
            _row(
                "mtp_accepted_length",
                "speculative decoding pays (mean accepted length)",
                ">= %.1f" % t["mtp_accepted_length"],
                "%.2f (acceptance %s%s; %s)"
                % (length, _pct(acc), "; per position " + per_pos if per_pos else "", spec_where),
                "MET" if ok else "MISSED",
                advice,
                "field notes: acceptance 56-70 %, AL 2.7-3.1; AL >= 2.5 pays",
            )
        )
    # tool calls
    tl = fig("tools")
    if not tl:
        why = "run the tools profile"
        if engine.get("tools") is False:
            why = (
                "the server parses no tool calls (no --enable-auto-tool-choice): set vllm_plan_tool_call_parser "
                "for agents that call tools"
            )
        rows.append(
            _row(
                "tool_call_parse_rate",
                "tool calls parse",
                ">= %s" % _pct(t["tool_call_parse_rate"]),
                None,
                "not measured",
                why,
                "field notes: --tool-call-parser qwen3_coder",
            )
        )
    else:
        rate = tl.get("parse_rate") or 0.0
        ok = rate >= t["tool_call_parse_rate"]
        rows.append(
            _row(
                "tool_call_parse_rate",
                "tool calls parse",
                ">= %s" % _pct(t["tool_call_parse_rate"]),
                "%s (%d of %d; %d with reasoning)"
                % (
                    _pct(rate),
                    tl.get("tool_calls_parsed") or 0,
                    tl.get("requests") or 0,
                    tl.get("with_reasoning") or 0,
                ),
                "MET" if ok else "MISSED",
                ""
                if ok
                else "check --enable-auto-tool-choice and the tool-call parser for this model "
                "(qwen3_coder for Qwen3.x): the server returned text instead of tool_calls",
                "field notes: --tool-call-parser qwen3_coder",
            )
        )
    # a fact at several depths of the context (the needle profile, when it ran)
    needle = needle_row(fig("needle"), ctx)
    if needle:
        rows.append(needle)
    # decode and prefill speed
    ss, rnd = fig("single-stream"), fig("random")
    for key, promise, value, source, advice in (
        (
            "single_stream_decode_tok_s",
            "decode tok/s of one user",
            ss.get("decode_tok_s"),
            "field notes: 40-48 tok/s with MTP (20+ without)",
            "decode is bound by memory bandwidth: MTP (num_speculative_tokens 3) is the single-stream lever; "
            "a faster card or tensor parallelism the rest",
        ),
        (
            "per_stream_decode_tok_s",
            "decode tok/s of each user at the planned concurrency",
            rnd.get("decode_tok_s")
            if rnd.get("decode_tok_s") is not None
            else fig("shared-prefix").get("decode_tok_s"),
            "field notes: ~36 tok/s each at 4 streams",
            "fewer concurrent requests (vllm_plan_concurrency) make each faster; the aggregate grows with them",
        ),
        (
            "prefill_tok_s",
            "prefill tok/s of one user (prompt / time to first token)",
            ss.get("prefill_tok_s"),
            "field notes: 2400+ tok/s",
            "prefill is bound by compute: a larger --max-num-batched-tokens, prefix caching for shared prompts",
        ),
    ):
        if value is None:
            rows.append(
                _row(
                    key,
                    promise,
                    ">= %g" % t[key],
                    None,
                    "not measured",
                    "run the %s profile" % ("random or shared-prefix" if key.startswith("per_") else "single-stream"),
                    source,
                )
            )
            continue
        ok = value >= t[key]
        rows.append(
            _row(
                key, promise, ">= %g" % t[key], "%.1f" % value, "MET" if ok else "MISSED", "" if ok else advice, source
            )
        )
    # preemptions over the whole check; the KV cache's peak use (a figure, no promise)
    pre = total.get("num_preemptions")
    if pre is None:
        rows.append(_row("preemptions", "no request is preempted", "0", None, "not measured", "", "field notes"))
    else:
        rows.append(
            _row(
                "preemptions",
                "no request is preempted",
                "0",
                "%d" % pre,
                "MET" if not pre else "MISSED",
                ""
                if not pre
                else "running requests outgrew the KV pool: a shorter context or fewer "
                "concurrent requests (trade-off table); KV offload holds only idle sessions",
                "field notes: 0 preemptions with 4 conversations",
            )
        )
    return rows


def promise_counts(rows):
    out = dict((s, 0) for s in STATUSES)
    for r in rows or []:
        out[r["status"]] = out.get(r["status"], 0) + 1
    return out


def planned_from_report(report):
    """The planned figures the promises compare with, from the deployment report (report.json the confirm
    step wrote): the final context (a re-plan's, when it restarted), concurrency, speculative tokens,
    prefix caching, the measured block size. {} without a report."""
    if not isinstance(report, dict):
        return {}
    planned, measured, final = (
        (report.get("planned") or {}),
        (report.get("measured") or {}),
        (report.get("final") or {}),
    )
    return {
        "max_model_len": final.get("max_model_len") or planned.get("max_model_len"),
        "concurrency": final.get("concurrency") or planned.get("concurrency"),
        "num_speculative_tokens": (report.get("ledger") or {}).get("num_speculative_tokens"),
        "prefix_caching": measured.get("enable_prefix_caching"),
        "block_size": measured.get("block_size") or planned.get("block_size"),
    }


def profile_line(name, record):
    """One line per profile for people."""
    f = record.get("figures") or {}
    d = record.get("delta") or {}
    took = record.get("wall_s")
    head = "  %-13s %s" % (name, "%.0f s" % took if took is not None else "")
    if name == "needle":
        return "%s: the fact recalled at %d of %d depths (%s)" % (
            head,
            f.get("recalled") or 0,
            f.get("requests") or 0,
            ", ".join(
                "%.0f %%: %s" % (100.0 * d["depth"], "recalled" if d["recalled"] else (d["error"] or "lost"))
                for d in f.get("depths") or []
            ),
        )
    if name == "tools":
        return "%s: %d of %d answers with a parsed tool call, %d with reasoning" % (
            head,
            f.get("tool_calls_parsed") or 0,
            f.get("requests") or 0,
            f.get("with_reasoning") or 0,
        )
    parts = ["%d ok, %d failed" % (f.get("completed") or 0, f.get("failed") or 0)]
    if name == "long-context" and f.get("mean_prompt_tokens"):
        parts.append("prompt %d tokens, prefill %.0f tok/s" % (f["mean_prompt_tokens"], f.get("prefill_tok_s") or 0))
    if name == "single-stream":
        parts.append(
            "decode %s tok/s, prefill %s tok/s"
            % (
                "-" if f.get("decode_tok_s") is None else "%.1f" % f["decode_tok_s"],
                "-" if f.get("prefill_tok_s") is None else "%.0f" % f["prefill_tok_s"],
            )
        )
    if name in ("random", "shared-prefix") and f.get("decode_tok_s"):
        parts.append("decode %.1f tok/s each" % f["decode_tok_s"])
    if d.get("prefix_cache_hit_rate") is not None and name == "shared-prefix":
        parts.append("prefix cache hit %s" % _pct(d["prefix_cache_hit_rate"]))
    if d.get("num_preemptions"):
        parts.append("%d preemption(s)" % d["num_preemptions"])
    if record.get("peak_kv_usage") is not None:
        parts.append("KV cache peak %s" % _pct(record["peak_kv_usage"]))
    return "%s: %s" % (head, ", ".join(parts))


def render_promises(rows):
    """The promises as lines for the end of a playbook."""
    lines = ["promises:"]
    for r in rows or []:
        lines.append(
            "  %-12s %-28s expected %s, measured %s"
            % (
                r["status"],
                r["key"],
                r["expected"] if r["expected"] is not None else "-",
                r["measured"] if r["measured"] is not None else "-",
            )
        )
        if r["advice"] and r["status"] in ("MISSED", "not witnessed"):
            lines.append("               -> " + r["advice"])
    return "\n".join(lines)
