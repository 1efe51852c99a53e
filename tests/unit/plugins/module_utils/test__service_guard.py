"""vllm_service security (issue 12: #2 API keys, #3 loopback, #4 seccomp). Test names state what is defended."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest
import yaml

from ansible_collections.airgap.vllm.plugins.module_utils.service import _service_guard as g

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
ROLE = os.path.join(ROOT, "roles", "vllm_service")
PROFILE_FILE = os.path.join(ROLE, "files", "seccomp-clone3-enosys.json")
MODEL = "/opt/models/qwen"
KEY = "sk-very-secret-0123456789"


def accepted(**kw):
    args = dict(
        argv=[MODEL],
        docker_options=["--gpus", "all"],
        env_names=[],
        publish_host="127.0.0.1",
        expose=False,
        seccomp="profile",
        profile_path="/etc/airgap-vllm/vllm/seccomp.json",
    )
    args.update(kw)
    return g.guard(**args)


def refused(**kw):
    with pytest.raises(g.GuardError) as err:
        accepted(**kw)
    return err.value


# ---------------------------------------------------------------- 2. API keys never on a command line

# Every spelling vLLM 0.27.1's parser turns into api_key (checked against the real parser in
# tests/real_wheel/test__service_guard_real_parser.py).
KEY_SPELLINGS = [
    ["--api-key", KEY],
    ["--api_key", KEY],
    ["--api-key=" + KEY],
    ["--api_key=" + KEY],
    ["--api-k", KEY],
    ["--api-ke", KEY],
    ["--api_k", KEY],
    ["--api_ke", KEY],
    ["--api-k=" + KEY],
    ["--api_ke=" + KEY],
    ["--api-key", "sk-other", KEY],
]


@pytest.mark.parametrize("spelling", KEY_SPELLINGS, ids=lambda a: a[0].split("=")[0] + ("=" if "=" in a[0] else ""))
def test_api_key_in_argv_is_refused_in_every_spelling_vllm_accepts(spelling):
    err = refused(argv=[MODEL, "--served-model-name", "qwen"] + spelling + ["--max-model-len", "8192"])
    assert "vllm_service_api_keys" in str(err)
    assert KEY not in str(err), "the refusal must not repeat the key"
    assert KEY in err.secrets


@pytest.mark.parametrize(
    "argv",
    [
        ["--api-server-count", "2"],
        ["--served-model-name", "api-key"],
        ["--chat-template", "/x/api-key.jinja"],
        ["--config", "/etc/vllm/keys.yaml"],
        ["--", "--api-key"],
    ],
)
def test_options_that_only_look_like_api_keys_are_accepted(argv):
    assert accepted(argv=[MODEL] + argv)["secrets"] == []


def test_vllm_api_key_in_the_environment_is_refused():
    assert "vllm_service_api_keys" in str(refused(env_names=["HF_HUB_OFFLINE", "VLLM_API_KEY"]))


@pytest.mark.parametrize(
    "opts", [["--env", "HF_TOKEN=hf_x"], ["-e", "HF_TOKEN=hf_x"], ["--env=HF_TOKEN=hf_x"], ["-eHF_TOKEN=hf_x"]]
)
def test_env_value_on_the_docker_command_line_is_refused(opts):
    err = refused(docker_options=["--gpus", "all"] + opts)
    assert "vllm_service_extra_env" in str(err) and "hf_x" not in str(err)


def _role_tasks(name):
    with open(os.path.join(ROLE, "tasks", name)) as f:
        return yaml.safe_load(f)


def test_files_holding_secrets_are_root_only_and_never_shown_by_diff_or_verbose():
    with open(os.path.join(ROLE, "vars", "main.yml")) as f:
        role_vars = yaml.safe_load(f)
    secret = set(role_vars["__vllm_service_secret_files"])
    assert secret == {"container.env.j2", "keys.yaml.j2"}
    for item in role_vars["__vllm_service_files"]:
        if item["src"] in secret:
            assert item["mode"] == "0600", item
    writers = [
        t
        for t in _role_tasks("configure.yml")
        if "ansible.builtin.template" in t and t["ansible.builtin.template"]["src"] in secret
    ]
    assert sorted(t["ansible.builtin.template"]["src"] for t in writers) == sorted(secret)
    for task in writers:
        mod = task["ansible.builtin.template"]
        assert (mod["owner"], mod["group"], mod["mode"]) == ("root", "root", "0600"), task["name"]
        assert task.get("no_log") is True and task.get("diff") is False, task["name"]
    # The loop that does show diffs must leave the secret files out.
    loop = [t for t in _role_tasks("configure.yml") if "loop" in t and "ansible.builtin.template" in t][0]
    assert "__vllm_service_secret_files" in loop["loop"]


def test_guard_runs_before_anything_is_written_whatever_the_tags():
    tasks = _role_tasks("guard.yml")
    guard = [t for t in tasks if "airgap.vllm.vllm_service_guard" in t]
    assert len(guard) == 1 and "always" in guard[0]["tags"]
    assert guard[0]["register"] == "__vllm_service_guard"
    # preflight.yml imports it (tagged always) before configure.yml writes anything.
    imports = [t for t in _role_tasks("preflight.yml") if t.get("ansible.builtin.import_tasks") == "guard.yml"]
    assert len(imports) == 1 and "always" in imports[0]["tags"]


def test_a_replanned_unit_is_composed_and_checked_by_the_guard_again():
    """The unit's run_argv is the guard's: the re-plan runs the guard on the new argv before configure.yml."""
    tasks = _role_tasks("replan.yml")
    files = [t.get("ansible.builtin.include_tasks") for t in tasks]
    assert files.index("guard.yml") < files.index("configure.yml")
    args = _role_tasks("guard.yml")[0]["airgap.vllm.vllm_service_guard"]
    assert args["argv"] == "{{ __vllm_service_argv }}"


# ---------------------------------------------------------------- 3. the loopback promise


@pytest.mark.parametrize(
    "opts",
    [
        ["--network", "host"],
        ["--network=host"],
        ["--net", "host"],
        ["--net=host"],
        ["-p", "0.0.0.0:8000:8000"],
        ["--publish", "8000:8000"],
        ["--publish=8001:8000"],
        ["-p8000:8000"],
        ["-P"],
        ["--publish-all"],
        ["--init", "-P"],
        ["-P=true"],
    ],
)
def test_docker_options_leaving_loopback_are_refused_without_the_opt_in(opts):
    err = refused(docker_options=["--gpus", "all"] + opts)
    assert "vllm_service_expose_to_network" in str(err)
    assert accepted(docker_options=["--gpus", "all"] + opts, expose=True)


@pytest.mark.parametrize(
    "opts", [["--privileged"], ["--privileged=true"], ["--oom-kill-disable", "--privileged"], ["-itP"]]
)
def test_privileges_are_no_network_matter_the_network_opt_in_does_not_allow_them(opts):
    """#24: --privileged (and a terminal the unit does not have) were allowed by vllm_service_expose_to_network."""
    err = str(refused(docker_options=["--gpus", "all"] + opts, expose=True))
    assert "vllm_service_allow_docker_options" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["--host", "0.0.0.0"],
        ["--host", "::"],
        ["--host=0.0.0.0"],
        ["--host=::"],
        ["--ho", "0.0.0.0"],
        ["--hos=::"],
        ["--host", "[::]"],
        ["--host", ""],
    ],
)
def test_vllm_host_on_every_interface_is_refused_without_the_opt_in(argv):
    assert "vllm_service_expose_to_network" in str(refused(argv=[MODEL] + argv))
    assert accepted(argv=[MODEL] + argv, expose=True)


