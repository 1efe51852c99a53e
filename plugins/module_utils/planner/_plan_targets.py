# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The launch planner's inputs: defaults, checks and normalisation into the targets ``t``.

Pure, stdlib only, Python 3.7-clean. Which GPUs (and so the budget and tensor parallelism) is
_plan_gpus; everything else a plan is asked for is checked here, each refusal naming the input.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_common import (
    KV_CACHE_DTYPES,
    VLLM_VERSION,
    TargetsError,
    parse_compute_capability,
    parse_size,
    release_rules,
)
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_flags import (
    REASONING_PARSERS,
    TOOL_CALL_PARSERS,
)
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_gpus import (
    select_gpus,
    tensor_parallel,
)
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_memory import (
    default_batched_tokens,
)

DEFAULTS = {
    "model_dir": None,
    "model_path": None,  # path vLLM sees (inside the container); defaults to model_dir
    "served_model_name": None,
    "gpu_total_bytes": None,
    # NVML's reserved memory of that card (nvml_info memory_reserved): vLLM's budget is utilization x CUDA's total,
    # which is NVML's total less it. None: not known (the budget is then taken from gpu_total_bytes as it is).
    "gpu_reserved_bytes": None,
    "gpu_count": 1,
    "tensor_parallel_size": None,
    "compute_capability": "9.0",
    "concurrency": 4,
    "context": "max",
    "kv_cache_dtype": "auto",
    "gpu_memory_utilization": 0.92,
    "num_speculative_tokens": 0,
    "prefix_caching": None,  # None: vLLM's default (off for hybrid GDN models, on otherwise)
    "kv_offloading_gib": 0,
    "host_ram_bytes": None,
    "kernel": None,
    "docker_version": None,
    "reasoning_parser": None,
    "tool_call_parser": None,
    "chat_template_kwargs": None,
    "language_model_only": False,
    "max_num_batched_tokens": None,
    "enforce_eager": False,
    "max_image_pixels": None,
    "measured_kv_cache_bytes": None,
    "pin_kv_cache_memory": False,
    "require_full_length_concurrency": False,
    "api_keys_config_path": None,
    "host": None,
    "port": None,
    "layer_layout": None,
    "vllm_version": None,  # the release the image holds (vllm_image read it); None: VLLM_VERSION's rules
    # GPU selection and the container (vllm_launch_plan options of the same names).
    "gpus": None,  # selection: NVML indexes or UUIDs; None/[]: the first gpu_count GPUs
    "nvml_gpus": None,  # airgap.vllm.nvml_info's gpus: budget and capability from the selection
    "docker_log_driver": None,
    "log_max_size": "100m",
    "log_max_file": 5,
    "measured_kv_cache_bytes_by_gpu": None,  # {NVML GPU name: bytes} measured on a card of that kind
    "pin_measured_kv_cache": False,  # pin (--kv-cache-memory-bytes) a pool found there
    # A pooling model's task when its files do not say it (_plan_pooling.pooling_decision): "embed" or "classify".
    "pooling_task": None,
    "extra_args": None,
    "extra_docker_options": None,
    "override_flags": None,
}


def _positive_int(t, key, minimum=1, value=None):
    raw = t[key] if value is None else value
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise TargetsError("%s %r is not an integer" % (key, raw))
    if value < minimum:
        raise TargetsError("%s must be >= %d, got %d" % (key, minimum, value))
    return value


def served_model_name(name):
    """The name clients ask for. It reaches argv and the systemd unit: no control character (a newline
    would add a line to the unit), no blank name. None: the model directory's name."""
    if name is None or name == "":
        return None
    if not isinstance(name, str) or not name.strip():
        raise TargetsError(
            "served_model_name %r: give a non-empty name (or leave it unset for the model directory's name)" % (name,)
        )
    bad = [c for c in name if ord(c) < 32 or 127 <= ord(c) < 160 or c in "\u2028\u2029"]
    if bad:
        raise TargetsError(
            "served_model_name %r holds the control character %r: it would reach the "
            "systemd unit and vLLM's argv as is; use printable characters only" % (name, bad[0])
        )
    if name != name.strip():
        raise TargetsError(
            "served_model_name %r starts or ends with white space; clients would have to "
            "send it exactly so: remove it" % (name,)
        )
    return name


