# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check every role's variables, and the rules between roles, before any task changes a host.

Why: each role validates its own variables when it starts, so a wrong variable of stage 7 used to be
found after stages 1-6 had rebooted the host twice, and its message was the role's whole argument spec.
Here the decisions are pure functions over plain data (the action plugin airgap.vllm.validate reads the
specs, the variables and the bundle's manifest and passes them in):

- check_option(): one variable against its argument_specs entry, with ansible's own type conversions
  (ArgumentSpecValidator, the same code the role's own validation runs), reported as one short line:
  the variable, what it got, what it wants.
- cross_role_problems(): what no single spec can say (the bundle holds what the enabled stages need,
  the driver to install is one preflight accepts, the port preflight proves free is the service's, ...).
- shared_machine_problems(): inventory entries that land on one machine must not share a port, a
  container name or a GPU.
- misspelled(): a role-prefixed variable no role knows, with the option it probably meant.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import re

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.six import string_types

TYPE_WORDS = {
    "str": "a string",
    "path": "a path",
    "int": "an integer",
    "float": "a number",
    "bool": "a boolean (true/false)",
    "list": "a list",
    "dict": "a mapping",
    "raw": "any value",
}
PLURAL = {
    "str": "strings",
    "path": "paths",
    "int": "integers",
    "float": "numbers",
    "bool": "booleans",
    "dict": "mappings",
    "list": "lists",
    "raw": "values",
}
SECRET = "(hidden: no_log)"
MAX_GOT = 80

# The stages of site.yml, in order, and the bundle artifact kind each one takes from the bundle.
STAGES = ("preflight", "bundle", "nvidia_driver", "nvidia_toolkit", "gpu_free", "vllm_model", "vllm_plan",
          "vllm_image", "vllm_service")
STAGE_KINDS = {"nvidia_driver": "driver", "nvidia_toolkit": "toolkit", "vllm_model": "model", "vllm_image": "image"}
# Facts the roles publish for the stages after them: role-prefixed, but no one's input.
ROLE_OUTPUTS = ("bundle_staged", "vllm_image_ref", "vllm_image_patched", "vllm_model_dir", "vllm_plan_result")


class Problem(object):
    """One thing wrong: the variable, what it got, what it wants (and, when known, what to do)."""

    def __init__(self, variable, got, wants, hint="", text=""):
        self.variable = variable
        self.got = got
        self.wants = wants
        self.hint = hint
        self.text = text

    def line(self):
        if self.text:
            text = self.text
        else:
            text = "%s: got %s; wants %s" % (self.variable, self.got, self.wants)
        if self.hint:
            text += ". " + self.hint
        return text

    def as_dict(self):
        return dict(variable=self.variable, got=self.got, wants=self.wants, hint=self.hint, text=self.text)

    def __eq__(self, other):
        return isinstance(other, Problem) and self.as_dict() == other.as_dict()

    def __ne__(self, other):
        return not self.__eq__(other)

    def __repr__(self):
        return "Problem(%r)" % self.line()


def describe_got(value, secret=False):
    """`'abc' (a string)`: the value as the user wrote it, short, with its YAML type."""
    if secret:
        return SECRET
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        kind = "a boolean"
    elif isinstance(value, int):
        kind = "an integer"
    elif isinstance(value, float):
        kind = "a number"
    elif isinstance(value, string_types):
        kind = "an empty string" if value == "" else "a string"
        if value == "":
            return kind
    elif isinstance(value, dict):
        kind = "a mapping"
    elif isinstance(value, (list, tuple)):
        kind = "a list"
    else:
        kind = type(value).__name__
    text = repr(value)
    if text.startswith("u'"):
        text = text[1:]
    if len(text) > MAX_GOT:
        text = text[:MAX_GOT - 3] + "..."
    return "%s (%s)" % (text, kind)


def describe_wanted(spec):
    """What an argument_specs entry accepts, in words: `one of: controller, target`."""
    spec = spec or {}
    wanted = spec.get("type", "str")
    elements = spec.get("elements")
    choices = spec.get("choices")
    if wanted == "list":
        elem = elements or "raw"
        text = "a list of %s" % PLURAL.get(elem, elem)
        if choices:
            text += " from: %s" % ", ".join(str(c) for c in choices)
        if elem == "dict" and spec.get("options"):
            keys = []
            for key, sub in sorted(spec["options"].items()):
                sub = sub or {}
                keys.append("%s (%s%s)" % (key, sub.get("type", "str"), ", required" if sub.get("required") else ""))
            text += " with keys %s" % ", ".join(keys)
        return text
    if choices:
        return "one of: %s" % ", ".join(str(c) for c in choices)
    return TYPE_WORDS.get(wanted, wanted)


def _validator_spec(spec):
    """The parts of an argument_specs entry the validator reads (defaults are the role's business)."""
    keep = {}
    for key in ("type", "elements", "choices", "no_log", "required", "options"):
        if key in (spec or {}):
            keep[key] = spec[key]
    if isinstance(keep.get("options"), dict):
        keep["options"] = dict((k, _validator_spec(v)) for k, v in keep["options"].items())
    return keep


def check_option(name, spec, value):
    """Check one variable's value against its spec entry; return a Problem or None.

    ansible's ArgumentSpecValidator decides (so '8' is an integer here exactly when the role's own
    validation says so); the message is ours.
    """
    spec = spec or {}
    secret = bool(spec.get("no_log"))
    if value is None and spec.get("required"):
        return Problem(name, "nothing (null)", describe_wanted(spec))
    vspec = _validator_spec(spec)
    vspec.pop("required", None)
    result = ArgumentSpecValidator({name: vspec}).validate({name: value})
    if not result.error_messages:
        return None
    wants = describe_wanted(spec)
    choices = spec.get("choices")
    if choices and spec.get("type") == "list" and isinstance(value, list):
        bad = [v for v in value if v not in choices]
        if bad:
            wants += " (%s %s not)" % (", ".join(repr(b) for b in bad), "is" if len(bad) == 1 else "are")
    return Problem(name, describe_got(value, secret), wants)


def check_variables(options, values, skip=()):
    """Check every variable given a value against its role's spec.

    options: {variable: spec entry} of the roles checked; values: {variable: value} as resolved for the
    host (only the variables someone set: inventory, play or extra vars); skip: variables a playbook
    wires itself. Returns the problems, sorted by variable.
    """
    problems = []
    for name in sorted(options):
        if name in skip:
            continue
        spec = options[name] or {}
        if name in values:
            problem = check_option(name, spec, values[name])
            if problem:
                problems.append(problem)
        elif spec.get("required") and "default" not in spec:
            problems.append(Problem(name, "nothing (not set)", describe_wanted(spec)))
    return problems


def misspelled(options, names, prefixes, known=ROLE_OUTPUTS):
    """Role-prefixed variables no role knows: [(name, closest option or None)], sorted."""
    out = []
    for name in sorted(names):
        if name in options or name in known or name.startswith("__"):
            continue
        if not any(name.startswith(p + "_") for p in prefixes):
            continue
        close = difflib.get_close_matches(name, list(options), n=1, cutoff=0.8)
        out.append((name, close[0] if close else None))
    return out


# ------------------------------------------------------------------ cross-role rules

def version_key(version):
    """'580.65.06' -> (580, 65, 6); non-numeric parts compare as 0 (driver versions are numeric)."""
    out = []
    for part in re.split(r"[.\-]", str(version)):
        out.append(int(part) if part.isdigit() else 0)
    return tuple(out)


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


def gpu_set(extra_env):
    """GPUs a service is limited to (CUDA_VISIBLE_DEVICES), or None for 'all of them'."""
    if not isinstance(extra_env, dict):
        return None
    devices = extra_env.get("CUDA_VISIBLE_DEVICES")
    if devices is None:
        return None
    return frozenset(d.strip() for d in str(devices).split(",") if d.strip())


def needed_kinds(stages, values, options, manage_driver=True):
    """{kind: (stage, version or None)} the enabled stages take from the bundle."""
    stage_kinds = effective("bundle_stage_kinds", values, options) or []
    need = {}
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


def bundle_problems(bundle_path, manifest_file, entries, present, need, hint=""):
    """Problems of a controller-side bundle.

    entries: the manifest's artifacts (None when it could not be read); present: {path: size or None}
    for the entries' files on disk; need: from needed_kinds().
    """
    problems = []
    for entry in entries:
        size = present.get(entry["path"])
        if size is None:
            problems.append(Problem(
                "bundle_path", "%s, which lacks %s" % (bundle_path, entry["path"]),
                "every file %s lists" % manifest_file,
                "Rebuild the bundle (playbooks/bundle_build.yml) or copy the file back from the original medium"))
        elif size != entry["size"]:
            problems.append(Problem(
                "bundle_path", "%s of %d bytes" % (entry["path"], size),
                "%d bytes, as %s says" % (entry["size"], manifest_file),
                "The copy is incomplete: copy it again from the original medium"))
    kinds = {}
    for entry in entries:
        kinds.setdefault(entry.get("kind"), set()).add(str(entry.get("version", "")))
    for kind, (stage, version) in sorted(need.items()):
        if kind not in kinds:
            problems.append(Problem(
                "bundle_path", "a bundle whose %s has no %s artifact" % (manifest_file, kind),
                "a %s artifact: stage %s installs it" % (kind, stage),
                "Add it to bundle_build_artifacts and rebuild, or leave the stage out"))
        elif version is not None and str(version) not in kinds[kind]:
            problems.append(Problem(
                "nvidia_driver_version" if kind == "driver" else "bundle_path", describe_got(version),
                "a version the bundle carries: %s (%s)" % (", ".join(sorted(kinds[kind])), manifest_file)))
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
        if installed and minimum and version_key(installed) < version_key(minimum):
            problems.append(Problem(
                "nvidia_driver_version", describe_got(installed),
                "at least preflight_min_driver_version (%s): preflight refuses an older driver after the install"
                % minimum))
    if {"preflight", "vllm_service"} <= enabled:
        pre_services = effective("preflight_services", values, options)
        svc_port = effective("vllm_service_port", values, options)
        if isinstance(pre_services, list) and pre_services:
            # preflight_services wins (preflight_port is not read): an entry of each service's name and port.
            if services is None:
                services = [dict(name=effective("vllm_service_name", values, options), port=svc_port)]
            given = dict((str(e.get("name")), e.get("port")) for e in pre_services if isinstance(e, dict))
            wants = ["%s on %s" % (svc.get("name"), svc.get("port")) for svc in services
                     if svc.get("name") is not None and svc.get("port") is not None
                     and str(given.get(str(svc.get("name")))).strip() != str(svc.get("port")).strip()]
            if wants:
                problems.append(Problem(
                    "preflight_services", describe_got(pre_services),
                    "an entry {name, port} for each vLLM service of the host, lacking: %s (preflight proves "
                    "each service's port is free)" % ", ".join(wants)))
        else:
            pre_port = effective("preflight_port", values, options)
            if pre_port is not None and svc_port is not None and str(pre_port) != str(svc_port):
                problems.append(Problem(
                    "preflight_port", describe_got(pre_port),
                    "vllm_service_port (%s): preflight proves the service's port is free" % svc_port))
    if {"vllm_model", "vllm_plan"} <= enabled:
        model_lmo = effective("vllm_model_language_model_only", values, options)
        plan_lmo = effective("vllm_plan_language_model_only", values, options)
        if model_lmo is not None and plan_lmo is not None and _truthy(model_lmo) != _truthy(plan_lmo):
            problems.append(Problem(
                "vllm_model_language_model_only", describe_got(model_lmo),
                "the same as vllm_plan_language_model_only (%s): the model is checked for the way it is served"
                % plan_lmo))
    if "vllm_plan" in enabled:
        gpus = gpu_set(effective("vllm_service_extra_env", values, options))
        count = effective("vllm_plan_gpu_count", values, options)
        try:
            count = int(count)
        except (TypeError, ValueError):
            count = None
        if gpus is not None and count is not None and len(gpus) < count:
            problems.append(Problem(
                "vllm_plan_gpu_count", describe_got(count),
                "at most the %d GPU(s) vllm_service_extra_env.CUDA_VISIBLE_DEVICES leaves visible (%s)"
                % (len(gpus), ",".join(sorted(gpus)))))
    return problems


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
            for b in members[i + 1:]:
                ha, hb = hosts[a], hosts[b]
                where = "%s and %s both run on %s" % (a, b, machine)
                if str(ha.get("port")) == str(hb.get("port")):
                    for h, other in ((a, b), (b, a)):
                        out.setdefault(h, []).append(Problem(
                            "vllm_service_port", describe_got(hosts[h].get("port")),
                            "a port %s does not use (%s)" % (other, where)))
                if ha.get("name") == hb.get("name"):
                    for h, other in ((a, b), (b, a)):
                        out.setdefault(h, []).append(Problem(
                            "vllm_service_name", describe_got(hosts[h].get("name")),
                            "a container name %s does not use (%s)" % (other, where)))
                ga, gb = ha.get("gpus"), hb.get("gpus")
                if ga is None or gb is None or ga & gb:
                    shared = "all GPUs" if (ga is None or gb is None) else "GPU " + ",".join(sorted(ga & gb))
                    for h, other in ((a, b), (b, a)):
                        g = hosts[h].get("gpus")
                        out.setdefault(h, []).append(Problem(
                            "vllm_service_extra_env.CUDA_VISIBLE_DEVICES",
                            "all GPUs (not set)" if g is None else describe_got(",".join(sorted(g))),
                            "GPUs %s does not use (%s; they share %s)" % (other, where, shared)))
    return out


def docker_diagnosis(name, status):
    """What a docker-connection host's container state means, and what to do; '' when running."""
    if status is None:
        return "there is no container named %s" % name
    if status == "running":
        return ""
    return "the container %s exists but is %s, not running: `docker start %s` starts it with its state" % (
        name, "stopped" if status in ("exited", "created") else status, name)


def connection_problem(host, connection, error, diagnosis="", hint=""):
    """A host the controller cannot reach, said once, with what to do."""
    first = (error or "").strip().splitlines()[0] if (error or "").strip() else "no answer"
    text = "cannot reach %s (connection %s): %s" % (host, connection, diagnosis or first)
    return Problem("ansible_host", "", "", hint=hint, text=text)


def format_report(host, problems):
    """One line per problem under a one-line heading."""
    lines = ["%d problem%s in the settings of %s (nothing was changed):"
             % (len(problems), "" if len(problems) == 1 else "s", host)]
    lines.extend("- " + p.line() for p in problems)
    return "\n".join(lines)