@pytest.mark.parametrize("argv", [["--host", "127.0.0.1"], ["--headless"], ["--port", "8000"]])
def test_loopback_or_unrelated_argv_is_accepted(argv):
    assert accepted(argv=[MODEL] + argv)


@pytest.mark.parametrize(
    "opts",
    [
        ["--privileged=false"],
        ["--network", "bridge"],
        ["--shm-size", "72g"],
        ["--ipc", "private"],
        ["--publish-all=false"],
    ],
)
def test_harmless_docker_options_are_accepted(opts):
    assert accepted(docker_options=["--gpus", "all"] + opts)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10"])
def test_role_publish_host_off_loopback_is_refused_without_the_opt_in(host):
    assert "vllm_service_expose_to_network" in str(refused(publish_host=host))
    assert accepted(publish_host=host, expose=True)


def test_refusal_lists_every_problem_at_once():
    err = str(
        refused(argv=[MODEL, "--api-key", KEY, "--host", "0.0.0.0"], docker_options=["--network=host", "--privileged"])
    )
    assert err.count(";") >= 3


def test_role_defaults_keep_the_opt_in_off():
    with open(os.path.join(ROLE, "defaults", "main.yml")) as f:
        defaults = yaml.safe_load(f)
    assert defaults["vllm_service_expose_to_network"] is False
    assert defaults["vllm_service_host"] == "127.0.0.1"


# ---------------------------------------------------------------- 4. least privilege

PLANNER_OLD_DOCKER = ["--gpus", "all", "--security-opt", "seccomp=unconfined", "--shm-size", "72g"]


