"""airgap.vllm.vllm_journal_facts as vllm_service's start.yml calls it: vLLM 0.27.1's own start-up lines."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

STARTED = (
    "Nov 30 10:00:01 gpu1 vllm[811]: (EngineCore_DP0 pid=97) INFO 11-30 10:00:01 [gpu_model_runner.py:5406] "
    "Model loading took 28.71 GiB memory and 40.1 seconds\n"
    "Nov 30 10:00:09 gpu1 vllm[811]: (EngineCore_DP0 pid=97) INFO 11-30 10:00:09 [gpu_worker.py:564] "
    "Available KV cache memory: 11.41 GiB\n"
    "Nov 30 10:00:09 gpu1 vllm[811]: (EngineCore_DP0 pid=97) INFO 11-30 10:00:09 [kv_cache_utils.py:2235] "
    "GPU KV cache size: 315,076 tokens\n"
    "Nov 30 10:00:09 gpu1 vllm[811]: (EngineCore_DP0 pid=97) INFO 11-30 10:00:09 [kv_cache_utils.py:2237] "
    "Maximum concurrency for 204,800 tokens per request: 1.54x\n"
)
REFUSAL = (
    "Nov 30 10:00:09 gpu1 vllm[811]: ValueError: To serve at least one request with the model's max seq len "
    "(204800), (13.9 GiB KV cache is needed, which is larger than the available KV cache memory (11.1 GiB). "
    "Based on the available memory, the estimated maximum model length is 160800. Try increasing "
    "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.\n"
)
NO_MEMORY = (
    "Nov 30 10:00:09 gpu1 vllm[811]: ValueError: No available memory for the cache blocks. Try "
    "increasing `gpu_memory_utilization` when initializing the engine.\n"
)
EXPR = "{{ journal | airgap.vllm.vllm_journal_facts }}"


def test_a_started_engine_gives_its_numbers(render):
    facts = render(EXPR, journal=STARTED)
    assert facts["model_loading_gib"] == 28.71 and facts["available_kv_gib"] == 11.41
    assert facts["kv_cache_tokens"] == 315076
    assert (facts["max_concurrency"], facts["max_concurrency_len"]) == (1.54, 204800)
    assert facts["refusal"] is None and facts["no_memory"] is False


def test_a_refusal_gives_the_estimated_length_the_role_re_plans_from(render):
    facts = render(EXPR, journal=STARTED + REFUSAL)
    assert facts["refusal"] == {
        "max_model_len": 204800,
        "needed_gib": 13.9,
        "available_gib": 11.1,
        "estimated_max_model_len": 160800,
    }
    # start.yml's own test of it
    assert render("{{ (journal | airgap.vllm.vllm_journal_facts).refusal is not none }}", journal=REFUSAL) is True


def test_no_room_for_the_kv_cache_is_told_apart_from_a_refusal(render):
    facts = render(EXPR, journal=NO_MEMORY)
    assert facts["no_memory"] is True and facts["refusal"] is None


@pytest.mark.parametrize("journal", ["", "-- No entries --\n", "Nov 30 gpu1 systemd[1]: Started vllm.\n"])
def test_a_log_without_vllms_lines_gives_nothing_not_an_error(render, journal):
    facts = render("{{ journal | default('') | airgap.vllm.vllm_journal_facts }}", journal=journal)
    assert facts["refusal"] is None and facts["no_memory"] is False
    assert all(
        facts[k] is None for k in ("available_kv_gib", "model_loading_gib", "kv_cache_tokens", "max_concurrency")
    )


def test_only_the_current_start_counts(render):
    """Issue 24: a refusal of an earlier start (before the unit's last Started line) re-planned an unrelated
    failure; with TP the budget is the smallest rank's, not the last line's."""
    started = "Nov 30 11:00:00 gpu1 systemd[1]: Started vllm.service - vLLM OpenAI-compatible server (airgap.vllm).\n"
    facts = render(EXPR, journal=REFUSAL + started + "Nov 30 11:00:05 gpu1 vllm[901]: broken release\n")
    assert facts["refusal"] is None
    tp = (
        "(Worker_TP0 pid=5) INFO Available KV cache memory: 9.10 GiB\n"
        "(Worker_TP1 pid=6) INFO Available KV cache memory: 11.40 GiB\n"
    )
    assert render(EXPR, journal=started + tp)["available_kv_gib"] == 9.10
