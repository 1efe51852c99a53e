"""What daemon.json should become for the nvidia runtime (issue 32 item 2): the decisions the nvidia_toolkit role
made in Jinja (tasks/probe.yml, vars/main.yml, tasks/uninstall.yml), kept as they were, in one home."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.driver import _docker_daemon as d

PATH = "/etc/docker/daemon.json"
PACKAGES = [
    "libnvidia-container1",
    "libnvidia-container-tools",
    "nvidia-container-toolkit-base",
    "nvidia-container-toolkit",
]
VERSION = "1.17.8-1"
RPMS_OK = dict((name, [VERSION]) for name in PACKAGES)
DOCKER_OK = {"running": True, "server_version": "20.10.24", "runtimes": ["io.containerd.runc.v2", "nvidia", "runc"]}
DOCKER_PLAIN = {"running": True, "server_version": "20.10.24", "runtimes": ["io.containerd.runc.v2", "runc"]}
NVIDIA = {"args": [], "path": "nvidia-container-runtime"}
OTHERS = {
    "log-driver": "json-file",
    "log-opts": {"max-size": "100m"},
    "data-root": "/srv/docker",
    "runtimes": {"kata": {"path": "/usr/bin/kata-runtime"}},
}


def plan(text, **kw):
    kw.setdefault("docker", DOCKER_OK)
    kw.setdefault("rpms", RPMS_OK)
    kw.setdefault("packages", PACKAGES)
    kw.setdefault("version", VERSION)
    kw.setdefault("path", PATH)
    return d.plan(text, **kw)


# ------------------------------------------------------------------------------------------- reading the file
@pytest.mark.parametrize("text", [None, "", "   ", "\n\t \n"])
def test_an_absent_empty_or_blank_file_is_an_empty_object(text):
    assert d.parse_daemon_json(text) == ({}, None)
    p = plan(text)
    assert p["before"] == {} and p["after"] == {"runtimes": {"nvidia": NVIDIA}} and p["differs"] is True
    assert p["error"] == "" and p["converged"] is False


def test_data_already_parsed_is_taken_as_it_is():
    assert d.parse_daemon_json({"data-root": "/srv"}) == ({"data-root": "/srv"}, None)
    assert plan({"runtimes": {"nvidia": NVIDIA}})["differs"] is False
    assert d.parse_daemon_json(b'{"a": 1}') == ({"a": 1}, None)


@pytest.mark.parametrize("text", ['{"log-driver": "json-file",}', "{", "log-driver: json-file", "{'a': 1}"])
def test_invalid_json_fails_with_the_roles_message_and_nothing_to_do(text):
    p = plan(text)
    assert p["error"] == (
        "/etc/docker/daemon.json is not valid JSON; nvidia-ctk would refuse it and Docker would "
        "not start with it. Fix the file by hand (nothing was changed)."
    )
    assert p["differs"] is False and p["converged"] is False and p["restart"] is False
    assert p["before"] == {} and p["after"] == {}


def test_invalid_json_on_removal_keeps_the_uninstall_message():
    p = d.plan("{", remove=True, path="/etc/docker/custom.json")
    assert p["error"] == (
        "/etc/docker/custom.json is not valid JSON: the nvidia runtime cannot be taken out of it. "
        "Fix the file by hand (nothing was changed by this step)."
    )
    assert p["differs"] is False


@pytest.mark.parametrize(
    "text, kind",
    [
        ("[1, 2]", "an array"),
        ('"nvidia"', "a string"),
        ("5", "a number"),
        ("null", "null"),
        ("true", "a boolean"),
        ([{"a": 1}], "an array"),
    ],
)
def test_a_top_level_that_is_not_an_object_fails_clearly(text, kind):
    p = plan(text)
    assert p["error"].startswith("/etc/docker/daemon.json is not a JSON object (its top level is %s); " % kind)
    assert "nothing was changed" in p["error"]
    assert p["differs"] is False and p["converged"] is False and p["restart"] is False
    assert "nothing was changed by this step" in d.plan(text, remove=True)["error"]


@pytest.mark.parametrize("runtimes", ["kata", 5, {"x"} and ["kata"], False])
def test_runtimes_that_is_not_an_object_fails_clearly(runtimes):
    p = plan(json.dumps({"runtimes": runtimes}))
    assert p["error"].startswith('/etc/docker/daemon.json has a "runtimes" that is not a JSON object (it is ')
    assert p["differs"] is False and p["converged"] is False


@pytest.mark.parametrize("runtimes", [None, []])
def test_null_or_empty_list_runtimes_read_as_none(runtimes):
    """Ansible's combine read them as no runtimes; kept."""
    p = plan(json.dumps({"runtimes": runtimes, "data-root": "/srv"}))
    assert p["error"] == ""
    assert p["after"] == {"runtimes": {"nvidia": NVIDIA}, "data-root": "/srv"} and p["differs"] is True


