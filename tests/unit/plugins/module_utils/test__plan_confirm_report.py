"""The deployment report (plugins/module_utils/planner/_plan_confirm_report.py) never contradicts itself: the KV pool
against the plan, what the picture measured, the promises table and the planner's warnings."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.airgap.vllm.plugins.module_utils.service import _loadcheck_promises as LR
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_common as CM
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_confirm as C
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_confirm_report as R
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_tradeoff as T
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _planner as P

from .test__plan_confirm import ADA_48, FIXTURE, field_plan
from .test__plan_confirm_parse import metrics

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
TINY = dict(
    config={
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "head_dim": 64,
        "vocab_size": 1024,
        "torch_dtype": "bfloat16",
        "max_position_embeddings": 524288,
        "tie_word_embeddings": True,
    },
    weight_bytes=2 * 1024 * 1024,
)


def simulated_plan():
    """The simulated host's plan: a 48 GB card planned, the CPU engine serving the tiny Qwen3."""
    return P.plan(
        dict(
            gpu_total_bytes=49140 * CM.MIB,
            compute_capability="8.9",
            gpu_memory_utilization=0.93,
            concurrency=4,
            context=16384,
            kv_cache_dtype="auto",
            enforce_eager=True,
        ),
        **TINY,
    )


def cpu_metrics(blocks=2048, block=128, pinned=1073741824):
    """vllm:cache_config_info as the CPU engine wrote it (fixtures/loadcheck/metrics-0.27.1-cpu-*.txt)."""
    return (
        'vllm:cache_config_info{block_size="%d",cache_dtype="auto",enable_prefix_caching="True",engine="0",'
        'gpu_memory_utilization="0.92",kv_cache_max_concurrency="16.0",kv_cache_memory_bytes="%d",'
        'kv_cache_size_tokens="262144",num_gpu_blocks="%d",num_cpu_blocks="None"} 1.0\n' % (block, pinned, blocks)
    )


def test_a_pool_44x_smaller_is_not_simply_confirmed():
    r = simulated_plan()
    planned = r["ledger"]["kv_pool_bytes"]
    assert planned > 40 * CM.GIB
    c = C.confirm(r, cpu_metrics())
    # 16384 x 4 still fit in 1 GiB: no re-plan, no restart; but the pool is not the planned one (issue 42: report.json
    # said "confirmed" while report.md said "KV pool not as planned")
    assert c["verdict"] == "not_as_planned" and not c["restart"] and c["replan"] is None
    assert c["report"]["verdict"] == c["verdict"] and c["report"]["verdict_text"] == c["verdict_text"]
    assert c["pool"]["status"] == "smaller" and c["pool"]["ratio"] < 0.03
    md = c["report_markdown"]
    assert "confirmed" not in md.lower().replace("not confirmed", "")
    assert (
        "**Verdict: NOT as planned: KV pool 1.00 GiB, %s planned (smaller); context 16,384 x 4 requests still fit"
        % (CM.fmt_gib(planned))
        in md
    )
    assert "1.00 GiB measured against" in md
    # no re-plan is made (the requests fit): the note does not point at one (it did before issue 42)
    assert "no re-plan was made" in c["pool"]["note"] and "see the re-plan" not in c["pool"]["note"]
    assert "see the re-plan" in C.pool_check(c["planned"], c["measured"])["note"]
    assert c["summary"].splitlines()[0] == "vLLM plan " + c["verdict_text"]


def test_the_cpu_engines_fixed_space_is_named():
    c = C.confirm(simulated_plan(), cpu_metrics(), engine_env={"VLLM_CPU_KVCACHE_SPACE": "1"})
    md, svg = c["report_markdown"], c["report_svg"]
    # one verdict, in report.json and report.md alike, saying what the CPU engine measured and what it did not
    assert c["verdict"] == c["report"]["verdict"] == "not_measured"
    assert "**Verdict: %s**" % c["verdict_text"] in md and c["report"]["verdict_text"] == c["verdict_text"]
    assert c["verdict_text"].startswith(
        "NOT CONFIRMED on this engine: measured: its KV pool of 1.00 GiB (VLLM_CPU_KVCACHE_SPACE=1, a test setting) "
        "holds context 16,384 x 4 requests"
    )
    assert c["verdict_text"].endswith(
        "not measured: the planned %s KV pool" % CM.fmt_gib(c["planned"]["kv_cache_memory_bytes"])
    )
    assert "- Not measured: the planned " in md and "VLLM_CPU_KVCACHE_SPACE=1" in md
    # the trade-off at a test pool says nothing of the planned card: the plan's own table (planned), if any
    assert "measured" not in ((c["report"].get("tradeoff") or {}).get("basis") or "")
    assert "not measured" in svg and "other 4" not in svg  # the remainder is the plan's, not a measured "other"
    # the weights of the measured bar are the plan's: its legend cell says so (test__plan_confirm_picture.py)
    assert "VLLM_CPU_KVCACHE_SPACE" in svg and "measured: weights 0.0 GiB (plan)" in svg and "0.0 (planned)" in svg
    # another value than the pool: not the explanation
    other = C.confirm(simulated_plan(), cpu_metrics(), engine_env={"VLLM_CPU_KVCACHE_SPACE": "4"})
    assert other["pool"]["explained_by"] is None


