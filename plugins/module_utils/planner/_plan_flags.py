# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `vllm serve` argv of a launch plan (vLLM 0.27.1); the container around it is _container_options.

Pure, stdlib only, Python 3.7-clean. Every input that changes the ledger reaches the argv here.
"""

from __future__ import absolute_import, division, print_function

import json
import os

from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_memory import (
    default_batched_tokens,
)
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_pooling import pooling_flags

__metaclass__ = type

# Registered names in vLLM 0.27.1: reasoning/__init__.py _REASONING_PARSERS_TO_REGISTER and
# tool_parsers/__init__.py _TOOL_PARSERS_TO_REGISTER. An unknown name makes vLLM exit at start.
REASONING_PARSERS = frozenset(
    (
        "cohere_command3",
        "cohere_command4",
        "deepseek_r1",
        "deepseek_v3",
        "deepseek_v4",
        "ernie45",
        "gemma4",
        "glm45",
        "glm47",
        "granite",
        "holo2",
        "hunyuan_a13b",
        "hy_v3",
        "inkling",
        "kimi_k2",
        "kimi_k3",
        "mimo",
        "minimax_m2",
        "minimax_m2_append_think",
        "minimax_m3",
        "mistral",
        "nemotron_v3",
        "olmo3",
        "openai_gptoss",
        "poolside_v1",
        "qwen3",
        "seed_oss",
        "step3",
        "step3p5",
    )
)
TOOL_CALL_PARSERS = frozenset(
    (
        "apertus",
        "cohere_command3",
        "cohere_command4",
        "deepseek_v3",
        "deepseek_v31",
        "deepseek_v32",
        "deepseek_v4",
        "ernie45",
        "functiongemma",
        "gemma4",
        "gigachat3",
        "glm45",
        "glm47",
        "granite",
        "granite-20b-fc",
        "granite4",
        "hermes",
        "hunyuan_a13b",
        "hy_v3",
        "inkling",
        "internlm",
        "jamba",
        "kimi_k2",
        "kimi_k3",
        "lfm2",
        "llama3_json",
        "llama4_json",
        "llama4_pythonic",
        "longcat",
        "mimo",
        "minicpm5",
        "minimax_m2",
        "minimax_m3",
        "mistral",
        "olmo3",
        "openai",
        "phi4_mini_json",
        "poolside_v1",
        "pythonic",
        "qwen3_coder",
        "qwen3_xml",
        "seed_oss",
        "step3",
        "step3p5",
        "xlam",
    )
)


def _flag(args, why):
    return {"args": [str(a) for a in args], "reason": why}


def compact_json(obj):
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)


def build_flags(t, ctx, kv_pool, lay, pooling=None):
    """The argv as (args, reason) pairs. ``t`` are the resolved targets, ``lay`` the KV layout
    _plan_ledger.size returned (its attention_backend, has_sinks and kv_from_scheme; _plan_pooling.NO_KV_LAYOUT
    for a model without KV cache); ``pooling`` the pooling decision (_plan_pooling), None for a generative model."""
    f = [_flag([t.get("model_path") or t["model_dir"]], "absolute local model directory: no Hub lookup")]
    if pooling:
        f.extend(pooling_flags(pooling, compact_json))
    name = t["served_model_name"] or os.path.basename(str(t.get("model_path") or t["model_dir"]).rstrip("/"))
    f.append(_flag(["--served-model-name", name], "stable name for clients and metric labels"))
    if t["host"]:
        f.append(_flag(["--host", t["host"]], "bind address"))
    if t["port"]:
        f.append(_flag(["--port", t["port"]], "listen port"))
    if t["api_keys_config_path"]:
        f.append(
            _flag(
                ["--config", t["api_keys_config_path"]], "API keys from a YAML file (api-key list): never in argv or ps"
            )
        )
    f.append(_flag(["--tensor-parallel-size", t["tp"]], "GPUs the model is split across"))
    f.append(_flag(["--max-model-len", ctx], "context length; see ledger max_model_len_how"))
    f.append(_flag(["--max-num-seqs", t["concurrency"]], "target concurrency"))
    f.append(
        _flag(
            ["--gpu-memory-utilization", t["gpu_memory_utilization"]],
            "fraction of total GPU memory this instance may take",
        )
    )
    if t["pin_kv_cache_memory"]:
        f.append(
            _flag(
                ["--kv-cache-memory-bytes", kv_pool],
                "fix the KV pool to the measured budget (skips profiling-based sizing)",
            )
        )
    if not lay.get("no_kv"):
        f.append(
            _flag(
                ["--kv-cache-dtype", t["kv_cache_dtype"]],
                "fp8 KV halves bytes per token"
                if t["kv_cache_dtype"].startswith("fp8")
                else (
                    "KV dtype from the checkpoint's kv_cache_scheme"
                    if lay["kv_from_scheme"]
                    else "KV in the model dtype"
                ),
            )
        )
    if lay["attention_backend"] == "FLASHINFER":
        f.append(
            _flag(
                ["--attention-config", compact_json({"use_trtllm_attention": False})],
                "vLLM picks FlashInfer here; without this it probes NVIDIA's artifact "
                "server for TRT-LLM cubins (utils/flashinfer.py:346, 5 s timeout) on a "
                "network that does not reach it",
            )
        )
    elif lay["has_sinks"] and t["cc"][0] == 10:
        f.append(
            _flag(
                ["--attention-config", compact_json({"use_trtllm_attention": False})],
                "attention sinks: vLLM asks FlashInfer first on SM 10.x, whose sink support "
                "(flashinfer.py:473 supports_sink) probes NVIDIA's artifact server for TRT-LLM "
                "cubins; without it FlashAttention 4 serves the sinks",
            )
        )
    if pooling or t["max_num_batched_tokens"] != default_batched_tokens(t["gpu_total_bytes"]):
        f.append(
            _flag(
                ["--max-num-batched-tokens", t["max_num_batched_tokens"]],
                "prefill chunk size (sizes the activation peak)",
            )
        )
    if t["enforce_eager"]:
        f.append(_flag(["--enforce-eager"], "no CUDA graphs (the ledger counts none)"))
    if t["prefix_caching_asked"] is True:
        f.append(_flag(["--enable-prefix-caching"], "prefix caching asked for"))
    elif t["prefix_caching_asked"] is False:
        f.append(_flag(["--no-enable-prefix-caching"], "prefix caching switched off as asked"))
    if t["num_spec"]:
        f.append(
            _flag(
                ["--speculative-config", compact_json({"method": "mtp", "num_speculative_tokens": t["num_spec"]})],
                "MTP head drafts %d tokens per step" % t["num_spec"],
            )
        )
    if t["kv_offloading_gib"]:
        f.append(
            _flag(
                ["--kv-offloading-size", t["kv_offloading_gib"], "--kv-offloading-backend", "native"],
                "idle sessions' KV goes to host RAM (GiB, total across ranks)",
            )
        )
    if t["language_model_only"]:
        f.append(_flag(["--language-model-only"], "vision tower not loaded: more KV memory"))
    elif t.get("max_image_pixels"):
        f.append(
            _flag(
                ["--mm-processor-kwargs", compact_json({"max_pixels": int(t["max_image_pixels"])})],
                "largest image the encoder profile reserves for (qwen3_vl.py:907 max_pixels "
                "overrides the processor's longest_edge)",
            )
        )
    if t["reasoning_parser"]:
        f.append(_flag(["--reasoning-parser", t["reasoning_parser"]], "thinking goes to the reasoning field"))
    if t["tool_call_parser"]:
        f.append(
            _flag(
                ["--enable-auto-tool-choice", "--tool-call-parser", t["tool_call_parser"]],
                "tool calls parsed into tool_calls",
            )
        )
    if t["chat_template_kwargs"]:
        f.append(
            _flag(
                ["--default-chat-template-kwargs", compact_json(t["chat_template_kwargs"])],
                "server-side chat template defaults",
            )
        )
    return f


def api_key_config_yaml(path):
    """Content of the --config YAML: keys are referenced by a Jinja lookup the caller fills
    with no_log; the planner never sees or echoes a key."""
    return {
        "path": path,
        "template": "api-key:\n{% for k in vllm_api_keys %}  - {{ k | to_json }}\n{% endfor %}",
        "mode": "0600",
    }