# ---------------------------------------------------------------------------------------- registering nvidia
def test_other_keys_and_runtimes_are_kept():
    p = plan(json.dumps(OTHERS))
    want = dict(OTHERS, runtimes={"kata": {"path": "/usr/bin/kata-runtime"}, "nvidia": NVIDIA})
    assert p["before"] == OTHERS and p["after"] == want and p["differs"] is True and p["converged"] is False
    assert "default-runtime" not in p["after"]


def test_the_before_is_not_changed_in_place():
    before = json.loads(json.dumps(OTHERS))
    after = d.with_runtime(before, True)
    assert before == OTHERS and after["runtimes"] is not before["runtimes"]
    after["runtimes"]["nvidia"]["args"].append("x")
    assert d.RUNTIME_ENTRY == NVIDIA


def test_an_nvidia_runtime_with_other_args_is_replaced():
    """nvidia-ctk writes its own entry; the role always predicted that (the combine was not recursive)."""
    text = json.dumps(
        {"runtimes": {"nvidia": {"path": "/opt/nvidia-container-runtime", "args": ["--debug"], "runtimeArgs": []}}}
    )
    p = plan(text)
    assert p["after"] == {"runtimes": {"nvidia": NVIDIA}} and p["differs"] is True and p["converged"] is False
    assert p["restart"] is False


@pytest.mark.parametrize("default", [False, True])
def test_set_as_default_adds_the_default_runtime_and_the_flag(default):
    p = plan(json.dumps(OTHERS), set_as_default=default)
    assert ("default-runtime" in p["after"]) is default
    if default:
        assert p["after"]["default-runtime"] == "nvidia"
    assert p["argv"] == ["nvidia-ctk", "runtime", "configure", "--runtime=docker", "--config=" + PATH] + (
        ["--set-as-default"] if default else []
    )


def test_without_set_as_default_another_default_runtime_is_kept():
    text = json.dumps({"runtimes": {"nvidia": NVIDIA}, "default-runtime": "runc"})
    p = plan(text)
    assert p["differs"] is False and p["after"]["default-runtime"] == "runc" and p["converged"] is True
    on = plan(text, set_as_default=True)
    assert on["differs"] is True and on["after"]["default-runtime"] == "nvidia"


def test_an_nvidia_default_runtime_is_kept_when_set_as_default_is_off():
    text = json.dumps({"runtimes": {"nvidia": NVIDIA}, "default-runtime": "nvidia"})
    assert plan(text)["differs"] is False and plan(text, set_as_default=True)["differs"] is False


def test_the_command_names_the_file():
    assert plan("", path="/srv/docker/daemon.json")["argv"][-1] == "--config=/srv/docker/daemon.json"


# ---------------------------------------------------------------------------------------------- converged
def test_already_converged():
    text = json.dumps(dict(OTHERS, runtimes={"nvidia": NVIDIA, "kata": {"path": "/usr/bin/kata-runtime"}}))
    p = plan(text)
    assert p["converged"] is True and p["differs"] is False and p["restart"] is False and p["rpms_wrong"] == []
    assert p["before"] == p["after"]


def test_converged_needs_the_running_daemon_to_list_the_runtime():
    text = json.dumps({"runtimes": {"nvidia": NVIDIA}})
    stale = plan(text, docker=DOCKER_PLAIN)
    assert stale["converged"] is False and stale["differs"] is False and stale["restart"] is True
    down = plan(text, docker={"running": False, "error": "Cannot connect"})
    assert down["converged"] is False and down["restart"] is True
    # The daemon does not answer but (unexpectedly) lists runtimes: not converged, no restart (as in Jinja).
    odd = plan(text, docker={"running": False, "runtimes": ["nvidia"]})
    assert odd["converged"] is False and odd["restart"] is False
    assert plan(text, docker=None)["converged"] is False


