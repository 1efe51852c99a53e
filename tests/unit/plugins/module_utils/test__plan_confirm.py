"""Engine confirmation of a launch plan (plugins/module_utils/_plan_confirm.py).

The metrics and journal texts below are built in the exact formats vLLM 0.27.1 emits them:
vllm:cache_config_info labels = str() of every CacheConfig field (config/cache.py:243 metrics_info,
v1/metrics/loggers.py:1076); "Available KV cache memory: %s GiB" (v1/worker/gpu_worker.py:564);
"Model loading took %s GiB memory ..." (v1/worker/gpu_model_runner.py:5406); "GPU KV cache size: %s
tokens" / "Maximum concurrency for %s tokens per request: %.2fx" (v1/core/kv_cache_utils.py:2235);
the refusal text of kv_cache_utils.py:751 _check_enough_kv_cache_memory. The refusal used in
test_refused_start_replans_from_the_journal is the one vLLM's own code printed in the venv
(tests/vllm_parser/kv_reference.py, case qwen35-bf16: 11.1 GiB, bf16 KV, MTP 3 -> "13.9 GiB KV cache
is needed ... (11.1 GiB) ... the estimated maximum model length is 160800").
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils import _plan_confirm as C
from ansible_collections.airgap.vllm.plugins.module_utils import _plan_tradeoff as T
from ansible_collections.airgap.vllm.plugins.module_utils import _planner as P

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "models", "qwen3.x-27b-fp8")
ADA_48 = 49140 * P.MIB
PRO_96 = 97887 * P.MIB

REFUSAL = (
    "ValueError: To serve at least one request with the model's max seq len (204800), (13.9 GiB KV "
    "cache is needed, which is larger than the available KV cache memory (11.1 GiB). Based on the "
    "available memory, the estimated maximum model length is 160800. Try increasing "
    "`gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or decreasing "
    "`max_model_len` when initializing the engine. See "
    "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.")


def metrics(blocks, block_size=1600, tokens=None, pinned=None, conc=None):
    labels = {"block_size": block_size, "cache_dtype": "fp8_e4m3", "enable_prefix_caching": True,
              "gpu_memory_utilization": 0.93, "num_gpu_blocks": blocks, "num_cpu_blocks": None,
              "kv_cache_memory_bytes": pinned, "kv_cache_size_tokens": tokens,
              "kv_cache_max_concurrency": conc, "engine": "0", "model_name": "qwen"}
    body = ",".join('%s="%s"' % (k, v) for k, v in labels.items())
    return ("# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
            "# TYPE vllm:cache_config_info gauge\n"
            "vllm:cache_config_info{%s} 1.0\n"
            'vllm:num_preemptions_total{engine="0",model_name="qwen"} 0.0\n' % body)


def field_plan(**kw):
    base = dict(model_dir=FIXTURE, gpu_total_bytes=ADA_48, compute_capability="8.9",
                gpu_memory_utilization=0.93, num_speculative_tokens=3, concurrency=4,
                context=204800, prefix_caching=True, kv_cache_dtype="fp8_e4m3")
    base.update(kw)
    return P.plan(base)


def test_parse_metrics_types_labels():
    m = C.parse_metrics(metrics(220, tokens=315076))
    info = m["cache_config_info"]
    assert info["num_gpu_blocks"] == 220 and info["block_size"] == 1600
    assert info["kv_cache_memory_bytes"] is None and info["enable_prefix_caching"] is True
    assert info["kv_cache_size_tokens"] == 315076 and m["num_preemptions"] == 0.0


def test_parse_journal_reads_vllms_lines():
    text = ("INFO [gpu_model_runner.py:5406] Model loading took 28.71 GiB memory and 40.1 seconds\n"
            "INFO [gpu_worker.py:564] Available KV cache memory: 11.41 GiB\n"
            "INFO [kv_cache_utils.py:2235] GPU KV cache size: 315,076 tokens\n"
            "INFO [kv_cache_utils.py:2237] Maximum concurrency for 204,800 tokens per request: "
            "1.54x\n" + REFUSAL)
    j = C.parse_journal(text)
    assert (j["model_loading_gib"], j["available_kv_gib"]) == (28.71, 11.41)
    assert j["kv_cache_tokens"] == 315076 and j["max_concurrency"] == 1.54
    assert j["max_concurrency_len"] == 204800
    assert j["refusal"] == {"max_model_len": 204800, "needed_gib": 13.9, "available_gib": 11.1,
                            "estimated_max_model_len": 160800}


def test_confirmed_when_the_engine_holds_the_plan():
    r = field_plan(measured_kv_cache_bytes=int(11.41 * P.GIB))
    L = r["ledger"]
    c = C.confirm(r, metrics(L["num_gpu_blocks"], tokens=L["gpu_kv_cache_tokens"]))
    assert c["verdict"] == "confirmed" and not c["restart"] and c["replan"] is None
    assert c["delta"]["num_gpu_blocks"]["error_percent"] == 0.0


def test_smaller_pool_replans_once_with_the_budget_pinned():
    """The estimate says 248 blocks; the engine reports 220 (the field's ~315K tokens)."""
    r = field_plan()
    assert r["ledger"]["num_gpu_blocks"] == 248
    c = C.confirm(r, metrics(220))
    assert c["verdict"] == "replan_needed" and c["restart"]
    new = c["replan"]
    assert new["num_gpu_blocks"] == 220
    assert new["kv_cache_memory_bytes"] == 220 * 3276800 * 17
    argv = new["argv"]
    assert argv[argv.index("--kv-cache-memory-bytes") + 1] == str(220 * 3276800 * 17)
    assert argv[argv.index("--max-model-len") + 1] == "204800"  # stated context kept
    assert argv.count("--max-model-len") == 1
    assert new["max_concurrency_at_len"] == round(220 / 143.0, 2)
    # vLLM with that pin: 220 blocks again, 143 per request (the formula kv_reference checks)
    assert new["gpu_kv_cache_tokens"] == int(220 / 143.0 * 204800)
    # second round: the engine now reports what the re-plan said -> confirmed, no restart
    pinned_plan = dict(r, argv=argv)
    again = C.confirm(pinned_plan, metrics(220, pinned=new["kv_cache_memory_bytes"]),
                      is_replan=True)
    assert again["restart"] is False
    # and a re-plan that still does not hold never asks for another restart
    worse = C.confirm(r, metrics(200), is_replan=True)
    assert worse["verdict"] == "replan_needed" and worse["restart"] is False
    assert any("no loop" in n for n in worse["notes"])


def test_max_context_plan_shrinks_to_what_fits_for_all_users():
    """50 users, context max: the re-plan keeps 50 and finds the largest context that fits."""
    r = P.plan(dict(model_dir=FIXTURE, gpu_total_bytes=PRO_96, compute_capability="12.0",
                    concurrency=50, context="max", kv_cache_dtype="fp8_e4m3",
                    num_speculative_tokens=3))
    L = r["ledger"]
    c = C.confirm(r, metrics(L["num_gpu_blocks"] - 100))
    assert c["verdict"] == "replan_needed" and c["restart"]
    new = c["replan"]
    assert new["max_model_len"] < L["max_model_len"] and new["max_model_len"] % 1024 == 0
    assert new["max_concurrency_at_len"] >= 50
    g = P.group_layers(17, 48)
    assert 50 * P.blocks_per_request(new["max_model_len"] + 1024, 1600, g, 3, False) > \
        new["num_gpu_blocks"]


def test_refused_start_replans_from_the_journal():
    """bf16 KV at 204800 with vLLM's 11.1 GiB: vLLM refuses and estimates 160800; the
    re-plan from its own numbers pins 11.1 GiB rounded down and gives the same length."""
    r = field_plan(kv_cache_dtype="bfloat16", prefix_caching=False,
                   measured_kv_cache_bytes=40 * P.GIB)  # a plan that (wrongly) expected room
    c = C.confirm(r, journal_text=REFUSAL)
    assert c["verdict"] == "refused" and c["restart"]
    new = c["replan"]
    assert new["max_model_len"] == 160800
    assert new["kv_cache_memory_bytes"] <= int(11.1 * P.GIB)
    assert any("160800" in n for n in c["notes"])


def test_report_markdown_svg_and_tradeoff():
    r = field_plan()
    params = dict(model_dir=FIXTURE, gpu_total_bytes=ADA_48, compute_capability="8.9",
                  gpu_memory_utilization=0.93, num_speculative_tokens=3, concurrency=4,
                  context=204800, prefix_caching=True, kv_cache_dtype="fp8_e4m3")
    t = T.tradeoff(P.plan, params, title="RTX 6000 Ada 48 GB")
    journal = ("Model loading took 28.71 GiB memory and 40.1 seconds\n"
               "Available KV cache memory: 11.41 GiB\n")
    c = C.confirm(r, metrics(220), journal, tradeoff_rows=t)
    rep = c["report"]
    assert rep["memory"]["measured"]["weights"] == int(28.71 * P.GIB)
    assert rep["final"]["max_model_len"] == 204800
    assert json.loads(json.dumps(rep)) == rep  # plain JSON
    md = c["report_markdown"]
    assert "| num_gpu_blocks | 248 | 220 |" in md and "Trade-off (RTX 6000 Ada 48 GB)" in md
    assert c["report_svg"].startswith("<svg") and "kv_pool" in c["report_svg"]
    assert t["single_len"] >= t["all_fit_len"] > 0
    assert [row["length"] for row in t["typical"]] == [4096, 16384, 32768]


def test_nothing_measured_is_a_clear_error():
    with pytest.raises(C.ConfirmError):
        C.confirm(field_plan(), metrics_text="# nothing here\n")
    with pytest.raises(C.ConfirmError):
        C.confirm({"argv": []}, metrics(10))


def test_report_tradeoff_recomputed_at_the_measured_budget():
    """With the plan's inputs (as vllm_launch_plan returns them) the trade-off is recomputed at
    the engine's budget: 220 blocks -> 4 x 63K instead of the estimate's 4 x 73K."""
    params = dict(model_dir=FIXTURE, gpu_total_bytes=ADA_48, compute_capability="8.9",
                  gpu_memory_utilization=0.93, num_speculative_tokens=3, concurrency=4,
                  context=204800, prefix_caching=True, kv_cache_dtype="fp8_e4m3")
    r = dict(P.plan(params), inputs=params)
    r["tradeoff"] = T.tradeoff(P.plan, params, title="48 GB")
    c = C.confirm(r, metrics(220))
    t = c["report"]["tradeoff"]
    assert t["title"] == "48 GB, measured" and t["measured"]
    g = P.group_layers(17, 48)
    assert 4 * P.blocks_per_request(t["all_fit_len"], 1600, g, 3, True) <= 220 < \
        4 * P.blocks_per_request(t["all_fit_len"] + 1024, 1600, g, 3, True)
    assert r["tradeoff"]["all_fit_len"] > t["all_fit_len"]
    assert c["summary"].startswith("vLLM plan replan_needed -> restart once")


def test_engine_with_another_block_and_kv_dtype():
    """A CPU engine (the simulated host) may report another block size and KV dtype than the GPU
    plan: the budget and the re-plan use the engine's page, so vLLM gets back the same blocks."""
    r = field_plan()
    text = metrics(400, block_size=800).replace('cache_dtype="fp8_e4m3"', 'cache_dtype="bfloat16"')
    c = C.confirm(r, text)
    page = 800 * 4096  # 800 tokens x 4 kv heads x 512 x 2 bytes
    assert c["measured"]["budget_bytes"] == 400 * page * 17
    assert c["verdict"] == "replan_needed"  # 400 / (256 + 15) = 1.48 < 1.73 promised
    assert c["replan"]["num_gpu_blocks"] == 400
    assert c["replan"]["kv_cache_memory_bytes"] == 400 * page * 17
    assert c["replan"]["blocks_per_full_request"] == 271
    big = C.confirm(r, metrics(500, block_size=800).replace('"fp8_e4m3"', '"bfloat16"'))
    assert big["verdict"] == "confirmed"  # 500 / 271 = 1.85 >= 1.73


def test_after_the_one_restart_the_engine_confirms_the_replan_not_the_first_plan():
    """The planner chose "max" (74752 x 4 on the 48 GB field card); the engine holds 150 blocks. The
    re-plan keeps 4 users at a shorter context; after the restart the engine's numbers confirm the
    re-plan, and no second restart is asked for (the simulated host does the same with its CPU engine)."""
    r = field_plan(context="max", concurrency=4)
    first = C.confirm(r, metrics(150))
    assert first["verdict"] == "replan_needed" and first["restart"]
    new = first["replan"]
    pinned = metrics(new["num_gpu_blocks"], pinned=new["kv_cache_memory_bytes"])
    again = C.confirm(r, pinned, is_replan=True, replanned=new)
    assert again["verdict"] == "confirmed" and not again["restart"]
    assert again["planned"]["max_model_len"] == new["max_model_len"]
    assert again["report"]["final"]["max_model_len"] == new["max_model_len"]
    # Against the first plan the same numbers fall short: that is what the re-plan fixed.
    assert C.confirm(r, pinned, is_replan=True)["verdict"] == "replan_needed"


# --- issue 24: what the journal says is read from the current start only -----------------------

STARTED_LINE = "Started vllm.service - vLLM OpenAI-compatible server qwen (airgap.vllm)."
BANNER = "(APIServer pid=1) INFO 12-01 10:00:00 [api_utils.py:325] vLLM server version 0.27.1, serving model /m"


def test_an_old_refusal_is_not_read_into_a_later_start():
    """Before #24 the last refusal anywhere in the 400 journal lines counted: an unrelated later
    failure (a smoke test, a broken image) re-planned from a refusal days old."""
    old = "Starting vLLM x (airgap.vllm)...\n" + STARTED_LINE + "\n" + REFUSAL + "\n"
    later = (STARTED_LINE + "\n" + BANNER + "\nAvailable KV cache memory: 11.41 GiB\n"
             "broken release\n")
    facts = C.parse_journal(old + later)
    assert facts["refusal"] is None and facts["available_kv_gib"] == 11.41
    assert C.parse_journal(old)["refusal"]["estimated_max_model_len"] == 160800
    # systemd's short output format marks a start the same way; so does vLLM's banner in `docker logs`.
    short = "Dec 01 10:00:00 gpu1 systemd[1]: Started vllm.service - vLLM (airgap.vllm).\n"
    assert C.parse_journal(REFUSAL + "\n" + short + "no refusal here\n")["refusal"] is None
    assert C.parse_journal(REFUSAL + "\n" + BANNER + "\n")["refusal"] is None
    # vLLM's own "Starting ..." lines (prefixed) are no start of the unit.
    assert C.parse_journal("(APIServer pid=1) INFO Starting vLLM server...\n" + REFUSAL)["refusal"]


def test_tensor_parallel_budget_is_the_smallest_rank():
    """v1/core/kv_cache_utils.py:2210 get_kv_cache_configs: 'Change the num_blocks of each rank to
    the smallest among all ranks'; every worker logs its own 'Available KV cache memory'
    (gpu_worker.py:563, info_once scope local). Before #24 the last rank's line won."""
    journal = (BANNER + "\n(Worker_TP0 pid=5) INFO Model loading took 14.2 GiB memory and 20 seconds\n"
               "(Worker_TP1 pid=6) INFO Model loading took 14.4 GiB memory and 20 seconds\n"
               "(Worker_TP0 pid=5) INFO Available KV cache memory: 9.10 GiB\n"
               "(Worker_TP1 pid=6) INFO Available KV cache memory: 11.40 GiB\n")
    facts = C.parse_journal(journal)
    assert facts["available_kv_gib"] == 9.10 and facts["available_kv_gib_by_rank"] == [9.10, 11.40]
    assert facts["model_loading_gib"] == 14.4
    m = C.measured_from(field_plan()["ledger"], None, facts)
    assert m["budget_bytes"] <= int(9.10 * P.GIB)


# --- issue 24: a refused plan is not deployed again from an unchanged inventory -----------------

def _last_good(**kw):
    rec = {"name": "vllm", "unit": "/etc/systemd/system/vllm.service", "config_fingerprint": "abc"}
    rec.update(kw)
    return rec


def test_a_refused_plan_is_noted_and_refused_next_time():
    good, refused = field_plan(context=32768), field_plan(context=65536)
    assert C.plan_fingerprint(good) != C.plan_fingerprint(refused)
    assert C.plan_fingerprint(good) == C.plan_fingerprint(json.loads(json.dumps(good)))  # as plan.json holds it
    last = _last_good(plan_fingerprint=C.plan_fingerprint(good))
    rec = C.refusal_record(refused, STARTED_LINE + "\n" + REFUSAL, last)
    assert rec["refused_plan"]["fingerprint"] == C.plan_fingerprint(refused)
    assert "160800" in rec["refused_plan"]["cause"] and rec["config_fingerprint"] == "abc"
    assert rec["name"] == "vllm"
    # The next run from the unchanged inventory: refused before anything is touched, saying what to change.
    check = C.refused_plan_check(refused, rec, "vllm")
    assert check["refused"] and "vllm_plan_context" in check["msg"] and "160800" in check["msg"]
    assert "nothing was changed" in check["msg"]
    # Another plan (the inventory changed), or retry asked for: it deploys.
    assert not C.refused_plan_check(good, rec, "vllm")["refused"]
    assert not C.refused_plan_check(refused, rec, "vllm", retry=True)["refused"]
    assert not C.refused_plan_check(refused, last, "vllm")["refused"]


def test_no_refusal_is_noted_for_a_broken_image_a_busy_card_or_no_last_good():
    good, changed = field_plan(context=32768), field_plan(context=65536)
    last = _last_good(plan_fingerprint=C.plan_fingerprint(good))
    assert C.refusal_record(changed, "broken release\n", last) is None
    busy = ("Free memory on device cuda:0 (3.2/47.4 GiB) on startup is less than desired GPU memory "
            "utilization (0.93, 44.1 GiB)")
    assert C.refusal_record(changed, busy, last) is None
    assert C.refusal_record(changed, REFUSAL, {}) is None
    assert C.refusal_record(good, REFUSAL, last) is None  # the last good plan itself: nothing to block
    assert C.refusal_record(changed, REFUSAL, _last_good())["refused_plan"]  # record from before #24
    no_mem = "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`"
    assert "no memory" in C.refusal_record(changed, no_mem, last)["refused_plan"]["cause"]


# --- the failed start's cause, in vLLM's own words, decided here (the role only prints it) ----------------

# What vLLM 0.27.1 printed for `vllm serve ... --no-such-flag` in the simulated host's journal (molecule
# default's refusal case, `journalctl -u vllm -o cat`), after the previous start's shutdown lines.
ARGV_REFUSAL = (
    "(APIServer pid=1) INFO 12-01 23:18:13 [launcher.py:161] [shutdown] API server: shutting down FastAPI HTTP server\n"
    "vllm.service: Deactivated successfully.\n"
    "Stopped vllm.service - vLLM OpenAI-compatible server qwen3-tiny (airgap.vllm).\n"
    "Starting vllm.service - vLLM OpenAI-compatible server qwen3-tiny (airgap.vllm)...\n"
    "Started vllm.service - vLLM OpenAI-compatible server qwen3-tiny (airgap.vllm).\n"
    "INFO 12-01 23:18:31 [importing.py:88] Triton not installed or not compatible; certain GPU-related functions "
    "will not be available.\n"
    "usage: vllm [-h] [-v]\n"
    "            {chat,complete,serve,launch,bench,collect-env,run-batch} ...\n"
    "vllm: error: unrecognized arguments: --no-such-flag\n"
    "vllm.service: Main process exited, code=exited, status=2/INVALIDARGUMENT\n"
    "vllm.service: Failed with result 'exit-code'.\n")


def test_argv_refusal_is_read_and_named_as_the_cause():
    facts = C.parse_journal(ARGV_REFUSAL)
    assert facts["argv_refused"] == "unrecognized arguments: --no-such-flag"
    assert facts["cause"].startswith("vLLM refused its command line: unrecognized arguments: --no-such-flag.")
    assert "vllm_service_argv_check" in facts["cause"]
    # A subcommand's parser ("vllm serve: error: ...") and journald's short format read the same.
    short = "Dec 01 23:18:31 kylin vllm[812]: vllm serve: error: argument --max-model-len: invalid int value: 'x'\n"
    assert C.parse_journal(short)["argv_refused"] == "argument --max-model-len: invalid int value: 'x'"
    # An earlier start's parser error says nothing about this one.
    assert C.parse_journal(ARGV_REFUSAL + STARTED_LINE + "\nINFO ok\n")["argv_refused"] is None


def test_failure_cause_sentences_from_vllms_words():
    refused = C.parse_journal(STARTED_LINE + "\n" + REFUSAL)["cause"]
    assert refused.startswith("vLLM refused the configuration: --max-model-len 204800 needs 13.9 GiB of KV cache, "
                              "but only 11.1 GiB is available; vLLM estimates the longest length that fits at "
                              "160800 tokens. Plan a context of at most that (vllm_plan_context)")
    assert refused.endswith("or free memory for the KV cache.")
    no_estimate = {"refusal": {"max_model_len": 4096, "needed_gib": 2.0, "available_gib": 1.0,
                               "estimated_max_model_len": None}}
    assert C.failure_cause(no_estimate) == ("vLLM refused the configuration: --max-model-len 4096 needs 2.0 GiB of "
                                            "KV cache, but only 1.0 GiB is available.")
    no_mem = "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`"
    assert C.parse_journal(no_mem)["cause"].startswith("vLLM found no memory for the KV cache")
    busy = ("Free memory on device cuda:0 (3.2/47.4 GiB) on startup is less than desired GPU memory "
            "utilization (0.93, 44.1 GiB)")
    assert C.parse_journal(busy)["cause"] == ("The GPU had only 3.2 GiB free of 47.4 GiB at start, less than the "
                                              "44.1 GiB asked for: another process holds GPU memory.")
    assert C.parse_journal("broken release\n")["cause"] == "vLLM printed no refusal of its own: see its log below."
    assert C.failure_cause(None) == "vLLM printed no refusal of its own: see its log below."


def test_an_argv_refusal_is_noted_like_any_refused_plan():
    good, changed = field_plan(context=32768), field_plan(context=65536)
    last = _last_good(plan_fingerprint=C.plan_fingerprint(good))
    rec = C.refusal_record(changed, ARGV_REFUSAL, last)
    assert "unrecognized arguments: --no-such-flag" in rec["refused_plan"]["cause"]
    check = C.refused_plan_check(changed, rec, "vllm")
    assert check["refused"] and "--no-such-flag" in check["msg"] and "vllm_plan_extra_args" in check["msg"]
    assert "vllm_plan_context" not in check["msg"]
