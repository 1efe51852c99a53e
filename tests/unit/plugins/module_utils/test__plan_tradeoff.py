"""The operator's trade-off table (plugins/module_utils/planner/_plan_tradeoff.py): every row a planner run, and with a
measured budget each variant moved by its own change of the non-KV estimate."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_common as CM
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_tradeoff as T
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _planner as P

from .test__planner import ADA_48, FIXTURE

FIELD = dict(
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


def test_the_rows_are_the_planners_answers():
    t = T.tradeoff(P.plan, FIELD, title="48 GB")
    assert t["title"] == "48 GB" and t["concurrency"] == 4 and not t["measured"]
    assert t["all_fit_len"] == P.plan(dict(FIELD, context="max"))["ledger"]["max_model_len"]
    single = P.plan(dict(FIELD, context="max", concurrency=1))["ledger"]
    assert t["single_len"] == single["longest_single_request"] >= t["all_fit_len"]
    fits = [row["fit"] for row in t["typical"]]
    assert [row["length"] for row in t["typical"]] == list(T.TYPICAL_LENGTHS) and fits == sorted(fits, reverse=True)
    rows = t["batched_tokens"]
    assert [r["max_num_batched_tokens"] for r in rows] == sorted(T.BATCHED_TOKENS)
    assert [r["note"] for r in rows if r["note"]] == [" (current)"]  # 2048: the default below 70 GiB
    pools = [r["kv_pool_bytes"] for r in rows]
    assert pools == sorted(pools, reverse=True) and pools[0] > pools[-1]  # a bigger chunk, a bigger peak
    assert [r["num_speculative_tokens"] for r in t["speculative"]] == [0, 1, 3]


def test_a_measured_budget_moves_by_each_variants_own_non_kv_change():
    measured = 11 * CM.GIB
    t = T.tradeoff(P.plan, dict(FIELD, measured_kv_cache_bytes=measured))
    assert t["measured"]
    by_tokens = {r["max_num_batched_tokens"]: r["kv_pool_bytes"] for r in t["batched_tokens"]}
    assert by_tokens[2048] == measured  # the current setting: no change, the measurement as it is

    def non_kv(**over):
        return P.plan(dict(FIELD, context="max", **over))["ledger"]["non_kv_bytes"]

    moved = non_kv(max_num_batched_tokens=16384) - non_kv()
    assert moved > 0 and by_tokens[16384] == measured - moved  # up to 8192 the vision encoder's peak rules


def test_nothing_plans_nothing_is_answered():
    t = T.tradeoff(P.plan, dict(FIELD, gpu_total_bytes=8 * CM.GIB))  # the weights alone exceed the card
    assert (t["all_fit_len"], t["single_len"], t["typical"], t["batched_tokens"], t["speculative"]) == (
        None,
        None,
        [],
        [],
        [],
    )
    no_mtp = T.tradeoff(P.plan, dict(FIELD, num_speculative_tokens=0))
    assert no_mtp["speculative"] == [] and no_mtp["all_fit_len"] > 0


def test_a_sweep_rows_the_values_that_plan_with_the_current_one_marked():
    def variant(**over):
        value = next(iter(over.values()))
        return None if value == 8 else {"max_model_len": value * 10, "kv_pool_bytes": value + 1}

    fields = (("all_fit_len", "max_model_len"), ("pool", "kv_pool_bytes"))
    rows = T.sweep(variant, {"chunk": 6}, "chunk", (8, 2, 4), fields)
    assert rows == [
        {"chunk": 2, "all_fit_len": 20, "pool": 3, "note": ""},
        {"chunk": 4, "all_fit_len": 40, "pool": 5, "note": ""},
        {"chunk": 6, "all_fit_len": 60, "pool": 7, "note": " (current)"},
    ]  # ascending, the reference's own value added, 8 left out (it does not plan)
    assert list(rows[0]) == ["chunk", "all_fit_len", "pool", "note"]
