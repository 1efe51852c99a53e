"""Several services on one GPU: the split of the card (utilizations, start order) and the plans made at it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import os
import random

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_common as CM
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_share as S
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_ledger import render_ledger
from ansible_collections.airgap.vllm.plugins.module_utils.planner._planner import plan

GIB = CM.GIB
MODELS = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "models"))
ADA_48 = 49140 * CM.MIB
CARD = 48 * GIB


def _svc(name, need_gib, **kw):
    return dict(dict(name=name, need_bytes=int(need_gib * GIB)), **kw)


def _total(split):
    return sum(r["footprint_bytes"] for r in split["services"])


def test_two_services_fit_and_the_sum_keeps_the_margin():
    split = S.split_card(
        CARD, [_svc("chat", 30, takes_rest=True, kv_bytes=10 * GIB), _svc("embed", 2, fills_budget=False)]
    )
    chat, embed = (dict((r["name"], r) for r in split["services"])[n] for n in ("chat", "embed"))
    assert split["order"] == ["embed", "chat"]  # the service without a KV pool starts first, the rest-taker last
    # The encoder holds its need, not its budget; its budget is the least thousandth that covers the need.
    assert embed["footprint_bytes"] == S.CUDA_CONTEXT_BYTES + 2 * GIB
    assert embed["budget_bytes"] >= 2 * GIB > S.vllm_budget(CARD, embed["gpu_memory_utilization"] - 0.001)
    # The chat model takes everything else but the margin, and never more.
    assert _total(split) <= CARD - S.SHARE_MARGIN_BYTES
    assert CARD - S.SHARE_MARGIN_BYTES - _total(split) < CARD / 1000.0 + 1
    assert chat["budget_bytes"] == S.vllm_budget(CARD, chat["gpu_memory_utilization"])
    assert split["free_bytes"] == CARD - _total(split)
    # Each start-up check finds its budget free: at its turn, and when it restarts alone with the others running.
    for r in split["services"]:
        assert r["start_free_bytes"] >= r["budget_bytes"] and r["restart_free_bytes"] >= r["budget_bytes"]
    assert chat["start_free_bytes"] == CARD - embed["footprint_bytes"] - S.CUDA_CONTEXT_BYTES


def test_three_services_start_in_order_of_what_their_checks_ask():
    services = [
        _svc("chat", 25, takes_rest=True, outside_bytes=GIB // 2, kv_bytes=5 * GIB),
        _svc("qwen-embed", 4, kv_bytes=2 * GIB),  # a decoder embedder: its KV pool fills its budget
        _svc("bge-reranker", 2, fills_budget=False),
    ]
    split = S.split_card(CARD, services, others_bytes=GIB)
    assert split["order"] == ["bge-reranker", "qwen-embed", "chat"]
    rows = dict((r["name"], r) for r in split["services"])
    assert rows["qwen-embed"]["footprint_bytes"] == S.CUDA_CONTEXT_BYTES + rows["qwen-embed"]["budget_bytes"]
    assert rows["chat"]["footprint_bytes"] == S.CUDA_CONTEXT_BYTES + rows["chat"]["budget_bytes"] + GIB // 2
    assert _total(split) <= CARD - GIB - S.SHARE_MARGIN_BYTES
    before = 0
    for r in split["services"]:
        assert r["start_free_bytes"] == CARD - GIB - before - S.CUDA_CONTEXT_BYTES >= r["budget_bytes"]
        before += r["footprint_bytes"]
    assert abs(sum(r["share"] for r in split["services"]) - _total(split) / float(CARD)) < 1e-3


def test_a_split_that_cannot_fit_names_the_service_to_shrink_and_by_how_much():
    services = [_svc("chat", 40, takes_rest=True, kv_bytes=12 * GIB), _svc("bge-m3", 2.5, fills_budget=False)]
    # 48 - 1.95 margin - 2 x 0.52 contexts - 2.5 leaves 42.5 GiB for the chat model's budget: 40 fits.
    assert S.split_card(CARD, services)["order"] == ["bge-m3", "chat"]
    services[0]["need_bytes"] = 44 * GIB
    with pytest.raises(CM.InfeasibleError) as exc:
        S.split_card(CARD, services)
    msg = str(exc.value)
    assert "shrink chat by 1.5" in msg and "its promised KV is 12.00 GiB" in msg
    assert "bge-m3 2.50 GiB" in msg and "chat 44.00 GiB (takes the rest)" in msg


def test_a_shortfall_no_kv_can_cover_asks_to_move_the_biggest():
    services = [_svc("a", 30, fills_budget=False), _svc("b", 20, fills_budget=False)]
    with pytest.raises(CM.InfeasibleError, match=r"shrink a by .* or give it a GPU of its own"):
        S.split_card(CARD, services)


def test_only_one_service_takes_the_rest():
    with pytest.raises(CM.TargetsError, match="one service"):
        S.split_card(CARD, [_svc("a", 10, takes_rest=True), _svc("b", 10, takes_rest=True)])
    with pytest.raises(CM.TargetsError, match="listed twice"):
        S.split_card(CARD, [_svc("a", 1), _svc("a", 1)])


def test_without_a_rest_taker_the_rest_stays_free():
    split = S.split_card(CARD, [_svc("e1", 3, fills_budget=False), _svc("e2", 5)])
    assert split["free_bytes"] > 38 * GIB


@pytest.mark.parametrize("seed", range(5))
def test_utilization_rounding_never_overshoots(seed):
    """vLLM's budget is ceil(total x float(argv value)): the rest-taker's utilization must never give a budget
    above its room, the others' must always cover their need, for any card and need."""
    rnd = random.Random(seed)
    for dummy in range(400):
        total = rnd.randrange(8 * GIB, 200 * GIB)
        room = rnd.randrange(1, total)
        u = S.utilization_at_most(total, room)
        if u:
            assert S.vllm_budget(total, u) <= room
            assert u == float("%.3f" % u)
            nxt = float("%.3f" % (u + 0.001))
            assert nxt > 1.0 or S.vllm_budget(total, nxt) > room
        need = rnd.randrange(1, total)
        v = S.utilization_at_least(total, need)
        assert S.vllm_budget(total, v) >= need
        assert v == float("%.3f" % v)
        prev = float("%.3f" % (v - 0.001))
        assert prev <= 0 or S.vllm_budget(total, prev) < need


