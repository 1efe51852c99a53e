# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine confirms the plan: parse what vLLM 0.27.1 reports, compare, re-plan once, report.

Pure functions, stdlib only, Python 3.7-clean.

Inputs are the result of ``vllm_launch_plan`` (its ``ledger`` and ``argv``), the text of the
server's ``/metrics`` (``vllm:cache_config_info`` labels = every CacheConfig field as a string,
v1/metrics/loggers.py:1076 log_metrics_info, config/cache.py:243 metrics_info) and/or the journal
of a start (vLLM's own log lines, formats quoted below). The re-plan is computed from the plan's
ledger and the measured budget only (no model directory needed) and pins the pool with
``--kv-cache-memory-bytes`` so that vLLM reproduces exactly the measured number of blocks.
"""

from __future__ import absolute_import, division, print_function

import hashlib
import json
import math
import re

from ansible_collections.airgap.vllm.plugins.module_utils._plan_common import (
    GIB,
    PlanError,
    dtype_bytes,
    fmt_gib,
    fmt_tokens,
    release_rules,
)
from ansible_collections.airgap.vllm.plugins.module_utils._plan_kv import (
    blocks_per_request,
    longest_fitting_len,
    num_gpu_blocks,
)

__metaclass__ = type

# --- vLLM 0.27.1 log lines (exact formats) ---------------------------------------------------
# v1/worker/gpu_worker.py:564  "Available KV cache memory: %s GiB" (format_gib = round(b/GiB, 2))
RE_AVAILABLE = re.compile(r"Available KV cache memory: (-?[0-9.]+) GiB")
# v1/worker/gpu_model_runner.py:5406  "Model loading took %s GiB memory and %.6f seconds"
RE_LOADING = re.compile(r"Model loading took ([0-9.]+) GiB memory")
# v1/core/kv_cache_utils.py:2235  "GPU KV cache size: %s tokens" (thousands separators)
RE_KV_TOKENS = re.compile(r"GPU KV cache size: ([0-9,]+) tokens")
# v1/core/kv_cache_utils.py:2237  "Maximum concurrency for %s tokens per request: %.2fx"
RE_MAX_CONC = re.compile(r"Maximum concurrency for ([0-9,]+) tokens per request: ([0-9.]+)x")
# v1/core/kv_cache_utils.py:751 _check_enough_kv_cache_memory (ValueError text)
RE_REFUSAL = re.compile(
    r"To serve at least one request with the model's max seq len \((\d+)\), \(([0-9.]+) GiB KV "
    r"cache is needed, which is larger than the available KV cache memory \(([0-9.]+) GiB\)\."
    r"(?: Based on the available memory, the estimated maximum model length is (\d+)\.)?")
# kv_cache_utils.py:757 available <= 0
RE_NO_MEMORY = re.compile(r"No available memory for the cache blocks\.")
# vLLM's argument parser (argparse: "<prog>: error: <message>", exit status 2) refusing its command line, e.g.
# "vllm: error: unrecognized arguments: --no-such-flag" or "vllm serve: error: argument --max-model-len: ...".
RE_ARGV_REFUSED = re.compile(r"\bvllm(?: [a-z][a-z-]*)?: error: (.+?)\s*$", re.M)
# v1/worker/utils.py:420 request_memory: the card is not free enough for the utilisation asked
RE_NOT_FREE = re.compile(
    r"Free memory on device \S* ?\(([0-9.]+)/([0-9.]+) GiB\) on startup is less than desired "
    r"GPU memory utilization \(([0-9.]+), ([0-9.]+) GiB\)")

# Where one start begins. systemd's own lines in `journalctl -u <unit>` (-o cat or short: "Starting <description>..."
# before ExecStartPre, "Started <description>." once the process runs; vLLM's lines there begin with
# "(APIServer pid=..)", "INFO" or the like), and vLLM's start banner, the first line of every start
# (entrypoints/openai/api_server.py:624 setup_server -> entrypoints/serve/utils/api_utils.py:323
# log_version_and_model: "vLLM server version %s, serving model %s", or the logo's "version" line),
# which also marks a start in `docker logs`.
RE_START = re.compile(
    r"^(?:\S+ +\d+ [0-9:]+ \S+ systemd\[\d+\]: )?(?:Starting \S.*\.\.\.|Started \S.*)$"
    r"|vLLM server version \S+, serving model"
    r"|\u2588(?:\x1b\[[0-9;]*m)?\s+version\s", re.M)

VERDICTS = ("confirmed", "replan_needed", "refused")


class ConfirmError(PlanError):
    """The inputs cannot be compared (no plan ledger, nothing measured)."""


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
            body = line[len("vllm:cache_config_info{"):line.rfind("}")]
            labels = dict((k, _typed(_unescape(v))) for k, v in re.findall(
                r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"', body))
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
    return text[starts[-1]:] if starts else text


def parse_journal(text):
    """vLLM's own start-up numbers from a journal, read from the last start only (current_start).

    With tensor (or pipeline) parallelism every rank logs its own "Available KV cache memory"
    (v1/worker/gpu_worker.py:563 info_once, scope local: once per worker process) and vLLM sizes
    every rank to the smallest (v1/core/kv_cache_utils.py:2210 get_kv_cache_configs: "Change the
    num_blocks of each rank to the smallest among all ranks"): the budget is the minimum across
    ranks; the weights the largest rank's load."""
    text = current_start(text)
    out = {"available_kv_gib": None, "model_loading_gib": None, "kv_cache_tokens": None,
           "max_concurrency": None, "max_concurrency_len": None, "refusal": None,
           "no_memory": bool(RE_NO_MEMORY.search(text)), "not_free": None,
           "argv_refused": None, "available_kv_gib_by_rank": []}
    ranks = [float(m.group(1)) for m in RE_AVAILABLE.finditer(text)]
    if ranks:
        out["available_kv_gib"] = min(ranks)
        out["available_kv_gib_by_rank"] = ranks
    loads = [float(m.group(1)) for m in RE_LOADING.finditer(text)]
    if loads:
        out["model_loading_gib"] = max(loads)
    for m in RE_KV_TOKENS.finditer(text):
        out["kv_cache_tokens"] = int(m.group(1).replace(",", ""))
    for m in RE_MAX_CONC.finditer(text):
        out["max_concurrency_len"] = int(m.group(1).replace(",", ""))
        out["max_concurrency"] = float(m.group(2))
    for m in RE_REFUSAL.finditer(text):
        refusal = {"max_model_len": int(m.group(1)), "needed_gib": float(m.group(2)),
                   "available_gib": float(m.group(3)),
                   "estimated_max_model_len": int(m.group(4)) if m.group(4) else None}
        # Every rank checks its own memory (kv_cache_utils.py:2186): keep the tightest refusal.
        if out["refusal"] is None or refusal["available_gib"] < out["refusal"]["available_gib"]:
            out["refusal"] = refusal
    for m in RE_NOT_FREE.finditer(text):
        out["not_free"] = {"free_gib": float(m.group(1)), "total_gib": float(m.group(2)),
                           "utilization": float(m.group(3)), "requested_gib": float(m.group(4))}
    for m in RE_ARGV_REFUSED.finditer(text):
        out["argv_refused"] = m.group(1)
    out["cause"] = failure_cause(out)
    return out


def failure_cause(facts):
    """The sentence a failed start gives the operator from vLLM's own words (parse_journal's facts): its
    refusal of the context with its numbers, no memory left for the KV cache, a card another process holds,
    or its argument parser refusing the command line; otherwise that vLLM said nothing of its own."""
    facts = facts or {}
    r = facts.get("refusal")
    if r:
        # refusal_cause's sentence (what the refused-plan record keeps), with the advice.
        advice = (". Plan a context of at most that (vllm_plan_context), or free memory for the KV cache"
                  if r.get("estimated_max_model_len") else "")
        return "vLLM refused the configuration: %s%s." % (refusal_cause(facts), advice)
    if facts.get("no_memory"):
        return ("vLLM found no memory for the KV cache after loading the model: the weights do not leave room "
                "at this utilisation.")
    nf = facts.get("not_free")
    if nf:
        return ("The GPU had only %s GiB free of %s GiB at start, less than the %s GiB asked for: another process "
                "holds GPU memory." % (nf["free_gib"], nf["total_gib"], nf["requested_gib"]))
    if facts.get("argv_refused"):
        return ("vLLM refused its command line: %s. The image's vLLM release does not take this argv "
                "(vllm_service_argv_check, on by default, catches this before the service is touched)."
                % facts["argv_refused"])
    return "vLLM printed no refusal of its own: see its log below."


# --- a refused plan is not deployed again --------------------------------------------------------

# What of a plan reaches the unit: the service role runs exactly these.
FINGERPRINT_KEYS = ("argv", "docker_options", "env")


def plan_fingerprint(plan_result):
    """sha256 of what a plan puts into the unit (argv, Docker options, environment): equal plans, equal
    fingerprints, whichever run computed them. None without a plan."""
    if not isinstance(plan_result, dict) or not plan_result.get("argv"):
        return None
    body = dict((k, plan_result.get(k) or ([] if k != "env" else {})) for k in FINGERPRINT_KEYS)
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"),
                                     default=str).encode("utf-8")).hexdigest()


