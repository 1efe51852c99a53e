# -*- coding: utf-8 -*-
"""Ranges and rules of airgap.vllm.validate (issue 24, item 4): every operator number has a range, every name
that becomes a unit or container follows the one rule, what would open a service to every network is refused
(unless vllm_service_expose_to_network), all problems at once, and no input makes a traceback. The shipped
inventories and the molecule scenarios' variables still validate."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import math
import os

import pytest
import yaml

from ansible_collections.airgap.vllm.plugins.module_utils.common import _validate as V
from ansible_collections.airgap.vllm.plugins.module_utils.common import _validate_cross as V_cross
from ansible_collections.airgap.vllm.plugins.module_utils.service._services import (
    resolve,
    service_advisories,
    service_problems,
)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def role_specs():
    """{role: {option: spec}} of every role's meta/argument_specs.yml."""
    out = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml"))):
        with open(path) as f:
            out[path.split(os.sep)[-3]] = yaml.safe_load(f)["argument_specs"]["main"]["options"]
    return out


def all_options():
    out = {}
    for options in role_specs().values():
        out.update(options)
    return out


def numeric_options():
    """'variable' or 'variable.sub' of every int/float option (and int/float list elements), anywhere."""
    found = []

    def walk(name, spec):
        spec = spec or {}
        if spec.get("type") in ("int", "float") or spec.get("elements") in ("int", "float"):
            found.append(name)
        for sub, subspec in (spec.get("options") or {}).items():
            walk(name + "." + sub, subspec)

    for options in role_specs().values():
        for name, spec in options.items():
            walk(name, spec)
    return sorted(found)


OPTIONS = all_options()


def site_options_and_skip():
    """The options site.yml's validate play checks (every stage's role) and the variables it wires itself."""
    options = {}
    for role, role_options in role_specs().items():
        if role in V.STAGES:
            options.update(role_options)
    with open(os.path.join(ROOT, "playbooks", "site.yml")) as f:
        plays = yaml.safe_load(f)
    skip = set(plays[0]["vars"]["airgap_vllm_validate_skip"])
    return options, skip


# ------------------------------------------------------------------ the table is complete


def test_every_numeric_option_of_every_role_has_a_range():
    missing = [name for name in numeric_options() if name not in V.RANGES]
    assert not missing, "add a Range to RANGES in plugins/module_utils/common/_validate.py for: %s" % ", ".join(missing)


def test_every_range_belongs_to_a_numeric_option():
    roles = role_specs()
    # An entry of a role this checkout lacks (one being built next to this table) is not stale.
    present = [name for name in V.RANGES if any(name.startswith(role + "_") for role in roles)]
    stale = sorted(set(present) - set(numeric_options()))
    assert not stale, "RANGES entries no argument spec has (renamed or removed?): %s" % ", ".join(stale)


def test_every_range_kind_is_the_options_type():
    for name, rng in V.RANGES.items():
        top, _sep, sub = name.partition(".")
        if top not in OPTIONS:
            continue  # a role this checkout lacks
        spec = OPTIONS[top]
        if sub:
            spec = spec["options"][sub]
        assert rng.kind == spec["type"], name


@pytest.mark.parametrize("name", sorted(n for n in V.RANGES if "." not in n and n in OPTIONS))
def test_every_default_is_in_range(name):
    default = OPTIONS[name].get("default")
    if isinstance(default, str) and "{{" in default:
        return
    assert V.check_option(name, OPTIONS[name], default) is None


# ------------------------------------------------------------------ ports, fractions, counts


@pytest.mark.parametrize("name", ["vllm_service_port", "vllm_plan_port", "preflight_port", "bundle_peer_port"])
@pytest.mark.parametrize("value", [0, -1, 65536, 10**30, True, "0", "70000"])
def test_a_port_out_of_range_is_one_line(name, value):
    problem = V.check_option(name, OPTIONS[name], value)
    assert problem is not None and problem.variable == name
    assert "a TCP port" in problem.wants and "1 and at most 65535" in problem.wants
    assert "\n" not in problem.line()


@pytest.mark.parametrize("value", [1, 65535, "8000"])
def test_a_port_in_range_passes(value):
    assert V.check_option("vllm_service_port", OPTIONS["vllm_service_port"], value) is None


@pytest.mark.parametrize("name", ["vllm_plan_gpu_memory_utilization", "preflight_gpu_memory_utilization"])
@pytest.mark.parametrize("value", [0, 0.0, -0.5, 1.01, 93, float("nan"), "nan", float("inf"), "-inf", "1e999"])
def test_a_fraction_out_of_range_is_refused(name, value):
    problem = V.check_option(name, OPTIONS[name], value)
    assert problem is not None and "a fraction of GPU memory" in problem.wants, value