def test_rounding_at_the_float_edge():
    # 25 x 0.28 is 7.000000000000001 in floating point: vLLM's ceil makes it 8 bytes, so 0.28 overshoots a room of 7.
    assert S.vllm_budget(25, 0.28) == 8
    u = S.utilization_at_most(25, 7)
    assert u < 0.28 and S.vllm_budget(25, u) <= 7
    assert S.vllm_budget(25, S.utilization_at_least(25, 8)) >= 8
    assert S.utilization_at_most(1000, 0) == 0.0
    assert S.utilization_at_least(1000, 1000) == 1.0


def _chat(**over):
    params = dict(
        model_dir=os.path.join(MODELS, "qwen3.x-27b-fp8"),
        gpu_total_bytes=ADA_48,
        compute_capability="8.9",
        gpus=["0"],
        concurrency=4,
        context="max",
        kv_cache_dtype="fp8_e4m3",
        num_speculative_tokens=3,
        prefix_caching=True,
        language_model_only=True,
    )
    params.update(over)
    return {"name": "chat", "params": params}


def _pool(name, **over):
    params = dict(model_dir=os.path.join(MODELS, name), gpu_total_bytes=ADA_48, compute_capability="8.9", gpus=["0"])
    params["concurrency"] = 16
    params.update(over)
    return {"name": name, "params": params}


def test_plan_card_the_rag_set_on_a_48_gb_card():
    out = S.plan_card(plan, [_chat(), _pool("bge-m3"), _pool("bge-reranker-v2-m3")])
    assert out["order"] == ["bge-m3", "bge-reranker-v2-m3", "chat"]
    plans, split = out["plans"], out["split"]
    for name in out["order"]:
        argv = plans[name]["argv"]
        u = float(argv[argv.index("--gpu-memory-utilization") + 1])
        share = plans[name]["ledger"]["share"]
        assert u == share["gpu_memory_utilization"] == plans[name]["ledger"]["gpu_memory_utilization"]
        assert "card share" in render_ledger(plans[name])
    chat = plans["chat"]["ledger"]
    # The chat model's pool is what its share leaves, and its promise holds there.
    assert chat["budget_bytes"] == chat["share"]["budget_bytes"]
    assert chat["max_concurrency_at_len"] >= 4 and chat["max_model_len"] >= 32768
    # Its FlashInfer workspace (taken at the first request, outside the budget) is in its footprint.
    assert chat["late_workspace_bytes"] > 0 and chat["share"]["outside_bytes"] >= chat["late_workspace_bytes"]
    assert _total(split) <= split["cuda_total_bytes"] - S.SHARE_MARGIN_BYTES