def refusal_cause(facts):
    """One sentence of what vLLM refused (parse_journal's facts), or None when it refused nothing of the
    plan's own. A card another process holds (not_free) is not the plan's fault: never recorded."""
    r = (facts or {}).get("refusal")
    if r:
        cause = ("--max-model-len %d needs %s GiB of KV cache, but only %s GiB is available"
                 % (r["max_model_len"], r["needed_gib"], r["available_gib"]))
        if r.get("estimated_max_model_len"):
            cause += "; vLLM estimates the longest length that fits at %d tokens" % r["estimated_max_model_len"]
        return cause
    if (facts or {}).get("no_memory"):
        return "no memory was left for the KV cache after loading the model"
    if (facts or {}).get("argv_refused"):
        return "its argument parser refused the command line (%s)" % facts["argv_refused"]
    return None


def refusal_record(plan_result, journal_text, last_record):
    """The service's record after a rollback, with the refused plan noted (``refused_plan``), so that the
    same plan is not deployed again from an unchanged inventory; None when there is nothing to note: no
    last good record to roll back to, vLLM refused nothing of the plan (a broken image, a busy card), or
    the refused plan is the one the last good configuration runs."""
    if not isinstance(last_record, dict) or not last_record.get("name"):
        return None
    fingerprint = plan_fingerprint(plan_result)
    cause = refusal_cause(parse_journal(journal_text))
    if not fingerprint or not cause or fingerprint == last_record.get("plan_fingerprint"):
        return None
    ledger = (plan_result or {}).get("ledger") or {}
    record = dict(last_record)
    record["refused_plan"] = {"fingerprint": fingerprint, "cause": cause,
                              "max_model_len": ledger.get("max_model_len"),
                              "concurrency": ledger.get("concurrency")}
    return record


