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
  `variables`, the variables any of them sets (site.yml captures the host's values of those once, so every
  service starts from the host's, not from the service before it).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.six import string_types

from ansible_collections.airgap.vllm.plugins.module_utils._stage_state import DEFAULT_INSTANCE, INSTANCE_RE
from ansible_collections.airgap.vllm.plugins.module_utils._validate import Problem, check_option, describe_got

VARIABLE = "airgap_vllm_services"
# The host's variables a service that does not set them inherits, and the rules below read.
HOST_VALUES = ("vllm_service_name", "vllm_service_port", "vllm_plan_gpus", "vllm_plan_gpu_memory_utilization",
               "vllm_plan_kv_offloading_gib")
PER_SERVICE = re.compile(r"^(vllm_plan|vllm_service)_[a-z0-9_]+$")
# One per host, or produced by the stages: a service cannot have its own.
HOST_WIDE = frozenset((
    "vllm_plan_docker_bin", "vllm_service_docker_bin", "vllm_plan_kernel_release", "vllm_plan_docker_version",
    "vllm_plan_gpu_facts", "vllm_plan_record_state", "vllm_service_config_dir", "vllm_service_image",
    "vllm_service_argv", "vllm_service_docker_options", "vllm_service_env", "vllm_service_plan",
    "vllm_service_model_version", "vllm_plan_service_name",
))


_SECRET_WORDS = re.compile(r"key|token|secret|passw", re.I)


def _got(key, value, options):
    """describe_got, hiding what a no_log option or a secret-sounding name holds."""
    spec = (options or {}).get(key) or {}
    return describe_got(value, secret=bool(spec.get("no_log")) or bool(_SECRET_WORDS.search(str(key))))


def _where(index, key=None):
    return "%s[%d]%s" % (VARIABLE, index, "." + key if key else "")


def _gpus(value):
    if value in (None, "", []):
        return frozenset()
    if isinstance(value, (string_types, int)):
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
            problems.append(Problem(_where(index), describe_got(service),
                                    "a mapping of vllm_plan_* / vllm_service_* variables"))
            continue
        for key in sorted(service):
            value = service[key]
            if not isinstance(key, string_types) or not PER_SERVICE.match(key):
                problems.append(Problem(_where(index, str(key)), _got(key, value, options),
                                        "only vllm_plan_* and vllm_service_* variables (one service's settings)"))
            elif key in HOST_WIDE:
                problems.append(Problem(_where(index, key), _got(key, value, options),
                                        "nothing: %s is one per host (or the stages produce it); set it for the "
                                        "host, not for one service" % key))
            elif options is not None and key not in options:
                problems.append(Problem(_where(index, key), _got(key, value, options),
                                        "a variable of the vllm_plan or vllm_service role (no role reads %s)" % key))
            elif options is not None:
                problem = check_option(_where(index, key), options[key], value)
                if problem:
                    problems.append(problem)
        name = service.get("vllm_service_name")
        if not isinstance(name, string_types) or not INSTANCE_RE.match(name):
            problems.append(Problem(_where(index, "vllm_service_name"),
                                    describe_got(name) if "vllm_service_name" in service else "nothing (not set)",
                                    "the service's name (its unit and container): letters, digits, '-', '_', '.'"))
        elif name in names:
            problems.append(Problem(_where(index, "vllm_service_name"), describe_got(name),
                                    "a name no other service uses (%s has it)" % _where(names[name])))
        else:
            names[name] = index
        port = service.get("vllm_service_port", host_values.get("vllm_service_port"))
        if str(port) in ports:
            problems.append(Problem(_where(index, "vllm_service_port"), describe_got(port),
                                    "a host port no other service uses (%s has it)" % _where(ports[str(port)])))
        else:
            ports[str(port)] = index
        gpus.append(_gpus(service.get("vllm_plan_gpus", host_values.get("vllm_plan_gpus"))))
    if len(services) > 1:
        for index, selected in enumerate(gpus):
            if not selected:
                problems.append(Problem(_where(index, "vllm_plan_gpus"), "all GPUs (not set)",
                                        "the GPUs of this service by NVML index or UUID: several services on one "
                                        "host each need their own"))
                continue
            for other in range(index):
                shared = selected & gpus[other]
                if shared:
                    problems.append(Problem(_where(index, "vllm_plan_gpus"), describe_got(sorted(selected)),
                                            "GPUs no other service uses (%s has %s)"
                                            % (_where(other), ", ".join(sorted(shared)))))
    return problems


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
        return _with_preflight(dict(services=[dict(
            name=host_values.get("vllm_service_name") or DEFAULT_INSTANCE,
            port=host_values.get("vllm_service_port"),
            gpus=sorted(_gpus(host_values.get("vllm_plan_gpus"))),
            gpu_memory_utilization=host_values.get("vllm_plan_gpu_memory_utilization"),
            settings={})], variables=[]), [], host_values)
    out, keys = [], set()
    for service in services:
        keys.update(service)
        out.append(dict(
            name=service["vllm_service_name"],
            port=service.get("vllm_service_port", host_values.get("vllm_service_port")),
            gpus=sorted(_gpus(service.get("vllm_plan_gpus", host_values.get("vllm_plan_gpus")))),
            gpu_memory_utilization=service.get("vllm_plan_gpu_memory_utilization",
                                               host_values.get("vllm_plan_gpu_memory_utilization")),
            settings=dict(service)))
    return _with_preflight(dict(services=out, variables=sorted(keys)), services, host_values)


def _offload_gib(value):
    try:
        return float(value or 0)
    except (TypeError, ValueError):
        return 0.0


def _with_preflight(resolved, services=(), host_values=None):
    """Add what the preflight role checks for each service (its preflight_services): name, port, GPUs; and the
    host-wide values (highest utilisation, any KV offload)."""
    host_values = host_values or {}
    utilizations = [float(s["gpu_memory_utilization"]) for s in resolved["services"]
                    if s["gpu_memory_utilization"] not in (None, "")]
    resolved["gpu_memory_utilization"] = max(utilizations) if utilizations else None
    host_offload = host_values.get("vllm_plan_kv_offloading_gib")
    resolved["kv_offloading"] = any(
        _offload_gib(s.get("vllm_plan_kv_offloading_gib", host_offload)) > 0 for s in services or [{}])
    resolved["preflight"] = [
        dict(dict(name=s["name"], port=s["port"], gpus=s["gpus"]),
             **({"gpu_memory_utilization": s["gpu_memory_utilization"]} if s["gpu_memory_utilization"] is not None else {}))
        for s in resolved["services"]]
    return resolved