def test_a_pool_as_planned_keeps_the_plain_verdict():
    r = simulated_plan()
    L_ = r["ledger"]
    c = C.confirm(r, cpu_metrics(blocks=L_["num_gpu_blocks"], block=L_["block_size"], pinned=L_["kv_pool_bytes"]))
    assert c["pool"]["status"] == "as_planned" and c["verdict"] == "confirmed"
    assert "**Verdict: confirmed: the engine's KV pool of " in c["report_markdown"]
    assert C.pool_check({"kv_cache_memory_bytes": 100}, {"budget_bytes": None})["status"] == "not_measured"
    assert C.pool_check({"kv_cache_memory_bytes": 100}, {"budget_bytes": 95})["status"] == "as_planned"
    assert C.pool_check({"kv_cache_memory_bytes": 100}, {"budget_bytes": 130})["status"] == "larger"


def test_promises_and_planner_warnings_in_the_report():
    r = P.plan(
        dict(
            model_dir=os.path.join(ROOT, "tests", "fixtures", "models", "qwen3.x-27b-fp8"),
            gpu_total_bytes=49140 * CM.MIB,
            compute_capability="8.9",
            gpu_memory_utilization=0.93,
            num_speculative_tokens=3,
            concurrency=4,
            context=204800,
            prefix_caching=True,
            kv_cache_dtype="fp8_e4m3",
        )
    )
    L_ = r["ledger"]
    c = C.confirm(
        r,
        cpu_metrics(blocks=L_["num_gpu_blocks"], block=L_["block_size"], pinned=L_["kv_pool_bytes"]).replace(
            'cache_dtype="auto"', 'cache_dtype="fp8_e4m3"'
        ),
    )
    report = c["report"]
    assert "vllm_issue_44879" in [w["id"] for w in report["plan_warnings"]]
    assert report["ledger"]["num_speculative_tokens"] == 3
    rows = LR.promises(
        LR.planned_from_report(report),
        {},
        {"_all": {"delta": {"spec_mean_accepted_length": 1.4, "spec_acceptance_rate": 0.13}}},
        None,
        report["tradeoff"],
    )
    report["promises"] = rows
    md = R.render_markdown(report)
    assert "## Promises" in md and "## Planner warnings" in md and "vLLM issue 44879" in md
    mtp = [line for line in md.splitlines() if line.startswith("| speculative decoding pays")][0]
    assert "**MISSED**" in mtp and "vllm_plan_num_speculative_tokens: 0" in mtp
    assert "| tool calls parse | >= 100 % | - | not measured |" in md


def test_a_converged_rerun_keeps_the_promises_of_the_same_deployment():
    c = C.confirm(simulated_plan(), cpu_metrics(), engine_env={"VLLM_CPU_KVCACHE_SPACE": "1"})
    old = dict(c["report"], promises=[{"key": "context", "status": "MET"}], loadcheck={"tools": {"wall_s": 1}})
    again = C.confirm(simulated_plan(), cpu_metrics(), engine_env={"VLLM_CPU_KVCACHE_SPACE": "1"})
    kept, carried = R.carry_promises(old, again["report"])
    assert carried and kept["promises"] == old["promises"] and "promises" not in again["report"]
    other = C.confirm(
        P.plan(
            dict(
                gpu_total_bytes=49140 * CM.MIB,
                compute_capability="8.9",
                gpu_memory_utilization=0.93,
                concurrency=2,
                context=16384,
                kv_cache_dtype="auto",
                enforce_eager=True,
            ),
            **TINY,
        ),
        cpu_metrics(),
    )
    dropped, carried = R.carry_promises(old, other["report"])
    assert not carried and "promises" not in dropped
    assert R.carry_promises(None, again["report"]) == (again["report"], False)


def test_report_markdown_svg_and_tradeoff():
    r = field_plan()
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
    t = T.tradeoff(P.plan, params, title="RTX 6000 Ada 48 GB")
    journal = "Model loading took 28.71 GiB memory and 40.1 seconds\nAvailable KV cache memory: 11.41 GiB\n"
    c = C.confirm(r, metrics(220), journal, tradeoff_rows=t)
    rep = c["report"]
    assert rep["memory"]["measured"]["weights"] == int(28.71 * CM.GIB)
    assert rep["final"]["max_model_len"] == 204800
    assert json.loads(json.dumps(rep)) == rep  # plain JSON
    md = c["report_markdown"]
    assert "| num_gpu_blocks | 246 | 220 |" in md and "## Trade-off (RTX 6000 Ada 48 GB, planned)" in md
    assert c["report_svg"].startswith("<svg") and "kv_pool" in c["report_svg"]
    assert t["single_len"] >= t["all_fit_len"] > 0
    assert [row["length"] for row in t["typical"]] == [4096, 16384, 32768]


def test_tradeoff_markdown_rows_each_sweep_alike():
    t = {
        "concurrency": 4,
        "all_fit_len": 0,
        "single_len": 8192,
        "typical": [],
        "batched_tokens": [{"max_num_batched_tokens": 2048, "all_fit_len": 0, "kv_pool_bytes": 2 * 1024**3}],
        "speculative": [
            {"num_speculative_tokens": 1, "all_fit_len": 8192, "blocks": 1234, "block_size": 16, "note": " (current)"}
        ],
    }
    rows = R.render_tradeoff_markdown(t)
    assert rows[4:] == [
        "| longest context where 4 requests all fit | none |",
        "| longest single request (`--max-model-len`) | %s |" % R.fmt_tokens(8192),
        "| `--max-num-batched-tokens 2048` | none x 4 requests, KV pool %s |" % R.fmt_gib(2 * 1024**3),
        "| MTP 1 speculative tokens | %s x 4 requests, 1,234 blocks of 16 (current) |" % R.fmt_tokens(8192),
    ]
    assert [key for key, _question, _detail in R.TRADEOFF_SWEEPS] == ["batched_tokens", "speculative"]