def refused_plan_check(plan_result, service_record, service_name="vllm", retry=False):
    """Is this plan one vLLM already refused on this host ({refused, msg})? A refused plan from an unchanged
    inventory fails again the same way, after taking the running service down for minutes: refuse it before
    anything is touched, naming the refusal and what to change. ``retry`` deploys it anyway."""
    refused = (service_record or {}).get("refused_plan") if isinstance(service_record, dict) else None
    fingerprint = plan_fingerprint(plan_result)
    if retry or not isinstance(refused, dict) or not fingerprint or refused.get("fingerprint") != fingerprint:
        return {"refused": False, "msg": "", "fingerprint": fingerprint}
    what = ""
    if refused.get("max_model_len"):
        what = " (context %s x %s requests)" % (refused["max_model_len"], refused.get("concurrency") or 1)
    cause = refused.get("cause") or "it did not start"
    if cause.startswith("its argument parser refused"):
        change = ("Change the inventory so that the argv differs (the flag in vllm_plan_extra_args, or an image "
                  "whose vLLM release takes it) and run the plan and service stages again (ansible-playbook "
                  "site.yml --tags plan,service).")
    else:
        change = ("Change the inventory so that the plan differs (a smaller vllm_plan_context, a lower "
                  "vllm_plan_concurrency, vllm_plan_kv_cache_dtype fp8, more GPUs) and run the plan and service "
                  "stages again (ansible-playbook site.yml --tags plan,service), or, once more memory is free, "
                  "retry it as it is with -e airgap_vllm_retry_refused_plan=true.")
    msg = ("vLLM refused this plan%s for %s on this host before: %s. The last good configuration was "
           "rolled back and keeps serving; nothing was changed. %s" % (what, service_name, cause, change))
    return {"refused": True, "msg": msg, "fingerprint": fingerprint}


def _gib_floor(gib):
    """Bytes that surely fit under a figure vLLM printed rounded to 0.01 GiB."""
    return max(0, int(math.floor((gib - 0.005) * GIB)))


# --- comparison -------------------------------------------------------------------------------

def _kv_bytes(name):
    try:
        return dtype_bytes(name)
    except PlanError:
        return None


def _layout(ledger, block=None, cache_dtype=None):
    tok = ledger["attn_bytes_per_token_per_layer"]
    measured_b, planned_b = _kv_bytes(cache_dtype), _kv_bytes(ledger.get("kv_dtype"))
    if cache_dtype not in (None, "auto") and measured_b and planned_b and measured_b != planned_b:
        tok = tok * measured_b // planned_b  # the engine runs another KV dtype than planned
    block = int(block or ledger["block_size"])
    groups = {"group_size": ledger["group_size"], "full_groups": ledger.get("full_groups", 1),
              "linear_groups": ledger.get("linear_groups", 0),
              "sliding_groups": ledger.get("sliding_groups", 0)}
    sliding = None
    if groups["sliding_groups"]:
        sliding = (ledger["sliding_window"], ledger["sliding_in_flight_tokens"])
    return {"block": block, "page": block * tok, "groups": groups, "sliding": sliding,
            "spec": ledger.get("num_speculative_tokens", 0),
            "prefix": bool(ledger.get("prefix_caching"))}


def _capacity(ledger, lay, blocks, ctx):
    need = blocks_per_request(ctx, lay["block"], lay["groups"], lay["spec"], lay["prefix"],
                              lay["sliding"])
    conc = blocks / float(need) if need else 0.0
    return need, conc, int(conc * ctx)


def measured_from(ledger, metrics, journal):
    """What the engine reported, and the KV budget it implies (bytes that surely fit)."""
    info = (metrics or {}).get("cache_config_info") or {}
    j = journal or {}
    m = {"source": [], "num_gpu_blocks": None, "block_size": None, "kv_cache_size_tokens": None,
         "kv_cache_memory_bytes": None, "max_concurrency": None, "cache_dtype": None,
         "enable_prefix_caching": None, "weights_bytes": None, "budget_bytes": None,
         "budget_how": None, "max_model_len": None}
    if info:
        m["source"].append("metrics: vllm:cache_config_info")
        m["num_gpu_blocks"] = info.get("num_gpu_blocks")
        m["block_size"] = info.get("block_size")
        m["kv_cache_size_tokens"] = info.get("kv_cache_size_tokens")
        m["max_concurrency"] = info.get("kv_cache_max_concurrency")
        m["cache_dtype"] = info.get("cache_dtype")
        m["enable_prefix_caching"] = info.get("enable_prefix_caching")
        if isinstance(info.get("kv_cache_memory_bytes"), int):
            m["kv_cache_memory_bytes"] = info["kv_cache_memory_bytes"]
    if j.get("model_loading_gib") is not None:
        m["weights_bytes"] = int(j["model_loading_gib"] * GIB)
        m["source"].append("journal: Model loading took")
    if j.get("kv_cache_tokens") is not None and m["kv_cache_size_tokens"] is None:
        m["kv_cache_size_tokens"] = j["kv_cache_tokens"]
    if j.get("max_concurrency") is not None and m["max_concurrency"] is None:
        m["max_concurrency"] = j["max_concurrency"]
    if j.get("max_concurrency_len"):
        m["max_model_len"] = j["max_concurrency_len"]
    lay = _layout(ledger, m["block_size"], m["cache_dtype"])
    gs = lay["groups"]["group_size"]
    if m["kv_cache_memory_bytes"]:
        m["budget_bytes"] = m["kv_cache_memory_bytes"]
        m["budget_how"] = "kv_cache_memory_bytes label (pinned pool)"
    elif isinstance(m["num_gpu_blocks"], int):
        gpu_blocks = int(m["num_gpu_blocks"])  # an int here; int() also tells pylint it is not None
        m["budget_bytes"] = gpu_blocks * lay["page"] * gs
        m["budget_how"] = "num_gpu_blocks %d x page %d B x %d layers per group" % (
            gpu_blocks, lay["page"], gs)
    elif j.get("refusal"):
        m["budget_bytes"] = _gib_floor(j["refusal"]["available_gib"])
        m["budget_how"] = "refusal: available KV cache memory %.2f GiB (rounded down)" % (
            j["refusal"]["available_gib"])
        m["source"].append("journal: refusal")
    elif j.get("available_kv_gib") is not None:
        m["budget_bytes"] = _gib_floor(j["available_kv_gib"])
        m["budget_how"] = "Available KV cache memory %.2f GiB (rounded down)" % j[
            "available_kv_gib"]
        m["source"].append("journal: Available KV cache memory")
    if m["budget_bytes"] is not None and m["num_gpu_blocks"] is None:
        m["num_gpu_blocks"] = num_gpu_blocks(m["budget_bytes"], lay["page"], gs)
    return m


