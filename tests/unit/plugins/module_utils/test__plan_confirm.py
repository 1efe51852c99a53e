"""The engine confirms the plan (plugins/module_utils/planner/_plan_confirm.py): planned against measured, the
verdict, the one re-plan, and a refused plan not deployed again.

The engine's texts are test__plan_confirm_parse.py's, in the exact formats vLLM 0.27.1 emits them; the
refusal used in test_refused_start_replans_from_the_journal is the one vLLM's own code printed in the venv
(tests/vllm_parser/kv_reference.py, case qwen35-bf16).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_common as CM
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_confirm as C
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_kv as K
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_refusal as R
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_tradeoff as T
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _planner as P

from .test__plan_confirm_parse import ARGV_REFUSAL, BANNER, REFUSAL, STARTED_LINE, metrics

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "models", "qwen3.x-27b-fp8")
ADA_48 = 49140 * CM.MIB
PRO_96 = 97887 * CM.MIB


def field_plan(**kw):
    base = dict(
        model_dir=FIXTURE,
        gpu_total_bytes=ADA_48,
        compute_capability="8.9",
        gpu_memory_utilization=0.93,
        num_speculative_tokens=3,
        concurrency=4,
        context=204800,
        prefix_caching=True,
        kv_cache_dtype="fp8_e4m3",
    )
    base.update(kw)
    return P.plan(base)


def test_confirmed_when_the_engine_holds_the_plan():
    r = field_plan(measured_kv_cache_bytes=int(11.41 * CM.GIB))
    L = r["ledger"]
    c = C.confirm(r, metrics(L["num_gpu_blocks"], tokens=L["gpu_kv_cache_tokens"]))
    assert c["verdict"] == "confirmed" and not c["restart"] and c["replan"] is None
    assert c["delta"]["num_gpu_blocks"]["error_percent"] == 0.0


def test_smaller_pool_replans_once_with_the_budget_pinned():
    """The estimate says 246 blocks (248 at first, 253 once non-torch memory was calibrated on the H100, 246 once the
    activation, the CUDA graphs and the pool's margin were too, issue 43); the engine reports 220 (the field's ~315K
    tokens)."""
    r = field_plan()
    assert r["ledger"]["num_gpu_blocks"] == 246
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
    again = C.confirm(pinned_plan, metrics(220, pinned=new["kv_cache_memory_bytes"]), is_replan=True)
    assert again["restart"] is False
    # and a re-plan that still does not hold never asks for another restart
    worse = C.confirm(r, metrics(200), is_replan=True)
    assert worse["verdict"] == "replan_needed" and worse["restart"] is False
    assert any("no loop" in n for n in worse["notes"])


def test_max_context_plan_shrinks_to_what_fits_for_all_users():
    """50 users, context max: the re-plan keeps 50 and finds the largest context that fits."""
    r = P.plan(
        dict(
            model_dir=FIXTURE,
            gpu_total_bytes=PRO_96,
            compute_capability="12.0",
            concurrency=50,
            context="max",
            kv_cache_dtype="fp8_e4m3",
            num_speculative_tokens=3,
        )
    )
    L = r["ledger"]
    c = C.confirm(r, metrics(L["num_gpu_blocks"] - 100))
    assert c["verdict"] == "replan_needed" and c["restart"]
    new = c["replan"]
    assert new["max_model_len"] < L["max_model_len"] and new["max_model_len"] % 1024 == 0
    assert new["max_concurrency_at_len"] >= 50
    g = K.group_layers(17, 48)
    assert 50 * K.blocks_per_request(new["max_model_len"] + 1024, 1600, g, 3, False) > new["num_gpu_blocks"]


def test_refused_start_replans_from_the_journal():
    """bf16 KV at 204800 with vLLM's 11.1 GiB: vLLM refuses and estimates 160800; the
    re-plan from its own numbers pins 11.1 GiB rounded down and gives the same length."""
    r = field_plan(
        kv_cache_dtype="bfloat16", prefix_caching=False, measured_kv_cache_bytes=40 * CM.GIB
    )  # a plan that (wrongly) expected room
    c = C.confirm(r, journal_text=REFUSAL)
    assert c["verdict"] == "refused" and c["restart"]
    new = c["replan"]
    assert new["max_model_len"] == 160800
    assert new["kv_cache_memory_bytes"] <= int(11.1 * CM.GIB)
    assert any("160800" in n for n in c["notes"])


def test_nothing_measured_is_a_clear_error():
    with pytest.raises(C.ConfirmError):
        C.confirm(field_plan(), metrics_text="# nothing here\n")
    with pytest.raises(C.ConfirmError):
        C.confirm({"argv": []}, metrics(10))


def test_report_tradeoff_recomputed_at_the_measured_budget():
    """With the plan's inputs (as vllm_launch_plan returns them) the trade-off is recomputed at
    the engine's budget: 220 blocks -> 4 x 62K instead of the estimate's 4 x 59K (a "max" plan keeps its
    concurrency within the low end of its estimate band, issue 43: the engine here held more)."""
    params = dict(
        model_dir=FIXTURE,
        gpu_total_bytes=ADA_48,
        compute_capability="8.9",
        gpu_memory_utilization=0.93,
        num_speculative_tokens=3,
        concurrency=4,
        context=204800,
        prefix_caching=True,
        kv_cache_dtype="fp8_e4m3",
    )
    r = dict(P.plan(params), inputs=params)
    r["tradeoff"] = T.tradeoff(P.plan, params, title="48 GB")
    c = C.confirm(r, metrics(220))
    t = c["report"]["tradeoff"]
    # computed at the engine's pool, so "planned" (from what), never "measured"
    assert t["title"] == "48 GB" and t["measured"] and t["basis"].startswith("planned from the engine's measured")
    assert "## Trade-off (48 GB, planned from the engine's measured KV pool of " in c["report_markdown"]
    g = K.group_layers(17, 48)
    assert (
        4 * K.blocks_per_request(t["all_fit_len"], 1600, g, 3, True)
        <= 220
        < 4 * K.blocks_per_request(t["all_fit_len"] + 1024, 1600, g, 3, True)
    )
    assert r["tradeoff"]["all_fit_len"] < t["all_fit_len"]
    assert c["verdict"] == "replan_needed"
    assert c["summary"].startswith("vLLM plan re-plan needed: the engine's KV pool of ")
    assert c["summary"].splitlines()[0].endswith(" -> restart once with the re-plan")


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
    # 500 / 271 = 1.85 >= 1.73: held, no re-plan; but a bf16 pool of another size is not the planned fp8 pool
    assert big["verdict"] == "not_as_planned" and not big["restart"] and big["replan"] is None
    assert big["verdict_text"].startswith("NOT as planned: KV pool ")


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


def test_tensor_parallel_budget_is_the_smallest_rank():
    """v1/core/kv_cache_utils.py:2210 get_kv_cache_configs: 'Change the num_blocks of each rank to
    the smallest among all ranks'; every worker logs its own 'Available KV cache memory'
    (gpu_worker.py:563, info_once scope local). Before #24 the last rank's line won."""
    journal = (
        BANNER + "\n(Worker_TP0 pid=5) INFO Model loading took 14.2 GiB memory and 20 seconds\n"
        "(Worker_TP1 pid=6) INFO Model loading took 14.4 GiB memory and 20 seconds\n"
        "(Worker_TP0 pid=5) INFO Available KV cache memory: 9.10 GiB\n"
        "(Worker_TP1 pid=6) INFO Available KV cache memory: 11.40 GiB\n"
    )
    facts = C.parse_journal(journal)
    assert facts["available_kv_gib"] == 9.10 and facts["available_kv_gib_by_rank"] == [9.10, 11.40]
    assert facts["model_loading_gib"] == 14.4
    m = C.measured_from(field_plan()["ledger"], None, facts)
    assert m["budget_bytes"] <= int(9.10 * CM.GIB)


