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
- the rules between roles (cross_role_problems(), bundle_problems(), shared_machine_problems()) live beside it,
  in _validate_cross.py.
- misspelled(): a role-prefixed variable no role knows, with the option it probably meant.
- removed_problems(): a variable of a feature that was removed (REMOVED), named with what replaced it: a failure,
  not a warning, since the host would otherwise silently lose what the operator asked for.
- RANGES / RULES: what argument_specs cannot say (it has no minimum or maximum): the range of every operator
  number and the rule of every name or address that reaches a unit, a container or a firewall, by variable
  (check_option applies them once the type holds; advisories() says what is allowed but unwise).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import math
import re

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.six import string_types

from ansible_collections.airgap.vllm.plugins.module_utils.front._front_settings import front_warnings
from ansible_collections.airgap.vllm.plugins.module_utils.common._names import service_name_problem
from ansible_collections.airgap.vllm.plugins.module_utils.bundle._peer_fetch import peer_bind_problem

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
STAGES = (
    "preflight",
    "bundle",
    "nvidia_driver",
    "nvidia_toolkit",
    "gpu_free",
    "vllm_model",
    "vllm_plan",
    "vllm_image",
    "vllm_service",
    "vllm_front",
)
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


def base_variable(name):
    """'preflight_services[0].port' -> 'preflight_services' (the variable a Problem is about)."""
    return re.split(r"[\[.]", "%s" % (name,), maxsplit=1)[0]


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
        text = text[: MAX_GOT - 3] + "..."
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


# ------------------------------------------------------------------ ranges and rules