def replan(plan_result, budget, block=None, cache_dtype=None):
    """Re-plan from a measured KV budget: pin it, and keep the stated context x concurrency when
    it fits, else the largest context at which that concurrency fits, else the longest single
    request. Returns the new argv and the numbers vLLM will report with it."""
    ledger = plan_result["ledger"]
    lay = _layout(ledger, block, cache_dtype)
    gs = lay["groups"]["group_size"]
    blocks = num_gpu_blocks(budget, lay["page"], gs)
    pinned = blocks * lay["page"] * gs  # exactly what vLLM turns into `blocks` blocks again
    conc = int(ledger.get("concurrency") or 1)
    ctx = int(ledger["max_model_len"])
    upper = ledger.get("max_position_embeddings") or None
    args = [lay["block"], lay["groups"], lay["spec"], lay["prefix"]]
    need, max_conc, tokens = _capacity(ledger, lay, blocks, ctx) if blocks else (0, 0.0, 0)
    promise = min(float(conc), float(ledger.get("max_concurrency_at_len") or conc))
    keep_partial = ledger.get("context_requested") and not ledger.get(
        "require_full_length_concurrency")
    one = longest_fitting_len(blocks, *(args + [1, lay["sliding"], upper])) if blocks else 0
    if blocks and need <= blocks and (keep_partial or max_conc + 1e-9 >= promise):
        how = ("stated context %d kept: %.2f full-length requests fit (planned %.2f)"
               % (ctx, max_conc, promise)) if max_conc + 1e-9 < promise else (
            "stated context %d x %.2f requests still fit" % (ctx, promise))
    else:
        fit = longest_fitting_len(blocks, *(args + [conc, lay["sliding"], upper]))
        if fit and fit >= 1024:
            fit -= fit % 1024
        if fit and fit >= lay["block"] and not keep_partial:
            ctx = fit
            how = "largest multiple of 1024 keeping %d full-length requests in %d blocks" % (
                conc, blocks)
        elif one:
            ctx = one
            how = "longest single request in %d blocks (what vLLM itself estimates)" % blocks
        else:
            return {"feasible": False, "kv_cache_memory_bytes": pinned, "num_gpu_blocks": blocks,
                    "reason": "the measured budget %s holds %d blocks: not one request"
                              % (fmt_gib(budget), blocks)}
        need, max_conc, tokens = _capacity(ledger, lay, blocks, ctx)
    argv = _pinned_argv(plan_result["argv"], ctx, pinned)
    return {"feasible": True, "kv_cache_memory_bytes": pinned, "num_gpu_blocks": blocks,
            "block_size": lay["block"], "max_model_len": ctx, "max_model_len_how": how,
            "blocks_per_full_request": need, "max_concurrency_at_len": round(max_conc, 2),
            "gpu_kv_cache_tokens": tokens, "concurrency": conc, "argv": argv}


def _pinned_argv(argv, ctx, pinned):
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("--max-model-len", "--kv-cache-memory-bytes"):
            skip = True
            continue
        if a.startswith("--max-model-len=") or a.startswith("--kv-cache-memory-bytes="):
            continue
        out.append(a)
    pos = 1 if out and not out[0].startswith("-") else 0
    return out[:pos] + ["--max-model-len", str(ctx), "--kv-cache-memory-bytes", str(pinned)] \
        + out[pos:]


def replanned_plan(plan_result, replan_result):
    """The plan as the re-plan changed it (pinned pool, its context): what the engine must confirm after
    the one restart, instead of the first plan it could not hold."""
    ledger = dict(plan_result["ledger"])
    ledger.update({"kv_pool_bytes": replan_result["kv_cache_memory_bytes"],
                   "kv_pool_measured": True,
                   "num_gpu_blocks": replan_result["num_gpu_blocks"],
                   "block_size": replan_result["block_size"],
                   "gpu_kv_cache_tokens": replan_result["gpu_kv_cache_tokens"],
                   "max_model_len": replan_result["max_model_len"],
                   "max_concurrency_at_len": replan_result["max_concurrency_at_len"]})
    return dict(plan_result, ledger=ledger, argv=replan_result["argv"])


