# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of airgap.vllm.validate: every role's variables and the cross-role rules, at once.

Reads each role's meta/argument_specs.yml from this collection, the host's variables (as set in the
inventory, the play and -e) and, for a controller-side bundle, its manifest.yml; the decisions are
the pure functions of module_utils/common/_validate.py. Changes nothing anywhere (check mode runs it fully).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess

import yaml

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_manifest import (
    BundleError,
    load_manifest,
    medium_size,
)
from ansible_collections.airgap.vllm.plugins.module_utils.driver._fabric_manager import decision, normalize_setting
from ansible_collections.airgap.vllm.plugins.module_utils.service._services import (
    HOST_VALUES,
    resolve,
    service_advisories,
    service_problems,
)
from ansible_collections.airgap.vllm.plugins.module_utils.common._validate import (
    STAGES,
    Problem,
    advisories,
    base_variable,
    check_variables,
    describe_got,
    format_report,
    misspelled,
    removed_problems,
)
from ansible_collections.airgap.vllm.plugins.module_utils.common._validate_cross import (
    bundle_problems,
    connection_problem,
    cross_role_problems,
    docker_diagnosis,
    effective,
    gpu_set,
    needed_kinds,
    shared_machine_problems,
)

ROLES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "roles")
DOCKER_CONNECTIONS = ("community.docker.docker", "docker", "community.docker.docker_api")
_MISSING = object()


def load_role_options(roles_dir=ROLES_DIR, roles=None):
    """{role: {option: spec}} from each role's meta/argument_specs.yml (entry point main)."""
    out = {}
    for role in sorted(roles or os.listdir(roles_dir)):
        path = os.path.join(roles_dir, role, "meta", "argument_specs.yml")
        if not os.path.isfile(path):
            if roles:
                raise AnsibleError("airgap.vllm.validate: no role %s in %s" % (role, roles_dir))
            continue
        with open(path) as f:
            data = yaml.safe_load(f) or {}
        out[role] = (((data.get("argument_specs") or {}).get("main") or {}).get("options")) or {}
    return out


