"""vllm_service_guard as Ansible runs it: refusals, masked keys, the effective docker options."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.airgap.vllm.plugins.modules import vllm_service_guard as M

ARGV = ["/models/qwen3", "--served-model-name", "qwen3", "--port", "8000"]


def test_accepted_options_get_the_profile_and_no_new_privileges(run_module):
    r = run_module(
        M,
        argv=ARGV,
        docker_options=["--security-opt", "seccomp=unconfined", "--shm-size", "4g"],
        seccomp="profile",
        seccomp_profile="/etc/airgap-vllm/seccomp.json",
        docker_security_options=["name=seccomp,profile=builtin"],
    )
    assert not r["changed"] and "failed" not in r
    assert r["docker_options"] == [
        "--shm-size",
        "4g",
        "--security-opt",
        "seccomp=/etc/airgap-vllm/seccomp.json",
        "--security-opt",
        "no-new-privileges",
    ]


def test_an_api_key_on_the_command_line_is_refused_and_masked(run_module):
    secret = "sk-very-secret-value-123"
    r = run_module(M, argv=ARGV + ["--api-key", secret], seccomp="docker_default")
    assert r["failed"] and r["msg"].startswith("refused:") and "--api-key" in r["msg"]
    assert secret not in json.dumps(r)


def test_exposure_unconfined_and_missing_profile(run_module):
    r = run_module(M, argv=ARGV, publish_host="0.0.0.0", seccomp="docker_default")
    assert r["failed"] and "0.0.0.0" in r["msg"]
    r = run_module(M, argv=ARGV, publish_host="0.0.0.0", expose_to_network=True, seccomp="unconfined")
    assert "--security-opt" in r["docker_options"] and "seccomp=unconfined" in r["docker_options"]
    assert any("unconfined" in w for w in r["warnings"]) and any("expose_to_network" in w for w in r["warnings"])
    r = run_module(M, argv=ARGV, seccomp="profile")
    assert r["failed"] and "needs the profile path" in r["msg"]


def test_metrics_exposure_publishes_on_the_named_address(run_module):
    r = run_module(
        M,
        argv=ARGV,
        seccomp="docker_default",
        metrics_expose=True,
        metrics_address="10.20.0.15",
        metrics_port=9000,
        publish_port=8000,
        container_port=8000,
        has_api_keys=True,
    )
    assert "failed" not in r and r["docker_options"][:2] == ["--publish", "10.20.0.15:9000:8000"]
    r = run_module(M, argv=ARGV, seccomp="docker_default", metrics_expose=True, metrics_address="10.20.0.15")
    assert r["failed"] and "vllm_service_api_keys is empty" in r["msg"]


# ---------------------------------------------------------------- issue 24: allowlist, env values, API keys


def test_env_values_are_checked_never_shown_and_do_not_mask_the_output(run_module):
    r = run_module(
        M,
        argv=ARGV,
        docker_options=["--gpus", "all", "--log-opt", "max-file=1"],
        seccomp="docker_default",
        env={"HF_HUB_OFFLINE": "1"},
        extra_env={"HF_TOKEN": "hf_secret_token_1"},
        api_keys=["sk-key-number-one"],
    )
    assert "failed" not in r, r
    assert r["docker_options"] == ["--gpus", "all", "--log-opt", "max-file=1", "--security-opt", "no-new-privileges"]
    assert "hf_secret_token_1" not in json.dumps(r) and "sk-key-number-one" not in json.dumps(r)


def test_a_value_smuggling_a_second_line_is_refused_without_repeating_it(run_module):
    r = run_module(
        M, argv=ARGV, seccomp="docker_default", extra_env={"VLLM_CPU_KVCACHE_SPACE": "1\nVLLM_API_KEY=sk-smuggled-key"}
    )
    assert r["failed"] and "control character" in r["msg"] and "sk-smuggled-key" not in json.dumps(r)


@pytest.mark.parametrize(
    "keys", [{"default": "sk-secret-in-a-dict"}, "sk-secret-as-a-string", [{"k": "sk-secret-nested"}]]
)
def test_api_keys_that_are_not_a_list_of_strings_fail_clearly_and_are_never_repeated(run_module, keys):
    r = run_module(M, argv=ARGV, seccomp="docker_default", api_keys=keys)
    assert r["failed"] and "vllm_service_api_keys" in r["msg"]
    assert "sk-secret" not in json.dumps(r)


def test_a_mapping_in_the_docker_options_is_refused_not_turned_into_text(run_module):
    r = run_module(M, argv=ARGV, docker_options=["--gpus", {"all": True}], seccomp="docker_default")
    assert r["failed"] and "vllm_service_docker_options[1] is a mapping" in r["msg"]


def test_refused_options_name_the_opt_in_and_the_opt_in_allows_them(run_module):
    r = run_module(M, argv=ARGV, docker_options=["--cap-add", "SYS_PTRACE"], seccomp="docker_default")
    assert r["failed"] and "--cap-add SYS_PTRACE" in r["msg"] and "vllm_service_allow_docker_options" in r["msg"]
    r = run_module(
        M,
        argv=ARGV,
        docker_options=["--cap-add", "SYS_PTRACE"],
        seccomp="docker_default",
        allow_docker_options=["--cap-add"],
    )
    assert "failed" not in r and r["docker_options"][:2] == ["--cap-add", "SYS_PTRACE"]
    r = run_module(
        M,
        argv=ARGV,
        docker_options=["-v", "/models/qwen3:/models/qwen3:ro"],
        seccomp="docker_default",
        mount_roots=["/models/qwen3"],
    )
    assert "failed" not in r


# ---------------------------------------------------------------- issue 32 item 2: the unit's docker run command

UNIT_ARGS = dict(
    name="vllm",
    image="img:1",
    model_dir="/models/qwen3",
    service_dir="/etc/airgap-vllm/vllm",
    publish_port=8001,
    seccomp="docker_default",
)


def test_the_unit_arguments_return_the_whole_docker_run_command(run_module):
    r = run_module(
        M,
        argv=ARGV,
        api_keys=["sk-key-number-one"],
        selinux_relabel="auto",
        selinux_enabled=True,
        model_version="v1",
        **UNIT_ARGS,
    )
    assert "failed" not in r, r
    argv = r["run_argv"]
    assert argv[:7] == ["/usr/bin/docker", "run", "--rm", "--name", "vllm", "--publish", "127.0.0.1:8001:8000"]
    assert "/models/qwen3:/models/qwen3:ro,z" in argv and "org.airgap.vllm.model-version=v1" in argv
    assert argv[argv.index("img:1") + 1 :] == ARGV + ["--config", "/etc/vllm/keys.yaml"]
    assert r["served_model_name"] == "qwen3" and r["container_port"] == "8000"
    assert "sk-key-number-one" not in json.dumps(r)


def test_without_the_unit_arguments_no_command_is_composed(run_module):
    r = run_module(M, argv=ARGV, seccomp="docker_default", model_dir="/models/qwen3")
    assert "run_argv" not in r and r["container_port"] == "8000"
    r = run_module(M, argv=ARGV, seccomp="docker_default", container_port=9000)
    assert r["container_port"] == "9000"


def test_a_control_character_in_the_units_words_is_refused(run_module):
    r = run_module(M, argv=ARGV, **dict(UNIT_ARGS, name="vllm\nExecStartPre=/bin/evil"))
    assert r["failed"] and "name holds the control character" in r["msg"]