def confirm(plan_result, metrics_text=None, journal_text=None, is_replan=False,
            tradeoff_rows=None, replanned=None, engine_env=None):
    """Planned vs measured, a verdict, at most one re-plan, and the deployment report.

    verdict: confirmed (the engine holds what the plan promised: context x concurrency, or the
    warned fraction of it), replan_needed (it started with a smaller pool), refused (it did not
    start). ``restart`` is true only when a feasible re-plan exists and ``is_replan`` is false:
    the caller restarts once with ``replan.argv`` and calls this again with is_replan=true, which
    never asks for another restart.
    """
    if not isinstance(plan_result, dict) or not isinstance(plan_result.get("ledger"), dict):
        raise ConfirmError("plan must be the result of airgap.vllm.vllm_launch_plan (with its "
                           "ledger and argv)")
    if replanned and replanned.get("feasible"):
        plan_result = replanned_plan(plan_result, replanned)
    ledger = plan_result["ledger"]
    metrics = parse_metrics(metrics_text) if metrics_text else None
    journal = parse_journal(journal_text) if journal_text else None
    if not (metrics and metrics["cache_config_info"]) and not journal:
        raise ConfirmError("nothing measured: give the /metrics text (vllm:cache_config_info) "
                           "and/or the journal of the start")
    m = measured_from(ledger, metrics, journal)
    refused = bool(journal and (journal["refusal"] or journal["no_memory"] or journal["not_free"])
                   and not (metrics and metrics["cache_config_info"]))
    planned = {
        "kv_cache_memory_bytes": ledger["kv_pool_bytes"],
        "kv_pool_measured": ledger.get("kv_pool_measured", False),
        "num_gpu_blocks": ledger["num_gpu_blocks"], "block_size": ledger["block_size"],
        "kv_cache_size_tokens": ledger["gpu_kv_cache_tokens"],
        "max_model_len": ledger["max_model_len"], "concurrency": ledger.get("concurrency"),
        "max_concurrency": ledger["max_concurrency_at_len"],
        "weights_bytes": _component(ledger, "weights"),
        "non_kv_bytes": ledger["non_kv_bytes"], "budget_bytes": ledger["budget_bytes"],
        "attention_backend": ledger.get("attention_backend"), "kv_dtype": ledger.get("kv_dtype"),
    }
    promise = min(float(ledger.get("concurrency") or 1), float(ledger["max_concurrency_at_len"]))
    measured_conc = None
    if m["num_gpu_blocks"] is not None and not refused:
        lay = _layout(ledger, m["block_size"], m["cache_dtype"])
        _need, measured_conc, _tok = _capacity(ledger, lay, m["num_gpu_blocks"],
                                               ledger["max_model_len"])
    if refused:
        verdict = "refused"
    elif measured_conc is not None and measured_conc + 0.005 >= promise:
        verdict = "confirmed"
    else:
        verdict = "replan_needed"
    new = None
    if verdict != "confirmed" and m["budget_bytes"] is not None:
        new = replan(plan_result, m["budget_bytes"], m["block_size"], m["cache_dtype"])
    restart = bool(new and new.get("feasible") and not is_replan and verdict != "confirmed")
    notes = []
    if is_replan and verdict != "confirmed":
        notes.append("already a re-plan: not restarting again (no loop); fix the inputs or pin "
                     "a smaller context by hand")
    if journal and journal["refusal"] and journal["refusal"]["estimated_max_model_len"] and new \
            and new.get("feasible"):
        est = journal["refusal"]["estimated_max_model_len"]
        notes.append("vLLM's own estimate of the longest length: %d; re-plan: %d (%s)"
                     % (est, new["max_model_len"], new["max_model_len_how"]))
    if journal and journal["not_free"]:
        notes.append("the card was not free enough for gpu_memory_utilization %.2f (%.2f of "
                     "%.2f GiB free): another process holds GPU memory"
                     % (journal["not_free"]["utilization"], journal["not_free"]["free_gib"],
                        journal["not_free"]["total_gib"]))
    delta = {}
    for key in ("kv_cache_memory_bytes", "num_gpu_blocks", "kv_cache_size_tokens"):
        mv = m["budget_bytes"] if key == "kv_cache_memory_bytes" else m.get(key)
        pv = planned[key]
        if mv is not None and pv:
            delta[key] = {"planned": pv, "measured": mv,
                          "error_percent": round(100.0 * (pv - mv) / float(mv), 2) if mv else None}
    result = {"verdict": verdict, "restart": restart, "is_replan": bool(is_replan),
              "planned": planned, "measured": m, "delta": delta, "replan": new, "notes": notes,
              "measured_concurrency_at_len": round(measured_conc, 2)
              if measured_conc is not None else None,
              "promised_concurrency_at_len": round(promise, 2)}
    result["pool"] = pool_check(planned, m, (plan_result["ledger"] or {}).get("estimate_band"), engine_env)
    if result["pool"]["note"]:
        notes.append(result["pool"]["note"])
    if tradeoff_rows is None and m["budget_bytes"] and plan_result.get("inputs"):
        tradeoff_rows = measured_tradeoff(plan_result, m["budget_bytes"])
    result["report"] = deployment_report(plan_result, result, tradeoff_rows)
    result["report_markdown"] = render_markdown(result["report"])
    result["report_svg"] = render_svg(result["report"])
    result["summary"] = render_summary(dict(result, engine=result["report"]["engine"]))
    return result


def measured_tradeoff(plan_result, budget):
    """The trade-off table again, at the measured budget (needs the plan's ``inputs`` and its
    model directory); None when it cannot be recomputed (the plan's own table is kept)."""
    from ansible_collections.airgap.vllm.plugins.module_utils import _planner
    from ansible_collections.airgap.vllm.plugins.module_utils._plan_tradeoff import tradeoff
    inputs = dict(plan_result["inputs"])
    inputs["measured_kv_cache_bytes"] = int(budget)
    inputs["pin_kv_cache_memory"] = False
    old = plan_result.get("tradeoff") or {}
    try:
        return tradeoff(_planner.plan, inputs, title=(old.get("title") or "") + ", measured")
    except (PlanError, IOError, OSError, KeyError, TypeError, ValueError):
        return None