def test_plan_card_refuses_a_chat_promise_the_card_cannot_hold():
    with pytest.raises(CM.InfeasibleError, match=r"shrink chat by"):
        S.plan_card(plan, [_chat(context=131072), _pool("bge-m3"), _pool("bge-reranker-v2-m3")])


def test_plan_card_sizes_a_decoder_embedder_by_its_promise():
    out = S.plan_card(plan, [_chat(), _pool("qwen3-embedding-0.6b", context=8192, concurrency=4)])
    emb = out["plans"]["qwen3-embedding-0.6b"]["ledger"]
    assert emb["max_concurrency_at_len"] >= 4  # its 4 x 8192 tokens fit its share's pool
    assert out["order"] == ["qwen3-embedding-0.6b", "chat"]
    with pytest.raises(CM.TargetsError, match="give its context"):
        S.plan_card(plan, [_chat(), _pool("qwen3-embedding-0.6b")])


def test_plan_card_wants_the_same_gpus():
    with pytest.raises(CM.TargetsError, match="same GPUs"):
        S.plan_card(plan, [_chat(gpus=["0", "1"]), _pool("bge-m3")])


def test_render_split_lists_every_service():
    split = S.split_card(CARD, [_svc("chat", 30, takes_rest=True), _svc("embed", 2, fills_budget=False)])
    text = S.render_split(split)
    assert text.splitlines()[2].split()[:2] == ["1", "embed"] and "left free" in text
    assert math.isclose(
        split["services"][1]["share"], split["services"][1]["footprint_bytes"] / float(CARD), rel_tol=1e-3
    )


def _dense(name, **over):
    params = dict(
        model_dir=os.path.join(MODELS, "qwen3-8b"),
        gpu_total_bytes=ADA_48,
        compute_capability="8.9",
        gpus=["0"],
        concurrency=4,
        context=8192,
        served_model_name=name,
    )
    params.update(over)
    return {"name": name, "params": params}


def test_two_chat_models_share_a_card_by_their_promises():
    out = S.plan_card(plan, [_dense("a"), _dense("b", context="max")])
    assert out["order"] == ["a", "b"]  # b takes the rest, so it starts last
    a, b = out["plans"]["a"]["ledger"], out["plans"]["b"]["ledger"]
    assert a["max_concurrency_at_len"] >= 4 and a["max_model_len"] == 8192
    assert b["max_model_len"] > 8192 and b["share"]["budget_bytes"] > a["share"]["budget_bytes"]
    # At context "max" both would take the rest: one of them must say its context.
    with pytest.raises(CM.TargetsError, match="one service"):
        S.plan_card(plan, [_dense("a", context="max"), _dense("b", context="max")])
    # Two fixed promises leave the rest of the card free.
    fixed = S.plan_card(plan, [_dense("a"), _dense("b")])
    assert fixed["split"]["free_bytes"] > out["split"]["free_bytes"] + GIB
    assert fixed["split"]["free_bytes"] == fixed["split"]["cuda_total_bytes"] - _total(fixed["split"])


# --- wired to the vllm_plan role: the card's services from the role's loop, planned at their shares -------------

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def _inst(name, gpus, **variables):
    v = dict(vllm_plan_gpus=gpus, vllm_plan_concurrency=16, vllm_plan_context="max", vllm_plan_served_model_name="")
    v.update(variables)
    return {"name": name, "vars": v}


