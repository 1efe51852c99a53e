# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Launch planner for vLLM 0.27.1: flags plus a memory ledger sized the way vLLM sizes memory.

Pure functions, stdlib only, Python 3.7-clean. ``plan()`` is a short composition of:
  _plan_targets      inputs -> checked targets; _plan_gpus: which GPUs, budget, tensor parallel
  _plan_model        model reading (_model_dir) and config.json -> model shape and weights
  _plan_ledger       the memory ledger: KV layout (_plan_kv), non-KV estimate (_plan_memory),
                     pool, blocks, context
  _plan_flags        the `vllm serve` argv
  _container_options docker run options and environment (not planning); the madvise rule is
                     _source_patch.needs_madvise_patch
  _plan_extras       the operator's extra arguments and docker options, merged after the plan
Formulas cite the vLLM 0.27.1 wheel (paths inside the ``vllm/`` package). Anything vLLM measures
at start-up instead of computing is an *estimate*; ``measured_kv_cache_bytes`` replaces it.
"""

from __future__ import absolute_import, division, print_function

# This module is the planner's facade: it re-exports the public names of the _plan_* modules so that
# callers (modules, tests, bench/) can keep using ``_planner.NAME``; not every name is used here.
# pylint: disable=unused-import
from ansible_collections.airgap.vllm.plugins.module_utils._plan_common import (  # noqa: F401
    DTYPE_BYTES,
    GIB,
    KV_CACHE_DTYPES,
    MIB,
    VLLM_VERSION,
    InfeasibleError,
    ModelConfigError,
    PlanError,
    TargetsError,
    cdiv,
    dtype_bytes,
    fmt_gib,
    fmt_tokens,
    parse_compute_capability,
    parse_size,
)
from ansible_collections.airgap.vllm.plugins.module_utils._plan_model import (  # noqa: F401
    FAMILIES,
    describe_model,
    estimate_weight_bytes,
    model_weights,
    mtp_bytes,
    read_model_dir,
    safetensors_payload_bytes,
    vision_tower_bytes,
)
from ansible_collections.airgap.vllm.plugins.module_utils._plan_kv import (  # noqa: F401
    DEFAULT_BLOCK_SIZE,
    KERNEL_BLOCK_ALIGNMENT,
    attn_bytes_per_token,
    blocks_per_request,
    gdn_blocks_per_request,
    gdn_state_bytes,
    group_layers,
    hybrid_block_size,
    longest_fitting_len,
    max_in_flight_tokens,
    num_gpu_blocks,
)
from ansible_collections.airgap.vllm.plugins.module_utils._plan_memory import (  # noqa: F401
    CUDA_CONTEXT_BYTES,
    CUDAGRAPH_PER_GRAPH_BYTES,
    DEFAULT_MAX_IMAGE_PIXELS,
    FLASHINFER_PREFILL_BYTES_PER_ELEM,
    FLASHINFER_WORKSPACE_BYTES,
    GDN_CHUNK,
    TP_COMM_BYTES,
    attention_backend,
    cudagraph_capture_sizes,
    default_batched_tokens,
    estimate_non_kv,
    flashinfer_workspace,
    flashinfer_workspace_profiled,
    lm_token_transient_bytes,
)
from ansible_collections.airgap.vllm.plugins.module_utils._plan_flags import (  # noqa: F401
    REASONING_PARSERS,
    TOOL_CALL_PARSERS,
    api_key_config_yaml,
    build_flags,
)
from ansible_collections.airgap.vllm.plugins.module_utils._container_options import (  # noqa: F401
    OFFLINE_ENV,
    SHM_BASELINE_GIB,
    container_options,
    docker_decisions,
    plan_env,
)
from ansible_collections.airgap.vllm.plugins.module_utils._plan_targets import (  # noqa: F401
    DEFAULTS,
    resolve_kv_dtype,
    targets,
)
from ansible_collections.airgap.vllm.plugins.module_utils._plan_ledger import (  # noqa: F401
    CLEAN_LEN_MULTIPLE,
    ESTIMATE_ERROR_HIGH,
    ESTIMATE_ERROR_LOW,
    render_ledger,
    size,
)
from ansible_collections.airgap.vllm.plugins.module_utils._plan_extras import (  # noqa: F401
    merge_extras,
)
from ansible_collections.airgap.vllm.plugins.module_utils._source_patch import (  # noqa: F401
    needs_madvise_patch,
)
from ansible_collections.airgap.vllm.plugins.module_utils._plan_warnings import (  # noqa: F401
    plan_warnings,
    release_warnings,
)
# pylint: enable=unused-import

__metaclass__ = type


def plan(params, config=None, weight_bytes=None, weight_source=None):
    """Build a launch plan. ``config``/``weight_bytes`` may be given directly (tests);
    otherwise they are read from params['model_dir']."""
    t = targets(params)
    shape, weights = model_weights(t, config, weight_bytes, weight_source)
    ledger, warnings, lay, kv_pool = size(t, shape, weights)
    flags = build_flags(t, ledger["max_model_len"], kv_pool, lay)
    opts, opt_reasons, gpu_env = container_options(
        t["kernel"], t["docker_version"], t["kv_offloading_gib"], t["tp"], t["gpu_ids"],
        t["log_max_size"], t["log_max_file"], t["docker_log_driver"])
    env, env_reasons = plan_env(lay["attention_backend"], gpu_env)
    if t["gpu_ids"] and t["tp"] < len(t["gpu_ids"]):
        warnings.append("tensor_parallel_size %d uses %d of the %d selected GPUs; the others sit idle"
                        % (t["tp"], t["tp"], len(t["gpu_ids"])))
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
        "api_key_config": api_key_config_yaml(t["api_keys_config_path"]) if t[
            "api_keys_config_path"] else None,
    }
    if t["extra_args"] or t["extra_docker_options"] or t["override_flags"]:
        result = merge_extras(result, t["extra_args"], t["extra_docker_options"], t["override_flags"])
    return result