def engine_release(plan_result):
    """The vLLM release the plan was made for (the image's, vllm_launch_plan's ``vllm_version`` kept in its
    ``inputs``): {"version", "known", "rules", "relation", "text"}, or None when the plan was made without one."""
    version = ((plan_result or {}).get("inputs") or {}).get("vllm_version")
    if not version or not str(version).strip():
        return None
    try:
        r = release_rules(str(version))
    except ValueError:
        return {"version": str(version), "known": False, "rules": None, "relation": "unreadable",
                "text": "vLLM %r (UNKNOWN: not a version)" % str(version)}
    rules = r["rules"]["release"]
    text = "vLLM %s" % r["version"]
    if not r["known"]:
        text += " (UNKNOWN release, %s: planned with the rules of vLLM %s)" % (r["relation"], rules)
    elif r["rules"].get("planner", rules) != rules:
        text += " (known; sizing rules of vLLM %s)" % r["rules"]["planner"]
    return {"version": r["version"], "known": r["known"], "rules": rules, "relation": r["relation"], "text": text}


def render_summary(result):
    """One screen for the end of a playbook."""
    p, m, r = result["planned"], result["measured"], result.get("replan")
    engine = result.get("engine")
    lines = ["vLLM plan %s%s" % (verdict_text(result), " -> restart once with the re-plan"
                                 if result["restart"] else ""),
             "  KV pool   planned %s, measured %s (%s)" % (
                 fmt_gib(p["kv_cache_memory_bytes"]),
                 fmt_gib(m["budget_bytes"]) if m.get("budget_bytes") is not None else "-",
                 m.get("budget_how") or "-"),
             "  blocks    planned %s, measured %s" % (p["num_gpu_blocks"],
                                                      m.get("num_gpu_blocks")),
             "  context   %s x %s requests planned (%.2f full-length fit)" % (
                 p["max_model_len"], p["concurrency"], p["max_concurrency"] or 0)]
    if r and r.get("feasible"):
        lines.append("  re-plan   --max-model-len %d --kv-cache-memory-bytes %d: %.2f full-length "
                     "requests, %s tokens" % (r["max_model_len"], r["kv_cache_memory_bytes"],
                                              r["max_concurrency_at_len"],
                                              "{:,}".format(r["gpu_kv_cache_tokens"])))
    elif r:
        lines.append("  re-plan   not feasible: %s" % r["reason"])
    lines += ["  note      " + n for n in result.get("notes", [])]
    if engine:
        lines.insert(0, "vLLM release: %s" % engine["text"][len("vLLM "):])
    return "\n".join(lines)


def _component(ledger, name):
    for c in ledger.get("components", []):
        if c["name"] == name:
            return c["bytes"]
    return 0


# --- report ----------------------------------------------------------------------------------

def memory_bars(ledger, measured):
    """weights | other | KV pool | free, per GPU, planned and measured (bytes)."""
    total = int(ledger.get("gpu_total_bytes") or 0)
    budget = int(ledger["budget_bytes"])
    pw = _component(ledger, "weights")
    planned = {"total": total, "weights": pw, "other": budget - pw - ledger["kv_pool_bytes"],
               "kv_pool": ledger["kv_pool_bytes"], "free": max(0, total - budget)}
    bars = {"planned": planned, "measured": None}
    if measured and measured.get("budget_bytes") is not None:
        mw = measured.get("weights_bytes")
        weights = mw if mw is not None else pw
        kv = measured["budget_bytes"]
        bars["measured"] = {"total": total, "weights": weights,
                            "other": max(0, budget - weights - kv), "kv_pool": kv,
                            "free": max(0, total - max(budget, weights + kv)),
                            "weights_measured": mw is not None,
                            # Only the KV pool (and the weights, from a journal) is the engine's number: the rest
                            # of the bar is the plan's budget, not a measurement.
                            "labels": {"weights": "weights" if mw is not None else "weights (planned)",
                                       "other": "not measured", "kv_pool": "KV pool",
                                       "free": "free (planned)"}}
    return bars


def deployment_report(plan_result, confirmation, tradeoff_rows=None):
    ledger = plan_result["ledger"]
    final = confirmation.get("replan") if confirmation.get("restart") else None
    final_ctx = final["max_model_len"] if final else ledger["max_model_len"]
    return {
        "engine": engine_release(plan_result),
        "verdict": confirmation["verdict"],
        "restart": confirmation["restart"],
        "is_replan": confirmation["is_replan"],
        "planned": confirmation["planned"],
        "measured": confirmation["measured"],
        "delta": confirmation["delta"],
        "replan": confirmation.get("replan"),
        "final": {"max_model_len": final_ctx,
                  "concurrency": ledger.get("concurrency"),
                  "kv_cache_memory_bytes": final["kv_cache_memory_bytes"] if final else None,
                  "max_concurrency_at_len": final["max_concurrency_at_len"] if final else (
                      confirmation.get("measured_concurrency_at_len")
                      or ledger["max_concurrency_at_len"])},
        "memory": memory_bars(ledger, confirmation["measured"]),
        "tradeoff": tradeoff_rows or plan_result.get("tradeoff"),
        "notes": confirmation.get("notes", []),
        "pool": confirmation.get("pool"),
        "plan_warnings": plan_result.get("plan_warnings") or [],
        "ledger": {"num_speculative_tokens": ledger.get("num_speculative_tokens"),
                   "prefix_caching": ledger.get("prefix_caching"),
                   "attention_backend": ledger.get("attention_backend"),
                   "kv_dtype": ledger.get("kv_dtype"), "block_size": ledger["block_size"],
                   "model_family": ledger.get("model_family")},
    }


