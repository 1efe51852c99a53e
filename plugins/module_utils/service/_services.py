# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Several vLLM services on one host: the list an inventory gives, checked and resolved.

`airgap_vllm_services` is a list of mappings, one per service; each holds the vllm_plan_* and vllm_service_*
variables that differ for that service (its name, GPUs, port, keys, model, targets). What a service does not
set it takes from the host's own variables, exactly as a single service would. Empty: one service from the
host's variables (what a host always ran).

- service_problems(): everything wrong with the list, one Problem each (the validate action reports them
  with the other variables, before any host changes).
- resolve(): the services of a host, in order, with the name, host port and GPUs each ends up with, and
  `variables`, the variables any of them sets; what the host-wide stages (preflight, image, front, observe) take
  from all of them.
- instances(): what the vllm_plan and vllm_service roles loop over: each service's variables (the host's, with
  the service's own over them: no service inherits what the one before it set) and, for the service role, the
  plan it runs (never another service's).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

from ansible.module_utils.six import string_types

from ansible_collections.airgap.vllm.plugins.module_utils.common._names import service_name_problem
from ansible_collections.airgap.vllm.plugins.module_utils.common._secrets import SECRET_WORDS, redact_vars, secret_vars
from ansible_collections.airgap.vllm.plugins.module_utils.common._stage_state import DEFAULT_INSTANCE
from ansible_collections.airgap.vllm.plugins.module_utils.common._validate import (
    Problem,
    advisories,
    describe_got,
    option_problems,
)

VARIABLE = "airgap_vllm_services"
# The host's variables a service that does not set them inherits, and the rules below read.
HOST_VALUES = (
    "vllm_service_name",
    "vllm_service_port",
    "vllm_plan_gpus",
    "vllm_plan_gpu_memory_utilization",
    "vllm_plan_kv_offloading_gib",
)
PER_SERVICE = re.compile(r"^(vllm_plan|vllm_service|vllm_front)_[a-z0-9_]+$")
# One per host, or produced by the stages: a service cannot have its own.
HOST_WIDE = frozenset(
    (
        "vllm_plan_docker_bin",
        "vllm_service_docker_bin",
        "vllm_plan_kernel_release",
        "vllm_plan_docker_version",
        "vllm_plan_gpu_facts",
        "vllm_plan_record_state",
        "vllm_service_config_dir",
        "vllm_service_image",
        "vllm_service_argv",
        "vllm_service_docker_options",
        "vllm_service_env",
        "vllm_service_plan",
        "vllm_service_model_version",
        "vllm_plan_service_name",
        "vllm_plan_vllm_version",
        # The list itself, and the plans by service the service role picks each service's plan from.
        "vllm_plan_instances",
        "vllm_service_instances",
        "vllm_service_plans",
    )
)


def _got(key, value, options):
    """describe_got, hiding what a no_log option or a secret-sounding name holds."""
    spec = (options or {}).get(key) or {}
    return describe_got(value, secret=bool(spec.get("no_log")) or bool(SECRET_WORDS.search(str(key))))


def _where(index, key=None):
    return "%s[%d]%s" % (VARIABLE, index, "." + key if key else "")


def _gpus(value):
    if value in (None, "", []):
        return frozenset()
    if not isinstance(value, (list, tuple, set, frozenset)):
        value = [value]
    return frozenset(str(g).strip() for g in value if str(g).strip())


def service_problems(services, host_values, options=None):
    """Problems of the airgap_vllm_services list ([] when it holds).

    services: the list as set; host_values: the host's own values of vllm_service_name, vllm_service_port and
    vllm_plan_gpus (what a service that does not set them gets); options: {variable: argument_specs entry} of
    the vllm_plan and vllm_service roles, to check each service's values as the roles would (None: not typed).
    """
    if services in (None, ""):
        return []
    if not isinstance(services, list):
        return [Problem(VARIABLE, describe_got(services), "a list of mappings, one per vLLM service of the host")]
    problems = []
    names, ports, gpus = {}, {}, []
    for index, service in enumerate(services):
        if not isinstance(service, dict):
            problems.append(
                Problem(_where(index), describe_got(service), "a mapping of vllm_plan_* / vllm_service_* variables")
            )
            continue
        for key in sorted(service):
            value = service[key]
            if not isinstance(key, string_types) or not PER_SERVICE.match(key):
                problems.append(
                    Problem(
                        _where(index, str(key)),
                        _got(key, value, options),
                        "only vllm_plan_* and vllm_service_* variables (one service's settings)",
                    )
                )
            elif key in HOST_WIDE:
                problems.append(
                    Problem(
                        _where(index, key),
                        _got(key, value, options),
                        "nothing: %s is one per host (or the stages produce it); set it for the "
                        "host, not for one service" % key,
                    )
                )
            elif options is not None and key not in options:
                problems.append(
                    Problem(
                        _where(index, key),
                        _got(key, value, options),
                        "a variable of the vllm_plan or vllm_service role (no role reads %s)" % key,
                    )
                )
            elif options is not None:
                problems.extend(option_problems(_where(index, key), options[key], value, key=key))
        name = service.get("vllm_service_name")
        why = service_name_problem(name)
        if why is not None:
            # The type and the rule said once: the options check above names a name that is not a string.
            if not (options is not None and "vllm_service_name" in service and "vllm_service_name" in options):
                problems.append(
                    Problem(
                        _where(index, "vllm_service_name"),
                        describe_got(name) if "vllm_service_name" in service else "nothing (not set)",
                        "the service's name (its unit and container): %s" % why,
                    )
                )
        elif name in names:
            problems.append(
                Problem(
                    _where(index, "vllm_service_name"),
                    describe_got(name),
                    "a name no other service uses (%s has it)" % _where(names[name]),
                )
            )
        else:
            names[name] = index
        port = service.get("vllm_service_port", host_values.get("vllm_service_port"))
        # None: the port is not known where the list is read (a role that does not run the service).
        if port is None:
            pass
        elif str(port) in ports:
            problems.append(
                Problem(
                    _where(index, "vllm_service_port"),
                    describe_got(port),
                    "a host port no other service uses (%s has it)" % _where(ports[str(port)]),
                )
            )
        else:
            ports[str(port)] = index
        gpus.append(_gpus(service.get("vllm_plan_gpus", host_values.get("vllm_plan_gpus"))))
    if len(services) > 1:
        for index, selected in enumerate(gpus):
            if not selected:
                problems.append(
                    Problem(
                        _where(index, "vllm_plan_gpus"),
                        "all GPUs (not set)",
                        "the GPUs of this service by NVML index or UUID: several services on one "
                        "host each need their own",
                    )
                )
                continue
            for other in range(index):
                shared = selected & gpus[other]
                # Services listing the very same GPUs share them: the plan stage splits the cards' memory between
                # them (_plan_share, with the model files and NVML's figures) and refuses a split that cannot fit,
                # naming the service to shrink. GPUs shared in part cannot be split (each service's budget is a
                # fraction of every card it runs on).
                if shared and selected != gpus[other]:
                    problems.append(
                        Problem(
                            _where(index, "vllm_plan_gpus"),
                            describe_got(sorted(selected)),
                            "GPUs no other service uses, or exactly the GPUs of the services it shares them with "
                            "(%s has %s: a card is shared whole, its memory split by the planner)"
                            % (_where(other), ", ".join(sorted(gpus[other]))),
                        )
                    )
    return problems


def service_advisories(services):
    """What the services set that is allowed but unwise (advisories(), named by the service's place)."""
    out = []
    if not isinstance(services, list):
        return out
    for index, service in enumerate(services):
        if isinstance(service, dict):
            keyed = dict((k, v) for k, v in service.items() if isinstance(k, string_types))
            out.extend(advisories(keyed, where=lambda key, i=index: _where(i, key)))
    return out


def resolve(services, host_values):
    """The services of a host: {'services': [{'name', 'port', 'gpus', 'gpu_memory_utilization', 'settings'}],
    'variables': [variable, ...], 'preflight': [{'name', 'port', 'gpus'}]} (gpus empty: every GPU), and what
    the host-wide stages take from all of them: 'gpu_memory_utilization' (the highest, or None) and
    'kv_offloading' (any service offloads KV to CPU memory: the image stage then needs the madvise patch rule).

    Raises ValueError with every problem when the list does not hold (service_problems)."""
    problems = service_problems(services, host_values)
    if problems:
        raise ValueError("; ".join(p.line() for p in problems))
    if not services:
        name = host_values.get("vllm_service_name")
        why = None if name in (None, "") else service_name_problem(name)
        if why is not None:
            raise ValueError("vllm_service_name: got %s; wants a service name: %s" % (describe_got(name), why))
        return _with_preflight(
            dict(
                services=[
                    dict(
                        name=host_values.get("vllm_service_name") or DEFAULT_INSTANCE,
                        port=host_values.get("vllm_service_port"),
                        gpus=sorted(_gpus(host_values.get("vllm_plan_gpus"))),
                        gpu_memory_utilization=host_values.get("vllm_plan_gpu_memory_utilization"),
                        settings={},
                    )
                ],
                variables=[],
            ),
            [],
            host_values,
        )
    out, keys = [], set()
    for service in services:
        keys.update(service)
        out.append(
            dict(
                name=service["vllm_service_name"],
                port=service.get("vllm_service_port", host_values.get("vllm_service_port")),
                gpus=sorted(_gpus(service.get("vllm_plan_gpus", host_values.get("vllm_plan_gpus")))),
                gpu_memory_utilization=service.get(
                    "vllm_plan_gpu_memory_utilization", host_values.get("vllm_plan_gpu_memory_utilization")
                ),
                settings=dict(service),
            )
        )
    return _with_preflight(dict(services=out, variables=sorted(keys)), services, host_values)


def _offload_gib(value):
    try:
        return float(value or 0)
    except (TypeError, ValueError, OverflowError):
        return 0.0


def _fraction(value):
    """A utilisation as a number, None when unset; ValueError naming it when it is not a number."""
    if value in (None, ""):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError("vllm_plan_gpu_memory_utilization: got %s; wants a number" % describe_got(value))
    if math.isnan(number) or number in (float("inf"), float("-inf")):
        raise ValueError("vllm_plan_gpu_memory_utilization: got %s; wants a finite number" % describe_got(value))
    return number


def _with_preflight(resolved, services=(), host_values=None):
    """Add what the preflight role checks for each service (its preflight_services): name, port, GPUs; and the
    host-wide values (highest utilisation, any KV offload)."""
    host_values = host_values or {}
    utilizations = [u for u in (_fraction(s["gpu_memory_utilization"]) for s in resolved["services"]) if u is not None]
    resolved["gpu_memory_utilization"] = max(utilizations) if utilizations else None
    host_offload = host_values.get("vllm_plan_kv_offloading_gib")
    resolved["kv_offloading"] = any(
        _offload_gib(s.get("vllm_plan_kv_offloading_gib", host_offload)) > 0 for s in services or [{}]
    )
    resolved["preflight"] = [
        dict(
            dict(name=s["name"], port=s["port"], gpus=s["gpus"]),
            **(
                {"gpu_memory_utilization": s["gpu_memory_utilization"]}
                if s["gpu_memory_utilization"] is not None
                else {}
            ),
        )
        for s in resolved["services"]
    ]
    return resolved


def _skipped_plan(name):
    return {"skipped": True, "skip_reason": "no plan recorded for %s" % name}


def instance_plan(name, plans, own_plan, listed, own_argv=None):
    """The plan a service runs: the one planned (or recorded) for its name; for the host's one service (not listed
    in airgap_vllm_services) the role's own vllm_service_plan when none is, and no plan at all ({}) when the
    role was given the engine's argv by hand; else a skipped result, so the role says the service has no plan
    instead of running another service's."""
    plan = (plans or {}).get(name) if isinstance(plans, dict) else None
    if plan:
        return plan
    if not listed and isinstance(own_plan, dict) and own_plan:
        return own_plan
    if not listed and own_argv:
        return {}
    return _skipped_plan(name)


PARTS = ("public", "secret", "all")


def instances(services, host_vars, plans=None, part="all"):
    """What a role that runs every service of the host loops over: [{'name', 'vars', 'listed'[, 'plan']}].

    services: airgap_vllm_services (empty: the host's one service, from host_vars alone); host_vars: the role's
    variables as the role sees them ({name: value}, its defaults included); plans: {service name: plan} (the
    vllm_service role; None for the vllm_plan role). 'vars' is host_vars with the service's own settings over
    them and vllm_service_name set to the service's name. Raises ValueError with every problem of the list.

    part: 'all', every value as given; 'public', the secrets in 'vars' redacted (_secrets.redact: what a task may
    print, a loop item included); 'secret', {service name: {variable: value}} of the secret variables alone (what
    a no_log task takes, for the variables the public part hides)."""
    if part not in PARTS:
        raise ValueError("part: got %r; wants one of %s" % (part, ", ".join(PARTS)))
    host_vars = dict(host_vars or {})
    resolved = resolve(services or [], dict((k, host_vars.get(k)) for k in HOST_VALUES))
    listed = bool(services)
    out = []
    for service in resolved["services"]:
        variables = dict(host_vars)
        variables.update(service["settings"])
        variables["vllm_service_name"] = service["name"]
        if part == "public":
            variables = redact_vars(variables)
        elif part == "secret":
            out.append((service["name"], secret_vars(variables)))
            continue
        item = dict(name=service["name"], vars=variables, listed=listed)
        if plans is not None:
            item["plan"] = instance_plan(
                service["name"], plans, host_vars.get("vllm_service_plan"), listed, host_vars.get("vllm_service_argv")
            )
        out.append(item)
    if part == "secret":
        return dict(out)
    return start_order(out) if plans is not None else out


def _card_of(item):
    plan = item.get("plan")
    share = ((plan.get("ledger") or {}).get("share") if isinstance(plan, dict) else None) or {}
    names = share.get("card_services") if isinstance(share, dict) else None
    return tuple(names) if isinstance(names, list) and len(names) > 1 else None


def start_order(items):
    """The services in the order the service role starts them: the operator's, but the services of one shared card
    (their plans' ledger ``share``, _plan_share.plan_card) in the split's start order, in the places the card's
    services hold in the list. The role starts them one after another, each waiting for the one before to be healthy
    (its /health): a later one's start-up check then sees the memory the earlier ones took, as the split planned.
    items: instances()' [{'name', 'plan', ...}]."""
    out = list(items)
    cards = {}
    for position, item in enumerate(out):
        names = _card_of(item)
        if names:
            cards.setdefault(names, []).append(position)
    for names, positions in cards.items():
        members = sorted(
            (out[p] for p in positions),
            key=lambda i: names.index(i["name"]) if i["name"] in names else len(names),
        )
        for position, item in zip(positions, members):
            out[position] = item
    return out


def recorded_plans(plan_records):
    """{service name: plan} from the plan stage's records by service (stage_state's instances.plan)."""
    out = {}
    for name, record in sorted((plan_records or {}).items()):
        plan = ((record or {}).get("facts") or {}).get("vllm_plan_result") if isinstance(record, dict) else None
        if isinstance(plan, dict) and plan:
            out[name] = plan
    return out