class ActionModule(ActionBase):
    _supports_check_mode = True
    _VALID_ARGS = frozenset(("roles", "stages", "skip", "manage_driver", "hints", "check_connection"))

    def _value(self, task_vars, name):
        """The variable as the role would get it, templated; _MISSING when unset or not yet knowable."""
        if name not in task_vars:
            return _MISSING
        try:
            return self._templar.template(task_vars[name])
        except AnsibleError:
            return _MISSING  # refers to a fact a later stage publishes: that stage's own check decides

    def _other_host(self, task_vars, host, names):
        hostvars = task_vars.get("hostvars") or {}
        out = {}
        try:
            hv = hostvars[host]
            for name in names:
                if name in hv:
                    out[name] = self._templar.template(hv[name])
        except Exception:  # another host's broken variable is reported by that host's own check
            return None
        return out

    def _fabric_manager(self, task_vars, values, options, stages, manage_driver):
        """(the host's Fabric Manager decision or None, [Problem]). auto reads the host's PCI bus (host_info pci, read
        only), and only where a controller-side bundle is checked; an unreachable host is the reach check's."""
        if "nvidia_driver" not in stages or not manage_driver:
            return None, []
        raw = effective("nvidia_driver_fabric_manager", values, options)
        try:
            setting = normalize_setting(raw)
        except ValueError:
            return None, [Problem("nvidia_driver_fabric_manager", describe_got(raw), "auto, true or false")]
        if setting != "auto":
            return decision(setting, None), []
        if "bundle" not in stages or effective("bundle_source", values, options) != "controller":
            return None, []
        try:
            res = self._execute_module(
                module_name="airgap.vllm.host_info", module_args=dict(docker=False, pci=True), task_vars=task_vars
            )
        except AnsibleError:
            return None, []
        if res.get("failed") or res.get("unreachable"):
            return None, []
        fabric = decision(setting, res.get("pci"))
        if fabric["needed"] is None:
            return fabric, [
                Problem(
                    "nvidia_driver_fabric_manager", describe_got(raw), "true or false on this host: " + fabric["reason"]
                )
            ]
        return fabric, []

    def _bundle(self, values, options, stages, manage_driver, hint, fabric=None):
        if "bundle" not in stages:
            return []
        source = effective("bundle_source", values, options)
        if source != "controller":
            return []  # on the target: the bundle role reads and verifies it there
        raw = values.get("bundle_path", "")
        path = os.path.expanduser(str(raw or ""))
        if not path:
            return [
                Problem(
                    "bundle_path",
                    describe_got(raw),
                    "the bundle root on the controller, the directory holding manifest.yml",
                    hint,
                )
            ]
        manifest = os.path.join(path, "manifest.yml")
        if not os.path.isfile(manifest):
            what = "no such directory" if not os.path.isdir(path) else "no manifest.yml in it"
            return [
                Problem(
                    "bundle_path",
                    "%r: %s" % (raw, what),
                    "the bundle root on the controller, the directory holding manifest.yml",
                    hint,
                )
            ]
        try:
            entries = load_manifest(manifest)
        except BundleError as e:
            return [
                Problem(
                    "bundle_path",
                    describe_got(raw),
                    "a bundle with a readable manifest (%s)" % to_text(e),
                    "Rebuild the bundle with playbooks/bundle_build.yml",
                )
            ]
        kinds = effective("bundle_stage_kinds", values, options) or []
        staged = [e for e in entries if e.get("kind") in kinds]
        present = {}
        for entry in staged:
            # A file split for FAT32 is on the medium as its parts.
            present[entry["path"]] = medium_size(path, entry)
        need = needed_kinds(stages, values, options, manage_driver, fabric_manager=fabric)
        return bundle_problems(path, manifest, staged, present, need, fabric_reason=(fabric or {}).get("reason", ""))

    def _reach(self, task_vars, host, hint):
        connection = self._templar.template(task_vars.get("ansible_connection", "ssh"))
        try:
            res = self._execute_module(module_name="ansible.builtin.ping", module_args={}, task_vars=task_vars)
        except AnsibleError as e:
            error = to_text(e)
        else:
            if not res.get("failed") and not res.get("unreachable"):
                return []
            error = to_text(res.get("msg", "ping failed"))
            # sudo's own words (e.g. "sorry, you must have a tty to run sudo" under requiretty) are in the
            # module's stderr; "MODULE FAILURE" alone says nothing an operator can act on.
            stderr = to_text(res.get("module_stderr") or "").strip()
            if stderr and stderr not in error:
                error = "%s: %s" % ((error.splitlines() or [""])[0], " ".join(stderr[-500:].split()))
        diagnosis = ""
        if connection in DOCKER_CONNECTIONS:
            name = self._templar.template(task_vars.get("ansible_host", host))
            try:
                status = subprocess.run(
                    ["docker", "inspect", "-f", "{{.State.Status}}", name],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    timeout=30,
                    check=False,
                )
                state = to_text(status.stdout).strip() if status.returncode == 0 else None
            except (OSError, subprocess.SubprocessError):
                state = "unknown (docker cannot be asked on the controller)"
            diagnosis = docker_diagnosis(name, state)
        return [connection_problem(host, connection, error, diagnosis, hint)]

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        args = self._task.args
        # A fleet playbook that runs some roles checks those (stages); site.yml runs every stage (not the
        # controller-side bundle_build role).
        role_options = load_role_options(roles=args.get("roles") or args.get("stages") or list(STAGES))
        options = {}
        for opts in role_options.values():
            options.update(opts)
        stages = [s for s in (args.get("stages") or role_options) if s in STAGES or s in role_options]
        skip = set(args.get("skip") or [])
        manage_driver = boolean(self._templar.template(args.get("manage_driver", True)), strict=False)
        check_connection = boolean(self._templar.template(args.get("check_connection", True)), strict=False)
        hints = args.get("hints") or {}
        host = task_vars.get("inventory_hostname", "localhost")

        values = {}
        for name in options:
            if name in skip:
                continue
            value = self._value(task_vars, name)
            if value is not _MISSING:
                values[name] = value

        problems = check_variables(options, values, skip=skip)
        # The host's vLLM services (airgap_vllm_services), for the rules between the preflight and the services.
        resolved = None
        raw_services = self._value(task_vars, "airgap_vllm_services")
        if "vllm_service" in stages and raw_services not in (_MISSING, None):
            try:
                resolved = resolve(raw_services, dict((n, effective(n, values, options)) for n in HOST_VALUES))[
                    "services"
                ]
            except ValueError:
                resolved = None  # service_problems below reports what is wrong with the list
        bad = set(base_variable(p.variable) for p in problems)
        clean = dict((k, v) for k, v in values.items() if k not in bad)
        # A rule about a variable the playbook wires itself (skip) is the playbook's to keep.
        problems.extend(
            p
            for p in cross_role_problems(stages, clean, options, manage_driver, services=resolved)
            if p.variable not in bad and p.variable not in skip
        )
        fabric, fabric_problems = self._fabric_manager(task_vars, clean, options, stages, manage_driver)
        problems.extend(fabric_problems)
        problems.extend(self._bundle(clean, options, stages, manage_driver, hints.get("bundle_path", ""), fabric))

        warnings = advisories(clean)
        if "vllm_service" in stages:
            services = self._value(task_vars, "airgap_vllm_services")
            if services not in (_MISSING, None):
                host_values = dict((n, effective(n, clean, options)) for n in HOST_VALUES)
                problems.extend(service_problems(services, host_values, options))
                warnings.extend(service_advisories(services))
            wanted = (
                "ansible_host",
                "ansible_port",
                "vllm_service_port",
                "vllm_service_name",
                "vllm_service_extra_env",
            )
            machines = {}
            for other in task_vars.get("ansible_play_hosts_all") or [host]:
                hv = clean if other == host else self._other_host(task_vars, other, wanted)
                if hv is None:
                    continue
                if other == host:
                    hv = dict(
                        hv,
                        ansible_host=self._value(task_vars, "ansible_host"),
                        ansible_port=self._value(task_vars, "ansible_port"),
                    )
                address = hv.get("ansible_host")
                address = other if address in (None, _MISSING, "") else address
                port = hv.get("ansible_port")
                machines[other] = dict(
                    machine="%s:%s" % (address, port) if port not in (None, _MISSING, "") else address,
                    port=effective("vllm_service_port", hv, options),
                    name=effective("vllm_service_name", hv, options),
                    gpus=gpu_set(effective("vllm_service_extra_env", hv, options)),
                )
            problems.extend(shared_machine_problems(machines).get(host, []))

        prefixes = sorted(role_options)
        warnings.extend(
            "%s is set but no role reads it%s" % (name, "; did you mean %s?" % close if close else "")
            for name, close in misspelled(options, list(task_vars), prefixes)
        )
        # A variable of a removed feature (the whole-port metrics exposure): refused, naming what replaces it.
        problems.extend(removed_problems(task_vars))
        if warnings:
            result["warnings"] = warnings

        if check_connection:
            problems.extend(self._reach(task_vars, host, hints.get("connection", "")))

        result["changed"] = False
        if problems:
            result["failed"] = True
            result["msg"] = format_report(host, problems)
        else:
            result["msg"] = "%d variables of %d roles checked; the cross-role rules hold" % (
                len(values),
                len(role_options),
            )
        return result