def test_planners_seccomp_unconfined_is_replaced_by_the_shipped_profile():
    out = accepted(docker_options=PLANNER_OLD_DOCKER)["docker_options"]
    assert "seccomp=unconfined" not in out
    assert out == [
        "--gpus",
        "all",
        "--shm-size",
        "72g",
        "--security-opt",
        "seccomp=/etc/airgap-vllm/vllm/seccomp.json",
        "--security-opt",
        "no-new-privileges",
    ]


def test_seccomp_unconfined_stays_a_documented_opt_in():
    out = accepted(docker_options=PLANNER_OLD_DOCKER, seccomp="unconfined")
    assert out["docker_options"][-4:] == ["--security-opt", "seccomp=unconfined", "--security-opt", "no-new-privileges"]
    assert any("unconfined" in w for w in out["warnings"])
    with open(os.path.join(ROLE, "meta", "argument_specs.yml")) as f:
        spec = yaml.safe_load(f)["argument_specs"]["main"]["options"]["vllm_service_seccomp"]
    assert spec["choices"] == ["profile", "unconfined", "docker_default"] and spec["default"] == "profile"


def test_no_new_privileges_is_always_set_once():
    for mode in g.SECCOMP_MODES:
        out = accepted(
            docker_options=["--security-opt=no-new-privileges:true", "--security-opt", "label=disable"],
            seccomp=mode,
            allow_options=["--security-opt"],
        )["docker_options"]
        assert out.count("no-new-privileges") == 1 and "label=disable" in out


def _profile():
    with open(PROFILE_FILE) as f:
        return f.read()


def _without_clone3(profile):
    """What Docker < 20.10.10 shipped: no clone3 rule at all (its default action answers EPERM)."""
    old = json.loads(json.dumps(profile))
    old["syscalls"] = [r for r in old["syscalls"] if r["names"] != ["clone3"]]
    return old


def test_committed_seccomp_profile_equals_the_generators_output():
    text = _profile()
    profile = json.loads(text)
    assert g.dump_profile(g.clone3_enosys_profile(profile)) == text  # a fixed point
    assert g.dump_profile(g.clone3_enosys_profile(_without_clone3(profile))) == text


def test_seccomp_profile_answers_clone3_with_enosys_never_eperm():
    rules = [r for r in json.loads(_profile())["syscalls"] if "clone3" in r["names"]]
    by_action = dict((r["action"], r) for r in rules if r["names"] == ["clone3"])
    # Kernel < 5.3 (4.19): allowed, so the kernel answers ENOSYS - also on Docker < 20.10.10 without errnoRet.
    assert by_action["SCMP_ACT_ALLOW"]["excludes"] == {"minKernel": "5.3"}
    # Kernel >= 5.3: Docker's own ENOSYS rule.
    assert by_action["SCMP_ACT_ERRNO"]["errnoRet"] == 38
    assert by_action["SCMP_ACT_ERRNO"]["includes"] == {"minKernel": "5.3"}
    # The only other clone3 rule needs CAP_SYS_ADMIN (as in Docker's profile).
    others = [r for r in rules if r["names"] != ["clone3"]]
    assert all("CAP_SYS_ADMIN" in r["includes"]["caps"] for r in others)


def test_seccomp_profile_keeps_dockers_default_deny():
    profile = json.loads(_profile())
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    allowed = set(
        n
        for r in profile["syscalls"]
        if r["action"] == "SCMP_ACT_ALLOW" and not r.get("includes") and not r.get("excludes") and not r.get("args")
        for n in r["names"]
    )
    for dangerous in ("mount", "unshare", "setns", "bpf", "kexec_load", "init_module", "ptrace"):
        assert dangerous not in allowed


