# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine confirms the plan, part one: read what vLLM reports (0.26.0 to 0.30.0, every form they print).

Pure functions, stdlib only, Python 3.7-clean. The labels of ``vllm:cache_config_info`` in the server's
``/metrics`` (every CacheConfig field as a string, v1/metrics/loggers.py:1076 log_metrics_info,
config/cache.py:243 metrics_info) and vLLM's own log lines of a start (formats quoted below), as numbers,
and the failed start's cause in vLLM's words. The comparison with the plan is _plan_confirm, the report
_plan_confirm_report.
"""

from __future__ import absolute_import, division, print_function

import re

__metaclass__ = type

# --- vLLM 0.27.1 log lines (exact formats) ---------------------------------------------------
# v1/worker/gpu_worker.py:564  "Available KV cache memory: %s GiB" (format_gib = round(b/GiB, 2))
RE_AVAILABLE = re.compile(r"Available KV cache memory: (-?[0-9.]+) GiB")
# The weights as loaded, in two forms: the V1 model runner (v1/worker/gpu_model_runner.py: 0.26.0 :5348, 0.27.1
# :5406) "Model loading took %s GiB memory and %.6f seconds"; the newer (V2) runner, the default for dense models
# (v1/worker/gpu/model_runner.py: 0.26.0 :306, 0.27.1 :330) "Model loading took %s GiB and %.6f seconds" (no word
# "memory"; measured on vLLM 0.26.0 on an H100: "Model loading took 15.27 GiB and 1.03 seconds").
RE_LOADING = re.compile(r"Model loading took ([0-9.]+) GiB(?: memory)? and")
# The one-line memory summary after the CUDA-graph capture (v1/worker/gpu_worker.py, format_gib = round(b/GiB, 2)):
#   0.26.0 (:836): "Free memory on device (F/T GiB) on startup. Desired GPU memory utilization is (U, R GiB). Actual
#     usage is W GiB for weight, A GiB for peak activation, N GiB for non-torch memory, and C GiB for CUDAGraph
#     memory. Replace ... Current kv cache memory in use is K GiB."
#   0.27.1 (:774) and 0.30.0 (:873): "... Actual usage is X GiB for consumed memory (weights + non-torch), A GiB for
#     peak activation, and C GiB for CUDAGraph memory. ..." (A there includes the CUDA-graph estimate vLLM took
#     off before the pool; C is what the capture took, after the pool).
RE_SUMMARY = re.compile(
    r"Free memory on device \(([0-9.]+)/([0-9.]+) GiB\) on startup\. Desired GPU memory utilization is "
    r"\(([0-9.]+), ([0-9.]+) GiB\)\. Actual usage is "
    r"(?:([0-9.]+) GiB for weight, ([0-9.]+) GiB for peak activation, ([0-9.]+) GiB for non-torch memory, and "
    r"|([0-9.]+) GiB for consumed memory \(weights \+ non-torch\), ([0-9.]+) GiB for peak activation, and )"
    r"([0-9.]+) GiB for CUDAGraph memory\.(?:.*?Current kv cache memory in use is (-?[0-9.]+) GiB\.)?"
)
# v1/core/kv_cache_utils.py:2235  "GPU KV cache size: %s tokens" (thousands separators)
RE_KV_TOKENS = re.compile(r"GPU KV cache size: ([0-9,]+) tokens")
# v1/core/kv_cache_utils.py:2237  "Maximum concurrency for %s tokens per request: %.2fx"
RE_MAX_CONC = re.compile(r"Maximum concurrency for ([0-9,]+) tokens per request: ([0-9.]+)x")
# v1/core/kv_cache_utils.py:751 _check_enough_kv_cache_memory (ValueError text)
RE_REFUSAL = re.compile(
    r"To serve at least one request with the model's max seq len \((\d+)\), \(([0-9.]+) GiB KV "
    r"cache is needed, which is larger than the available KV cache memory \(([0-9.]+) GiB\)\."
    r"(?: Based on the available memory, the estimated maximum model length is (\d+)\.)?"
)
# kv_cache_utils.py:757 available <= 0
RE_NO_MEMORY = re.compile(r"No available memory for the cache blocks\.")
# vLLM's argument parser (argparse: "<prog>: error: <message>", exit status 2) refusing its command line, e.g.
# "vllm: error: unrecognized arguments: --no-such-flag" or "vllm serve: error: argument --max-model-len: ...".
RE_ARGV_REFUSED = re.compile(r"\bvllm(?: [a-z][a-z-]*)?: error: (.+?)\s*$", re.M)
# v1/worker/utils.py:420 request_memory: the card is not free enough for the utilisation asked
RE_NOT_FREE = re.compile(
    r"Free memory on device \S* ?\(([0-9.]+)/([0-9.]+) GiB\) on startup is less than desired "
    r"GPU memory utilization \(([0-9.]+), ([0-9.]+) GiB\)"
)

# Where one start begins. systemd's own lines in `journalctl -u <unit>` (-o cat or short: "Starting <description>..."
# before ExecStartPre, "Started <description>." once the process runs; vLLM's lines there begin with
# "(APIServer pid=..)", "INFO" or the like), and vLLM's start banner, the first line of every start
# (entrypoints/openai/api_server.py:624 setup_server -> entrypoints/serve/utils/api_utils.py:323
# log_version_and_model: "vLLM server version %s, serving model %s", or the logo's "version" line),
# which also marks a start in `docker logs`.
RE_START = re.compile(
    r"^(?:\S+ +\d+ [0-9:]+ \S+ systemd\[\d+\]: )?(?:Starting \S.*\.\.\.|Started \S.*)$"
    r"|vLLM server version \S+, serving model"
    r"|\u2588(?:\x1b\[[0-9;]*m)?\s+version\s",
    re.M,
)


# --- parsing ---------------------------------------------------------------------------------


def _unescape(value):
    return value.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")


def _typed(value):
    if value in ("None", ""):
        return None
    if value in ("True", "False"):
        return value == "True"
    if re.match(r"^-?\d+$", value):
        return int(value)
    if re.match(r"^-?\d+\.\d*(e-?\d+)?$", value):
        return float(value)
    return value


def parse_metrics(text):
    """Labels of ``vllm:cache_config_info`` (first engine) and a few gauges/counters, typed."""
    out = {"cache_config_info": None, "num_preemptions": None, "kv_cache_usage_perc": None}
    for line in (text or "").splitlines():
        if line.startswith("vllm:cache_config_info{") and out["cache_config_info"] is None:
            body = line[len("vllm:cache_config_info{") : line.rfind("}")]
            labels = dict(
                (k, _typed(_unescape(v))) for k, v in re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"', body)
            )
            out["cache_config_info"] = labels
        m = re.match(r"^vllm:num_preemptions(?:_total)?(?:\{[^}]*\})? ([0-9.eE+-]+)$", line)
        if m:
            out["num_preemptions"] = (out["num_preemptions"] or 0) + float(m.group(1))
        m = re.match(r"^vllm:kv_cache_usage_perc(?:\{[^}]*\})? ([0-9.eE+-]+)$", line)
        if m:
            out["kv_cache_usage_perc"] = float(m.group(1))
    return out


def current_start(text):
    """The part of a journal since the last start (RE_START): what an earlier start printed (an old
    refusal, another context's numbers) says nothing about this one."""
    text = text or ""
    starts = [m.start() for m in RE_START.finditer(text)]
    return text[starts[-1] :] if starts else text


def parse_journal(text):
    """vLLM's own start-up numbers from a journal, read from the last start only (current_start).

    With tensor (or pipeline) parallelism every rank logs its own "Available KV cache memory"
    (v1/worker/gpu_worker.py:563 info_once, scope local: once per worker process) and vLLM sizes
    every rank to the smallest (v1/core/kv_cache_utils.py:2210 get_kv_cache_configs: "Change the
    num_blocks of each rank to the smallest among all ranks"): the budget is the minimum across
    ranks; the weights the largest rank's load."""
    text = current_start(text)
    out = {
        "available_kv_gib": None,
        "model_loading_gib": None,
        "kv_cache_tokens": None,
        "max_concurrency": None,
        "max_concurrency_len": None,
        "refusal": None,
        "no_memory": bool(RE_NO_MEMORY.search(text)),
        "not_free": None,
        "argv_refused": None,
        "available_kv_gib_by_rank": [],
        "memory_summary": None,
    }
    ranks = [float(m.group(1)) for m in RE_AVAILABLE.finditer(text)]
    if ranks:
        out["available_kv_gib"] = min(ranks)
        out["available_kv_gib_by_rank"] = ranks
    loads = [float(m.group(1)) for m in RE_LOADING.finditer(text)]
    if loads:
        out["model_loading_gib"] = max(loads)
    summaries = [_summary(m) for m in RE_SUMMARY.finditer(text)]
    if summaries:
        # One line per rank: the tightest pool, as vLLM sizes every rank to the smallest.
        out["memory_summary"] = min(summaries, key=lambda s: (s["kv_cache_gib"] is None, s["kv_cache_gib"]))
        if out["available_kv_gib"] is None and out["memory_summary"]["kv_cache_gib"] is not None:
            out["available_kv_gib"] = out["memory_summary"]["kv_cache_gib"]
    for m in RE_KV_TOKENS.finditer(text):
        out["kv_cache_tokens"] = int(m.group(1).replace(",", ""))
    for m in RE_MAX_CONC.finditer(text):
        out["max_concurrency_len"] = int(m.group(1).replace(",", ""))
        out["max_concurrency"] = float(m.group(2))
    for m in RE_REFUSAL.finditer(text):
        refusal = {
            "max_model_len": int(m.group(1)),
            "needed_gib": float(m.group(2)),
            "available_gib": float(m.group(3)),
            "estimated_max_model_len": int(m.group(4)) if m.group(4) else None,
        }
        # Every rank checks its own memory (kv_cache_utils.py:2186): keep the tightest refusal.
        if out["refusal"] is None or refusal["available_gib"] < out["refusal"]["available_gib"]:
            out["refusal"] = refusal
    for m in RE_NOT_FREE.finditer(text):
        out["not_free"] = {
            "free_gib": float(m.group(1)),
            "total_gib": float(m.group(2)),
            "utilization": float(m.group(3)),
            "requested_gib": float(m.group(4)),
        }
    for m in RE_ARGV_REFUSED.finditer(text):
        out["argv_refused"] = m.group(1)
    out["cause"] = failure_cause(out)
    return out


def _summary(m):
    """RE_SUMMARY's match as numbers (GiB). ``weights_gib``/``non_torch_gib``: None where the release prints their
    sum alone (``consumed_gib``, 0.27.1 and later)."""

    def num(i):
        return float(m.group(i)) if m.group(i) is not None else None

    out = {
        "free_gib": num(1),
        "total_gib": num(2),
        "utilization": num(3),
        "requested_gib": num(4),
        "weights_gib": num(5),
        "activation_gib": num(6) if m.group(6) is not None else num(9),
        "non_torch_gib": num(7),
        "consumed_gib": num(8),
        "cudagraph_gib": num(10),
        "kv_cache_gib": num(11),
    }
    if out["consumed_gib"] is None and out["weights_gib"] is not None:
        out["consumed_gib"] = round(out["weights_gib"] + out["non_torch_gib"], 2)
    return out


def failure_cause(facts):
    """The sentence a failed start gives the operator from vLLM's own words (parse_journal's facts): its
    refusal of the context with its numbers, no memory left for the KV cache, a card another process holds,
    or its argument parser refusing the command line; otherwise that vLLM said nothing of its own."""
    facts = facts or {}
    r = facts.get("refusal")
    if r:
        # refusal_cause's sentence (what the refused-plan record keeps), with the advice.
        advice = (
            ". Plan a context of at most that (vllm_plan_context), or free memory for the KV cache"
            if r.get("estimated_max_model_len")
            else ""
        )
        return "vLLM refused the configuration: %s%s." % (refusal_cause(facts), advice)
    if facts.get("no_memory"):
        return (
            "vLLM found no memory for the KV cache after loading the model: the weights do not leave room "
            "at this utilisation."
        )
    nf = facts.get("not_free")
    if nf:
        return (
            "The GPU had only %s GiB free of %s GiB at start, less than the %s GiB asked for: another process "
            "holds GPU memory." % (nf["free_gib"], nf["total_gib"], nf["requested_gib"])
        )
    if facts.get("argv_refused"):
        return (
            "vLLM refused its command line: %s. The image's vLLM release does not take this argv "
            "(vllm_service_argv_check, on by default, catches this before the service is touched)."
            % facts["argv_refused"]
        )
    return "vLLM printed no refusal of its own: see its log below."


def refusal_cause(facts):
    """One sentence of what vLLM refused (parse_journal's facts), or None when it refused nothing of the
    plan's own. A card another process holds (not_free) is not the plan's fault: never recorded."""
    r = (facts or {}).get("refusal")
    if r:
        cause = "--max-model-len %d needs %s GiB of KV cache, but only %s GiB is available" % (
            r["max_model_len"],
            r["needed_gib"],
            r["available_gib"],
        )
        if r.get("estimated_max_model_len"):
            cause += "; vLLM estimates the longest length that fits at %d tokens" % r["estimated_max_model_len"]
        return cause
    if (facts or {}).get("no_memory"):
        return "no memory was left for the KV cache after loading the model"
    if (facts or {}).get("argv_refused"):
        return "its argument parser refused the command line (%s)" % facts["argv_refused"]
    return None