def test_a_pending_change_is_no_restart_of_its_own():
    """configure.yml restarts through nvidia-ctk's handler then; restart is for an unchanged file only."""
    assert plan("", docker=DOCKER_PLAIN)["restart"] is False


@pytest.mark.parametrize(
    "rpms, wrong",
    [
        ({}, PACKAGES),
        (None, PACKAGES),
        (dict(RPMS_OK, **{"nvidia-container-toolkit": ["1.16.2-1"]}), ["nvidia-container-toolkit"]),
        (dict(RPMS_OK, **{"nvidia-container-toolkit": ["1.16.2-1", VERSION]}), []),
        (dict((k, v) for k, v in RPMS_OK.items() if k != "libnvidia-container1"), ["libnvidia-container1"]),
        (dict(RPMS_OK, **{"libnvidia-container-tools": None}), ["libnvidia-container-tools"]),
        (dict(RPMS_OK, **{"libnvidia-container-tools": ["1.17.8-10"]}), ["libnvidia-container-tools"]),
    ],
)
def test_rpms_at_another_version_or_missing(rpms, wrong):
    text = json.dumps({"runtimes": {"nvidia": NVIDIA}})
    p = plan(text, rpms=rpms)
    assert p["rpms_wrong"] == wrong and p["converged"] is (not wrong)
    assert d.rpms_wrong(PACKAGES, VERSION, rpms) == wrong


def test_rpms_wrong_keeps_the_package_order():
    assert d.rpms_wrong(["b", "a"], "1", {}) == ["b", "a"]
    assert d.rpms_wrong([], "1", {}) == []


def test_rpms_wrong_on_a_bad_file_is_still_reported():
    assert plan("{", rpms={})["rpms_wrong"] == PACKAGES


# --------------------------------------------------------------------------------------------------- removal
def test_removal_takes_out_nvidia_and_keeps_the_rest():
    text = json.dumps(dict(OTHERS, runtimes={"nvidia": NVIDIA, "kata": {"path": "k"}}, **{"default-runtime": "nvidia"}))
    p = d.plan(text, remove=True)
    assert p["after"] == dict(OTHERS, runtimes={"kata": {"path": "k"}}) and p["differs"] is True
    assert p["error"] == "" and p["argv"] == [] and p["restart"] is False and p["converged"] is False


def test_removal_keeps_another_default_runtime_and_drops_empty_runtimes():
    p = d.plan(
        json.dumps({"runtimes": {"nvidia": NVIDIA}, "default-runtime": "runc", "data-root": "/srv"}), remove=True
    )
    assert p["after"] == {"default-runtime": "runc", "data-root": "/srv"}
    # An empty runtimes object was dropped by the role's Jinja too (a change: the file is rewritten).
    empty = d.plan('{"runtimes": {}, "data-root": "/srv"}', remove=True)
    assert empty["after"] == {"data-root": "/srv"} and empty["differs"] is True


@pytest.mark.parametrize("text", [None, "", " \n", '{"data-root": "/srv"}', '{"runtimes": {"kata": {"path": "k"}}}'])
def test_removal_without_nvidia_changes_nothing(text):
    p = d.plan(text, remove=True)
    assert p["differs"] is False and p["error"] == ""


def test_removal_then_registration_round_trips():
    after = d.with_runtime(OTHERS, True)
    assert d.without_runtime(after) == OTHERS


# ------------------------------------------------------------------------------------------ the runtime test
def test_runtime_listed_reads_names_or_dockers_mapping():
    assert d.runtime_listed(["runc", "nvidia"]) and d.runtime_listed({"nvidia": {"path": "x"}})
    assert not d.runtime_listed(["runc"]) and not d.runtime_listed(None) and not d.runtime_listed({})
    assert d.docker_knows_runtime(DOCKER_OK) and not d.docker_knows_runtime(DOCKER_PLAIN)
    assert not d.docker_knows_runtime({"running": False}) and not d.docker_knows_runtime(None)