def render_markdown(report):
    p, m = report["planned"], report["measured"]

    def g(b):
        return fmt_gib(b) if isinstance(b, int) else "-"

    def n(v):
        return "{:,}".format(v) if isinstance(v, int) else ("-" if v is None else str(v))

    rows = ["# vLLM deployment report", "",
            "**Verdict: %s**%s" % (verdict_text(report),
                                   " (restart with the re-plan)" if report["restart"] else ""), ""] + (
        ["Engine: %s." % report["engine"]["text"], ""] if report.get("engine") else []) + [
            "| | planned | measured |", "|---|---|---|",
            "| KV pool | %s | %s |" % (g(p["kv_cache_memory_bytes"]), g(m.get("budget_bytes"))),
            "| num_gpu_blocks | %s | %s |" % (n(p["num_gpu_blocks"]), n(m.get("num_gpu_blocks"))),
            "| block size | %s | %s |" % (n(p["block_size"]), n(m.get("block_size"))),
            "| GPU KV cache size (tokens) | %s | %s |" % (n(p["kv_cache_size_tokens"]),
                                                          n(m.get("kv_cache_size_tokens"))),
            "| weights | %s | %s |" % (g(p["weights_bytes"]), g(m.get("weights_bytes"))),
            "| max_model_len | %s | %s |" % (n(p["max_model_len"]), n(m.get("max_model_len"))),
            "| full-length requests at once | %s | %s |" % (
                p["max_concurrency"], m.get("max_concurrency") if m.get(
                    "max_concurrency") is not None else "-"),
            "", "Measured from: %s; budget: %s." % (", ".join(m.get("source") or ["-"]),
                                                    m.get("budget_how") or "-"), ""]
    r = report.get("replan")
    if r and r.get("feasible"):
        rows += ["## Re-plan from the measured budget", "",
                 "`--kv-cache-memory-bytes %d` (%s), `--max-model-len %d` (%s): %s blocks, "
                 "%.2f full-length requests, %s tokens." % (
                     r["kv_cache_memory_bytes"], fmt_gib(r["kv_cache_memory_bytes"]),
                     r["max_model_len"], r["max_model_len_how"], n(r["num_gpu_blocks"]),
                     r["max_concurrency_at_len"], n(r["gpu_kv_cache_tokens"])), ""]
    elif r:
        rows += ["## Re-plan", "", "Not feasible: %s." % r["reason"], ""]
    f = report["final"]
    rows += ["Final: context %s x %s requests (%.2f full-length requests fit)." % (
        n(f["max_model_len"]), n(f["concurrency"]), f["max_concurrency_at_len"] or 0), ""]
    t = report.get("tradeoff")
    if t:
        rows += render_tradeoff_markdown(t) + [""]
    if report.get("promises"):
        rows += render_promises_markdown(report["promises"]) + [""]
    if report.get("plan_warnings"):
        rows += ["## Planner warnings", ""]
        for w in report["plan_warnings"]:
            rows.append("- **%s**: %s (%s)" % (w.get("id"), w.get("message"), w.get("source")))
        rows.append("")
    for note in report.get("notes", []):
        rows.append("- " + note)
    rows += ["", "![memory](memory.svg)"]
    return "\n".join(rows) + "\n"


def render_tradeoff_markdown(t):
    rows = ["## Trade-off (%s)" % t.get("title", "this card"), "",
            "| question | answer |", "|---|---|",
            "| longest context where %d requests all fit | %s |" % (
                t["concurrency"], fmt_tokens(t["all_fit_len"]) if t["all_fit_len"] else "none"),
            "| longest single request (`--max-model-len`) | %s |" % (
                fmt_tokens(t["single_len"]) if t["single_len"] else "none")]
    for row in t["typical"]:
        rows.append("| requests of %s that fit at once (then vLLM preempts) | %d |" % (
            fmt_tokens(row["length"]), row["fit"]))
    for row in t.get("batched_tokens", []):
        rows.append("| `--max-num-batched-tokens %d` | %s x %d requests, KV pool %s%s |" % (
            row["max_num_batched_tokens"], fmt_tokens(row["all_fit_len"]) if row[
                "all_fit_len"] else "none", t["concurrency"], fmt_gib(row["kv_pool_bytes"]),
            row.get("note", "")))
    for row in t.get("speculative", []):
        rows.append("| MTP %d speculative tokens | %s x %d requests, %s blocks of %d%s |" % (
            row["num_speculative_tokens"], fmt_tokens(row["all_fit_len"]) if row[
                "all_fit_len"] else "none", t["concurrency"], "{:,}".format(row["blocks"]),
            row["block_size"], row.get("note", "")))
    return rows


def render_svg(report, width=640):
    """Two stacked bars, planned and measured: weights | other | KV pool | free."""
    colors = (("weights", "#4e79a7"), ("other", "#f28e2b"), ("kv_pool", "#59a14f"),
              ("free", "#d0d0d0"))
    bars = report["memory"]
    total = max(1, bars["planned"]["total"] or sum(bars["planned"][k] for k, _c in colors))
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="180" '
           'font-family="sans-serif" font-size="11">' % (width + 120)]
    y = 10
    for label in ("planned", "measured"):
        bar_bytes = bars.get(label)
        out.append('<text x="0" y="%d">%s</text>' % (y + 17, label))
        if not bar_bytes:
            out.append('<text x="80" y="%d">not measured</text>' % (y + 17))
            y += 40
            continue
        x = 80.0
        for key, color in colors:
            w = width * max(0, bar_bytes[key]) / float(total)
            name = (bar_bytes.get("labels") or {}).get(key) or key.replace("_", " ")
            fill = "#bbbbbb" if name == "not measured" else color
            out.append('<rect x="%.1f" y="%d" width="%.1f" height="24" fill="%s">'
                       '<title>%s: %s %s</title></rect>' % (x, y, w, fill, key, name, fmt_gib(bar_bytes[key])))
            if w > 50:
                out.append('<text x="%.1f" y="%d" fill="#fff">%s %.1f</text>'
                           % (x + 3, y + 16, name, bar_bytes[key] / float(GIB)))
            x += w
        y += 40
    x = 80
    for key, color in colors:
        out.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/>'
                   '<text x="%d" y="%d">%s</text>' % (x, y, color, x + 14, y + 9,
                                                      key.replace("_", " ")))
        x += 110
    captions = ["GiB per GPU of %.1f GiB" % (total / float(GIB))]
    if bars.get("measured"):
        captions.append("measured: the KV pool (vllm:cache_config_info)%s; the rest of that bar is the plan's"
                        % (" and the weights (journal)" if bars["measured"].get("weights_measured") else ""))
    pool = report.get("pool") or {}
    if pool.get("explained_by"):
        captions.append(pool["explained_by"].split(": ")[0])
    for i, caption in enumerate(captions):
        out.append('<text x="80" y="%d">%s</text>' % (y + 30 + 14 * i, _xml(caption)))
    out.append("</svg>")
    return "".join(out)