# --- issue 24: a refused plan is not deployed again from an unchanged inventory -----------------


def _last_good(**kw):
    rec = {"name": "vllm", "unit": "/etc/systemd/system/vllm.service", "config_fingerprint": "abc"}
    rec.update(kw)
    return rec


def test_a_refused_plan_is_noted_and_refused_next_time():
    good, refused = field_plan(context=32768), field_plan(context=65536)
    assert R.plan_fingerprint(good) != R.plan_fingerprint(refused)
    assert R.plan_fingerprint(good) == R.plan_fingerprint(json.loads(json.dumps(good)))  # as plan.json holds it
    last = _last_good(plan_fingerprint=R.plan_fingerprint(good))
    rec = R.refusal_record(refused, STARTED_LINE + "\n" + REFUSAL, last)
    assert rec["refused_plan"]["fingerprint"] == R.plan_fingerprint(refused)
    assert "160800" in rec["refused_plan"]["cause"] and rec["config_fingerprint"] == "abc"
    assert rec["name"] == "vllm"
    # The next run from the unchanged inventory: refused before anything is touched, saying what to change.
    check = R.refused_plan_check(refused, rec, "vllm")
    assert check["refused"] and "vllm_plan_context" in check["msg"] and "160800" in check["msg"]
    assert "nothing was changed" in check["msg"]
    # Another plan (the inventory changed), or retry asked for: it deploys.
    assert not R.refused_plan_check(good, rec, "vllm")["refused"]
    assert not R.refused_plan_check(refused, rec, "vllm", retry=True)["refused"]
    assert not R.refused_plan_check(refused, last, "vllm")["refused"]