@pytest.mark.parametrize("value", [1, 1.0, 0.5, "0.9", 0.93, 0.99])
def test_a_fraction_in_range_passes(value):
    assert (
        V.check_option("vllm_plan_gpu_memory_utilization", OPTIONS["vllm_plan_gpu_memory_utilization"], value) is None
    )


def test_a_fraction_above_095_is_advised_against_not_refused():
    warnings = V.advisories(
        {
            "vllm_plan_gpu_memory_utilization": 0.97,
            "preflight_gpu_memory_utilization": "0.99",
            "vllm_plan_concurrency": 4,
        }
    )
    assert len(warnings) == 2 and all("above 0.95" in w for w in warnings)
    assert V.advisories({"vllm_plan_gpu_memory_utilization": 0.95}) == []
    assert V.advisories({"vllm_plan_gpu_memory_utilization": float("nan")}) == [], "refused, not advised"
    services = [{"vllm_service_name": "a", "vllm_plan_gpu_memory_utilization": 0.98}, "odd", {1: 2}]
    assert service_advisories(services) == [
        "airgap_vllm_services[0].vllm_plan_gpu_memory_utilization is 0.98: above 0.95 vLLM and the CUDA context of "
        "each GPU often run out of memory at start-up; 0.9-0.93 is the usual choice"
    ]


@pytest.mark.parametrize(
    "name, value",
    [
        ("vllm_plan_concurrency", 0),
        ("vllm_plan_gpu_count", 0),
        ("bundle_peer_concurrency", 0),
        ("bundle_verify_workers", -2),
        ("bundle_peer_timeout", 0),
        ("vllm_service_health_timeout", -1),
        ("nvidia_driver_reboot_timeout", 0),
        ("vllm_service_loadcheck_prompts", 0),
        ("vllm_plan_log_max_file", 0),
        ("vllm_plan_kv_offloading_gib", -1),
        ("vllm_plan_kv_offloading_gib", "nan"),
        ("vllm_image_keep", -1),
        ("bundle_build_split_size", 100),
        ("vllm_service_loadcheck_ttft_p95_max_ms", "nan"),
        ("vllm_service_loadcheck_tpot_p95_max_ms", -5),
        ("vllm_plan_num_speculative_tokens", -1),
        ("bundle_chunk_size", 0),
    ],
)
def test_counts_sizes_and_timeouts_out_of_range(name, value):
    assert V.check_option(name, OPTIONS[name], value) is not None


@pytest.mark.parametrize(
    "name, value",
    [
        ("vllm_plan_tensor_parallel_size", 0),
        ("vllm_plan_num_speculative_tokens", 0),
        ("vllm_image_keep", 0),
        ("vllm_plan_kv_offloading_gib", 0),
        ("bundle_build_split_size", 0),
        ("vllm_service_loadcheck_ttft_p95_max_ms", 0),
    ],
)
def test_zero_that_means_off_or_auto_passes(name, value):
    assert V.check_option(name, OPTIONS[name], value) is None


def test_a_list_of_mappings_names_each_entry_out_of_range():
    spec = OPTIONS["preflight_services"]
    value = [
        {"name": "vllm", "port": 8000},
        {"name": "vllm-b", "port": 0, "gpu_memory_utilization": 1.5},
        {"name": "docker", "port": 8002},
    ]
    problems = V.option_problems("preflight_services", spec, value)
    assert [p.variable for p in problems] == [
        "preflight_services[1].gpu_memory_utilization",
        "preflight_services[1].port",
        "preflight_services[2].name",
    ]
    disk = V.option_problems(
        "preflight_disk_requirements", OPTIONS["preflight_disk_requirements"], [{"path": "/var", "min_free_gb": -1}]
    )
    assert [p.variable for p in disk] == ["preflight_disk_requirements[0].min_free_gb"]


# ------------------------------------------------------------------ names and addresses


@pytest.mark.parametrize(
    "name", ["docker", "sshd", "containerd", "vllm\n", "..", "systemd-journald", "a/b", "vllm.service", "", "-x"]
)
def test_a_service_name_that_is_not_ours_is_refused(name):
    problem = V.check_option("vllm_service_name", OPTIONS["vllm_service_name"], name)
    assert problem is not None and problem.variable == "vllm_service_name"
    assert "\n" not in problem.line().replace(repr(name), "")


def test_a_service_name_in_the_services_list_is_refused_once():
    services = [
        {"vllm_service_name": "docker", "vllm_plan_gpus": ["0"]},
        {"vllm_service_name": "vllm\n", "vllm_plan_gpus": ["1"], "vllm_service_port": 8001},
        {"vllm_plan_gpus": ["2"], "vllm_service_port": 8002},
    ]
    for options in (None, OPTIONS):
        problems = service_problems(services, {"vllm_service_port": 8000}, options)
        where = [p.variable for p in problems]
        assert where == [
            "airgap_vllm_services[0].vllm_service_name",
            "airgap_vllm_services[1].vllm_service_name",
            "airgap_vllm_services[2].vllm_service_name",
        ], problems
    with pytest.raises(ValueError, match="docker"):
        resolve(services, {"vllm_service_port": 8000})