class Range(object):
    """The numbers an option accepts: `kind` 'int' or 'float'; low/high inclusive (None: unbounded); low_open:
    the low end itself is refused (a fraction above 0); also: values besides the range that mean something
    (0 = off); warn_above: allowed, but advised against (advisories())."""

    def __init__(self, kind, low=None, high=None, low_open=False, also=(), warn_above=None, why=""):
        self.kind = kind
        self.low = low
        self.high = high
        self.low_open = low_open
        self.also = tuple(also)
        self.warn_above = warn_above
        self.why = why

    def wants(self):
        unit = "a whole number" if self.kind == "int" else "a finite number"
        if self.low is not None and self.high is not None:
            text = "%s %s %s and at most %s" % (unit, "above" if self.low_open else "from", self.low, self.high)
        elif self.low is not None:
            text = "%s %s %s" % (unit, "above" if self.low_open else "of at least", self.low)
        elif self.high is not None:
            text = "%s of at most %s" % (unit, self.high)
        else:
            text = unit
        if self.also:
            text += " (or %s)" % " or ".join(str(a) for a in self.also)
        return text + (" - " + self.why if self.why else "")

    def problem(self, value):
        """None when `value` (already through ansible's type conversion) is in range, else what it wants."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return self.wants()
        if isinstance(value, float) and not math.isfinite(value):
            return self.wants()
        if self.kind == "int" and isinstance(value, float) and value != int(value):
            return self.wants()
        if value in self.also:
            return None
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return self.wants()
        if self.high is not None and value > self.high:
            return self.wants()
        return None


PORT = Range("int", 1, 65535, why="a TCP port")
FRACTION = Range(
    "float",
    0,
    1,
    low_open=True,
    warn_above=0.95,
    why="a fraction of GPU memory (0.9 = 90%; above 0.95 leaves too little for the CUDA context)",
)
SECONDS = Range("int", 1, 7 * 86400, why="seconds")
LATENCY_MS = Range("float", 0, 3600 * 1000, why="milliseconds; 0 = no threshold")
GIB = 1024**3

# Every int or float option of every role's meta/argument_specs.yml, by variable (a sub-option of a list of
# mappings as 'variable.key'); tests/unit/plugins/module_utils/test__validate.py fails on one missing here.
RANGES = {
    "bundle_verify_workers": Range("int", 1, 256, why="files hashed at once"),
    "bundle_chunk_size": Range("int", 65536, 64 * GIB, why="bytes per transfer"),
    "bundle_min_free_bytes": Range("int", 0, 2**50, why="bytes"),
    "bundle_peer_port": PORT,
    "bundle_peer_concurrency": Range("int", 1, 1024, why="peers fetching at once"),
    "bundle_peer_timeout": SECONDS,
    "bundle_peer_server_max_seconds": SECONDS,
    "bundle_build_split_size": Range("int", 1024**2, 2**50, also=(0,), why="bytes per part; 0 = files whole"),
    "nvidia_driver_reboot_timeout": SECONDS,
    "preflight_gpu_memory_utilization": FRACTION,
    "preflight_disk_requirements.min_free_gb": Range("float", 0, 1024**3, why="GiB"),
    "preflight_port": PORT,
    "preflight_services.port": PORT,
    "preflight_services.gpu_memory_utilization": FRACTION,
    "vllm_image_keep": Range("int", 0, 1000, why="earlier images kept"),
    "vllm_model_keep": Range("int", 0, 1000, why="earlier model versions kept"),
    "vllm_plan_gpu_count": Range("int", 1, 256, why="GPUs"),
    "vllm_plan_tensor_parallel_size": Range("int", 0, 256, why="GPUs; 0 = from the GPUs selected"),
    "vllm_plan_concurrency": Range("int", 1, 65536, why="concurrent requests (--max-num-seqs)"),
    "vllm_plan_gpu_memory_utilization": FRACTION,
    "vllm_plan_num_speculative_tokens": Range("int", 0, 64, why="tokens; 0 = off"),
    "vllm_plan_kv_offloading_gib": Range("float", 0, 1024**2, why="GiB of host memory; 0 = off"),
    "vllm_plan_port": PORT,
    "vllm_plan_log_max_file": Range("int", 1, 1000, why="log files kept"),
    "vllm_service_port": PORT,
    "vllm_service_health_timeout": SECONDS,
    "vllm_service_smoke_max_tokens": Range("int", 1, 10**7, why="tokens"),
    "vllm_service_loadcheck_prompts": Range("int", 1, 10**6, why="requests"),
    "vllm_service_loadcheck_input_len": Range("int", 1, 10**7, why="tokens"),
    "vllm_service_loadcheck_output_len": Range("int", 1, 10**7, why="tokens"),
    "vllm_service_loadcheck_ttft_p95_max_ms": LATENCY_MS,
    "vllm_service_loadcheck_tpot_p95_max_ms": LATENCY_MS,
    # The promises table's thresholds (docs/load-check.md): shares 0..1, a mean accepted length 1..17 (1 + up to
    # 16 speculative tokens), tokens per second.
    "vllm_service_promise_prefix_cache_hit_rate": Range("float", 0, 1, why="a share of prompt tokens"),
    "vllm_service_promise_mtp_accepted_length": Range("float", 1, 17, why="mean accepted tokens per draft"),
    "vllm_service_promise_tool_call_parse_rate": Range("float", 0, 1, why="a share of tool requests"),
    "vllm_service_promise_single_stream_decode_tok_s": Range("float", 0, 10**6, why="tokens per second"),
    "vllm_service_promise_per_stream_decode_tok_s": Range("float", 0, 10**6, why="tokens per second"),
    "vllm_service_promise_prefill_tok_s": Range("float", 0, 10**8, why="tokens per second"),
    "vllm_service_promise_context_fill": Range("float", 0, 1, low_open=True, why="a share of --max-model-len"),
    # The front door (roles/vllm_front).
    "vllm_front_port": PORT,
    "vllm_front_metrics_port": Range("int", 1, 65535, also=(0,), why="a TCP port; 0 = no metrics listener"),
    "vllm_front_tls_renew_days": Range("int", 1, 3650, why="days before expiry"),
    "vllm_front_max_concurrent": Range("int", 0, 65536, why="requests at the engine; 0 = the plan's --max-num-seqs"),
    "vllm_front_client_max_concurrent": Range("int", 0, 65536, why="a client's requests in flight; 0 = the total cap"),
    "vllm_front_client_rate_per_minute": Range("int", 0, 10**7, why="requests per minute; 0 = no limit"),
    "vllm_front_clients.max_concurrent": Range("int", 0, 65536, why="a client's requests in flight"),
    "vllm_front_clients.rate_per_minute": Range("int", 0, 10**7, why="requests per minute"),
    "vllm_front_max_body_bytes": Range("int", 1024, 2**40, why="bytes of a request body"),
    "vllm_front_queue_timeout": Range("int", 0, 86400, why="seconds"),
    "vllm_front_request_timeout": Range("int", 1, 86400, why="seconds"),
    "vllm_front_stream_timeout": SECONDS,
    "vllm_front_fleet_check_interval": Range("int", 1, 3600, why="seconds between health checks"),
    "vllm_front_drain_timeout": Range("int", 0, 86400, why="seconds"),
    # Day-2 observability (roles/vllm_observe).
    "vllm_observe_dcgm_exporter_port": PORT,
    "vllm_observe_interval": Range("int", 5, 3600, why="seconds between two runs of the GPU exporter"),
    "vllm_observe_node_exporter_port": Range("int", 1, 65535, also=(0,), why="a TCP port; 0 = no node target"),
    "vllm_observe_services.max_num_seqs": Range("int", 1, 65536, why="requests the engine runs at once"),
    "vllm_observe_services.ttft_p95_ms": Range("float", 0, 3600 * 1000, low_open=True, why="milliseconds"),
    "vllm_observe_services.gpu_memory_utilization": FRACTION,
    "vllm_observe_services.metrics_port": Range("int", 1, 65535, also=(0,), why="a TCP port; 0 = none"),
}


def _name_rule(value):
    problem = service_name_problem(value)
    return None if problem is None else "a service name: " + problem


# Rules of strings that name a unit, a container or an address, by variable (as RANGES).
RULES = {
    "vllm_service_name": _name_rule,
    "vllm_plan_service_name": _name_rule,
    "preflight_services.name": _name_rule,
    "bundle_peer_address": peer_bind_problem,
}


def _rule_problems(key, value):
    """[(suffix, wants)] for `value` of option `key` under RANGES and RULES; sub-options of a list of
    mappings (or a mapping) as '[i].sub'."""
    out = []
    rng = RANGES.get(key)
    if rng is not None:
        wants = rng.problem(value)
        if wants:
            out.append(("", wants, value))
    rule = RULES.get(key)
    if rule is not None and value is not None:
        wants = rule(value)
        if wants:
            out.append(("", wants, value))
    prefix = key + "."
    subs = sorted(set(k[len(prefix) :] for k in list(RANGES) + list(RULES) if k.startswith(prefix)))
    if subs:
        items = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
        for index, item in items:
            if not isinstance(item, dict):
                continue
            for sub in subs:
                if sub in item and item[sub] is not None:
                    for suffix, wants, got in _rule_problems(prefix + sub, item[sub]):
                        where = ("" if index is None else "[%s]" % index) + "." + sub + suffix
                        out.append((where, wants, got))
    return out


def advisories(values, where=None):
    """What is allowed but unwise (one line each): a GPU memory fraction above 0.95, ... `where(name)`
    says how a variable is named in the line (airgap_vllm_services[1].x); default the name itself."""
    out = []
    for name in sorted(values, key=str):
        rng = RANGES.get(name)
        value = values[name]
        if rng is None or rng.warn_above is None or rng.problem(_number(value)) is not None:
            continue
        if _number(value) > rng.warn_above:
            out.append(
                "%s is %s: above %s vLLM and the CUDA context of each GPU often run out of memory at "
                "start-up; 0.9-0.93 is the usual choice" % (where(name) if where else name, value, rng.warn_above)
            )
    if where is None:
        out.extend(front_warnings(values.get))
    return out


def _number(value):
    """A number from what an inventory gives ('0.9' too), else the value itself (Range.problem refuses it)."""
    if isinstance(value, string_types):
        try:
            return float(value.strip())
        except (ValueError, OverflowError):
            return value
    return value


def check_option(name, spec, value, key=None):
    """The first of option_problems(), or None."""
    problems = option_problems(name, spec, value, key)
    return problems[0] if problems else None


def option_problems(name, spec, value, key=None):
    """Check one variable's value against its spec entry, then its range or rule (RANGES, RULES under `key`,
    default `name`); return [Problem] (one per entry of a list that is out of range).

    ansible's ArgumentSpecValidator decides the type (so '8' is an integer here exactly when the role's own
    validation says so); the message is ours.
    """
    spec = spec or {}
    secret = bool(spec.get("no_log"))
    if value is None and spec.get("required"):
        return [Problem(name, "nothing (null)", describe_wanted(spec))]
    vspec = _validator_spec(spec)
    vspec.pop("required", None)
    try:
        result = ArgumentSpecValidator({name: vspec}).validate({name: value})
        errors = result.error_messages
    except Exception:  # pylint: disable=broad-except  # a value ansible's own conversion chokes on is wrong too
        result, errors = None, ["unconvertible"]
    if not errors:
        converted = result.validated_parameters.get(name, value)
        found = _rule_problems(key or name, converted) if converted is not None else []
        return [Problem(name + suffix, describe_got(got, secret), wants) for suffix, wants, got in found]
    wants = describe_wanted(spec)
    choices = spec.get("choices")
    if choices and spec.get("type") == "list" and isinstance(value, list):
        bad = [v for v in value if v not in choices]
        if bad:
            wants += " (%s %s not)" % (", ".join(repr(b) for b in bad), "is" if len(bad) == 1 else "are")
    return [Problem(name, describe_got(value, secret), wants)]


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
            problems.extend(option_problems(name, spec, values[name]))
        elif spec.get("required") and "default" not in spec:
            problems.append(Problem(name, "nothing (not set)", describe_wanted(spec)))
    return problems


# Variables of removed features: {name: what replaces it}. The whole-port metrics exposure (issue 14) gave way to
# the front door's metrics listener (issue 25); a host that had it loses it on its next run (vllm_service's
# tasks/expose_removal.yml), so setting one of these is refused before anything changes.
_METRICS_NOW = (
    "removed: Prometheus scrapes /metrics through the front door's metrics listener - set "
    "vllm_front_metrics_port, vllm_front_metrics_sources and vllm_front_metrics_tokens instead "
    "(docs/monitoring.md, \"Migrating from vllm_service_metrics_expose\")"
)
REMOVED = dict(
    (name, _METRICS_NOW)
    for name in (
        "vllm_service_metrics_expose",
        "vllm_service_metrics_address",
        "vllm_service_metrics_port",
        "vllm_service_metrics_sources",
        "vllm_service_metrics_firewalld",
        "vllm_service_metrics_firewalld_zone",
        "vllm_service_metrics_scrape_dir",
    )
)


def removed_problems(names, where=""):
    """[Problem] for every variable of `names` that belongs to a removed feature (REMOVED), one line each."""
    return [
        Problem(name, "", "", text="%s%s is %s" % (where, name, REMOVED[name]))
        for name in sorted(set(n for n in names if n in REMOVED))
    ]


def misspelled(options, names, prefixes, known=ROLE_OUTPUTS):
    """Role-prefixed variables no role knows: [(name, closest option or None)], sorted (REMOVED ones are
    removed_problems()'s)."""
    out = []
    for name in sorted(names):
        if name in options or name in known or name in REMOVED or name.startswith("__"):
            continue
        if not any(name.startswith(p + "_") for p in prefixes):
            continue
        close = difflib.get_close_matches(name, list(options), n=1, cutoff=0.8)
        out.append((name, close[0] if close else None))
    return out


def format_report(host, problems):
    """One line per problem under a one-line heading."""
    lines = [
        "%d problem%s in the settings of %s (nothing was changed):"
        % (len(problems), "" if len(problems) == 1 else "s", host)
    ]
    lines.extend("- " + p.line() for p in problems)
    return "\n".join(lines)