def test_no_refusal_is_noted_for_a_broken_image_a_busy_card_or_no_last_good():
    good, changed = field_plan(context=32768), field_plan(context=65536)
    last = _last_good(plan_fingerprint=R.plan_fingerprint(good))
    assert R.refusal_record(changed, "broken release\n", last) is None
    busy = (
        "Free memory on device cuda:0 (3.2/47.4 GiB) on startup is less than desired GPU memory "
        "utilization (0.93, 44.1 GiB)"
    )
    assert R.refusal_record(changed, busy, last) is None
    assert R.refusal_record(changed, REFUSAL, {}) is None
    assert R.refusal_record(good, REFUSAL, last) is None  # the last good plan itself: nothing to block
    assert R.refusal_record(changed, REFUSAL, _last_good())["refused_plan"]  # record from before #24
    no_mem = "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`"
    assert "no memory" in R.refusal_record(changed, no_mem, last)["refused_plan"]["cause"]


def test_an_argv_refusal_is_noted_like_any_refused_plan():
    good, changed = field_plan(context=32768), field_plan(context=65536)
    last = _last_good(plan_fingerprint=R.plan_fingerprint(good))
    rec = R.refusal_record(changed, ARGV_REFUSAL, last)
    assert "unrecognized arguments: --no-such-flag" in rec["refused_plan"]["cause"]
    check = R.refused_plan_check(changed, rec, "vllm")
    assert check["refused"] and "--no-such-flag" in check["msg"] and "vllm_plan_extra_args" in check["msg"]
    assert "vllm_plan_context" not in check["msg"]


def test_a_shared_cards_share_is_in_the_report_and_the_summary():
    from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_share as S

    chat = dict(
        model_dir=FIXTURE,
        gpu_total_bytes=ADA_48,
        compute_capability="8.9",
        gpus=["0"],
        concurrency=4,
        num_speculative_tokens=3,
        prefix_caching=True,
        kv_cache_dtype="fp8_e4m3",
        language_model_only=True,
    )
    embed = dict(
        model_dir=os.path.join(ROOT, "tests", "fixtures", "models", "bge-m3"),
        gpu_total_bytes=ADA_48,
        compute_capability="8.9",
        gpus=["0"],
        concurrency=16,
    )
    out = S.plan_card(P.plan, [{"name": "chat", "params": chat}, {"name": "embed", "params": embed}])
    r = out["plans"]["chat"]
    L = r["ledger"]
    c = C.confirm(r, metrics(L["num_gpu_blocks"], tokens=L["gpu_kv_cache_tokens"]))
    assert c["report"]["share"]["order"] == 2 and c["report"]["share"]["card_services"] == ["embed", "chat"]
    line = "card share %.1f%%: --gpu-memory-utilization %.3f" % (
        100 * L["share"]["share"],
        L["share"]["gpu_memory_utilization"],
    )
    assert line in c["report_markdown"] and "starts 2 of 2 (embed, chat)" in c["summary"]
    alone = field_plan(measured_kv_cache_bytes=int(11.41 * CM.GIB))
    c = C.confirm(alone, metrics(alone["ledger"]["num_gpu_blocks"], tokens=alone["ledger"]["gpu_kv_cache_tokens"]))
    assert c["report"]["share"] is None and "card share" not in c["report_markdown"] + c["summary"]


