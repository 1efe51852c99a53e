"""Unit tests for _plan_extras: the operator's extra vLLM arguments and docker options, merged after the plan."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_common as CM
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_extras as X
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _planner as P

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "models", "qwen3.x-27b-fp8")


@pytest.fixture(scope="module")
def planned():
    return P.plan(
        dict(
            model_dir=FIXTURE,
            gpu_total_bytes=49140 * CM.MIB,
            compute_capability="8.9",
            gpu_memory_utilization=0.93,
            concurrency=4,
            kv_cache_dtype="fp8_e4m3",
            num_speculative_tokens=3,
            prefix_caching=True,
            reasoning_parser="qwen3",
            tool_call_parser="qwen3_coder",
            port=8000,
            docker_version="24.0.7",
            kernel="5.15.0",
        )
    )


def value(argv, flag):
    return argv[argv.index(flag) + 1]


def test_nothing_extra_changes_nothing(planned):
    out = X.merge_extras(planned)
    for key in ("argv", "flags", "docker_options", "docker_option_reasons", "warnings"):
        assert out[key] == planned[key]
    assert out["extras"] == {"args": [], "docker_options": [], "overridden": []}


def test_extras_are_appended_after_the_plan(planned):
    out = X.merge_extras(planned, ["--seed", "7", "--disable-log-stats"], ["--ulimit", "memlock=-1"])
    assert out["argv"] == planned["argv"] + ["--seed", "7", "--disable-log-stats"]
    assert out["argv"] == [a for f in out["flags"] for a in f["args"]]
    assert out["docker_options"] == planned["docker_options"] + ["--ulimit", "memlock=-1"]
    assert out["docker_option_reasons"]["--ulimit memlock=-1"] == X.DOCKER_VAR
    assert planned["argv"][-1] != "--disable-log-stats"  # the plan itself is not modified


@pytest.mark.parametrize(
    "extra,flag",
    [
        (["--max-num-seqs", "8"], "--max-num-seqs 4"),
        (["--max_num_seqs=8"], "--max-num-seqs 4"),  # vLLM reads _ as -
        (["--no-enable-prefix-caching"], "--enable-prefix-caching"),  # same value, other spelling
        (["--port", "9000"], "--port 8000"),
        (["--tool-call-parser", "hermes"], "--tool-call-parser qwen3_coder"),
    ],
)
def test_a_duplicate_of_a_planned_flag_is_refused_naming_it(planned, extra, flag):
    with pytest.raises(CM.TargetsError) as err:
        X.merge_extras(planned, extra)
    assert "duplicates the planned %s" % flag in str(err.value)
    assert X.OVERRIDE_VAR in str(err.value)


def test_an_override_replaces_the_planned_value(planned):
    out = X.merge_extras(planned, ["--max-num-seqs", "8"], override_flags=["--max-num-seqs"])
    assert out["argv"].count("--max-num-seqs") == 1 and value(out["argv"], "--max-num-seqs") == "8"
    assert out["extras"]["overridden"] == ["--max-num-seqs"]
    assert any("ledger" in w and "--max-num-seqs 4" in w for w in out["warnings"])
    # Only the overridden option of a planned group goes: --enable-auto-tool-choice stays.
    out = X.merge_extras(planned, ["--tool-call-parser", "hermes"], override_flags=["--tool-call-parser"])
    assert "--enable-auto-tool-choice" in out["argv"] and value(out["argv"], "--tool-call-parser") == "hermes"
    assert out["argv"].count("--tool-call-parser") == 1
    assert not any("ledger" in w for w in out["warnings"][len(planned["warnings"]) :])


def test_an_unused_override_is_a_warning(planned):
    out = X.merge_extras(planned, override_flags=["--max-num-seqs"])
    assert out["argv"] == planned["argv"]
    assert any("no extra argument overrides" in w for w in out["warnings"])


@pytest.mark.parametrize("extra", [["--api-key", "sk-x"], ["--api_key=sk-x"], ["--api-ke", "sk-x"]])
def test_api_keys_are_pointed_at_the_key_variable(planned, extra):
    with pytest.raises(CM.TargetsError) as err:
        X.merge_extras(planned, extra, override_flags=["--api-key"])
    assert "vllm_service_api_keys" in str(err.value) and "sk-x" not in str(err.value)


@pytest.mark.parametrize(
    "extra,match",
    [
        (["--seed", "7\n--api-key"], "newline"),
        (["--seed", "7\r"], "carriage return"),
        (["--seed\x00", "7"], "NUL"),
        (["--seed", "7\x1b[2J"], "U\\+001B"),
        (["--served-model-name", "q\u2028x"], "U\\+2028"),
        (["--seed", "7\x85"], "U\\+0085"),
        ([""], "empty"),
        ("--seed 7", "list of strings"),
        ([{"seed": 7}], "give a string"),
        (["-tp", "2"], "long option name"),
        (["/other/model"], "positional"),
        (["--", "--seed"], "ends vLLM's options"),
        (["--config", "/etc/x.yaml"], "API keys file"),
        (["--seed", "1", "--seed", "2"], "give each option once"),
        (["--max-num", "8"], "abbreviates the planned --max-num-seqs"),
    ],
)
def test_bad_extra_args_are_refused(planned, extra, match):
    with pytest.raises(CM.TargetsError, match=match):
        X.merge_extras(planned, extra)


def test_docker_duplicates_and_overrides(planned):
    with pytest.raises(CM.TargetsError, match="duplicates the planned --shm-size 4g"):
        X.merge_extras(planned, extra_docker_options=["--shm-size", "16g"])
    with pytest.raises(CM.TargetsError, match="duplicates the planned --shm-size 4g"):
        X.merge_extras(planned, extra_docker_options=["--shm-size=16g"])
    out = X.merge_extras(planned, extra_docker_options=["--shm-size", "16g"], override_flags=["--shm-size"])
    assert out["docker_options"].count("--shm-size") == 1 and value(out["docker_options"], "--shm-size") == "16g"
    assert "--shm-size 4g" not in out["docker_option_reasons"]
    # --log-opt repeats: only the same key is a duplicate.
    with pytest.raises(CM.TargetsError, match="duplicates the planned --log-opt max-size=100m"):
        X.merge_extras(planned, extra_docker_options=["--log-opt", "max-size=1g"])
    out = X.merge_extras(planned, extra_docker_options=["--log-opt", "compress=true"])
    assert out["docker_options"][-2:] == ["--log-opt", "compress=true"]
    out = X.merge_extras(planned, extra_docker_options=["--log-opt", "max-size=1g"], override_flags=["--log-opt"])
    assert "max-size=1g" in out["docker_options"] and "max-size=100m" not in out["docker_options"]
    assert "max-file=5" in out["docker_options"]
    with pytest.raises(CM.TargetsError, match="duplicates the planned --gpus all"):
        X.merge_extras(planned, extra_docker_options=["--gpus", '"device=1"'])


@pytest.mark.parametrize(
    "extra,match",
    [
        (["vllm/vllm-openai:latest"], "not an option"),
        (["--ulimit", "memlock=-1\n"], "newline"),
        (["--label", "a=\x7f"], "U\\+007F"),
        (["--device", "/dev/x", "--device", "/dev/x"], "give each option once"),
    ],
)
def test_bad_docker_options_are_refused(planned, extra, match):
    with pytest.raises(CM.TargetsError, match=match):
        X.merge_extras(planned, extra_docker_options=extra)


def test_plan_merges_extras_from_its_params():
    r = P.plan(
        dict(
            model_dir=FIXTURE,
            gpu_total_bytes=49140 * CM.MIB,
            compute_capability="8.9",
            concurrency=4,
            extra_args=["--seed", "7"],
            extra_docker_options=["--ulimit", "memlock=-1"],
        )
    )
    assert r["argv"][-2:] == ["--seed", "7"] and r["docker_options"][-2:] == ["--ulimit", "memlock=-1"]
    with pytest.raises(CM.TargetsError, match="--max-num-seqs"):
        P.plan(
            dict(
                model_dir=FIXTURE,
                gpu_total_bytes=49140 * CM.MIB,
                compute_capability="8.9",
                extra_args=["--max-num-seqs", "9"],
            )
        )


def test_docker_options_are_read_by_dockers_own_list():
    """#24: which options take a value is Docker 20.10's own list (_container_allowlist), not a hand-kept subset."""
    groups = X.docker_groups(["--init", "--sig-proxy", "--no-healthcheck", "-itd", "--shm-size", "1g", "-P"])
    assert [g[1] for g in groups] == [
        "--init",
        "--sig-proxy",
        "--no-healthcheck",
        "-itd",
        "--shm-size",
        "--publish-all",
    ]
    assert X.docker_groups(["--net", "bridge"])[0][1] == "--network"
    assert X.docker_groups(["-e", "HF_HUB_OFFLINE"])[0][0] == "--env HF_HUB_OFFLINE"
