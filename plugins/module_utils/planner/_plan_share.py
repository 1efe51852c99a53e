# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Several vLLM services on one GPU: the card's memory split between them, and the order they start in.

Pure, stdlib only, Python 3.7-clean. Paths cited are inside the vLLM 0.27.1 wheel's ``vllm/``.

How a vLLM process on a card that another one already uses sizes itself (0.27.1):
- Each process first creates its CUDA context (and NCCL), then takes a memory snapshot
  (v1/worker/gpu_worker.py:371-396). Its budget is ``ceil(cudaMemGetInfo total x gpu_memory_utilization)``
  (v1/worker/utils.py:409 request_memory): a fraction of the card's TOTAL, whoever else is on it. The only look
  at the others is the start-up check right there: the snapshot's FREE memory (the total less what every other
  process holds, and less this process's own CUDA context) must be at least that budget, or vLLM exits with
  "Free memory on device ... is less than desired GPU memory utilization".
- A model with a KV cache then fills its budget: KV pool = budget - its own non-KV memory (gpu_worker.py:541-546),
  what other processes hold is not subtracted. Its footprint on the card is CUDA context + budget + what its model
  runner allocates after the pool (the ledger's ``outside_pool``).
- A model without KV layers (an encoder-only embedder or cross-encoder) skips the memory profile and allocates no
  pool (v1/engine/core.py:281): its footprint is CUDA context + its non-KV memory, whatever its utilization says;
  its utilization only sets what its start-up check asks to be free.
So the utilizations must be split: their sum plus the CUDA contexts and the parts outside the budgets must fit the
card, and each start must find its budget free after the services started before it. split_card() decides that;
plan_card() plans each service at its share with _planner.plan.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_common import (
    GIB,
    InfeasibleError,
    PlanError,
    TargetsError,
    fmt_gib,
)
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_ledger import ESTIMATE_ERROR_LOW, KV_POOL_MARGIN

# A vLLM process's CUDA context (and NCCL) before its snapshot: what its start-up check finds already gone from an
# empty card. Measured on an H100 80GB HBM3 (driver 580.159.04, vLLM 0.26.0, issue 43): "Free memory on device
# (78.66/79.18 GiB) on startup" = 0.52 GiB. It lies outside every budget, once per process.
CUDA_CONTEXT_BYTES = int(0.52 * GIB)
# The card's memory kept free under the services: the largest under-count of non-KV memory observed
# (_plan_ledger.ESTIMATE_ERROR_LOW). A service with a KV pool cannot outgrow its budget (its pool shrinks), but an
# encoder-only one's footprint and every service's parts outside its budget are estimates.
SHARE_MARGIN_BYTES = ESTIMATE_ERROR_LOW
# Utilizations are given in thousandths (48 MiB of a 48 GB card): fine enough not to waste the card, short on argv.
UTILIZATION_STEP = 1000


def vllm_budget(cuda_total_bytes, utilization):
    """The budget vLLM takes for ``utilization`` as written on its argv (v1/worker/utils.py:414)."""
    return int(math.ceil(cuda_total_bytes * float(utilization)))


def _as_float(steps):
    # The float argparse reads from "%.3f": the value vLLM computes with, not steps / 1000.0's neighbour.
    return float("%.3f" % (steps / float(UTILIZATION_STEP)))


def utilization_at_least(cuda_total_bytes, need_bytes):
    """The smallest utilization (in thousandths) whose budget holds ``need_bytes``."""
    steps = max(1, int(math.ceil(need_bytes * float(UTILIZATION_STEP) / cuda_total_bytes)))
    while steps > 1 and vllm_budget(cuda_total_bytes, _as_float(steps - 1)) >= need_bytes:
        steps -= 1
    while vllm_budget(cuda_total_bytes, _as_float(steps)) < need_bytes:
        steps += 1
    return _as_float(steps)


def utilization_at_most(cuda_total_bytes, room_bytes):
    """The largest utilization (in thousandths) whose budget, as vLLM rounds it up, stays within ``room_bytes``;
    0.0 when not even 0.001 fits."""
    steps = int(math.floor(room_bytes * float(UTILIZATION_STEP) / cuda_total_bytes)) if room_bytes > 0 else 0
    steps = min(steps, UTILIZATION_STEP)
    while steps > 0 and vllm_budget(cuda_total_bytes, _as_float(steps)) > room_bytes:
        steps -= 1
    while steps < UTILIZATION_STEP and vllm_budget(cuda_total_bytes, _as_float(steps + 1)) <= room_bytes:
        steps += 1
    return _as_float(steps) if steps else 0.0


def _check_services(services):
    names = set()
    for s in services:
        for key in ("name", "need_bytes"):
            if key not in s:
                raise TargetsError("a shared-card service lacks %r: %r" % (key, s))
        if s["name"] in names:
            raise TargetsError("service %s is listed twice on one card" % s["name"])
        names.add(s["name"])
        if int(s["need_bytes"]) <= 0:
            raise TargetsError("service %s needs %r bytes: a service needs memory" % (s["name"], s["need_bytes"]))
    rest = [s["name"] for s in services if s.get("takes_rest")]
    if len(rest) > 1:
        raise TargetsError(
            "%s would each take the rest of the card: one service (the chat model) takes it, the others "
            "need a context to size them by" % " and ".join(rest)
        )


def split_card(
    cuda_total_bytes,
    services,
    others_bytes=0,
    margin_bytes=SHARE_MARGIN_BYTES,
    context_bytes=CUDA_CONTEXT_BYTES,
):
    """Split one card between ``services``: the utilization of each, their start order, and what each takes.

    cuda_total_bytes: the card's total as CUDA sees it (NVML's total less its reserved memory); others_bytes:
    memory other processes hold on it. services: [{'name', 'need_bytes' (inside its budget: non-KV memory, and
    for a model with a KV cache the pool its promise needs), 'outside_bytes' (allocated outside its budget,
    default 0), 'fills_budget' (a KV pool takes the whole budget; False for an encoder-only model), 'takes_rest'
    (at most one: its budget is all the card leaves), 'kv_bytes' (the part of need_bytes a shorter context or
    fewer requests can give back)}], in the operator's order.

    Returns {'order': [names in start order], 'services': [{'name', 'gpu_memory_utilization', 'budget_bytes',
    'fills_budget', 'outside_bytes', 'footprint_bytes' (CUDA context + budget, or its need without a KV pool, +
    outside_bytes), 'start_free_bytes' (what its start-up check finds free, the services before it running),
    'restart_free_bytes' (what it finds when it restarts alone, every other service running), 'share' (of the
    card)}] in start order, 'cuda_total_bytes', 'others_bytes', 'margin_bytes', 'context_bytes', 'free_bytes'
    (left on the card)}. Raises InfeasibleError naming the service to shrink and by how much."""
    _check_services(services)
    total = int(cuda_total_bytes)
    available = total - int(others_bytes) - int(margin_bytes)
    rows = {}
    for s in services:
        if s.get("takes_rest"):
            continue
        need = int(s["need_bytes"])
        u = utilization_at_least(total, need)
        budget = vllm_budget(total, u)
        held = budget if s.get("fills_budget", True) else need
        rows[s["name"]] = dict(
            name=s["name"],
            gpu_memory_utilization=u,
            budget_bytes=budget,
            fills_budget=bool(s.get("fills_budget", True)),
            outside_bytes=int(s.get("outside_bytes") or 0),
            footprint_bytes=context_bytes + held + int(s.get("outside_bytes") or 0),
        )
    fixed = sum(r["footprint_bytes"] for r in rows.values())
    rest = [s for s in services if s.get("takes_rest")]
    if rest:
        s = rest[0]
        room = available - fixed - context_bytes - int(s.get("outside_bytes") or 0)
        u = utilization_at_most(total, room)
        budget = vllm_budget(total, u) if u else 0
        if budget < int(s["need_bytes"]):
            _refuse(total, services, rows, int(s["need_bytes"]) - max(budget, 0), available, others_bytes, margin_bytes)
        rows[s["name"]] = dict(
            name=s["name"],
            gpu_memory_utilization=u,
            budget_bytes=budget,
            fills_budget=True,
            outside_bytes=int(s.get("outside_bytes") or 0),
            footprint_bytes=context_bytes + budget + int(s.get("outside_bytes") or 0),
        )
    used = sum(r["footprint_bytes"] for r in rows.values())
    if used > available:
        _refuse(total, services, rows, used - available, available, others_bytes, margin_bytes)
    # Start order: the models that hold less than their budget (no KV pool) first, so that their start-up checks
    # ask for the least; the one taking the rest last, when everything it leaves room for already holds its memory.
    order = sorted(
        services,
        key=lambda x: (bool(x.get("takes_rest")), bool(x.get("fills_budget", True)), services.index(x)),
    )
    out, before = [], 0
    for s in order:
        r = rows[s["name"]]
        r["start_free_bytes"] = total - int(others_bytes) - before - context_bytes
        r["restart_free_bytes"] = total - int(others_bytes) - (used - r["footprint_bytes"]) - context_bytes
        r["share"] = round(r["footprint_bytes"] / float(total), 4)
        if r["start_free_bytes"] < r["budget_bytes"] or r["restart_free_bytes"] < r["budget_bytes"]:
            raise InfeasibleError(
                "%s would not pass vLLM's start-up check: %s free, its budget %s"
                % (s["name"], fmt_gib(min(r["start_free_bytes"], r["restart_free_bytes"])), fmt_gib(r["budget_bytes"]))
            )
        before += r["footprint_bytes"]
        out.append(r)
    return {
        "order": [r["name"] for r in out],
        "services": out,
        "cuda_total_bytes": total,
        "others_bytes": int(others_bytes),
        "margin_bytes": int(margin_bytes),
        "context_bytes": context_bytes,
        "free_bytes": total - int(others_bytes) - used,
    }


def _refuse(total, services, rows, short, available, others_bytes, margin_bytes):
    """The refusal of a split that cannot fit: every service's need, how much is missing, and which service to
    shrink (the one whose promised KV can give the most back) or move."""
    needs = ", ".join(
        "%s %s%s%s"
        % (
            s["name"],
            fmt_gib(int(s["need_bytes"])),
            " + %s outside its budget" % fmt_gib(int(s["outside_bytes"])) if s.get("outside_bytes") else "",
            " (takes the rest)" if s.get("takes_rest") else "",
        )
        for s in services
    )
    shrinkable = sorted(services, key=lambda s: (-int(s.get("kv_bytes") or 0), services.index(s)))
    first = shrinkable[0]
    if int(first.get("kv_bytes") or 0) >= short:
        advice = "shrink %s by %s (a shorter context or fewer concurrent requests: its promised KV is %s)" % (
            first["name"],
            fmt_gib(short),
            fmt_gib(int(first["kv_bytes"])),
        )
    else:
        biggest = max(services, key=lambda s: int(s["need_bytes"]))
        advice = "shrink %s by %s, or give it a GPU of its own" % (biggest["name"], fmt_gib(short))
    raise InfeasibleError(
        "the services do not fit one card: %s of %s (%s less %s held by other processes and %s kept free) after a "
        "%s CUDA context each; needs: %s. %s short: %s."
        % (
            fmt_gib(available - len(services) * CUDA_CONTEXT_BYTES),
            fmt_gib(total),
            fmt_gib(total),
            fmt_gib(int(others_bytes)),
            fmt_gib(int(margin_bytes)),
            fmt_gib(CUDA_CONTEXT_BYTES),
            needs,
            fmt_gib(short),
            advice,
        )
    )


def need_of(result):
    """What a planned service needs on a shared card, from its plan (_planner.plan's result) at any utilization:
    {'need_bytes', 'outside_bytes', 'fills_budget', 'kv_bytes'}. A KV model needs its non-KV memory, the pool
    margin and the KV of its promise (concurrency x one request of its context); an encoder-only model its
    footprint. Outside its budget: the ledger's outside_pool and FlashInfer's late workspace."""
    L = result["ledger"]
    outside = sum(int(c["bytes"]) for c in L.get("outside_pool") or []) + int(L.get("late_workspace_bytes") or 0)
    pooling = L.get("pooling") or {}
    if pooling.get("encoder_only"):
        return {"need_bytes": int(L["footprint_bytes"]), "outside_bytes": outside, "fills_budget": False, "kv_bytes": 0}
    kv = int(L["concurrency"]) * int(L["kv_bytes_per_full_request"])
    return {
        "need_bytes": int(L["non_kv_bytes"]) + KV_POOL_MARGIN + kv,
        "outside_bytes": outside,
        "fills_budget": True,
        "kv_bytes": kv,
    }


# The context a service taking the rest of the card is probed at when it asks for "max": its need is its non-KV
# memory and one such request per concurrent user; plan() then gives it the longest context its share holds.
PROBE_CONTEXT = 1024


def plan_card(plan, services, cuda_total_bytes=None, others_bytes=0, margin_bytes=SHARE_MARGIN_BYTES):
    """Plan services that share one card. ``plan``: _planner.plan; services: [{'name', 'params' (planner params,
    the same GPUs for all), 'config', 'weight_bytes', 'weight_source', 'st' (optional, as plan() takes them)}].

    A generative service at context "max" (at most one) takes the rest of the card; every other service is sized
    by its promise (concurrency x its context; an encoder-only model by its own memory), and a pooling model with a
    KV cache must give its context. Returns
    {'plans': {name: plan result, its ledger carrying 'share'}, 'order': [start order], 'split': split_card()}."""
    if not services:
        raise TargetsError("no services to plan on the card")
    keys = set(tuple(str(g) for g in (s["params"].get("gpus") or [])) for s in services)
    if len(keys) > 1:
        raise TargetsError(
            "services sharing a card must list the same GPUs: %s"
            % "; ".join(
                "%s: %s" % (s["name"], ",".join(map(str, s["params"].get("gpus") or [])) or "all") for s in services
            )
        )

    def run(s, **over):
        params = dict(s["params"], **over)
        return plan(params, s.get("config"), s.get("weight_bytes"), s.get("weight_source"), s.get("st"))

    rows = []
    for s in services:
        # Probed at the whole card: the non-KV memory and one request's KV do not depend on the utilization, and a
        # promise that needs more than the split can give is refused by the split, with the service to shrink.
        probe = run(s, gpu_memory_utilization=1.0)
        L = probe["ledger"]
        at_max = str(s["params"].get("context", "max")).strip().lower() in ("max", "auto", "-1")
        takes_rest = not L.get("pooling") and at_max
        over = {}
        if L.get("pooling") and not L["pooling"]["encoder_only"] and at_max:
            raise TargetsError(
                "%s shares the card: give its context (a pooling model with a KV cache is sized by concurrency x "
                "context; only a chat model at context max takes the rest of the card)" % s["name"]
            )
        if takes_rest:
            over = {"context": PROBE_CONTEXT, "gpu_memory_utilization": 1.0}
        row = need_of(run(s, **over) if over else probe)
        row.update(name=s["name"], takes_rest=takes_rest)
        rows.append(row)
        if cuda_total_bytes is None:
            cuda_total_bytes = L["cuda_total_bytes"]
    split = split_card(cuda_total_bytes, rows, others_bytes, margin_bytes)
    plans = {}
    by_name = dict((r["name"], r) for r in split["services"])
    for s in services:
        share = by_name[s["name"]]
        try:
            result = run(s, gpu_memory_utilization=share["gpu_memory_utilization"])
        except PlanError as exc:
            raise type(exc)(
                "%s at its share of the card (gpu_memory_utilization %.3f): %s"
                % (s["name"], share["gpu_memory_utilization"], exc)
            )
        result["ledger"]["share"] = dict(share, order=split["order"].index(s["name"]) + 1, card_services=split["order"])
        plans[s["name"]] = result
    return {"plans": plans, "order": split["order"], "split": split}


def render_split(split):
    """The split as a table for a human (the ledger's share of each service)."""
    rows = [
        "card: %s CUDA total, %s held by other processes, %s kept free, %s CUDA context per service"
        % (
            fmt_gib(split["cuda_total_bytes"]),
            fmt_gib(split["others_bytes"]),
            fmt_gib(split["margin_bytes"]),
            fmt_gib(split["context_bytes"]),
        ),
        "%-3s %-24s %9s %10s %10s %7s %12s" % ("#", "service", "util", "budget", "footprint", "share", "start free"),
    ]
    for i, r in enumerate(split["services"]):
        rows.append(
            "%-3d %-24s %9.3f %10s %10s %6.1f%% %12s"
            % (
                i + 1,
                r["name"],
                r["gpu_memory_utilization"],
                fmt_gib(r["budget_bytes"]),
                fmt_gib(r["footprint_bytes"]),
                100 * r["share"],
                fmt_gib(r["start_free_bytes"]),
            )
        )
    rows.append("left free on the card: %s" % fmt_gib(split["free_bytes"]))
    return "\n".join(rows)


# The vllm_launch_plan options a service's plan is made from, each with the vllm_plan role variable that gives it
# (roles/vllm_plan/tasks/configure.yml passes the same ones for the service it plans; a unit test holds the two
# to each other). A card mate is planned from these, its own settings; the card's facts (the GPUs, NVML, the host's
# kernel and Docker, the vLLM release) are the planned service's; its utilization is the split's; a KV pool measured
# on a card of its own says nothing of a share, so the measured-pool options are not passed for any service of a
# shared card. Empty values of the OMIT_EMPTY options are left out, as the role's `or omit` leaves them.
MATE_OPTIONS = {
    "model_dir": "vllm_plan_model_dir",
    "served_model_name": "vllm_plan_served_model_name",
    "tensor_parallel_size": "vllm_plan_tensor_parallel_size",
    "concurrency": "vllm_plan_concurrency",
    "context": "vllm_plan_context",
    "kv_cache_dtype": "vllm_plan_kv_cache_dtype",
    "num_speculative_tokens": "vllm_plan_num_speculative_tokens",
    "prefix_caching": "vllm_plan_prefix_caching",
    "kv_offloading_gib": "vllm_plan_kv_offloading_gib",
    "reasoning_parser": "vllm_plan_reasoning_parser",
    "tool_call_parser": "vllm_plan_tool_call_parser",
    "chat_template_kwargs": "vllm_plan_chat_template_kwargs",
    "language_model_only": "vllm_plan_language_model_only",
    "enforce_eager": "vllm_plan_enforce_eager",
    "layer_layout": "vllm_plan_layer_layout",
    "require_full_length_concurrency": "vllm_plan_require_full_length_concurrency",
    "port": "vllm_plan_port",
    "extra_args": "vllm_plan_extra_args",
    "extra_docker_options": "vllm_plan_extra_docker_options",
    "override_flags": "vllm_plan_override_flags",
    "log_max_size": "vllm_plan_log_max_size",
    "log_max_file": "vllm_plan_log_max_file",
}
OMIT_EMPTY = frozenset(
    (
        "served_model_name",
        "tensor_parallel_size",
        "reasoning_parser",
        "tool_call_parser",
        "chat_template_kwargs",
        "layer_layout",
    )
)
# The role variables that are the card's, or the split's, not a mate's own (configure.yml passes them too).
CARD_VARIABLES = {
    "gpus": "vllm_plan_gpus",
    "gpu_count": "vllm_plan_gpu_count",
    "gpu_memory_utilization": "vllm_plan_gpu_memory_utilization",
    "measured_kv_cache_bytes_by_gpu": "vllm_plan_measured_kv_cache_bytes",
    "pin_measured_kv_cache": "vllm_plan_pin_measured_kv_cache",
}
# What every service of the card plans with, taken from the planned service's own call.
CARD_FACTS = (
    "gpu_total_bytes",
    "gpu_reserved_bytes",
    "gpu_count",
    "gpus",
    "nvml_gpus",
    "compute_capability",
    "host_ram_bytes",
    "kernel",
    "docker_version",
    "vllm_version",
    "docker_log_driver",
)
MEASURED_OPTIONS = ("measured_kv_cache_bytes", "measured_kv_cache_bytes_by_gpu")


def _gpu_set(value):
    if value in (None, "", []):
        return frozenset()
    if not isinstance(value, (list, tuple)):
        value = [value]
    return frozenset(str(g).strip() for g in value if str(g).strip())


def card_services(instances, name):
    """The services that share the GPUs of service ``name``, in the operator's order (``name`` among them), each as
    {'name', 'options' (its vllm_launch_plan options, MATE_OPTIONS from its variables)}; [] when it has its GPUs to
    itself. instances: what the vllm_plan role loops over ([{'name', 'vars'}], _services.instances). Services share
    a card when they list the same GPUs (validate refuses GPUs shared only in part, and unlisted GPUs next to
    another service: _services.service_problems)."""
    by_name = dict((i["name"], i) for i in instances or [])
    if name not in by_name:
        raise TargetsError("service %s is not one of the host's services (%s)" % (name, ", ".join(sorted(by_name))))
    own = _gpu_set((by_name[name].get("vars") or {}).get("vllm_plan_gpus"))
    if not own:
        return []
    mates = [i for i in instances if _gpu_set((i.get("vars") or {}).get("vllm_plan_gpus")) == own]
    if len(mates) < 2:
        return []
    out = []
    for i in mates:
        variables = i.get("vars") or {}
        options = {}
        for option, variable in sorted(MATE_OPTIONS.items()):
            value = variables.get(variable)
            if value is None or (option in OMIT_EMPTY and value in ("", 0, "0", {}, [])):
                continue
            options[option] = value
        out.append({"name": i["name"], "options": options})
    return out


def plan_shared(plan, name, params, card):
    """Plan service ``name`` (its vllm_launch_plan ``params``) at its share of the card it shares with the services
    of ``card`` (card_services(): every service of the card, ``name`` among them; their own options, the card's
    facts taken from ``params``). Returns plan_card()'s answer; its ``plans[name]`` is this service's plan, made at
    its share (--gpu-memory-utilization the split's)."""
    names = [c.get("name") for c in card or []]
    if name not in names:
        raise TargetsError("service %s is not among the services of its card (%s)" % (name, ", ".join(map(str, names))))
    if len(set(names)) != len(names):
        raise TargetsError("a service is listed twice on one card: %s" % ", ".join(map(str, names)))
    facts = dict((k, params.get(k)) for k in CARD_FACTS if params.get(k) is not None)
    services = []
    for c in card:
        if c["name"] == name:
            own = dict(params)
        else:
            unknown = sorted(set(c.get("options") or {}) - set(MATE_OPTIONS))
            if unknown:
                raise TargetsError(
                    "card service %s: %s not a service's own planning option (the card's are the planned "
                    "service's)" % (c["name"], ", ".join(unknown))
                )
            own = dict(c.get("options") or {}, **facts)
        for key in MEASURED_OPTIONS:
            own[key] = None
        own["pin_kv_cache_memory"] = own["pin_measured_kv_cache"] = False
        services.append({"name": c["name"], "params": own})
    return plan_card(plan, services)