def _encoder_metrics(blocks):
    labels = dict(block_size=16, cache_dtype="auto", enable_prefix_caching=False, num_gpu_blocks=blocks, engine="0")
    body = ",".join('%s="%s"' % (k, v) for k, v in labels.items())
    return "vllm:cache_config_info{%s} 1.0\n" % body


def _encoder_plan(name="bge-m3"):
    return P.plan(
        dict(
            model_dir=os.path.join(ROOT, "tests", "fixtures", "models", name),
            gpu_total_bytes=ADA_48,
            compute_capability="8.9",
            concurrency=16,
        )
    )


@pytest.mark.parametrize("name", ["bge-m3", "bge-reranker-v2-m3"])
def test_an_encoder_only_model_has_no_pool_to_confirm(name):
    r = _encoder_plan(name)
    # vLLM 0.27.1 reports one block for a model without KV layers: the block pool's null block (the CPU engine's
    # /metrics for a BERT embedder and reranker: tests/system/test_rag_engine.py).
    c = C.confirm(r, _encoder_metrics(1))
    # Never "confirmed": nothing the engine reports measures its memory; never a re-plan: there is no pool.
    assert c["verdict"] == "not_measured" and not c["restart"] and c["replan"] is None
    assert "encoder-only" in c["verdict_text"] and "1 KV blocks" in " ".join(c["verdict_evidence"]["measured"])
    assert "null block" in " ".join(c["verdict_evidence"]["measured"])
    assert C.confirm(r, _encoder_metrics(0))["verdict"] == "not_measured"
    assert any("encoder's memory" in x for x in c["verdict_evidence"]["not_measured"])
    assert c["planned"]["max_concurrency"] == 16 and "16 requests" in c["summary"]
    assert c["report_markdown"].startswith("# vLLM deployment report") and c["report_svg"].startswith("<svg")
    json.dumps(c["report"])


def test_an_encoder_only_model_given_kv_blocks_or_refused_is_said_so():
    r = _encoder_plan()
    c = C.confirm(r, _encoder_metrics(1200))
    assert c["verdict"] == "not_as_planned" and "1,200 KV blocks" in c["verdict_text"]
    refused = C.confirm(r, journal_text=BANNER + "\n" + REFUSAL)
    assert refused["verdict"] == "refused" and not refused["restart"]


@pytest.mark.parametrize("name", ["bge-m3", "qwen3-embedding-0.6b"])
def test_a_pooling_models_report_has_no_tradeoff_table(name):
    # vllm_launch_plan's result for a pooling model carries no trade-off table, only why (the module's
    # {"single_len": None, "skipped": "pooling model"}); the report renders without one (the simulated host's
    # molecule rag found the KeyError this guards against).
    r = P.plan(
        dict(
            model_dir=os.path.join(ROOT, "tests", "fixtures", "models", name),
            gpu_total_bytes=ADA_48,
            compute_capability="8.9",
            concurrency=16,
            context=8192,
        )
    )
    r["tradeoff"] = {"single_len": None, "skipped": "pooling model"}
    r["inputs"] = {"model_dir": "unused"}
    metrics = _encoder_metrics(1) if name == "bge-m3" else None
    c = C.confirm(r, metrics, journal_text=None if metrics else BANNER)
    assert c["report"]["tradeoff"] is None and "Trade-off" not in c["report_markdown"]
    json.dumps(c["report"])
