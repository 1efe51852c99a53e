#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_card_plan
short_description: Split one GPU between several vLLM 0.27.1 services and plan each at its share
version_added: "0.1.0"
description:
  - Plans services that share the same GPU(s) - a chat model with an embedding model and a reranker, say - the way
    M(airgap.vllm.vllm_launch_plan) plans one, after splitting the card between them.
  - vLLM's C(--gpu-memory-utilization) is a fraction of the card's total that one process may reach, and its only
    look at other processes is its start-up check (the free memory must hold its budget). The split gives each
    service the utilization its promise needs (an encoder-only model, which allocates no KV pool, the least that
    covers its memory), the generative service the rest, so that the budgets, one CUDA context per process and what
    each allocates outside its budget fit the card with a margin kept free; and it orders the starts so that every
    start-up check finds its budget free, also when a service restarts alone.
  - A split that cannot fit fails, naming the service to shrink and by how much.
  - Pure computation; runs on the target or on localhost and never touches the network.
options:
  services:
    description:
      - The services on the card, each a mapping with C(name) and the options of M(airgap.vllm.vllm_launch_plan)
        for that service (C(model_dir), C(concurrency), C(context), C(pooling_task), ...), in the operator's order.
      - All must list the same C(gpus). At most one generative service; it takes the rest of the card (its
        C(context) may be C(max)). Every pooling model with a KV cache needs a C(context) (its promise is
        concurrency x context); an encoder-only one is sized by its own positions.
      - Their C(gpu_memory_utilization) is the split's, whatever they say.
    type: list
    elements: dict
    required: true
  nvml_gpus:
    description:
      - The C(gpus) list M(airgap.vllm.nvml_info) returns, given to every service that does not carry its own (the
        card's total and reserved memory, its capability).
    type: list
    elements: dict
  others_bytes:
    description:
      - Memory that processes other than these services hold on the card (bytes). Their start-up checks see it gone.
    type: int
    default: 0
  margin_bytes:
    description:
      - Memory kept free on the card under the services. Default, the largest under-count of non-KV memory observed
        (C(_plan_ledger.ESTIMATE_ERROR_LOW), 1.95 GiB).
    type: int
attributes:
  check_mode:
    support: full
    description: Read-only; the plan is the same in check mode.
  diff_mode:
    support: none
    description: Nothing to show as a diff.
  idempotent:
    support: full
    description: Same inputs give the same plans; nothing on the host changes.
author:
  - airgap.vllm maintainers (@airgap-vllm)
"""

EXAMPLES = r"""
- name: A chat model, an embedder and a reranker on GPU 0 of a 48 GB card
  airgap.vllm.vllm_card_plan:
    nvml_gpus: "{{ gpu_facts.gpus }}"
    services:
      - name: chat
        model_dir: /opt/models/Qwen3.x-27B-FP8
        gpus: ["0"]
        concurrency: 4
        context: max
        kv_cache_dtype: fp8_e4m3
        num_speculative_tokens: 3
        language_model_only: true
      - name: embed
        model_dir: /opt/models/bge-m3
        gpus: ["0"]
        concurrency: 16
      - name: rerank
        model_dir: /opt/models/bge-reranker-v2-m3
        gpus: ["0"]
        concurrency: 16
  register: card
"""

RETURN = r"""
order:
  description: The services in the order they must start (each start-up check sees the memory the earlier ones hold).
  returned: success
  type: list
  elements: str
plans:
  description:
    - Each service's plan by name, as M(airgap.vllm.vllm_launch_plan) returns it (C(argv), C(flags), C(docker_options),
      C(env), C(ledger), C(warnings_list), C(ledger_text)); its ledger's C(share) is its row of RV(split).
  returned: success
  type: dict
split:
  description:
    - The card's split - C(cuda_total_bytes), C(others_bytes), C(margin_bytes), C(context_bytes) (one CUDA context),
      C(free_bytes) (left on the card) and C(services) in start order, each with C(gpu_memory_utilization),
      C(budget_bytes), C(footprint_bytes), C(share) (of the card), C(start_free_bytes) and C(restart_free_bytes)
      (what its start-up check finds free at its turn, and restarting alone).
  returned: success
  type: dict
split_text:
  description: The split as a table for humans.
  returned: success
  type: str
"""

from ansible_collections.airgap.vllm.plugins.module_utils._module import ansible_module
from ansible_collections.airgap.vllm.plugins.module_utils._plan_common import InfeasibleError, PlanError, TargetsError
from ansible_collections.airgap.vllm.plugins.module_utils._plan_ledger import render_ledger
from ansible_collections.airgap.vllm.plugins.module_utils._plan_share import (
    SHARE_MARGIN_BYTES,
    plan_card,
    render_split,
)
from ansible_collections.airgap.vllm.plugins.module_utils._plan_targets import DEFAULTS
from ansible_collections.airgap.vllm.plugins.module_utils._planner import plan


def argument_spec():
    return dict(
        services=dict(type="list", elements="dict", required=True),
        nvml_gpus=dict(type="list", elements="dict"),
        others_bytes=dict(type="int", default=0),
        margin_bytes=dict(type="int"),
    )


def card_services(services, nvml_gpus=None):
    """The module's services as _plan_share.plan_card takes them: a name each, planner options only."""
    out = []
    for index, service in enumerate(services):
        params = dict(service)
        name = params.pop("name", None)
        if not name or not isinstance(name, str):
            raise TargetsError("services[%d]: give the service's name" % index)
        unknown = sorted(set(params) - set(DEFAULTS))
        if unknown:
            raise TargetsError(
                "services[%d] (%s): %s is not an option of airgap.vllm.vllm_launch_plan" % (index, name, unknown[0])
            )
        if nvml_gpus and not params.get("nvml_gpus"):
            params["nvml_gpus"] = nvml_gpus
        out.append({"name": name, "params": params})
    return out


@ansible_module(argument_spec(), errors=(PlanError,))
def main(module):
    p = module.params
    margin = SHARE_MARGIN_BYTES if p["margin_bytes"] is None else p["margin_bytes"]
    try:
        out = plan_card(plan, card_services(p["services"], p["nvml_gpus"]), None, p["others_bytes"], margin)
    except InfeasibleError as exc:
        module.fail_json(msg=str(exc), alternatives=exc.alternatives)
    plans = {}
    for name, result in out["plans"].items():
        warnings_list = result.pop("warnings")
        result["ledger_text"] = render_ledger(dict(result, warnings=[]))
        result["warnings_list"] = warnings_list
        for w in warnings_list:
            module.warn("%s: %s" % (name, w))
        plans[name] = result
    return dict(
        changed=False, order=out["order"], plans=plans, split=out["split"], split_text=render_split(out["split"])
    )


if __name__ == "__main__":
    main()