def test_card_services_are_the_services_listing_the_same_gpus_in_the_operators_order():
    chat = _inst("chat", ["0"], vllm_plan_model_dir="/m/chat", vllm_plan_reasoning_parser="qwen3")
    embed = _inst("embed", ["0"], vllm_plan_model_dir="/m/bge-m3", vllm_plan_tensor_parallel_size=0)
    other = _inst("other", ["1"], vllm_plan_model_dir="/m/other")
    card = S.card_services([chat, other, embed], "embed")
    assert [c["name"] for c in card] == ["chat", "embed"]
    assert card[0]["options"]["reasoning_parser"] == "qwen3" and card[0]["options"]["model_dir"] == "/m/chat"
    # Empty values the role leaves out (its `or omit`) are left out here too; the card's own variables are not a
    # mate's options (the planned service's call gives them).
    assert "tensor_parallel_size" not in card[1]["options"] and "served_model_name" not in card[1]["options"]
    assert not set(card[1]["options"]) & set(S.CARD_VARIABLES)
    assert S.card_services([chat, other, embed], "other") == []
    assert S.card_services([_inst("a", []), _inst("b", [])], "a") == []  # no GPUs listed: not a shared card
    with pytest.raises(CM.TargetsError, match="not one of the host's services"):
        S.card_services([chat], "nope")


def _role_option_variables():
    """{module option: vllm_plan variable} as roles/vllm_plan/tasks/configure.yml passes them."""
    import yaml

    with open(os.path.join(ROOT, "roles", "vllm_plan", "tasks", "configure.yml")) as f:
        tasks = yaml.safe_load(f)
    args = [t for t in tasks if "airgap.vllm.vllm_launch_plan" in t][0]["airgap.vllm.vllm_launch_plan"]
    out = {}
    for option, value in args.items():
        found = __import__("re").search(r"__vllm_plan_settings\.(vllm_plan_[a-z_]+)", str(value))
        if found:
            out[option] = found.group(1)
    return out


def test_a_mate_is_planned_from_the_same_variables_the_role_plans_its_own_service_from():
    assert _role_option_variables() == dict(S.MATE_OPTIONS, **S.CARD_VARIABLES)


def test_plan_shared_plans_the_service_at_its_share_with_the_cards_facts():
    params = dict(_chat()["params"], measured_kv_cache_bytes_by_gpu={"x": 1}, pin_measured_kv_cache=True)
    card = [
        {"name": "chat", "options": {}},
        {"name": "embed", "options": {"model_dir": os.path.join(MODELS, "bge-m3"), "concurrency": 16}},
        {"name": "rerank", "options": {"model_dir": os.path.join(MODELS, "bge-reranker-v2-m3"), "concurrency": 16}},
    ]
    out = S.plan_shared(plan, "chat", params, card)
    assert out["order"] == ["embed", "rerank", "chat"]
    # The same split as plan_card's from the same services: every service's call computes the one split.
    again = S.plan_card(plan, [_chat(), _pool("bge-m3"), _pool("bge-reranker-v2-m3")])
    assert [r["gpu_memory_utilization"] for r in out["split"]["services"]] == [
        r["gpu_memory_utilization"] for r in again["split"]["services"]
    ]
    emb = out["plans"]["embed"]["ledger"]
    assert emb["gpu_total_bytes"] == ADA_48 and emb["compute_capability"] == "8.9"  # the card's facts
    assert out["plans"]["chat"]["ledger"]["share"]["order"] == 3
    with pytest.raises(CM.TargetsError, match="not a service's own planning option"):
        S.plan_shared(plan, "chat", params, [card[0], dict(card[1], options=dict(card[1]["options"], gpus=["1"]))])
    with pytest.raises(CM.TargetsError, match="not among the services"):
        S.plan_shared(plan, "nope", params, card)
    # Planned as the embedder, the chat model is a mate given by its own options: its promise too big is refused.
    chat = dict((k, v) for k, v in params.items() if k in S.MATE_OPTIONS)
    embed = dict(_pool("bge-m3")["params"])
    with pytest.raises(CM.InfeasibleError, match="shrink chat"):
        S.plan_shared(plan, "embed", embed, [dict(card[0], options=dict(chat, context=131072))] + card[1:])
    mine = S.plan_shared(plan, "embed", embed, [dict(card[0], options=chat)] + card[1:])
    assert mine["split"] == out["split"]