def test_a_port_out_of_range_in_the_services_list_is_named():
    services = [
        {"vllm_service_name": "a", "vllm_plan_gpus": ["0"], "vllm_service_port": 0},
        {"vllm_service_name": "b", "vllm_plan_gpus": ["1"], "vllm_plan_gpu_memory_utilization": "nan"},
    ]
    problems = service_problems(services, {"vllm_service_port": 8000}, OPTIONS)
    assert [p.variable for p in problems] == [
        "airgap_vllm_services[0].vllm_service_port",
        "airgap_vllm_services[1].vllm_plan_gpu_memory_utilization",
    ]


@pytest.mark.parametrize("address", ["0.0.0.0", "::", "[::]", "0", "0x0"])
def test_the_bundle_seed_on_every_interface_is_refused(address):
    problem = V.check_option("bundle_peer_address", OPTIONS["bundle_peer_address"], address)
    assert problem is not None and "not every interface" in problem.wants or "not" in problem.wants


@pytest.mark.parametrize("address", ["", "10.231.7.11", "seed-1.site"])
def test_one_seed_address_passes(address):
    assert V.check_option("bundle_peer_address", OPTIONS["bundle_peer_address"], address) is None


def test_the_removed_metrics_exposure_is_refused_naming_the_front_doors_variables():
    names = ["vllm_service_metrics_expose", "vllm_service_metrics_sources", "vllm_service_port", "vllm_front_port"]
    problems = V.removed_problems(names)
    assert [p.variable for p in problems] == ["vllm_service_metrics_expose", "vllm_service_metrics_sources"]
    for p in problems:
        line = p.line()
        assert "\n" not in line and line.startswith(p.variable + " is removed")
        for new in (
            "vllm_front_metrics_port",
            "vllm_front_metrics_sources",
            "vllm_front_metrics_tokens",
            "docs/monitoring.md",
        ):
            assert new in line
    # Refused, so not also warned about as a misspelling; no role knows them any more.
    assert V.misspelled(OPTIONS, names, ["vllm_service", "vllm_front"]) == []
    assert not any(name in OPTIONS for name in V.REMOVED)
    assert V_cross.cross_role_problems(["vllm_service"], {"vllm_service_expose_to_network": False}, OPTIONS) == []


def test_every_problem_is_reported_at_once_one_line_each():
    values = {
        "vllm_service_port": 0,
        "vllm_plan_port": 70000,
        "vllm_plan_gpu_memory_utilization": float("nan"),
        "vllm_service_name": "sshd",
        "bundle_peer_address": "0.0.0.0",
        "vllm_plan_concurrency": 0,
        "vllm_service_loadcheck_prompts": 0,
    }
    options, _skip = site_options_and_skip()
    problems = V.check_variables(options, values)
    assert sorted(p.variable for p in problems) == sorted(values)
    report = V.format_report("gpu1", problems)
    assert len(report.splitlines()) == len(values) + 1


# ------------------------------------------------------------------ no traceback for any input

ODD = [
    None,
    True,
    0,
    -1,
    10**400,
    float("nan"),
    float("inf"),
    -0.0,
    "",
    " ",
    "x\n",
    "a\x00b",
    "{{ x }}",
    "\u00e9\udcff"[:1],
    [],
    [None],
    [{}],
    [[1]],
    {},
    {"a": None},
    {"port": "x"},
    {1: 2},
    object(),
    b"\xff",
    ("t",),
]


@pytest.mark.parametrize("value", ODD, ids=[repr(v)[:20] for v in ODD])
def test_no_option_gives_a_traceback_for_an_odd_value(value):
    for name, spec in sorted(OPTIONS.items()):
        problems = V.option_problems(name, spec, value)
        for p in problems:
            assert isinstance(p.line(), str)
    V.advisories(dict((name, value) for name in V.RANGES))


@pytest.mark.parametrize("value", ODD, ids=[repr(v)[:20] for v in ODD])
def test_no_rule_between_roles_gives_a_traceback_for_an_odd_value(value):
    for name in sorted(OPTIONS):
        V_cross.cross_role_problems(list(V.STAGES), {name: value}, OPTIONS)
    V_cross.shared_machine_problems(
        {
            "a": {"machine": "m", "port": value, "name": value, "gpus": None},
            "b": {"machine": "m", "port": value, "name": "x", "gpus": frozenset()},
        }
    )