def _xml(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# --- the report never contradicts itself ------------------------------------------------------------

POOL_TOLERANCE = 0.10  # outside the estimate's band and this far from the plan, the pool is "not as planned"


def pool_check(planned, measured, band=None, engine_env=None):
    """Is the measured KV pool the planned one? {status: as_planned|smaller|larger|not_measured, ratio,
    explained_by, note}. The plan's estimate band (ledger estimate_band) counts as planned; a pool fixed by
    a test setting (the CPU engine's VLLM_CPU_KVCACHE_SPACE, GiB of host memory: vllm/v1/worker/cpu_worker.py
    "Explicitly set ... GiB for KV cache") is said to be one."""
    p = (planned or {}).get("kv_cache_memory_bytes")
    m = (measured or {}).get("budget_bytes")
    out = {"status": "not_measured", "ratio": None, "planned_bytes": p, "measured_bytes": m,
           "explained_by": None, "note": None}
    if not p or m is None:
        return out
    out["ratio"] = round(float(m) / p, 4) if p else None
    band = band or {}
    low = min(band.get("kv_pool_low_bytes") or p, p * (1 - POOL_TOLERANCE))
    high = max(band.get("kv_pool_high_bytes") or p, p * (1 + POOL_TOLERANCE))
    if low <= m <= high:
        out["status"] = "as_planned"
        return out
    out["status"] = "smaller" if m < p else "larger"
    factor = (float(p) / m if m else float("inf")) if m < p else float(m) / p
    space = (engine_env or {}).get("VLLM_CPU_KVCACHE_SPACE")
    try:
        space_bytes = int(float(space) * GIB) if space not in (None, "") else None
    except (TypeError, ValueError):
        space_bytes = None
    if space_bytes and abs(m - space_bytes) <= max(GIB // 100, space_bytes // 100):
        out["explained_by"] = ("the CPU engine's VLLM_CPU_KVCACHE_SPACE=%s fixes its KV pool at %s GiB of host memory "
                               "(a test setting): the planned pool is the GPU's and was not measured here" % (space, space))
    out["note"] = "the KV pool is %s than planned: %s measured against %s planned (%.1fx)%s" % (
        out["status"], fmt_gib(m), fmt_gib(p), factor,
        ("; " + out["explained_by"]) if out["explained_by"] else
        "; the engine did not get the memory the plan counted on (another process on the card, a different "
        "gpu_memory_utilization, or an estimate off by more than its band): see the re-plan")
    return out


def verdict_text(report):
    """The verdict as the report states it: 'confirmed' only when the pool is the planned one too."""
    verdict = report.get("verdict")
    pool = report.get("pool") or {}
    if verdict != "confirmed" or pool.get("status") in (None, "as_planned", "not_measured"):
        return verdict
    planned = report.get("planned") or {}
    held = "context %s x %s requests held" % (planned.get("max_model_len"), planned.get("concurrency"))
    if pool.get("explained_by"):
        return "%s; KV pool not as planned (%s than planned, explained by a test setting)" % (held, pool["status"])
    return "%s; KV pool NOT as planned (%s than planned)" % (held, pool["status"])


def render_promises_markdown(rows):
    """The promises table of report.md."""
    out = ["## Promises", "",
           "| promise | expected | measured | status | advice | source |", "|---|---|---|---|---|---|"]
    for r in rows:
        out.append("| %s | %s | %s | %s | %s | %s |" % tuple(
            ("-" if v in (None, "") else str(v)).replace("|", "\\|") for v in (
                r.get("promise"), r.get("expected"), r.get("measured"),
                "**%s**" % r.get("status") if r.get("status") == "MISSED" else r.get("status"),
                r.get("advice"), r.get("source"))))
    return out


CARRIED = ("promises", "loadcheck")


def carry_promises(old_report, new_report):
    """The new report with the load check's promises of the old one (report.json on the host) when both describe
    the same deployment (planned and final equal): a converged re-run that confirms again keeps them, and so
    leaves report.md unchanged; a changed plan drops them (its load check writes new ones). Returns the report
    (a copy when something was carried) and whether it was."""
    if not isinstance(old_report, dict) or not isinstance(new_report, dict):
        return new_report, False
    if not any(old_report.get(k) for k in CARRIED):
        return new_report, False
    same = all(json.dumps(old_report.get(k), sort_keys=True, default=str)
               == json.dumps(new_report.get(k), sort_keys=True, default=str) for k in ("planned", "final"))
    if not same:
        return new_report, False
    out = dict(new_report)
    for key in CARRIED:
        if old_report.get(key):
            out[key] = old_report[key]
    return out, True
