# -*- coding: utf-8 -*-
"""Unit tests of the pure decisions behind airgap.vllm.validate."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.airgap.vllm.plugins.module_utils.common._validate import (
    Problem,
    check_option,
    check_variables,
    describe_got,
    describe_wanted,
    format_report,
    misspelled,
)
from ansible_collections.airgap.vllm.plugins.module_utils.common._validate_cross import (
    bundle_problems,
    connection_problem,
    cross_role_problems,
    disagreement,
    docker_diagnosis,
    effective,
    gpu_set,
    needed_kinds,
    shared_machine_problems,
)
from ansible_collections.airgap.vllm.plugins.module_utils.common._version import at_least

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def role_options():
    out = {}
    roles = os.path.join(ROOT, "roles")
    for role in sorted(os.listdir(roles)):
        path = os.path.join(roles, role, "meta", "argument_specs.yml")
        if os.path.isfile(path):
            with open(path) as f:
                out.update(yaml.safe_load(f)["argument_specs"]["main"]["options"])
    return out


OPTIONS = role_options()


@pytest.mark.parametrize(
    "name,value",
    [
        ("vllm_plan_concurrency", 8),
        ("vllm_plan_concurrency", "8"),  # -e gives strings; ansible converts them, so do we
        ("vllm_plan_gpu_memory_utilization", "0.9"),
        ("vllm_plan_prefix_caching", "yes"),
        ("bundle_source", "target"),
        ("preflight_checks", ["os", "disk"]),
        ("preflight_disk_requirements", [{"path": "/opt", "min_free_gb": 5}]),
        ("vllm_service_extra_env", {"CUDA_VISIBLE_DEVICES": "0"}),
        ("vllm_plan_kv_offloading_gib", 2),
    ],
)
def test_valid_values_pass(name, value):
    assert check_option(name, OPTIONS[name], value) is None


@pytest.mark.parametrize(
    "name,value,got,wants",
    [
        ("vllm_plan_concurrency", "abc", "'abc' (a string)", "an integer"),
        ("vllm_plan_gpu_memory_utilization", "lots", "'lots' (a string)", "a number"),
        ("vllm_plan_prefix_caching", "maybe", "'maybe' (a string)", "a boolean (true/false)"),
        ("bundle_source", "usb", "'usb' (a string)", "one of: controller, target"),
        (
            "vllm_plan_kv_cache_dtype",
            "int4",
            "'int4' (a string)",
            "one of: auto, float16, bfloat16, fp8, fp8_e4m3, fp8_e5m2",
        ),
        # Its values may be secrets (HF_TOKEN=...): never repeated (no_log in argument_specs, issue 42).
        ("vllm_service_extra_env", ["HF_TOKEN=hf_x"], "(hidden: no_log)", "a mapping"),
    ],
)
def test_wrong_values_say_variable_got_wants(name, value, got, wants):
    problem = check_option(name, OPTIONS[name], value)
    assert problem == Problem(name, got, wants)
    assert problem.line() == "%s: got %s; wants %s" % (name, got, wants)


def test_list_with_choices_names_the_bad_elements():
    problem = check_option("preflight_checks", OPTIONS["preflight_checks"], ["os", "gpu", "dsk"])
    assert problem.wants.startswith("a list of strings from: os, gpu_present,")
    assert problem.wants.endswith("('gpu', 'dsk' are not)")


def test_nested_options_described():
    problem = check_option("preflight_disk_requirements", OPTIONS["preflight_disk_requirements"], [{"path": "/opt"}])
    assert problem.wants == "a list of mappings with keys min_free_gb (float, required), path (path, required)"


def test_secret_values_are_not_shown():
    problem = check_option("vllm_service_api_keys", OPTIONS["vllm_service_api_keys"], {"k": "sk-secret"})
    assert "sk-secret" not in problem.line()
    assert "hidden" in problem.got


def test_long_values_are_cut():
    assert len(describe_got("x" * 500)) < 100


@pytest.mark.parametrize(
    "value,text",
    [
        (None, "nothing (null)"),
        ("", "an empty string"),
        (True, "True (a boolean)"),
        (3, "3 (an integer)"),
        (0.5, "0.5 (a number)"),
        ({"a": 1}, "{'a': 1} (a mapping)"),
    ],
)
def test_describe_got(value, text):
    assert describe_got(value) == text


def test_describe_wanted_defaults_to_string():
    assert describe_wanted({}) == "a string"
    assert describe_wanted({"type": "list", "elements": "int"}) == "a list of integers"


def test_check_variables_only_set_ones_and_required_unless_skipped():
    options = {"a_x": {"type": "int"}, "a_req": {"type": "path", "required": True}, "a_y": {"type": "str"}}
    problems = check_variables(options, {"a_x": "no"})
    assert [p.variable for p in problems] == ["a_req", "a_x"]
    assert problems[0].got == "nothing (not set)"
    assert check_variables(options, {"a_x": 1}, skip={"a_req"}) == []


def test_every_role_default_passes_its_own_spec():
    # The specs' own defaults (the non-template ones) must pass: otherwise a user setting the default
    # explicitly would be refused.
    for name, spec in OPTIONS.items():
        default = spec.get("default")
        if isinstance(default, str) and "{{" in default:
            continue
        if "default" in spec:
            assert check_option(name, spec, default) is None, name


def test_misspelled_suggests_the_option():
    out = misspelled(
        OPTIONS,
        [
            "vllm_plan_concurency",
            "vllm_plan_result",
            "bundle_staged",
            "other_var",
            "__vllm_plan_x",
            "vllm_plan_concurrency",
            "vllm_service_zzz_qqq",
        ],
        ["vllm_plan", "vllm_service", "bundle"],
    )
    assert out == [("vllm_plan_concurency", "vllm_plan_concurrency"), ("vllm_service_zzz_qqq", None)]


def test_driver_version_order():
    assert at_least("580.65.06", "580.9.1") and not at_least("580.9.1", "580.65.06")
    assert not at_least("570.172.08", "580.65.06")


def test_effective_ignores_template_defaults():
    assert effective("vllm_service_port", {}, OPTIONS) == 8000
    assert effective("vllm_plan_kernel_release", {}, OPTIONS) is None
    assert effective("vllm_service_port", {"vllm_service_port": 9000}, OPTIONS) == 9000


def test_gpu_set():
    assert gpu_set({}) is None
    assert gpu_set(None) is None
    assert gpu_set({"CUDA_VISIBLE_DEVICES": "0, 1"}) == frozenset(["0", "1"])


ALL = [
    "preflight",
    "bundle",
    "nvidia_driver",
    "nvidia_toolkit",
    "gpu_free",
    "vllm_model",
    "vllm_plan",
    "vllm_image",
    "vllm_service",
]


def test_cross_role_defaults_hold():
    assert cross_role_problems(ALL, {}, OPTIONS) == []


def test_cross_role_old_driver_port_lmo_gpus():
    values = {
        "nvidia_driver_version": "570.172.08",
        "vllm_service_port": 9000,
        "vllm_model_language_model_only": True,
        "vllm_plan_gpu_count": 2,
        "vllm_service_extra_env": {"CUDA_VISIBLE_DEVICES": "3"},
    }
    problems = cross_role_problems(ALL, values, OPTIONS)
    assert [p.variable for p in problems] == [
        "nvidia_driver_version",
        "preflight_port",
        "vllm_model_language_model_only",
        "vllm_plan_gpu_count",
    ]
    assert "580.65.06" in problems[0].wants
    assert problems[1].got == "8000 (an integer)" and "9000" in problems[1].wants


@pytest.mark.parametrize(
    "installed, flagged",
    [
        ("580.65", False),  # preflight pads missing parts with 0: 580.65 == 580.65.0 passes there, and here
        (" 580.65.06", False),  # preflight trims blanks
        ("580.64.99", True),
        ("570.172.08", True),
        ("590.1", False),
    ],
)
def test_cross_role_driver_rule_is_preflights_own_comparison(installed, flagged):
    values = {"nvidia_driver_version": installed, "preflight_min_driver_version": "580.65.0"}
    problems = [p for p in cross_role_problems(ALL, values, OPTIONS) if p.variable == "nvidia_driver_version"]
    assert bool(problems) == flagged
    assert bool(problems) == (not at_least(installed, "580.65.0"))


def test_cross_role_preflight_services_win_over_preflight_port():
    two = [{"name": "vllm", "port": 9000, "gpus": ["0"]}, {"name": "vllm-b", "port": 9001, "gpus": ["1"]}]
    # preflight_port (8000 by default) is not read when preflight_services is set: no preflight_port problem.
    assert cross_role_problems(ALL, {"vllm_service_port": 9000, "preflight_services": two}, OPTIONS) == []
    # The host's one service (vllm_service_name, vllm_service_port) needs its entry, at its port.
    problems = cross_role_problems(ALL, {"vllm_service_port": 9005, "preflight_services": two}, OPTIONS)
    assert [p.variable for p in problems] == ["preflight_services"]
    assert "lacking: vllm on 9005" in problems[0].wants and problems[0].got.endswith("(a list)")
    # Several services (as _services.resolve gives them): each needs its entry.
    services = [{"name": "vllm", "port": 9000}, {"name": "vllm-b", "port": "9001"}, {"name": "vllm-c", "port": 9002}]
    problems = cross_role_problems(ALL, {"preflight_services": two}, OPTIONS, services=services)
    assert len(problems) == 1 and "lacking: vllm-c on 9002 (preflight" in problems[0].wants
    assert cross_role_problems(ALL, {"preflight_services": two}, OPTIONS, services=services[:2]) == []
    # Empty preflight_services: preflight_port against vllm_service_port, as before.
    problems = cross_role_problems(ALL, {"vllm_service_port": 9000, "preflight_services": []}, OPTIONS)
    assert [p.variable for p in problems] == ["preflight_port"]
    assert cross_role_problems(["preflight"], {"preflight_services": two}, OPTIONS) == []


def test_cross_role_old_driver_fine_when_driver_not_managed():
    values = {"nvidia_driver_version": "570.172.08"}
    assert cross_role_problems(ALL, values, OPTIONS, manage_driver=False) == []
    assert cross_role_problems(["nvidia_driver"], values, OPTIONS) == []


MANIFEST = [
    {"kind": "driver", "version": "580.65.06", "path": "artifacts/NVIDIA.run", "size": 10},
    {"kind": "toolkit", "version": "1.17.8-1", "path": "artifacts/tk/a.rpm", "size": 5},
    {"kind": "image", "version": "v0.27.1", "path": "artifacts/vllm.tar", "size": 7},
    {"kind": "model", "version": "1", "path": "artifacts/model.tar", "size": 3},
]


def test_needed_kinds():
    assert needed_kinds(ALL, {}, OPTIONS) == {
        "driver": ("nvidia_driver", "580.65.06"),
        "toolkit": ("nvidia_toolkit", None),
        "image": ("vllm_image", None),
        "model": ("vllm_model", None),
    }
    assert "driver" not in needed_kinds(ALL, {}, OPTIONS, manage_driver=False)
    assert "model" not in needed_kinds(ALL, {"vllm_model_src": "/x"}, OPTIONS)
    assert needed_kinds(["preflight", "gpu_free"], {}, OPTIONS) == {}


def test_bundle_complete():
    present = dict((e["path"], e["size"]) for e in MANIFEST)
    assert bundle_problems("/b", "/b/manifest.yml", MANIFEST, present, needed_kinds(ALL, {}, OPTIONS)) == []


def test_bundle_missing_and_short_files_name_file_and_manifest():
    present = {
        "artifacts/NVIDIA.run": 10,
        "artifacts/tk/a.rpm": 5,
        "artifacts/vllm.tar": 2,
        "artifacts/model.tar": None,
    }
    problems = bundle_problems("/b", "/b/manifest.yml", MANIFEST, present, {})
    lines = [p.line() for p in problems]
    assert "artifacts/vllm.tar of 2 bytes" in lines[0] and "7 bytes" in lines[0]
    assert lines[1] == (
        "bundle_path: got /b, which lacks artifacts/model.tar; wants every file /b/manifest.yml lists. "
        "Rebuild the bundle (playbooks/bundle_build.yml) or copy the file back from the original medium"
    )


def test_bundle_lacking_a_kind_or_the_driver_version():
    entries = [e for e in MANIFEST if e["kind"] != "image"]
    present = dict((e["path"], e["size"]) for e in entries)
    need = needed_kinds(ALL, {"nvidia_driver_version": "590.1"}, OPTIONS)
    problems = bundle_problems("/b", "/b/manifest.yml", entries, present, need, hint="H")
    assert [p.variable for p in problems] == ["nvidia_driver_version", "bundle_path"]
    assert "580.65.06" in problems[0].wants
    assert "no image artifact" in problems[1].got and "vllm_image" in problems[1].wants
    assert problems[1].hint != "H"  # its own advice wins over the inventory's


def test_an_nvswitch_host_needs_the_fabric_manager_rpm_of_the_drivers_version():
    hgx = {"needed": True, "reason": "lspci shows 4 NVSwitch(es) (vendor 10de, class 0680): ..."}
    need = needed_kinds(ALL, {}, OPTIONS, fabric_manager=hgx)
    assert need["fabricmanager"] == ("nvidia_driver", "580.65.06")
    present = dict((e["path"], e["size"]) for e in MANIFEST)
    problems = bundle_problems("/b", "/b/manifest.yml", MANIFEST, present, need, fabric_reason=hgx["reason"])
    assert len(problems) == 1 and problems[0].variable == "bundle_path"
    line = problems[0].line()
    assert (
        "a bundle without nvidia-fabric-manager-580.65.06-1.x86_64.rpm (/b/manifest.yml: it carries no "
        "fabricmanager artifact)" in line
    )
    assert "this host needs it (lspci shows 4 NVSwitch(es)" in line and "kind fabricmanager" in line
    # The RPM of another driver version does not do: Fabric Manager refuses to run beside it.
    old = MANIFEST + [
        {
            "kind": "fabricmanager",
            "version": "570.172.08",
            "size": 4,
            "path": "artifacts/nvidia-fabric-manager-570.172.08-1.x86_64.rpm",
        }
    ]
    problems = bundle_problems("/b", "/b/manifest.yml", old, dict((e["path"], e["size"]) for e in old), need)
    assert len(problems) == 1 and "it carries nvidia-fabric-manager-570.172.08-1.x86_64.rpm" in problems[0].got
    good = MANIFEST + [
        {
            "kind": "fabricmanager",
            "version": "580.65.06",
            "size": 4,
            "path": "artifacts/nvidia-fabric-manager-580.65.06-1.x86_64.rpm",
        }
    ]
    assert bundle_problems("/b", "/b/manifest.yml", good, dict((e["path"], e["size"]) for e in good), need) == []
    # A renamed file of the driver's version: the role installs it (pick_entry), so validate takes it too.
    renamed = MANIFEST + [{"kind": "fabricmanager", "version": "580.65.06", "size": 4, "path": "artifacts/fm.rpm"}]
    assert bundle_problems("/b", "/b/manifest.yml", renamed, dict((e["path"], e["size"]) for e in renamed), need) == []


def test_a_host_without_nvswitches_or_unknown_needs_no_fabric_manager_rpm():
    for fabric in (None, {"needed": False}, {"needed": None}):
        assert "fabricmanager" not in needed_kinds(ALL, {}, OPTIONS, fabric_manager=fabric)
    hgx = {"needed": True}
    assert "fabricmanager" not in needed_kinds(ALL, {}, OPTIONS, manage_driver=False, fabric_manager=hgx)
    assert "fabricmanager" not in needed_kinds(
        ALL, {"nvidia_driver_fabric_manager_rpm": "/x.rpm"}, OPTIONS, fabric_manager=hgx
    )
    # Empty (the default) means the bundle's RPM.
    assert "fabricmanager" in needed_kinds(ALL, {"nvidia_driver_fabric_manager_rpm": ""}, OPTIONS, fabric_manager=hgx)
    assert "fabricmanager" not in needed_kinds(ALL, {"bundle_stage_kinds": ["driver"]}, OPTIONS, fabric_manager=hgx)


def test_shared_machine_collisions():
    hosts = {
        "gpu0": {"machine": "10.0.0.1", "port": 8000, "name": "vllm", "gpus": frozenset(["0"])},
        "gpu1": {"machine": "10.0.0.1", "port": 8000, "name": "vllm-b", "gpus": frozenset(["0", "1"])},
        "other": {"machine": "10.0.0.2", "port": 8000, "name": "vllm", "gpus": None},
    }
    out = shared_machine_problems(hosts)
    assert sorted(out) == ["gpu0", "gpu1"]
    assert [p.variable for p in out["gpu0"]] == ["vllm_service_port", "vllm_service_extra_env.CUDA_VISIBLE_DEVICES"]
    assert "share GPU 0" in out["gpu1"][1].wants


def test_shared_machine_apart_is_fine():
    hosts = {
        "gpu0": {"machine": "m", "port": 8000, "name": "vllm-a", "gpus": frozenset(["0"])},
        "gpu1": {"machine": "m", "port": 8001, "name": "vllm-b", "gpus": frozenset(["1"])},
    }
    assert shared_machine_problems(hosts) == {}


def test_docker_diagnosis():
    assert docker_diagnosis("sim", "running") == ""
    assert docker_diagnosis("sim", None) == "there is no container named sim"
    assert "exists but is stopped" in docker_diagnosis("sim", "exited")
    assert "docker start sim" in docker_diagnosis("sim", "exited")


def test_connection_problem_prefers_the_diagnosis():
    p = connection_problem(
        "h",
        "community.docker.docker",
        "Failed to create temporary directory\nmore",
        "there is no container named h",
        "run bash tests/simulate",
    )
    assert p.line() == (
        "cannot reach h (connection community.docker.docker): there is no container named h. run bash tests/simulate"
    )
    p = connection_problem("h", "ssh", "Failed to connect\nmore")
    assert p.line() == "cannot reach h (connection ssh): Failed to connect"


def test_format_report():
    text = format_report("h", [Problem("a", "1", "2"), Problem("b", "3", "4", "Do X")])
    assert text.splitlines() == [
        "2 problems in the settings of h (nothing was changed):",
        "- a: got 1; wants 2",
        "- b: got 3; wants 4. Do X",
    ]


def test_disagreement_of_two_set_variables():
    options = {"b": {"default": "8000"}}
    wants = "b's value (%s)"
    assert disagreement("a", "b", {"a": 8000}, options, str, wants) == []  # the same once str()
    assert disagreement("a", "b", {}, options, str, wants) == []  # a unset
    assert disagreement("a", "b", {"a": 1}, {}, str, wants) == []  # b unset, no default
    assert disagreement("a", "b", {"a": 8001}, options, str, wants) == [
        Problem("a", describe_got(8001), "b's value (8000)")
    ]
