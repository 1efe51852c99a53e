#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_launch_plan
short_description: Plan vLLM 0.27.1 flags and a GPU memory ledger from the card, the model and the targets
version_added: "0.1.0"
description:
  - Reads the model directory's C(config.json) and C(model.safetensors.index.json) and computes, the way
    vLLM 0.27.1 sizes memory, the KV pool, block size, number of GPU blocks, the GPU KV cache size in tokens
    and the concurrency at the chosen context.
  - Returns the exact C(vllm serve) argv, container options, environment and a ledger where every number has
    the formula it came from. Fails with concrete alternatives when the targets do not fit.
  - Pure computation; runs on the target or on localhost and never touches the network.
options:
  model_dir:
    description: Model directory holding C(config.json) (and the weight index) on the host the module runs on.
    type: path
    required: true
  model_path:
    description: Model path as vLLM sees it (inside the container). Defaults to O(model_dir).
    type: str
  served_model_name:
    description:
      - Name clients use; defaults to the model directory's basename.
      - It reaches vLLM's argv and the systemd unit, so a control character (a newline, say) or surrounding
        white space is refused.
    type: str
  gpu_total_bytes:
    description:
      - Total memory of one GPU in bytes (C(airgap.vllm.nvml_info) reports it).
      - Required unless O(nvml_gpus) is given; then the smallest planned GPU's memory is the default.
    type: int
  gpu_reserved_bytes:
    description:
      - NVML's reserved memory of that GPU in bytes (C(memory_reserved) of M(airgap.vllm.nvml_info), 480 MiB on an
        H100 80GB HBM3). vLLM's budget is O(gpu_memory_utilization) times the total CUDA reports, which is NVML's
        total less this.
      - Default, the planned GPU's C(memory_reserved) in O(nvml_gpus) when O(gpu_total_bytes) is not given; when not
        known, the budget is taken from O(gpu_total_bytes) as it is (the ledger's C(budget_how) says so).
    type: int
  gpu_count:
    description:
      - GPUs to plan for when O(gpus) selects none (the first ones NVML lists).
      - Not used with a selection, which is its own count.
    type: int
    default: 1
  gpus:
    description:
      - GPUs to run on, as NVML indexes (C("0")) or UUIDs (C(GPU-...), C(nvidia-smi -L)); each at most once.
      - Empty (default), the first O(gpu_count) GPUs and the container gets C(--gpus all).
      - With a selection, the container gets only those (C(--gpus "device=0,1"), the quotes being part of the
        option's value for Docker's CSV reading; C(NVIDIA_VISIBLE_DEVICES) under C(--runtime nvidia)), tensor
        parallel defaults to their number, and with O(nvml_gpus) each must be an NVML GPU and the budget is the
        smallest selected card.
    type: list
    elements: str
  nvml_gpus:
    description:
      - The C(gpus) list M(airgap.vllm.nvml_info) returns (C(index), C(uuid), C(name), C(memory_total),
        C(compute_capability)). With it, O(gpu_total_bytes) and O(compute_capability) default to the planned GPUs'
        (smallest memory, first card's capability), and a selection naming a GPU NVML does not list is refused.
    type: list
    elements: dict
  tensor_parallel_size:
    description:
      - GPUs the model is split across; defaults to the number of planned GPUs (O(gpus), else O(gpu_count)).
      - Refused when larger than that number.
    type: int
  compute_capability:
    description:
      - CUDA compute capability as MAJOR.MINOR, e.g. C(8.9) (Ada), C(9.0) (Hopper), C(10.0) or C(12.0) (Blackwell).
      - Decides the attention backend the way vLLM 0.27.1 does (FlashInfer on 10.x, and for fp8 KV on 8.x/12.x and
        C(fp8_e5m2) everywhere; FlashAttention otherwise), its workspace and the flags it needs offline.
      - Default, the first planned GPU's in O(nvml_gpus), else C(9.0).
    type: str
  concurrency:
    description: Target concurrent requests (C(--max-num-seqs)).
    type: int
    default: 4
  context:
    description:
      - Context length (C(--max-model-len)) as a number or with a suffix (C(200K) = 204800, C(200k) = 200000),
        or C(max) for the largest length that keeps O(concurrency) full-length requests in the pool.
    type: str
    default: max
  kv_cache_dtype:
    description: KV cache dtype.
    type: str
    choices: [auto, float16, bfloat16, fp8, fp8_e4m3, fp8_e5m2]
    default: auto
  gpu_memory_utilization:
    description: Fraction of the card's total memory this instance may use.
    type: float
    default: 0.92
  num_speculative_tokens:
    description: MTP speculative tokens (0 disables speculative decoding).
    type: int
    default: 0
  prefix_caching:
    description:
      - Automatic prefix caching (hybrid models then keep one more state block per request).
      - Unset leaves vLLM's default (off for hybrid Gated-DeltaNet models, on for the others) and emits no flag;
        C(true) emits C(--enable-prefix-caching), C(false) emits C(--no-enable-prefix-caching).
    type: bool
  kv_offloading_gib:
    description: Native KV offload to host RAM in GiB (0 = off).
    type: float
    default: 0
  host_ram_bytes:
    description: Host RAM in bytes; the offload must leave room for the OS.
    type: int
  kernel:
    description: Host kernel release (decides the seccomp option and the madvise patch). Usually C(ansible_kernel).
    type: str
  docker_version:
    description: Docker engine version (decides C(--gpus) versus C(--runtime nvidia) and seccomp).
    type: str
  vllm_version:
    description:
      - The vLLM release the image says it is (what the vllm_image role read, C(vllm_image_vllm_version), e.g.
        C(0.27.1+cpu)). A release the collection does not know (C(_plan_common.KNOWN_RELEASES)) is planned with the
        nearest known release's rules and says so first in RV(warnings_list) and RV(plan_warnings); unset, nothing
        is said about the release. Kept in RV(inputs), so the deployment report names the engine release.
    type: str
  reasoning_parser:
    description: vLLM reasoning parser name (validated against vLLM 0.27.1's registry).
    type: str
  tool_call_parser:
    description: vLLM tool-call parser name; adds C(--enable-auto-tool-choice).
    type: str
  chat_template_kwargs:
    description: Server-side default chat template kwargs.
    type: dict
  language_model_only:
    description: Do not load the vision tower of a multimodal checkpoint.
    type: bool
    default: false
  max_num_batched_tokens:
    description:
      - Prefill chunk size; defaults to vLLM's card-dependent default (leave it unset for that).
      - 0 or less is refused.
    type: int
  enforce_eager:
    description: Plan without CUDA graphs (emits C(--enforce-eager)).
    type: bool
    default: false
  max_image_pixels:
    description:
      - "Largest image in pixels the encoder profile uses (processor C(longest_edge)); emitted as
        C(--mm-processor-kwargs {\"max_pixels\": N}) unless O(language_model_only)."
    type: int
  measured_kv_cache_bytes:
    description:
      - KV memory measured on this kind of host (vLLM's "Available KV cache memory", or C(kv_cache_memory_bytes)
        of C(vllm:cache_config_info), or the C(replan.kv_cache_memory_bytes) that M(airgap.vllm.vllm_plan_confirm) returns);
        replaces the estimate, so every number of the plan is exact.
    type: int
  measured_kv_cache_bytes_by_gpu:
    description:
      - KV memory measured on cards of a kind, keyed by the GPU name NVML reports (as O(measured_kv_cache_bytes));
        with O(nvml_gpus), the first planned GPU's entry is used unless O(measured_kv_cache_bytes) is given.
    type: dict
  pin_measured_kv_cache:
    description: Pin (as O(pin_kv_cache_memory)) a pool found in O(measured_kv_cache_bytes_by_gpu).
    type: bool
    default: false
  pin_kv_cache_memory:
    description:
      - Emit C(--kv-cache-memory-bytes) with O(measured_kv_cache_bytes) so vLLM uses exactly that pool.
      - Refused without O(measured_kv_cache_bytes) (pinning an estimate bypasses the utilisation limit).
    type: bool
    default: false
  pooling_task:
    description:
      - The task of a pooling model whose own files do not say it. An embedding model or a reranker is found from
        its files (C(architectures) in C(config.json), sentence-transformers' C(modules.json) and
        C(1_Pooling/config.json)) and planned with C(--runner pooling --convert ...) as vLLM 0.27.1 resolves them;
        C(embed) adapts a decoder checkpoint to embeddings, C(classify) plans the original Qwen3 reranker
        (a C(Qwen3ForCausalLM) checkpoint, C(--hf-overrides) as vLLM's example).
      - An encoder-only model (BERT, RoBERTa, XLM-RoBERTa) has no KV cache; its ledger holds its weights and the
        activation of one batch of C(--max-num-batched-tokens) tokens, and promises no decode KV.
      - A task the files contradict (C(classify) on an embedding model) is refused.
    type: str
    choices: [embed, classify]
  layer_layout:
    description:
      - Declares the attention layers of an architecture the planner does not know (it refuses such models
        otherwise). Keys C(full_attention), C(sliding_attention), C(linear_attention) (layer counts summing
        to C(num_hidden_layers)), C(sliding_window), and optionally C(num_kv_heads), C(head_dim).
      - MLA models are refused either way.
    type: dict
  require_full_length_concurrency:
    description: Fail unless O(concurrency) requests of the full context fit in GPU memory at once.
    type: bool
    default: false
  api_keys_config_path:
    description:
      - Path (as vLLM sees it) of a YAML file with an C(api-key) list; added as C(--config) so keys stay out
        of argv and C(ps). The module never receives the keys; RV(api_key_config) says how to write the file.
    type: str
  host:
    description: Address vLLM binds.
    type: str
  port:
    description: Port vLLM listens on.
    type: int
  extra_args:
    description:
      - Extra C(vllm serve) arguments, one word per item, appended after the plan (e.g. C([--seed, "7"])).
      - Long option names only; a duplicate of a planned option (C(_) for C(-) and C(--no-X) for C(--X) included)
        is refused, naming it, unless it is in O(override_flags). No API key in any spelling (list the keys in
        C(vllm_service_api_keys)), no C(--config) (the service's keys file), no newline, carriage return or NUL.
    type: list
    elements: str
  extra_docker_options:
    description:
      - Extra C(docker run) options, one word per item, appended after the planned ones (e.g. C([--ulimit,
        memlock=-1])). A duplicate of a planned option (for C(--log-opt)/C(--security-opt) the same key) is refused
        unless in O(override_flags). The service's guard still applies its network and privilege rules.
    type: list
    elements: str
  override_flags:
    description:
      - Options (e.g. C(--max-num-seqs), C(--shm-size)) that O(extra_args) or O(extra_docker_options) may set
        although the plan sets them; the extra value replaces the planned one. Overriding an option the ledger is
        computed with adds a warning.
    type: list
    elements: str
  log_max_size:
    description: Rotate the container's log at this size (C(--log-opt max-size), Docker units C(k), C(m), C(g)).
    type: str
    default: 100m
  log_max_file:
    description: Rotated container log files kept (C(--log-opt max-file)).
    type: int
    default: 5
  service_name:
    description:
      - The name of the service planned (its unit); names it among O(card_services).
    type: str
  card_services:
    description:
      - The services that share this service's GPUs, in the operator's order, this one among them (by
        O(service_name)), each C(name) and C(options) (its own planning options as this module takes them, such as
        C(model_dir), C(concurrency), C(context)); what the C(airgap.vllm.vllm_plan_card) filter gives.
      - With two or more, the card's memory is split between them (C(_plan_share.split_card)) and this service is
        planned at its share - its C(--gpu-memory-utilization) the split's, whatever O(gpu_memory_utilization)
        says - or the split is refused, naming the service to shrink. The card's facts (O(nvml_gpus), O(gpus),
        the kernel, Docker, the vLLM release) are this call's for every service; measured KV pools are not used.
      - Empty (default), the service has its GPUs to itself.
    type: list
    elements: dict
    default: []
  docker_log_driver:
    description:
      - Docker's logging driver (C(docker info --format '{{.LoggingDriver}}')). The log options are set for
        C(json-file) and C(local) (and when unknown, Docker's default being C(json-file)); other drivers rotate
        themselves and refuse them.
    type: str
attributes:
  check_mode:
    support: full
    description: Read-only; the plan is the same in check mode.
  diff_mode:
    support: none
    description: Nothing to show as a diff.
  idempotent:
    support: full
    description: Same inputs give the same plan; nothing on the host changes.
author:
  - airgap.vllm maintainers (@airgap-vllm)
"""

EXAMPLES = r"""
- name: Plan a 48 GB Ada card, 4 agent sessions, 200K context
  airgap.vllm.vllm_launch_plan:
    model_dir: /opt/models/Qwen3.x-27B-FP8
    gpu_total_bytes: "{{ 49140 * 1024 * 1024 }}"
    compute_capability: "8.9"
    gpu_memory_utilization: 0.93
    concurrency: 4
    context: 204800
    kv_cache_dtype: fp8_e4m3
    num_speculative_tokens: 3
    prefix_caching: true
    kv_offloading_gib: 64
    kernel: "{{ ansible_kernel }}"
    docker_version: "20.10.7"
    reasoning_parser: qwen3
    tool_call_parser: qwen3_coder
  register: vllm_plan

- name: Longest context for 50 users on a 96 GB card
  airgap.vllm.vllm_launch_plan:
    model_dir: /opt/models/Qwen3.x-27B-FP8
    gpu_total_bytes: "{{ 97887 * 1024 * 1024 }}"
    compute_capability: "12.0"
    concurrency: 50
    context: max
    kv_cache_dtype: fp8_e4m3
    num_speculative_tokens: 3
  register: vllm_plan
"""

RETURN = r"""
argv:
  description: Exactly what follows C(vllm serve).
  returned: success
  type: list
  elements: str
flags:
  description: The argv grouped per flag, each with a one-line reason.
  returned: success
  type: list
  elements: dict
docker_options:
  description: C(docker run) options (GPU access, seccomp when needed, shm size for offload).
  returned: success
  type: list
  elements: str
docker_option_reasons:
  description: Why each docker option is there.
  returned: success
  type: dict
env:
  description: Container environment that keeps vLLM offline.
  returned: success
  type: dict
env_reasons:
  description: Why each variable is set.
  returned: success
  type: dict
needs_madvise_patch:
  description:
    - KV offload on a kernel older than 5.14 (MADV_POPULATE_WRITE missing) needs the patch; so does offload on a
      kernel whose version cannot be read (the patch is harmless on a new kernel). The rule is the one
      M(airgap.vllm.vllm_source_patch) applies (its C(madvise_patch_needed)).
  returned: success
  type: bool
gpus:
  description: The GPUs planned for - C(selected) (O(gpus) as given, empty for all), C(count), C(tensor_parallel_size).
  returned: success
  type: dict
extras:
  description: The operator's extras merged after the plan - C(args), C(docker_options), C(overridden) (option names).
  returned: when O(extra_args), O(extra_docker_options) or O(override_flags) is given
  type: dict
ledger:
  description: Budget (C(gpu_memory_utilization) x C(cuda_total_bytes), NVML's total less C(gpu_reserved_bytes)),
    non-KV components, C(outside_pool) (what vLLM allocates after sizing the pool), C(kv_pool_margin_bytes) (left
    unused out of an estimated pool), KV pool, block size, num_gpu_blocks, GPU KV cache tokens, concurrency; for a
    pooling model C(pooling) (task, runner, convert, pooling type, encoder_only) and, encoder-only, C(footprint_bytes)
    (its whole memory, no KV pool).
  returned: success
  type: dict
ledger_text:
  description: The ledger rendered for humans.
  returned: success
  type: str
warnings_list:
  description: Plan warnings (e.g. fewer full-length requests fit than the concurrency target).
  returned: success
  type: list
  elements: str
plan_warnings:
  description:
    - The planner's warnings with their reason and source (plugins/module_utils/planner/_plan_warnings.py), each also in
      RV(warnings_list) - a plan within a few KV blocks of its edge (C(plan_at_edge)), gpu_memory_utilization above
      0.95 (C(utilization_high)), SM 8.9 + FP8 checkpoint + fp8 KV cache + MTP (C(vllm_issue_44879)).
  returned: success
  type: list
  elements: dict
api_key_config:
  description: Path, mode and a Jinja template for the C(--config) YAML holding the keys (fill it with no_log).
  returned: when api_keys_config_path is set
  type: dict
inputs:
  description: The planner inputs this plan was made from (no secrets); M(airgap.vllm.vllm_plan_confirm) re-plans with them.
  returned: success
  type: dict
card:
  description:
    - The split of a card shared with other services (O(card_services)) - C(order) (the start order),
      C(split) (C(_plan_share.split_card)'s answer, each service's utilization, budget, footprint and share) and
      C(split_text) (the table, also first in RV(ledger_text)). This service's share is also in RV(ledger)'s C(share).
  returned: when O(card_services) lists two or more services
  type: dict
tradeoff:
  description:
    - The operator's question as a trade-off at this budget, for O(concurrency) users - C(all_fit_len) (longest
      context where all of them fit at once), C(single_len) (longest single request), C(typical) (how many 4K/16K/32K
      requests then fit before vLLM preempts), C(batched_tokens) and C(speculative) (what C(--max-num-batched-tokens)
      and MTP's speculative tokens cost in that pool).
    - For a pooling model C(single_len) is null and C(skipped) says C(pooling model).
  returned: success
  type: dict
alternatives:
  description: Plans that fit, when the targets do not.
  returned: failure
  type: list
  elements: dict
"""

import os

from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_common import (
    GIB,
    KV_CACHE_DTYPES,
    InfeasibleError,
    PlanError,
)
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_ledger import render_ledger
from ansible_collections.airgap.vllm.plugins.module_utils.planner._planner import plan
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_confirm_report import render_tradeoff_markdown
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_pooling import POOLING_TASKS
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_share import plan_shared, render_split
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_targets import DEFAULTS
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_tradeoff import tradeoff


def argument_spec():
    """The options; their defaults are the planner's (_plan_targets.DEFAULTS, one home), but compute_capability's:
    unset here, the planner reads it from nvml_gpus first."""
    spec = dict(
        model_dir=dict(type="path", required=True),
        model_path=dict(type="str"),
        served_model_name=dict(type="str"),
        gpu_total_bytes=dict(type="int"),
        gpu_reserved_bytes=dict(type="int"),
        gpu_count=dict(type="int"),
        gpus=dict(type="list", elements="str"),
        nvml_gpus=dict(type="list", elements="dict"),
        tensor_parallel_size=dict(type="int"),
        compute_capability=dict(type="str"),
        concurrency=dict(type="int"),
        context=dict(type="str"),
        kv_cache_dtype=dict(type="str", choices=list(KV_CACHE_DTYPES)),
        gpu_memory_utilization=dict(type="float"),
        num_speculative_tokens=dict(type="int", no_log=False),
        prefix_caching=dict(type="bool"),
        kv_offloading_gib=dict(type="float"),
        host_ram_bytes=dict(type="int"),
        kernel=dict(type="str"),
        docker_version=dict(type="str"),
        vllm_version=dict(type="str"),
        reasoning_parser=dict(type="str"),
        tool_call_parser=dict(type="str"),
        chat_template_kwargs=dict(type="dict"),
        language_model_only=dict(type="bool"),
        max_num_batched_tokens=dict(type="int", no_log=False),
        enforce_eager=dict(type="bool"),
        max_image_pixels=dict(type="int"),
        measured_kv_cache_bytes=dict(type="int"),
        pin_kv_cache_memory=dict(type="bool"),
        measured_kv_cache_bytes_by_gpu=dict(type="dict"),
        pin_measured_kv_cache=dict(type="bool"),
        require_full_length_concurrency=dict(type="bool"),
        api_keys_config_path=dict(type="str", no_log=False),
        host=dict(type="str"),
        port=dict(type="int"),
        layer_layout=dict(type="dict"),
        pooling_task=dict(type="str", choices=list(POOLING_TASKS)),
        extra_args=dict(type="list", elements="str"),
        extra_docker_options=dict(type="list", elements="str"),
        override_flags=dict(type="list", elements="str"),
        log_max_size=dict(type="str"),
        log_max_file=dict(type="int"),
        docker_log_driver=dict(type="str"),
    )
    for name, option in spec.items():
        if DEFAULTS[name] is not None and name != "compute_capability":
            option["default"] = DEFAULTS[name]
    # Not planner targets: which service this is, and the services it shares its card with.
    spec.update(service_name=dict(type="str"), card_services=dict(type="list", elements="dict", default=[]))
    return spec


@ansible_module(argument_spec(), errors=(PlanError,))
def main(module):
    params = dict(module.params)
    if params["kv_offloading_gib"] and params["host_ram_bytes"]:
        if params["kv_offloading_gib"] * (1 << 30) > 0.8 * params["host_ram_bytes"]:
            module.fail_json(msg="kv_offloading_gib %s exceeds 80%% of host RAM" % params["kv_offloading_gib"])
    if params["kv_offloading_gib"] and float(params["kv_offloading_gib"]).is_integer():
        params["kv_offloading_gib"] = int(params["kv_offloading_gib"])
    card, name = params.pop("card_services") or [], params.pop("service_name")
    shared = None
    absent = [
        c.get("name")
        for c in card
        if c.get("name") != name
        and not os.path.isfile(os.path.join(str((c.get("options") or {}).get("model_dir")), "config.json"))
    ]
    if len(card) > 1 and absent:
        if not module.check_mode:
            module.fail_json(
                msg="%s shares its GPUs with %s, whose model is not imported (no config.json): import every model of "
                "the card first (vllm_model role)" % (name, ", ".join(map(str, absent)))
            )
        # --check before the models are imported: this service is planned alone, and says so.
        module.warn("not split: %s of this card not imported yet (check mode)" % ", ".join(map(str, absent)))
        card = []
    try:
        if len(card) > 1:
            if not name:
                module.fail_json(msg="card_services needs service_name: which of them this plan is for")
            shared = plan_shared(plan, name, params, card)
            result = shared["plans"][name]
        else:
            result = plan(params)
    except InfeasibleError as exc:
        module.fail_json(msg=str(exc), alternatives=exc.alternatives)
    if shared:
        # The plan is made at the split's utilization, with no measured pool: so is any re-plan from its inputs.
        params.update(
            gpu_memory_utilization=result["ledger"]["share"]["gpu_memory_utilization"],
            measured_kv_cache_bytes_by_gpu=None,
            pin_measured_kv_cache=False,
        )
    # What NVML gave, resolved: a re-plan (vllm_plan_confirm, the trade-off) needs no NVML facts.
    measured = result["ledger"]["kv_pool_measured"]
    by_gpu = measured and not params["measured_kv_cache_bytes"]  # found in measured_kv_cache_bytes_by_gpu
    params.update(
        gpu_total_bytes=result["ledger"]["gpu_total_bytes"],
        gpu_reserved_bytes=result["ledger"]["gpu_reserved_bytes"],
        compute_capability=result["ledger"]["compute_capability"],
        nvml_gpus=None,
        measured_kv_cache_bytes=result["ledger"]["kv_pool_bytes"] if measured else None,
        pin_kv_cache_memory=bool(params["pin_kv_cache_memory"] or (by_gpu and params["pin_measured_kv_cache"])),
        measured_kv_cache_bytes_by_gpu=None,
        pin_measured_kv_cache=False,
    )
    result["inputs"] = dict((k, v) for k, v in params.items() if v is not None)
    if result["ledger"].get("pooling"):
        # A pooling model answers no context x concurrency question (an encoder-only one has no KV pool at all).
        result["tradeoff"] = {"single_len": None, "skipped": "pooling model"}
    else:
        result["tradeoff"] = tradeoff(
            plan,
            params,
            title="%.0f GiB GPU x %d"
            % (params["gpu_total_bytes"] / float(GIB), result["gpus"]["tensor_parallel_size"]),
        )
    warnings_list = result.pop("warnings")
    for w in warnings_list:
        module.warn(w)
    text = render_ledger(dict(result, warnings=[]))
    if shared:
        split_text = render_split(shared["split"])
        result["card"] = dict(order=shared["order"], split=shared["split"], split_text=split_text)
        text = split_text + "\n\n" + text
    if result["tradeoff"]["single_len"]:
        text += "\n" + "\n".join(render_tradeoff_markdown(result["tradeoff"]))
    return dict(changed=False, ledger_text=text, warnings_list=warnings_list, **result)


if __name__ == "__main__":
    main()