@pytest.mark.parametrize("value", ODD, ids=[repr(v)[:20] for v in ODD])
def test_no_services_list_gives_a_traceback(value):
    host = {"vllm_service_port": 8000, "vllm_plan_gpu_memory_utilization": value}
    lists = [
        value,
        [value],
        [{"vllm_service_name": value}],
        [
            {
                "vllm_service_name": "a",
                "vllm_service_port": value,
                "vllm_plan_gpus": value,
                "vllm_plan_gpu_memory_utilization": value,
                "vllm_plan_kv_offloading_gib": value,
            }
        ],
    ]
    for services in lists:
        for options in (None, OPTIONS):
            try:
                service_problems(services, host, options)
            except TypeError:
                if isinstance(services, list):
                    raise
                # a services value that is not hashable reaches `in` in the action only as a list
        service_advisories(services)
        try:
            resolve(services, host)
        except ValueError:
            pass


def test_nan_and_huge_numbers_never_pass():
    for name in V.RANGES:
        if "." in name or name not in OPTIONS:
            continue
        for value in (float("nan"), float("inf"), 10**400, -(10**400)):
            assert V.check_option(name, OPTIONS[name], value) is not None, (name, value)
    assert math.isnan(float("nan"))


# ------------------------------------------------------------------ the shipped inventories and molecule scenarios


def _plain(values):
    """Drop what only Ansible can resolve (templates): the action templates them; here they are unknown."""
    out = {}
    for key, value in (values or {}).items():
        if isinstance(value, str) and "{{" in value:
            continue
        if isinstance(value, (list, dict)) and "{{" in repr(value):
            continue
        out[key] = value
    return out


def _inventory_hosts():
    """(label, {variable: value}) of every host of every inventory and molecule scenario."""
    out = []
    for inventory in sorted(glob.glob(os.path.join(ROOT, "inventories", "*", "hosts.yml"))):
        base = os.path.dirname(inventory)
        group_vars = {}
        for path in sorted(glob.glob(os.path.join(base, "group_vars", "*.yml"))):
            with open(path) as f:
                group_vars.update(yaml.safe_load(f) or {})

        label = os.path.basename(base)

        def walk(group, inherited, label=label):
            merged = dict(inherited, **(group.get("vars") or {}))
            for host, host_vars in (group.get("hosts") or {}).items():
                out.append(("%s/%s" % (label, host), dict(merged, **(host_vars or {}))))
            for child in (group.get("children") or {}).values():
                walk(child or {}, merged)

        with open(inventory) as f:
            data = yaml.safe_load(f) or {}
        walk(data.get("all") or {}, group_vars)
    for scenario in sorted(glob.glob(os.path.join(ROOT, "molecule", "*", "molecule.yml"))):
        with open(scenario) as f:
            data = yaml.safe_load(f) or {}
        inventory = (data.get("provisioner") or {}).get("inventory") or {}
        group_vars = {}
        for _group, values in sorted((inventory.get("group_vars") or {}).items()):
            group_vars.update(values or {})
        link = (inventory.get("links") or {}).get("group_vars")
        if link:
            for path in sorted(glob.glob(os.path.join(os.path.dirname(scenario), link, "*.yml"))):
                with open(path) as f:
                    group_vars.update(yaml.safe_load(f) or {})
        hosts = [p.get("name") for p in data.get("platforms") or []]
        host_vars = inventory.get("host_vars") or {}
        for host in sorted(set(hosts) | set(host_vars)) or (["all"] if group_vars else []):
            out.append(
                ("molecule/%s/%s" % (scenario.split(os.sep)[-2], host), dict(group_vars, **(host_vars.get(host) or {})))
            )
    return out


HOSTS = _inventory_hosts()


def test_the_inventories_and_scenarios_are_found():
    labels = [label for label, _values in HOSTS]
    assert any(label.startswith("simulated/") for label in labels)
    assert any(label.startswith("kylin-prod/") for label in labels)
    assert any(label.startswith("molecule/fleet/") for label in labels)
    assert (
        "molecule/serve/kylin-serve" in labels
        and "molecule/front/kylin-front" in labels
        and "molecule/bundle/all" in labels
    )


@pytest.mark.parametrize("label, values", HOSTS, ids=[label for label, _values in HOSTS])
def test_shipped_variables_still_validate(label, values):
    values = _plain(values)
    options, skip = site_options_and_skip()
    known = dict((k, v) for k, v in values.items() if k in options and k not in skip)
    problems = V.check_variables(options, known, skip=skip)
    problems += [p for p in V_cross.cross_role_problems(list(V.STAGES), known, options) if p.variable not in skip]
    services = values.get("airgap_vllm_services")
    if services:
        host = dict(
            (n, V_cross.effective(n, known, options))
            for n in ("vllm_service_name", "vllm_service_port", "vllm_plan_gpus")
        )
        problems += service_problems(services, host, options)
    assert problems == [], "%s: %s" % (label, V.format_report(label, problems))
