# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Launch planner for vLLM 0.27.1: flags plus a memory ledger sized the way vLLM sizes memory.

Pure functions, stdlib only, Python 3.7-clean. ``plan()`` is a short composition of:
  _plan_targets      inputs -> checked targets; _plan_gpus: which GPUs, budget, tensor parallel
  _plan_model        model reading (_model_dir) and config.json -> model shape and weights
  _plan_ledger       the memory ledger: KV layout (_plan_kv), non-KV estimate (_plan_memory),
                     pool, blocks, context
  _plan_pooling      pooling models (embedders, rerankers): runner/convert, encoder-only sizing (no KV)
  _plan_flags        the `vllm serve` argv
  _container_options docker run options and environment (not planning); the madvise rule is
                     _source_patch.needs_madvise_patch
  _plan_extras       the operator's extra arguments and docker options, merged after the plan
  _plan_warnings     the release check and the plan's warnings (``plan_warnings``)
This module defines ``plan()`` and nothing else; callers import every other planner name from the
module that defines it (errors, units and the version: _plan_common; render_ledger: _plan_ledger; ...).
Formulas cite the vLLM 0.27.1 wheel (paths inside the ``vllm/`` package). Anything vLLM measures
at start-up instead of computing is an *estimate*; ``measured_kv_cache_bytes`` replaces it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.airgap.vllm.plugins.module_utils.service._container_options import container_options, plan_env
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_extras import merge_extras
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_flags import api_key_config_yaml, build_flags
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_ledger import size
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_model import model_weights
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_pooling import (
    NO_KV_LAYOUT,
    pooling_targets,
    size_encoder,
)
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_targets import targets
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_warnings import plan_warnings, release_warnings
from ansible_collections.airgap.vllm.plugins.module_utils.image._source_patch import needs_madvise_patch


def plan(params, config=None, weight_bytes=None, weight_source=None, st=None):
    """Build a launch plan. ``config``/``weight_bytes`` (and sentence-transformers' files ``st``,
    _plan_pooling.read_sentence_transformers) may be given directly (tests); otherwise they are read
    from params['model_dir']."""
    t = targets(params)
    shape, weights = model_weights(t, config, weight_bytes, weight_source, st)
    t = pooling_targets(t, shape)
    if shape["pooling"] and shape["pooling"]["encoder_only"]:
        (ledger, warnings), lay, kv_pool = size_encoder(t, shape, weights, shape["pooling"]), NO_KV_LAYOUT, 0
    else:
        ledger, warnings, lay, kv_pool = size(t, shape, weights)
        if shape["pooling"]:
            ledger["pooling"] = dict(shape["pooling"])
    flags = build_flags(t, ledger["max_model_len"], kv_pool, lay, shape["pooling"])
    opts, opt_reasons, gpu_env = container_options(
        t["kernel"],
        t["docker_version"],
        t["kv_offloading_gib"],
        t["tp"],
        t["gpu_ids"],
        t["log_max_size"],
        t["log_max_file"],
        t["docker_log_driver"],
    )
    env, env_reasons = plan_env(lay["attention_backend"], gpu_env)
    if t["gpu_ids"] and t["tp"] < len(t["gpu_ids"]):
        warnings.append(
            "tensor_parallel_size %d uses %d of the %d selected GPUs; the others sit idle"
            % (t["tp"], t["tp"], len(t["gpu_ids"]))
        )
    # The release the image says it is (params["vllm_version"], optional): unknown ones say so loudly, first.
    checks = release_warnings(params.get("vllm_version")) + plan_warnings(ledger, shape)
    warnings += [w["message"] for w in checks]
    result = {
        "argv": [a for f in flags for a in f["args"]],
        "flags": flags,
        "docker_options": opts,
        "docker_option_reasons": opt_reasons,
        "env": env,
        "env_reasons": env_reasons,
        "needs_madvise_patch": needs_madvise_patch(bool(t["kv_offloading_gib"]), t["kernel"]),
        "gpus": {"selected": t["gpu_ids"], "count": t["gpu_count"], "tensor_parallel_size": t["tp"]},
        "ledger": ledger,
        "warnings": warnings,
        "plan_warnings": checks,
        "api_key_config": api_key_config_yaml(t["api_keys_config_path"]) if t["api_keys_config_path"] else None,
    }
    if t["extra_args"] or t["extra_docker_options"] or t["override_flags"]:
        result = merge_extras(result, t["extra_args"], t["extra_docker_options"], t["override_flags"])
    return result