def targets(params):
    """Resolved targets ``t`` of a plan: params over DEFAULTS, checked and normalised."""
    t = dict(DEFAULTS)
    t.update({k: v for k, v in params.items() if v is not None})
    sel = select_gpus(t["gpus"], t["nvml_gpus"], _positive_int(t, "gpu_count"))
    t["gpu_ids"], t["gpu_count"] = sel["ids"], sel["count"]
    if sel["cards"]:
        # The budget of the smallest planned card; every rank gets the same share.
        if not params.get("gpu_total_bytes"):
            # The card with the least memory CUDA can give (NVML's total less its reserved memory).
            card = min(sel["cards"], key=lambda c: int(c["memory_total"]) - int(c.get("memory_reserved") or 0))
            t["gpu_total_bytes"] = int(card["memory_total"])
            if params.get("gpu_reserved_bytes") is None and card.get("memory_reserved") is not None:
                t["gpu_reserved_bytes"] = int(card["memory_reserved"])
        if not params.get("compute_capability") and sel["cards"][0].get("compute_capability"):
            t["compute_capability"] = sel["cards"][0]["compute_capability"]
        measured = (t["measured_kv_cache_bytes_by_gpu"] or {}).get(sel["cards"][0].get("name"))
        if measured and not t["measured_kv_cache_bytes"]:
            # A pool measured on a card of this kind, for this model and these settings.
            t["measured_kv_cache_bytes"] = _positive_int(t, "measured_kv_cache_bytes_by_gpu", value=measured)
            t["pin_kv_cache_memory"] = bool(t["pin_kv_cache_memory"] or t["pin_measured_kv_cache"])
    if not t["gpu_total_bytes"] or int(t["gpu_total_bytes"]) <= 0:
        raise TargetsError("gpu_total_bytes is required (from airgap.vllm.nvml_info or given)")
    total = int(t["gpu_total_bytes"])
    t["gpu_total_bytes"] = total
    if t["gpu_reserved_bytes"] is not None:
        reserved = _positive_int(t, "gpu_reserved_bytes", 0)
        t["gpu_reserved_bytes"] = reserved
        if reserved >= total:
            raise TargetsError(
                "gpu_reserved_bytes %d is not less than gpu_total_bytes %d: give NVML's memory_total and "
                "memory_reserved of the same card (airgap.vllm.nvml_info)" % (reserved, total)
            )
    # What CUDA reports as the card's total (cudaMemGetInfo), the total vLLM takes its budget from
    # (v1/worker/utils.py request_memory: total x gpu_memory_utilization). Measured on an H100 80GB HBM3 (driver
    # 580.159.04, vLLM 0.26.0, issue 43): NVML total 81559 MiB, reserved 480 MiB, CUDA total 79.18 GiB = the difference.
    t["cuda_total_bytes"] = t["gpu_total_bytes"] - (t["gpu_reserved_bytes"] or 0)
    t["cc"] = parse_compute_capability(t["compute_capability"])
    t["tp"] = tensor_parallel(t["tensor_parallel_size"], t["gpu_count"])
    u = float(t["gpu_memory_utilization"])
    if not 0.0 < u <= 1.0:
        raise TargetsError("gpu_memory_utilization must be in (0, 1], got %s" % u)
    t["gpu_memory_utilization"] = u
    if t["kv_cache_dtype"] not in KV_CACHE_DTYPES:
        raise TargetsError(
            "kv_cache_dtype %r is not one the planner can size; use one of %s"
            % (t["kv_cache_dtype"], ", ".join(KV_CACHE_DTYPES))
        )
    release, absent = VLLM_VERSION, ()
    if t["vllm_version"]:
        try:
            r = release_rules(str(t["vllm_version"]))
        except ValueError:  # not a version: 0.27.1's names (release_warnings says so loudly)
            r = None
        if r and r["known"] and r["rules"].get("parsers_absent"):
            release, absent = r["release"], tuple(r["rules"]["parsers_absent"])
    for key, names in (("reasoning_parser", REASONING_PARSERS), ("tool_call_parser", TOOL_CALL_PARSERS)):
        valid = names.difference(absent)
        if t[key] and t[key] not in valid:
            raise TargetsError(
                "%s %r is not registered in vLLM %s; valid: %s" % (key, t[key], release, ", ".join(sorted(valid)))
            )
    t["concurrency"] = _positive_int(t, "concurrency")
    t["num_spec"] = _positive_int(t, "num_speculative_tokens", 0, value=t["num_speculative_tokens"] or 0)
    if str(t["context"]).strip().lower() in ("max", "auto", "-1"):
        t["context"] = "max"
    else:
        t["context"] = parse_size(t["context"])
        if t["context"] < 1:
            raise TargetsError(
                "context %r: a context must be at least 1 token; give a length "
                "such as 32768 / 32K, or 'max' for the longest that fits" % (params.get("context"),)
            )
    t["max_num_batched_tokens_asked"] = params.get("max_num_batched_tokens")
    if params.get("max_num_batched_tokens") is None:
        t["max_num_batched_tokens"] = default_batched_tokens(t["gpu_total_bytes"])
    else:
        # 0 is not "vLLM's default": it is refused (not silently replaced by the default).
        t["max_num_batched_tokens"] = _positive_int(t, "max_num_batched_tokens")
    t["served_model_name"] = served_model_name(t["served_model_name"])
    t["max_num_seqs"] = t["concurrency"]
    off = float(t["kv_offloading_gib"] or 0)
    t["kv_offloading_gib"] = int(off) if off.is_integer() else off
    if t["pin_kv_cache_memory"] and not t["measured_kv_cache_bytes"]:
        raise TargetsError(
            "pin_kv_cache_memory needs measured_kv_cache_bytes: pinning an estimated pool with "
            "--kv-cache-memory-bytes bypasses gpu_memory_utilization and can run the card out "
            "of memory. Start once, take vLLM's 'Available KV cache memory' (or "
            "vllm:cache_config_info kv_cache_memory_bytes) and pass it as "
            "measured_kv_cache_bytes."
        )
    if t["measured_kv_cache_bytes"] is not None and int(t["measured_kv_cache_bytes"]) <= 0:
        raise TargetsError("measured_kv_cache_bytes must be > 0")
    t["prefix_caching_asked"] = params.get("prefix_caching")
    return t


def resolve_kv_dtype(kv_cache_dtype, model_dtype, scheme_dtype=None):
    """--kv-cache-dtype auto: the checkpoint's kv_cache_scheme if it declares one
    (attention.py:284), else the model dtype (utils/torch_utils.py kv_cache_dtype_str_to_dtype)."""
    if kv_cache_dtype == "auto":
        return scheme_dtype or model_dtype
    return kv_cache_dtype
