# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rules between roles, checked before any task changes a host (the validate play; the per-variable checks are
_validate.py's):

- cross_role_problems(): what no single spec can say (the bundle holds what the enabled stages need, the driver to
  install is one preflight accepts, the port preflight proves free is the service's, ...);
- bundle_problems(): the bundle's manifest against the stages that will run (needed_kinds());
- shared_machine_problems(): inventory entries that land on one machine must not share a port, a container name or
  a GPU;
- connection_problem() / docker_diagnosis(): a host the controller cannot reach, said once with its cause."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.six import string_types
from ansible_collections.airgap.vllm.plugins.module_utils.driver._fabric_manager import (
    bundle_entry_problem,
    rpm_file_name,
)
from ansible_collections.airgap.vllm.plugins.module_utils.front._front_settings import front_problems
from ansible_collections.airgap.vllm.plugins.module_utils.common._version import at_least
from ansible_collections.airgap.vllm.plugins.module_utils.common._validate import Problem, STAGE_KINDS, describe_got


# ------------------------------------------------------------------ cross-role rules


def _is_template(value):
    return isinstance(value, string_types) and ("{{" in value or "{%" in value)


def effective(name, values, options):
    """The value a role would see: the one set, else the spec's default (None when that is a template)."""
    if name in values:
        return values[name]
    default = (options.get(name) or {}).get("default")
    return None if _is_template(default) else default


def _truthy(value):
    if isinstance(value, string_types):
        return value.strip().lower() in ("1", "true", "yes", "on", "y", "t")
    return bool(value)


def disagreement(variable, other, values, options, same_as, wants):
    """[Problem] of ``variable`` when it and ``other`` are both set and differ once each is ``same_as(value)``;
    ``wants`` says what it should be, with other's value for its ``%s``. [] when they agree or one is unset."""
    mine = effective(variable, values, options)
    theirs = effective(other, values, options)
    if mine is None or theirs is None or same_as(mine) == same_as(theirs):
        return []
    return [Problem(variable, describe_got(mine), wants % (theirs,))]


def gpu_set(extra_env):
    """GPUs a service is limited to (CUDA_VISIBLE_DEVICES), or None for 'all of them'."""
    if not isinstance(extra_env, dict):
        return None
    devices = extra_env.get("CUDA_VISIBLE_DEVICES")
    if devices is None:
        return None
    return frozenset(d.strip() for d in str(devices).split(",") if d.strip())


def needed_kinds(stages, values, options, manage_driver=True, fabric_manager=None):
    """{kind: (stage, version or None)} the enabled stages take from the bundle.

    fabric_manager: the host's Fabric Manager decision (_fabric_manager.decision) or None (not known): when it says
    needed, the driver stage also takes the `fabricmanager` RPM of the driver's version (unless
    nvidia_driver_fabric_manager_rpm names a file of the operator's; empty, its default, means the bundle's)."""
    stage_kinds = effective("bundle_stage_kinds", values, options) or []
    need = {}
    if (
        "nvidia_driver" in stages
        and manage_driver
        and (fabric_manager or {}).get("needed")
        and not values.get("nvidia_driver_fabric_manager_rpm")
        and "fabricmanager" in stage_kinds
    ):
        need["fabricmanager"] = ("nvidia_driver", effective("nvidia_driver_version", values, options))
    for stage in stages:
        kind = STAGE_KINDS.get(stage)
        if not kind:
            continue
        if stage == "nvidia_driver" and (not manage_driver or "nvidia_driver_run_file" in values):
            continue
        if stage == "vllm_model" and "vllm_model_src" in values:
            continue
        if kind not in stage_kinds:
            continue
        version = effective("nvidia_driver_version", values, options) if kind == "driver" else None
        need[kind] = (stage, version)
    return need


def bundle_problems(bundle_path, manifest_file, entries, present, need, hint="", fabric_reason=""):
    """Problems of a controller-side bundle.

    entries: the manifest's artifacts (None when it could not be read); present: {path: size or None}
    for the entries' files on disk; need: from needed_kinds(); fabric_reason: why the host needs Fabric Manager.
    """
    problems = []
    for entry in entries:
        size = present.get(entry["path"])
        if size is None:
            problems.append(
                Problem(
                    "bundle_path",
                    "%s, which lacks %s" % (bundle_path, entry["path"]),
                    "every file %s lists" % manifest_file,
                    "Rebuild the bundle (playbooks/bundle_build.yml) or copy the file back from the original medium",
                )
            )
        elif size != entry["size"]:
            problems.append(
                Problem(
                    "bundle_path",
                    "%s of %d bytes" % (entry["path"], size),
                    "%d bytes, as %s says" % (entry["size"], manifest_file),
                    "The copy is incomplete: copy it again from the original medium",
                )
            )
    kinds = {}
    for entry in entries:
        kinds.setdefault(entry.get("kind"), set()).add(str(entry.get("version", "")))
    for kind, (stage, version) in sorted(need.items()):
        if kind == "fabricmanager":
            missing = bundle_entry_problem(entries, version)
            if missing:
                problems.append(
                    Problem(
                        "bundle_path",
                        "a bundle without %s (%s: %s)" % (rpm_file_name(version), manifest_file, missing),
                        "the Fabric Manager RPM of driver %s: this host needs it (%s), and Fabric Manager refuses to "
                        "run beside a driver of another version" % (version, fabric_reason or "NVSwitch system"),
                        "Add it to bundle_build_artifacts as kind fabricmanager and rebuild the bundle, or set "
                        "nvidia_driver_fabric_manager: false for a host without NVSwitches",
                    )
                )
            continue
        if kind not in kinds:
            problems.append(
                Problem(
                    "bundle_path",
                    "a bundle whose %s has no %s artifact" % (manifest_file, kind),
                    "a %s artifact: stage %s installs it" % (kind, stage),
                    "Add it to bundle_build_artifacts and rebuild, or leave the stage out",
                )
            )
        elif version is not None and str(version) not in kinds[kind]:
            problems.append(
                Problem(
                    "nvidia_driver_version" if kind == "driver" else "bundle_path",
                    describe_got(version),
                    "a version the bundle carries: %s (%s)" % (", ".join(sorted(kinds[kind])), manifest_file),
                )
            )
    for p in problems:
        if hint and not p.hint:
            p.hint = hint
    return problems


def cross_role_problems(stages, values, options, manage_driver=True, services=None):
    """Rules between roles for one host (no I/O): [Problem].

    services: the host's vLLM services as [{'name', 'port'}] (_services.resolve); None: the one service of
    vllm_service_name and vllm_service_port."""
    problems = []
    enabled = set(stages)
    if "nvidia_driver" in enabled and manage_driver and "preflight" in enabled:
        installed = effective("nvidia_driver_version", values, options)
        minimum = effective("preflight_min_driver_version", values, options)
        # preflight's own comparison (_version.at_least): validate names exactly what preflight would refuse.
        if installed and minimum and not at_least(installed, minimum):
            problems.append(
                Problem(
                    "nvidia_driver_version",
                    describe_got(installed),
                    "at least preflight_min_driver_version (%s): preflight refuses an older driver after the install"
                    % minimum,
                )
            )
    if {"preflight", "vllm_service"} <= enabled:
        pre_services = effective("preflight_services", values, options)
        svc_port = effective("vllm_service_port", values, options)
        if isinstance(pre_services, list) and pre_services:
            # preflight_services wins (preflight_port is not read): an entry of each service's name and port.
            if services is None:
                services = [dict(name=effective("vllm_service_name", values, options), port=svc_port)]
            given = dict((str(e.get("name")), e.get("port")) for e in pre_services if isinstance(e, dict))
            wants = [
                "%s on %s" % (svc.get("name"), svc.get("port"))
                for svc in services
                if svc.get("name") is not None
                and svc.get("port") is not None
                and str(given.get(str(svc.get("name")))).strip() != str(svc.get("port")).strip()
            ]
            if wants:
                problems.append(
                    Problem(
                        "preflight_services",
                        describe_got(pre_services),
                        "an entry {name, port} for each vLLM service of the host, lacking: %s (preflight proves "
                        "each service's port is free)" % ", ".join(wants),
                    )
                )
        else:
            problems += disagreement(
                "preflight_port",
                "vllm_service_port",
                values,
                options,
                str,
                "vllm_service_port (%s): preflight proves the service's port is free",
            )
    if {"vllm_model", "vllm_plan"} <= enabled:
        problems += disagreement(
            "vllm_model_language_model_only",
            "vllm_plan_language_model_only",
            values,
            options,
            _truthy,
            "the same as vllm_plan_language_model_only (%s): the model is checked for the way it is served",
        )
    if "vllm_plan" in enabled:
        gpus = gpu_set(effective("vllm_service_extra_env", values, options))
        count = effective("vllm_plan_gpu_count", values, options)
        try:
            count = int(count)
        except (TypeError, ValueError, OverflowError):
            count = None
        if gpus is not None and count is not None and len(gpus) < count:
            problems.append(
                Problem(
                    "vllm_plan_gpu_count",
                    describe_got(count),
                    "at most the %d GPU(s) vllm_service_extra_env.CUDA_VISIBLE_DEVICES leaves visible (%s)"
                    % (len(gpus), ",".join(sorted(gpus))),
                )
            )
    if "vllm_front" in enabled:
        # The front door's rules live in module_utils/front/_front_settings.py.
        problems.extend(
            Problem(variable, "", "", text=text)
            for variable, text in front_problems(lambda name: effective(name, values, options), services)
        )
    return problems


# What two entries on one machine must not share: (key of the entry, variable, what it wants, compared as).
_MACHINE_CLASHES = (
    ("port", "vllm_service_port", "a port", str),
    ("name", "vllm_service_name", "a container name", lambda value: value),
)


def shared_machine_problems(hosts):
    """Inventory entries on one machine must not share a port, a container name or a GPU.

    hosts: {inventory_hostname: {'machine': address, 'port': host port, 'name': service name,
    'gpus': frozenset or None (all)}}. Returns {inventory_hostname: [Problem]}.
    """
    out = {}
    by_machine = {}
    for host in sorted(hosts):
        by_machine.setdefault(hosts[host].get("machine") or host, []).append(host)
    for machine, members in sorted(by_machine.items()):
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                ha, hb = hosts[a], hosts[b]
                where = "%s and %s both run on %s" % (a, b, machine)
                for key, variable, wants, same_as in _MACHINE_CLASHES:
                    if same_as(ha.get(key)) == same_as(hb.get(key)):
                        for h, other in ((a, b), (b, a)):
                            out.setdefault(h, []).append(
                                Problem(
                                    variable,
                                    describe_got(hosts[h].get(key)),
                                    "%s %s does not use (%s)" % (wants, other, where),
                                )
                            )
                ga, gb = ha.get("gpus"), hb.get("gpus")
                if ga is None or gb is None or ga & gb:
                    shared = "all GPUs" if (ga is None or gb is None) else "GPU " + ",".join(sorted(ga & gb))
                    for h, other in ((a, b), (b, a)):
                        g = hosts[h].get("gpus")
                        out.setdefault(h, []).append(
                            Problem(
                                "vllm_service_extra_env.CUDA_VISIBLE_DEVICES",
                                "all GPUs (not set)" if g is None else describe_got(",".join(sorted(g))),
                                "GPUs %s does not use (%s; they share %s)" % (other, where, shared),
                            )
                        )
    return out


def docker_diagnosis(name, status):
    """What a docker-connection host's container state means, and what to do; '' when running."""
    if status is None:
        return "there is no container named %s" % name
    if status == "running":
        return ""
    return "the container %s exists but is %s, not running: `docker start %s` starts it with its state" % (
        name,
        "stopped" if status in ("exited", "created") else status,
        name,
    )


def connection_problem(host, connection, error, diagnosis="", hint=""):
    """A host the controller cannot reach, said once, with what to do."""
    first = (error or "").strip().splitlines()[0] if (error or "").strip() else "no answer"
    text = "cannot reach %s (connection %s): %s" % (host, connection, diagnosis or first)
    return Problem("ansible_host", "", "", hint=hint, text=text)
