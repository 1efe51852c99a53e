"""Engine logs replayed through the journal parser and the confirm (issue 43 item 6).

The logs are tests/fixtures/logs/*.log (their README says where each number comes from): vLLM 0.26.0 on an
H100, the newer (V2) model runner's weights line "Model loading took 15.27 GiB and 1.03 seconds" (no word
"memory"), the V1 runner's "... GiB memory and ...", and the one-line memory summary in the forms 0.26.0 and
0.27.1 print it (v1/worker/gpu_worker.py: 0.26.0 :836, 0.27.1 :774).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_confirm_parse as C

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
LOGS = os.path.join(ROOT, "tests", "fixtures", "logs")
DENSE = os.path.join(LOGS, "vllm-0.26.0-h100-qwen3-8b-16x-max.log")
HYBRID = os.path.join(LOGS, "vllm-0.26.0-h100-qwen3.5-27b-fp8-mtp3-50x32k.log")


def read(path):
    with open(path) as fh:
        return fh.read()


def sidecar(name):
    with open(os.path.join(LOGS, name + ".json")) as fh:
        return json.load(fh)


# Logs the GPU harness recorded (tests/gpu, fixture.py): each <name>.log with <name>.json beside it (the plan, the
# /metrics line the confirm read, what the parser and the confirm said on the card, the load). UNPLANNED: starts
# with an argv of their own (issue 43 item 7: the field notes' hand configuration, vLLM's defaults), no plan.
ALL_RECORDED = sorted(f[: -len(".json")] for f in os.listdir(LOGS) if f.endswith(".json"))
UNPLANNED = [n for n in ALL_RECORDED if sidecar(n).get("unplanned")]
RECORDED = [n for n in ALL_RECORDED if n not in UNPLANNED]


def test_every_log_fixture_is_replayed_here():
    assert sorted(f for f in os.listdir(LOGS) if f.endswith(".log")) == sorted(
        [os.path.basename(p) for p in (DENSE, HYBRID)] + [n + ".log" for n in ALL_RECORDED]
    )


def recorded(name):
    with open(os.path.join(LOGS, name + ".json")) as fh:
        side = json.load(fh)
    plan = side["plan"]
    plan["inputs"] = dict(plan["inputs"], model_dir=os.path.join(ROOT, plan["inputs"]["model_dir"]))
    return side, read(os.path.join(LOGS, name + ".log"))


@pytest.mark.parametrize("name", RECORDED)
def test_a_recorded_log_reads_as_on_the_card(name):
    """The parser reads from the trimmed log what the confirm read from the whole log on the card."""
    side, log = recorded(name)
    j = C.parse_journal(log)
    m = side["on_the_card"]["measured"]
    assert j["refusal"] is None and j["not_free"] is None
    assert j["kv_cache_tokens"] is not None and j["max_concurrency"] is not None
    assert j["model_loading_gib"] is not None  # both runners' weights lines (issue 43 item 6)
    assert j["kv_cache_tokens"] == m["kv_cache_size_tokens"]
    assert j["memory_summary"] == m.get("memory_summary")


@pytest.mark.parametrize("name", RECORDED)
def test_a_recorded_log_confirms_as_on_the_card(name):
    """The collection's confirm on the recorded plan, /metrics line and log gives the card's verdict, concurrency
    and parts (planned vs engine)."""
    from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_confirm as PC

    side, log = recorded(name)
    card = side["on_the_card"]
    c = PC.confirm(side["plan"], side["metrics_text"] or None, log)
    assert c["verdict"] == card["verdict"]
    assert c["measured_concurrency_at_len"] == card["measured_concurrency_at_len"]
    assert c["parts"] == card["parts"]


@pytest.mark.parametrize("name", RECORDED)
def test_a_broken_promise_is_never_confirmed(name):
    """The card's verdict and the replay's: "confirmed" only where the engine's pool holds what the plan promised,
    and a load at full length with every request in the engine at once that preempted is no confirmation either."""
    from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_confirm as PC
    from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_verdict as V

    side, log = recorded(name)
    c = PC.confirm(side["plan"], side["metrics_text"] or None, log)
    held = V.holds(c["measured_concurrency_at_len"], c["promised_concurrency_at_len"])
    assert held is (c["verdict"] != "replan_needed")
    if not held:
        assert c["verdict"] != "confirmed" and c["restart"]
    load = side.get("load") or {}
    if c["verdict"] == "confirmed" and load.get("all_at_once"):
        assert load["preemptions"] == 0


BENCHED = [n for n in RECORDED if "bench" in recorded(n)[0]]


@pytest.mark.parametrize("name", BENCHED)
def test_a_recorded_bench_served_every_request_of_the_plan(name):
    """Issue 43 item 7: the planner's row of the comparison ran `vllm bench serve` at the planned concurrency on the
    planned engine, and every request came back (the figures docs/fidelity.md quotes are from these)."""
    side, _log = recorded(name)
    b, L = side["bench"], side["plan"]["ledger"]
    assert b["rc"] == 0 and b["failed"] == 0 and b["completed"] == b["num_prompts"] > 0
    assert b["max_concurrency"] == L["concurrency"] <= L["max_concurrency_at_len"]
    assert b["total_output_tokens"] == b["num_prompts"] * 256  # --ignore-eos: every request its full output
    assert 0 < b["median_ttft_ms"] <= b["p99_ttft_ms"] and 0 < b["median_tpot_ms"] <= b["p99_tpot_ms"]


READ_KEYS = ("kv_cache_tokens", "max_concurrency", "max_concurrency_len", "model_loading_gib", "available_kv_gib")


@pytest.mark.parametrize("name", UNPLANNED)
def test_an_unplanned_log_reads_as_on_the_card(name):
    """Issue 43 item 7's other rows: the parser reads from the trimmed log what it read from the whole log on the
    card (the pool, the tokens, the concurrency, the weights, the memory summary where the engine got that far)."""
    side = sidecar(name)
    j = C.parse_journal(read(os.path.join(LOGS, name + ".log")))
    card = side["on_the_card"]
    for k in READ_KEYS + ("memory_summary", "refusal", "not_free"):
        assert j[k] == card[k], k
    assert j["kv_cache_tokens"] is not None and j["model_loading_gib"] is not None


def _unplanned_plan(side):
    from ansible_collections.airgap.vllm.plugins.module_utils.planner import _planner as P

    inputs = dict(side["planner_inputs"])
    inputs["model_dir"] = os.path.join(ROOT, inputs["model_dir"])
    return P.plan(inputs)


@pytest.mark.parametrize("name", [n for n in UNPLANNED if (sidecar(n)["on_the_card"] or {}).get("memory_summary")])
def test_the_planner_given_an_unplanned_starts_flags_tracks_its_engine(name):
    """The field notes' hand configuration (0.96, 32,000, 64 sequences, fp8 KV, 8,192 batched tokens) on the H100,
    2026-12-07 19:31 UTC: the calibrated planner given the same pool-sizing flags, part by part against what that
    engine reported. The activation is the known over-count without MTP (KNOWN_OVER's bench row: 2.89 planned, 2.57
    taken, the same engine figure as the planner's own 0.92 start); every other part is inside issue 43's bounds."""
    from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_confirm as PC

    side = sidecar(name)
    r = _unplanned_plan(side)
    engine = [f for f in _flags(side["engine_argv"]) if f != ("--max-num-batched-tokens", "8192")]
    assert r["ledger"]["max_num_batched_tokens"] == 8192  # vLLM's default: the plan leaves the flag out
    assert sorted(_flags(r["argv"])) == sorted(engine)
    for p in PC.part_deltas(r["ledger"], side["on_the_card"]["memory_summary"]):
        off = abs(p["planned_bytes"] - p["measured_bytes"])
        if p["part"] == "activation_peak":
            assert p["planned_bytes"] > p["measured_bytes"] and off > PART_FLOOR, p  # still over: else drop this
            continue
        assert off <= max(PART_BOUND * p["measured_bytes"], PART_FLOOR), p


@pytest.mark.parametrize("name", [n for n in UNPLANNED if (sidecar(n)["on_the_card"] or {}).get("memory_summary")])
def test_an_unplanned_start_that_ran_never_broke_the_promise_the_planner_would_make(name):
    """Where the hand configuration's pool holds fewer full-length requests than it admits (38.74 of 64 at 32,000
    on the H100), the planner with the same flags says so in a warning: it never promises what the pool lacks."""
    side = sidecar(name)
    r = _unplanned_plan(side)
    L = r["ledger"]
    engine = side["on_the_card"]["max_concurrency"]
    if engine < L["concurrency"]:
        assert any("fit at once" in w for w in r.get("warnings_list") or r.get("warnings") or [])
    assert abs(L["max_concurrency_at_len"] - engine) <= 0.05 * engine  # planned 38.96 (1,568 blocks), engine 38.74


@pytest.mark.parametrize(
    "name", [n for n in UNPLANNED if (sidecar(n)["on_the_card"] or {}).get("memory_summary") is None]
)
def test_vllms_defaults_that_did_not_start_the_planner_refuses_too(name):
    """vLLM's defaults on the Qwen3.5-27B FP8 shape (262,144 tokens, 1,024 sequences, bf16 KV) on the H100, 2026-12-07
    19:40 UTC: the engine sized its pool (842 blocks of 784 tokens) and exited before /health ("max_num_seqs (1024)
    exceeds available Mamba cache blocks (842)"). The planner refuses the same targets before any host changes."""
    from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_common as E

    side = sidecar(name)
    assert "exceeds available Mamba cache blocks" in read(os.path.join(LOGS, name + ".log"))
    with pytest.raises(E.InfeasibleError, match="per-request state of 1024 requests"):
        _unplanned_plan(side)


# The bounds of issue 43: a part within 5 % of the engine's figure, or within 0.1 GiB where that is the larger.
PART_BOUND, PART_FLOOR = 0.05, int(0.1 * (1 << 30))
# The flags that size the engine's pool (the activation profile, the CUDA graphs, the budget): a plan that gives the
# same ones is measured by the recorded pool whatever its --max-model-len.
POOL_FLAGS = (
    "--max-num-seqs",
    "--max-num-batched-tokens",
    "--gpu-memory-utilization",
    "--kv-cache-dtype",
    "--speculative-config",
    "--language-model-only",
    "--enforce-eager",
)


def _flags(argv):
    return [
        (a, argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else None)
        for i, a in enumerate(argv)
        if a in POOL_FLAGS
    ]


# Parts known to lie outside the bounds, each on the safe side (planned above the engine's figure) and why
# (docs/fidelity.md, run of 2026-12-07): the Qwen3.5-27B shape started with its vision tower peaked at 1.92 GiB, the
# planner's encoder estimate says 2.43; it is kept because the field's start on an RTX 6000 Ada (another encoder
# attention backend, 2,048 batched tokens) held a pool below the plan already (docs/launch-planning.md). The same
# shape text-only without MTP (issue 43 item 7, 2026-12-07 13:28 UTC) peaked at 2.57 GiB where the text-only starts
# with MTP 3 peaked at 2.92: the Gated DeltaNet term was fitted on those (GDN_TOKEN_BYTES_PER_VALUE), so without
# speculative decoding it counts 0.32 GiB too much (2.89 planned); one point without MTP, not refitted yet.
KNOWN_OVER = {
    "vllm-0.26.0-h100-predict-qwen3.5-27b-fp8-mtp3-mm-50x32k": ("activation_peak",),
    "vllm-0.26.0-h100-bench-qwen3.5-27b-fp8-50xmax": ("activation_peak",),
}


@pytest.mark.parametrize("name", RECORDED)
def test_the_calibrated_planner_tracks_the_engine_part_by_part(name):
    """The planner as it is now, given the recorded case's inputs and card, against what the engine reported: every
    part of its ledger within the bounds, and its promise held by the engine's own pool (issue 43 item 3)."""
    from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_confirm as PC
    from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_kv as K
    from ansible_collections.airgap.vllm.plugins.module_utils.planner import _planner as P

    side, log = recorded(name)
    r = P.plan(side["plan"]["inputs"])
    assert _flags(r["argv"]) == _flags(side["plan"]["argv"])
    L = r["ledger"]
    summary = side["on_the_card"]["measured"]["memory_summary"]
    parts = PC.part_deltas(L, summary)
    assert sorted(p["part"] for p in parts) == sorted(
        ["budget", "weights", "activation_peak", "non_torch", "cuda_graphs", "kv_pool"]
    )
    for p in parts:
        off = abs(p["planned_bytes"] - p["measured_bytes"])
        if p["part"] in KNOWN_OVER.get(name, ()):
            assert p["planned_bytes"] > p["measured_bytes"] and off > PART_FLOOR, p  # still over: else drop it here
            continue
        assert off <= max(PART_BOUND * p["measured_bytes"], PART_FLOOR), p
    m = side["on_the_card"]["measured"]
    assert m["block_size"] in (None, L["block_size"])  # None: no /metrics line (the journal gave the blocks)
    g = dict((k, L[k]) for k in ("full_groups", "linear_groups", "sliding_groups", "group_size"))
    need = K.blocks_per_request(
        L["max_model_len"], L["block_size"], g, L["num_speculative_tokens"], L["prefix_caching"], None
    )
    assert need == L["blocks_per_full_request"]
    promised = min(float(L["concurrency"]), L["max_concurrency_at_len"])
    assert m["num_gpu_blocks"] / float(need) >= promised


def test_the_v2_runner_log_reads_whole():
    j = C.parse_journal(read(DENSE))
    assert j["model_loading_gib"] == 15.27
    assert j["available_kv_gib"] == 56.07
    assert (j["kv_cache_tokens"], j["max_concurrency_len"], j["max_concurrency"]) == (408256, 25600, 15.95)
    assert j["memory_summary"] == {
        "free_gib": 78.66,
        "total_gib": 79.18,
        "utilization": 0.92,
        "requested_gib": 72.84,
        "weights_gib": 15.27,
        "activation_gib": 1.29,
        "non_torch_gib": 0.22,
        "consumed_gib": 15.49,
        "cudagraph_gib": 0.15,
        "kv_cache_gib": 56.07,
    }
    assert j["refusal"] is None and j["cause"] == "vLLM printed no refusal of its own: see its log below."


def test_the_v1_runner_log_reads_whole():
    j = C.parse_journal(read(HYBRID))
    assert (j["model_loading_gib"], j["available_kv_gib"]) == (28.07, 40.95)
    assert (j["kv_cache_tokens"], j["max_concurrency_len"], j["max_concurrency"]) == (783453, 32768, 23.91)
    assert j["memory_summary"] is None


@pytest.mark.parametrize(
    "line, loaded",
    [
        ("Model loading took 15.27 GiB and 1.03 seconds", 15.27),  # V2 runner (0.26.0 model_runner.py:306)
        ("Model loading took 28.07 GiB memory and 40.100000 seconds", 28.07),  # V1 runner
        ("(EngineCore pid=9) INFO [model_runner.py:330] Model loading took 0.5 GiB and 0.2 seconds", 0.5),
    ],
)
def test_both_weights_lines(line, loaded):
    assert C.parse_journal(line)["model_loading_gib"] == loaded


SUMMARY_0_27 = (
    "Free memory on device (78.66/79.18 GiB) on startup. Desired GPU memory utilization is (0.92, 72.84 GiB). "
    "Actual usage is 15.49 GiB for consumed memory (weights + non-torch), 1.44 GiB for peak activation, and 0.15 "
    "GiB for CUDAGraph memory. Replace gpu_memory_utilization config with `--kv-cache-memory=1` (0.0 GiB) to fit "
    "into requested memory, or `--kv-cache-memory=2` (0.0 GiB) to fully utilize gpu memory. Current kv cache "
    "memory in use is 55.91 GiB."
)


def test_the_0_27_summary_names_the_sum_of_weights_and_non_torch():
    s = C.parse_journal(SUMMARY_0_27)["memory_summary"]
    assert (s["consumed_gib"], s["weights_gib"], s["non_torch_gib"]) == (15.49, None, None)
    assert (s["activation_gib"], s["cudagraph_gib"], s["kv_cache_gib"]) == (1.44, 0.15, 55.91)


def test_the_summary_alone_gives_the_pool_and_ranks_take_the_smallest():
    two = SUMMARY_0_27 + "\n" + SUMMARY_0_27.replace("55.91 GiB.", "55.80 GiB.")
    j = C.parse_journal(two)
    assert j["available_kv_gib"] == 55.80 and j["memory_summary"]["kv_cache_gib"] == 55.80


def test_the_summary_is_not_the_busy_card_refusal():
    busy = (
        "ValueError: Free memory on device cuda:0 (20.0/79.18 GiB) on startup is less than desired GPU memory "
        "utilization (0.92, 72.84 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."
    )
    j = C.parse_journal(busy)
    assert j["memory_summary"] is None and j["not_free"]["free_gib"] == 20.0


def test_the_v1_runner_log_through_the_confirm():
    """The Qwen3.5-27B FP8 shape, 50 users at 32,768 with MTP 3, text only, on the H100. The plan at 2bc9f95 promised
    24.36 full-length requests (804 blocks) and the engine's 40.95 GiB held 789 blocks = 23.91 (its own "Maximum
    concurrency"): replan_needed (the recorded harness run of the same case says so too: test_a_recorded_log_confirms
    _as_on_the_card). The calibrated plan (issue 43) promises 23.79 (785 blocks): the same log confirms it."""
    from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_confirm as PC
    from ansible_collections.airgap.vllm.plugins.module_utils.planner import _planner as P

    h100 = {
        "index": 0,
        "uuid": "GPU-00000000-1111-2222-3333-444444444444",
        "name": "NVIDIA H100 80GB HBM3",
        "memory_total": 81559 << 20,
        "memory_reserved": 480 << 20,
        "compute_capability": "9.0",
    }
    r = P.plan(
        dict(
            model_dir=os.path.join(ROOT, "tests", "fixtures", "models", "qwen3.x-27b-fp8"),
            nvml_gpus=[h100],
            concurrency=50,
            context=32768,
            kv_cache_dtype="fp8_e4m3",
            num_speculative_tokens=3,
            language_model_only=True,
            vllm_version="0.26.0",
        )
    )
    assert (r["ledger"]["num_gpu_blocks"], r["ledger"]["max_concurrency_at_len"]) == (785, 23.79)
    c = PC.confirm(r, journal_text=read(HYBRID))
    assert (c["verdict"], c["measured"]["num_gpu_blocks"], c["measured_concurrency_at_len"]) == (
        "confirmed",
        789,
        23.91,
    )
    assert c["measured"]["weights_bytes"] == int(28.07 * (1 << 30))
    assert c["replan"] is None
    assert c["parts"] == []  # no memory summary in this log
    # The same log against a plan that promises more than it holds (the 2bc9f95 plan's 804 blocks): re-plan needed.
    over = dict(r, ledger=dict(r["ledger"], max_concurrency_at_len=24.36, num_gpu_blocks=804))
    c = PC.confirm(over, journal_text=read(HYBRID))
    assert c["verdict"] == "replan_needed" and c["replan"]["feasible"] and c["replan"]["max_model_len"] == 32768
