"""Reading what vLLM reports (plugins/module_utils/planner/_plan_confirm_parse.py): /metrics and the journal of a start.

The metrics and journal texts below are built in the exact formats vLLM 0.27.1 emits them:
vllm:cache_config_info labels = str() of every CacheConfig field (config/cache.py:243 metrics_info,
v1/metrics/loggers.py:1076); "Available KV cache memory: %s GiB" (v1/worker/gpu_worker.py:564);
"Model loading took %s GiB memory ..." (v1/worker/gpu_model_runner.py:5406); "GPU KV cache size: %s
tokens" / "Maximum concurrency for %s tokens per request: %.2fx" (v1/core/kv_cache_utils.py:2235);
the refusal text of kv_cache_utils.py:751 _check_enough_kv_cache_memory. REFUSAL is the one vLLM's own
code printed in the venv (tests/vllm_parser/kv_reference.py, case qwen35-bf16: 11.1 GiB, bf16 KV, MTP 3
-> "13.9 GiB KV cache is needed ... (11.1 GiB) ... the estimated maximum model length is 160800");
test__plan_confirm.py re-plans from it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_confirm_parse as C

REFUSAL = (
    "ValueError: To serve at least one request with the model's max seq len (204800), (13.9 GiB KV "
    "cache is needed, which is larger than the available KV cache memory (11.1 GiB). Based on the "
    "available memory, the estimated maximum model length is 160800. Try increasing "
    "`gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or decreasing "
    "`max_model_len` when initializing the engine. See "
    "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
)


def metrics(blocks, block_size=1600, tokens=None, pinned=None, conc=None):
    labels = {
        "block_size": block_size,
        "cache_dtype": "fp8_e4m3",
        "enable_prefix_caching": True,
        "gpu_memory_utilization": 0.93,
        "num_gpu_blocks": blocks,
        "num_cpu_blocks": None,
        "kv_cache_memory_bytes": pinned,
        "kv_cache_size_tokens": tokens,
        "kv_cache_max_concurrency": conc,
        "engine": "0",
        "model_name": "qwen",
    }
    body = ",".join('%s="%s"' % (k, v) for k, v in labels.items())
    return (
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
        "# TYPE vllm:cache_config_info gauge\n"
        "vllm:cache_config_info{%s} 1.0\n"
        'vllm:num_preemptions_total{engine="0",model_name="qwen"} 0.0\n' % body
    )


def test_parse_metrics_types_labels():
    m = C.parse_metrics(metrics(220, tokens=315076))
    info = m["cache_config_info"]
    assert info["num_gpu_blocks"] == 220 and info["block_size"] == 1600
    assert info["kv_cache_memory_bytes"] is None and info["enable_prefix_caching"] is True
    assert info["kv_cache_size_tokens"] == 315076 and m["num_preemptions"] == 0.0


def test_parse_journal_reads_vllms_lines():
    text = (
        "INFO [gpu_model_runner.py:5406] Model loading took 28.71 GiB memory and 40.1 seconds\n"
        "INFO [gpu_worker.py:564] Available KV cache memory: 11.41 GiB\n"
        "INFO [kv_cache_utils.py:2235] GPU KV cache size: 315,076 tokens\n"
        "INFO [kv_cache_utils.py:2237] Maximum concurrency for 204,800 tokens per request: "
        "1.54x\n" + REFUSAL
    )
    j = C.parse_journal(text)
    assert (j["model_loading_gib"], j["available_kv_gib"]) == (28.71, 11.41)
    assert j["kv_cache_tokens"] == 315076 and j["max_concurrency"] == 1.54
    assert j["max_concurrency_len"] == 204800
    assert j["refusal"] == {
        "max_model_len": 204800,
        "needed_gib": 13.9,
        "available_gib": 11.1,
        "estimated_max_model_len": 160800,
    }


def test_the_real_cpu_engine_scrape_reads_as_the_fixture_says():
    with open(
        os.path.join(os.path.dirname(__file__), "fixtures", "loadcheck", "metrics-0.27.1-cpu-shared-prefix.txt")
    ) as fh:
        info = C.parse_metrics(fh.read())["cache_config_info"]
    assert info["kv_cache_memory_bytes"] == 1073741824 and info["num_gpu_blocks"] == 2048


# --- issue 24: what the journal says is read from the current start only -----------------------

STARTED_LINE = "Started vllm.service - vLLM OpenAI-compatible server qwen (airgap.vllm)."
BANNER = "(APIServer pid=1) INFO 12-01 10:00:00 [api_utils.py:325] vLLM server version 0.27.1, serving model /m"


def test_an_old_refusal_is_not_read_into_a_later_start():
    """Before #24 the last refusal anywhere in the 400 journal lines counted: an unrelated later
    failure (a smoke test, a broken image) re-planned from a refusal days old."""
    old = "Starting vLLM x (airgap.vllm)...\n" + STARTED_LINE + "\n" + REFUSAL + "\n"
    later = STARTED_LINE + "\n" + BANNER + "\nAvailable KV cache memory: 11.41 GiB\nbroken release\n"
    facts = C.parse_journal(old + later)
    assert facts["refusal"] is None and facts["available_kv_gib"] == 11.41
    assert C.parse_journal(old)["refusal"]["estimated_max_model_len"] == 160800
    # systemd's short output format marks a start the same way; so does vLLM's banner in `docker logs`.
    short = "Dec 01 10:00:00 gpu1 systemd[1]: Started vllm.service - vLLM (airgap.vllm).\n"
    assert C.parse_journal(REFUSAL + "\n" + short + "no refusal here\n")["refusal"] is None
    assert C.parse_journal(REFUSAL + "\n" + BANNER + "\n")["refusal"] is None
    # vLLM's own "Starting ..." lines (prefixed) are no start of the unit.
    assert C.parse_journal("(APIServer pid=1) INFO Starting vLLM server...\n" + REFUSAL)["refusal"]


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
    "vllm.service: Failed with result 'exit-code'.\n"
)


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
    assert refused.startswith(
        "vLLM refused the configuration: --max-model-len 204800 needs 13.9 GiB of KV cache, "
        "but only 11.1 GiB is available; vLLM estimates the longest length that fits at "
        "160800 tokens. Plan a context of at most that (vllm_plan_context)"
    )
    assert refused.endswith("or free memory for the KV cache.")
    no_estimate = {
        "refusal": {"max_model_len": 4096, "needed_gib": 2.0, "available_gib": 1.0, "estimated_max_model_len": None}
    }
    assert C.failure_cause(no_estimate) == (
        "vLLM refused the configuration: --max-model-len 4096 needs 2.0 GiB of KV cache, but only 1.0 GiB is available."
    )
    no_mem = "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`"
    assert C.parse_journal(no_mem)["cause"].startswith("vLLM found no memory for the KV cache")
    busy = (
        "Free memory on device cuda:0 (3.2/47.4 GiB) on startup is less than desired GPU memory "
        "utilization (0.93, 44.1 GiB)"
    )
    assert C.parse_journal(busy)["cause"] == (
        "The GPU had only 3.2 GiB free of 47.4 GiB at start, less than the "
        "44.1 GiB asked for: another process holds GPU memory."
    )
    assert C.parse_journal("broken release\n")["cause"] == "vLLM printed no refusal of its own: see its log below."
    assert C.failure_cause(None) == "vLLM printed no refusal of its own: see its log below."