def test_generator_on_a_docker_20_10_7_shaped_profile_adds_the_rules_after_clone():
    old = {
        "defaultAction": "SCMP_ACT_ERRNO",
        "syscalls": [
            {"names": ["read"], "action": "SCMP_ACT_ALLOW"},
            {
                "names": ["clone"],
                "action": "SCMP_ACT_ALLOW",
                "args": [{"index": 0, "value": 2114060288, "op": "SCMP_CMP_MASKED_EQ"}],
            },
            {"names": ["reboot"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_BOOT"]}},
        ],
    }
    out = g.clone3_enosys_profile(old)
    assert [r["names"] for r in out["syscalls"]] == [["read"], ["clone"], ["clone3"], ["clone3"], ["reboot"]]
    assert old["syscalls"][1] == out["syscalls"][1]


def test_unit_runs_the_guards_docker_options_and_the_installed_profile_is_root_only():
    with open(os.path.join(ROLE, "vars", "main.yml")) as f:
        role_vars = yaml.safe_load(f)
    assert role_vars["__vllm_service_run_argv"] == "{{ __vllm_service_guard.run_argv }}"
    out = accepted(docker_options=PLANNER_OLD_DOCKER, unit=UNIT)
    assert (
        out["run_argv"][out["run_argv"].index("vllm/vllm-openai:v0.27.1") - len(out["docker_options"]) :][
            : len(out["docker_options"])
        ]
        == out["docker_options"]
    )
    assert "seccomp=unconfined" not in out["run_argv"] and "no-new-privileges" in out["run_argv"]
    assert "seccomp=/etc/airgap-vllm/vllm/seccomp.json" in out["run_argv"]
    install = [t for t in _role_tasks("configure.yml") if "ansible.builtin.copy" in t][0]["ansible.builtin.copy"]
    assert install["src"] == "seccomp-clone3-enosys.json" and install["mode"] == "0600"
    assert role_vars["__vllm_service_seccomp_profile"].startswith("{{ __vllm_service_dir }}/")


# ---------------------------------------------------------------- the unit's docker run command (issue 32 item 2)

UNIT = dict(
    docker_bin="/usr/bin/docker",
    name="vllm",
    publish_port=8000,
    service_dir="/etc/airgap-vllm/vllm",
    model_dir=MODEL,
    image="vllm/vllm-openai:v0.27.1",
    model_version="",
    selinux_relabel="never",
)


def test_run_argv_is_the_whole_docker_run_command_in_the_units_order():
    out = accepted(
        argv=[MODEL, "--max-model-len", 8192], docker_options=["--gpus", "all"], seccomp="docker_default", unit=UNIT
    )
    assert out["run_argv"] == [
        "/usr/bin/docker",
        "run",
        "--rm",
        "--name",
        "vllm",
        "--publish",
        "127.0.0.1:8000:8000",
        "--env-file",
        "/etc/airgap-vllm/vllm/container.env",
        "--env",
        "VLLM_LOGGING_CONFIG_PATH=/etc/vllm/logging.json",
        "--volume",
        "/etc/airgap-vllm/vllm/logging.json:/etc/vllm/logging.json:ro",
        "--volume",
        MODEL + ":" + MODEL + ":ro",
        "--gpus",
        "all",
        "--security-opt",
        "no-new-privileges",
        "vllm/vllm-openai:v0.27.1",
        MODEL,
        "--max-model-len",
        "8192",
    ]
    assert out["container_port"] == "8000" and out["served_model_name"] == "qwen"
    assert "run_argv" not in accepted()


def test_run_argv_binds_the_key_file_reads_it_with_config_and_labels_the_model_version():
    out = accepted(
        argv=[MODEL, "--port", 9000, "--served-model-name", "q"],
        seccomp="docker_default",
        api_keys=["k1"],
        unit=dict(UNIT, model_version="v7", selinux_relabel="always"),
    )
    argv = out["run_argv"]
    assert "127.0.0.1:8000:9000" in argv and out["container_port"] == "9000" and out["served_model_name"] == "q"
    assert argv[argv.index("--label") + 1] == "org.airgap.vllm.model-version=v7"
    assert "/etc/airgap-vllm/vllm/keys.yaml:/etc/vllm/keys.yaml:ro,z" in argv
    assert argv[-2:] == ["--config", "/etc/vllm/keys.yaml"]
    # An argv that reads its own --config keeps it; no keys, no key file.
    own = accepted(argv=[MODEL, "--config", "/x.yaml"], seccomp="docker_default", api_keys=["k1"], unit=UNIT)
    assert own["run_argv"].count("--config") == 1
    assert not any("keys.yaml" in w for w in accepted(seccomp="docker_default", api_keys=[], unit=UNIT)["run_argv"])


@pytest.mark.parametrize(
    "relabel,enabled,suffix",
    [
        ("always", False, ":ro,z"),
        ("always", True, ":ro,z"),
        ("auto", True, ":ro,z"),
        ("auto", False, ":ro"),
        ("never", True, ":ro"),
        ("never", False, ":ro"),
    ],
)
def test_read_only_binds_are_relabelled_for_selinux_by_the_choice_and_the_host(relabel, enabled, suffix):
    assert g.mount_suffix(relabel, enabled) == suffix
    out = accepted(seccomp="docker_default", unit=dict(UNIT, selinux_relabel=relabel, selinux_enabled=enabled))
    assert MODEL + ":" + MODEL + suffix in out["run_argv"]
    with pytest.raises(g.GuardError):
        g.mount_suffix("sometimes", True)


def test_port_and_served_name_are_read_as_the_unit_always_read_them():
    assert g.container_port([MODEL]) == "8000" and g.container_port([MODEL, "--port", 8001]) == "8001"
    assert g.served_model_name([MODEL, "--served-model-name", "a", "b"], MODEL) == "a"
    assert g.served_model_name([MODEL], "/srv/models/qwen3") == "qwen3"
    with pytest.raises(g.GuardError):
        g.container_port([MODEL, "--port"])


@pytest.mark.parametrize(
    "argv,port",
    [
        ([MODEL, "--port=9000"], "9000"),
        ([MODEL, "--port", "8001", "--port=9000"], "9000"),
        ([MODEL, "--port=9000", "--port", "8001"], "8001"),
        ([MODEL, "--port", "9000"], "9000"),
        ([MODEL, "--portable", "x"], "8000"),
        ([MODEL, "--port-x=1"], "8000"),
    ],
)
def test_the_published_port_follows_the_engines_port_as_vllm_reads_it(argv, port):
    """Issue 42 left-over: --port=9000 in vllm_plan_extra_args published 8000 while the engine listened on 9000."""
    assert g.container_port(argv) == port
    out = accepted(argv=argv, seccomp="docker_default", unit=UNIT)
    assert "%s:%s:%s" % ("127.0.0.1", UNIT["publish_port"], port) in out["run_argv"]


def test_the_served_name_is_read_as_vllm_reads_it():
    assert g.served_model_name([MODEL, "--served-model-name=chat"], MODEL) == "chat"
    assert g.served_model_name([MODEL, "--served_model_name", "chat"], MODEL) == "chat"
    with pytest.raises(g.GuardError):
        g.container_port([MODEL, "--port"])


def test_the_units_words_are_checked_when_the_caller_names_none():
    err = refused(seccomp="docker_default", unit=dict(UNIT, image="img\nExecStartPost=/bin/evil"))
    assert "image holds the control character" in str(err)
    # The role names its own variables (unit_values): those are the names in the refusal.
    err = refused(seccomp="docker_default", unit=dict(UNIT, image="img\n"), unit_values={"vllm_service_image": "img\n"})
    assert "vllm_service_image holds" in str(err) and "; image holds" not in str(err)


@pytest.mark.parametrize(
    "security,expected",
    [
        (None, True),
        (["name=seccomp,profile=default", "name=cgroupns"], True),
        (["seccomp", "apparmor"], True),
        (["name=apparmor"], False),
        ([], False),
    ],
)
def test_engine_without_seccomp_gets_no_profile_it_would_refuse(security, expected):
    out = accepted(docker_options=PLANNER_OLD_DOCKER, security_options=security)
    assert ("seccomp=/etc/airgap-vllm/vllm/seccomp.json" in out["docker_options"]) is expected
    assert "seccomp=unconfined" not in out["docker_options"]
    assert "no-new-privileges" in out["docker_options"]


# ---------------------------------------------------------------- issue 14 #6: Prometheus access to /metrics

METRICS = dict(expose=True, address="10.20.0.15", port=8000, publish_port=8000, container_port=8000, has_api_keys=True)


def test_metrics_exposure_adds_one_publish_on_the_named_address_and_keeps_the_api_on_loopback():
    r = accepted(metrics=METRICS)
    assert r["docker_options"][:2] == ["--publish", "10.20.0.15:8000:8000"]
    assert r["docker_options"].count("--publish") == 1


def test_metrics_exposure_off_adds_nothing():
    assert "--publish" not in accepted(metrics=dict(METRICS, expose=False))["docker_options"]
    assert "--publish" not in accepted()["docker_options"]


def test_metrics_exposure_without_api_keys_is_refused_unless_the_network_exposure_is_opted_in():
    err = refused(metrics=dict(METRICS, has_api_keys=False))
    assert "vllm_service_api_keys is empty" in str(err)
    assert accepted(metrics=dict(METRICS, has_api_keys=False), expose=True)["docker_options"][0] == "--publish"


def test_metrics_exposure_on_every_interface_is_refused_without_the_network_exposure():
    assert "every interface" in str(refused(metrics=dict(METRICS, address="0.0.0.0")))
    assert "not an IP address" in str(refused(metrics=dict(METRICS, address="gpu1.lan")))


def test_metrics_exposure_refusals_join_the_other_refusals():
    err = refused(argv=[MODEL, "--api-key", KEY], metrics=dict(METRICS, address=""))
    assert "--api-key" in str(err) and "vllm_service_metrics_address is empty" in str(err)
