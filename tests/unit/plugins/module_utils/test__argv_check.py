"""The plan's argv checked by the new image's own parser (issue 30): the verdict, the flags named, the cache."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.image import _argv_check as A
from ansible_collections.airgap.vllm.plugins.module_utils.common import _docker as dk

IMAGE = "sha256:" + "a" * 64
ARGV = ["/models/m", "--max-model-len", "8192", "--swap-space", "4"]


def out(*cases, noise=True):
    lines = ["INFO 12-01 10:00:00 [__init__.py:1] vLLM says hello", "WARNING platform cpu"] if noise else []
    return "\n".join(lines + [A.MARKER + " " + json.dumps(list(cases))]) + "\n"


def test_key_is_image_and_argv():
    k = A.check_key(IMAGE, ARGV)
    assert k == A.check_key(IMAGE, list(ARGV)) and len(k) == 64
    assert k != A.check_key("sha256:" + "b" * 64, ARGV)
    assert k != A.check_key(IMAGE, ARGV[:-1] + ["8"])
    assert k != A.check_key(IMAGE, ARGV[2:4] + ARGV[:2] + ARGV[4:])
    with pytest.raises(ValueError):
        A.check_key("", ARGV)


@pytest.mark.parametrize(
    "error, argv, flags",
    [
        ("usage: vllm serve ...\nvllm serve: error: unrecognized arguments: --swap-space 4", ARGV, ["--swap-space"]),
        ("vllm serve: error: unrecognized arguments: --no-such-flag --other=3", [], ["--no-such-flag", "--other"]),
        (
            "vllm serve: error: argument --kv-cache-dtype: invalid choice: 'fp9' (choose from auto, fp8)",
            ["/m", "--kv-cache-dtype", "fp9"],
            ["--kv-cache-dtype"],
        ),
        (
            "ValueError('argument --reasoning-parser: reasoning parser %r not registered')" % "qwen9",
            ["/m", "--reasoning-parser", "qwen9"],
            ["--reasoning-parser"],
        ),
        (
            "vllm serve: error: ambiguous option: --max could match --max-model-len, --max-num-seqs",
            ["/m", "--max", "3"],
            ["--max"],
        ),
        ("something else entirely", ["/m"], []),
    ],
)
def test_refused_flags(error, argv, flags):
    assert A.refused_flags(error, argv) == flags


def test_verdict_ok():
    v = A.verdict(out({"id": "plan", "ok": True, "error": None, "args": {}}), "0.27.1+cpu", IMAGE, ARGV)
    assert v["ok"] and v["flags"] == [] and "vLLM 0.27.1+cpu" in v["message"] and "accepts" in v["message"]


def test_verdict_refused_names_flag_and_release():
    err = "usage: vllm serve\nvllm serve: error: unrecognized arguments: --swap-space 4"
    v = A.verdict(out({"id": "plan", "ok": False, "error": err, "args": None}), "0.30.0", IMAGE, ARGV)
    assert not v["ok"] and v["flags"] == ["--swap-space"]
    assert "vLLM 0.30.0" in v["message"] and "--swap-space" in v["message"] and IMAGE in v["message"]
    assert "not touched" in v["message"]


@pytest.mark.parametrize("stdout", ["", "python3: not found", A.MARKER + " {not json", A.MARKER + ' {"a": 1}'])
def test_verdict_fails_closed_when_the_check_did_not_run(stdout):
    v = A.verdict(stdout, None, IMAGE, ARGV, rc=127)
    assert not v["ok"] and "did not run" in v["message"] and "unknown release" in v["message"]


def test_verdict_without_the_plan_case():
    v = A.verdict(out({"id": "other", "ok": True}), "0.27.1", IMAGE, ARGV)
    assert not v["ok"] and "no result" in v["message"]


def test_cache_keeps_passing_verdicts_only():
    ok = {"ok": True, "flags": [], "error": None, "message": "fine"}
    bad = {"ok": False, "flags": ["--x"], "error": "e", "message": "no"}
    cache = A.remember(None, "k1", ok)
    assert A.cached(cache, "k1") == ok and A.cached(cache, "k2") is None
    cache = A.remember(cache, "k2", bad)
    assert A.cached(cache, "k2") is None
    cache = A.remember(cache, "k1", bad)  # a key that now fails is forgotten
    assert A.cached(cache, "k1") is None
    for i in range(30):
        cache = A.remember(cache, "k%d" % i, ok, limit=5)
    assert [e["key"] for e in cache["verdicts"]] == ["k25", "k26", "k27", "k28", "k29"]


@pytest.mark.parametrize("junk", [None, [], "x", {"verdicts": "x"}, {"verdicts": [1, {"key": "k"}]}])
def test_cache_of_another_shape_is_empty(junk):
    assert A.cached(junk, "k") is None
    assert A.remember(junk, "k", {"ok": True})["verdicts"] == [{"key": "k", "verdict": {"ok": True}}]


# ------------------------------------------------------------------ the step the vllm_argv_check module runs
SCRIPT = "print('parse')"
GUARD_OPTIONS = [
    "--gpus",
    "all",
    "--shm-size",
    "8g",
    "--security-opt",
    "seccomp=/etc/airgap-vllm/vllm/seccomp.json",
    "--security-opt=no-new-privileges",
    "--ipc",
    "host",
]


def test_check_argv_leaves_out_the_key_file():
    assert A.check_argv(["/m", "--config", "/etc/vllm/keys.yaml", "--max-num-seqs", "4"]) == [
        "/m",
        "--max-num-seqs",
        "4",
    ]
    assert A.check_argv(["/m", "--config=/etc/vllm/keys.yaml", "--port", "8000"]) == ["/m", "--port", "8000"]
    assert A.check_argv(["/m", "--configuration-x", "1"]) == ["/m", "--configuration-x", "1"]
    assert A.check_argv(None) == []


def test_check_command_is_offline_removed_and_takes_only_the_security_options():
    cmd = A.check_command(IMAGE, ["/m", "--swap-space", "4"], SCRIPT, "python3", GUARD_OPTIONS)
    assert cmd[:4] == ["run", "--rm", "--network", "none"]
    assert cmd[4:8] == [
        "--security-opt",
        "seccomp=/etc/airgap-vllm/vllm/seccomp.json",
        "--security-opt",
        "no-new-privileges",
    ]
    assert "--gpus" not in cmd and "--ipc" not in cmd and "--shm-size" not in cmd
    assert cmd[8:] == ["--entrypoint", "python3", IMAGE, "-c", SCRIPT, "-", "/m", "--swap-space", "4"]


class FakeCli(object):
    """A _docker.DockerCli that answers image_id and the check container from a table, and counts the runs."""

    def __init__(self, stdout="", rc=0, stderr="", image_id=IMAGE, raises=None):
        self.stdout, self.rc, self.stderr, self._id, self.raises = stdout, rc, stderr, image_id, raises
        self.calls = []

    def image_id(self, ref):
        if isinstance(self._id, Exception):
            raise self._id
        return self._id

    def call(self, args, check=True, timeout=None):
        self.calls.append((list(args), timeout))
        if self.raises:
            raise self.raises
        return self.rc, self.stdout, self.stderr


def accepted(version="0.27.1+cpu"):
    return out({"id": "plan", "ok": True, "error": None, "args": {}, "vllm": version})


def test_check_runs_once_then_answers_from_the_cache(tmp_path):
    cache = str(tmp_path / "svc" / "argv-check.json")
    cli = FakeCli(accepted())
    r = A.check(
        cli,
        "vllm/vllm-openai:v0.27.1",
        ARGV[:3] + ["--config", "/etc/vllm/keys.yaml"],
        SCRIPT,
        release="0.27.1+cpu",
        cache_path=cache,
        docker_options=GUARD_OPTIONS,
    )
    assert r["ok"] and r["checked"] and not r["cached"] and r["cache_written"] and r["image_id"] == IMAGE
    assert r["argv"] == ARGV[:3] and len(cli.calls) == 1 and cli.calls[0][1] == A.CHECK_TIMEOUT
    assert oct((tmp_path / "svc").stat().st_mode & 0o777) == "0o700"
    assert oct((tmp_path / "svc" / "argv-check.json").stat().st_mode & 0o777) == "0o600"
    again = A.check(cli, IMAGE, ARGV[:3], SCRIPT, release="0.27.1+cpu", cache_path=cache)
    assert again["ok"] and again["cached"] and not again["cache_written"] and len(cli.calls) == 1
    # Another argv, another image or another script: judged again.
    A.check(cli, IMAGE, ARGV[:3] + ["--max-num-seqs", "2"], SCRIPT, cache_path=cache)
    A.check(FakeCli(accepted(), image_id="sha256:" + "c" * 64), IMAGE, ARGV[:3], SCRIPT, cache_path=cache)
    A.check(cli, IMAGE, ARGV[:3], SCRIPT + "\n", cache_path=cache)
    assert len(cli.calls) == 3


def test_check_mode_judges_but_writes_no_cache(tmp_path):
    cache = tmp_path / "argv-check.json"
    cli = FakeCli(accepted())
    r = A.check(cli, IMAGE, ARGV[:3], SCRIPT, cache_path=str(cache), check_mode=True)
    assert r["ok"] and not r["cache_written"] and not cache.exists() and len(cli.calls) == 1


def test_a_refusal_names_flag_and_release_and_is_not_cached(tmp_path):
    cache = str(tmp_path / "argv-check.json")
    err = "usage: vllm serve\nvllm serve: error: unrecognized arguments: --swap-space 4"
    cli = FakeCli(out({"id": "plan", "ok": False, "error": err, "args": None, "vllm": "0.27.1+cpu"}))
    r = A.check(cli, IMAGE, ARGV, SCRIPT, cache_path=cache)
    assert r["ok"] is False and r["flags"] == ["--swap-space"] and r["release"] == "0.27.1+cpu"
    assert "vLLM 0.27.1+cpu" in r["message"] and "--swap-space" in r["message"] and "not touched" in r["message"]
    assert not r["cache_written"] and A.read_cache(cache) == {}
    A.check(cli, IMAGE, ARGV, SCRIPT, cache_path=cache)
    assert len(cli.calls) == 2


def test_the_image_stage_release_wins_over_the_scripts():
    r = A.check(FakeCli(accepted("0.30.0")), IMAGE, ARGV[:3], SCRIPT, release="0.30.0+cu129")
    assert r["release"] == "0.30.0+cu129" and "0.30.0+cu129" in r["message"]
    r = A.check(FakeCli(accepted("0.30.0")), IMAGE, ARGV[:3], SCRIPT)
    assert r["release"] == "0.30.0"


def test_an_image_without_a_parser_is_unchecked_not_passed(tmp_path):
    cache = str(tmp_path / "argv-check.json")
    cli = FakeCli(
        out(
            {
                "id": "plan",
                "ok": None,
                "unchecked": True,
                "args": None,
                "vllm": None,
                "error": "ImportError(\"cannot import name 'cli_args'\")",
            }
        )
    )
    r = A.check(cli, IMAGE, ARGV, SCRIPT, cache_path=cache)
    assert r["ok"] is None and r["checked"] is False and "NOT checked" in r["message"] and "cli_args" in r["message"]
    assert r["cache_written"]
    assert A.check(cli, IMAGE, ARGV, SCRIPT, cache_path=cache)["cached"] and len(cli.calls) == 1


@pytest.mark.parametrize(
    "cli",
    [
        FakeCli("", rc=125, stderr="docker: Error response from daemon: OCI runtime create failed"),
        FakeCli("", rc=127, stderr='exec: "python3": executable file not found in $PATH'),
        FakeCli(raises=dk.DockerTimeout("docker run did not finish within 900s (killed)", stdout="INFO importing")),
    ],
)
def test_a_check_that_did_not_run_fails_and_is_not_cached(tmp_path, cli):
    cache = str(tmp_path / "argv-check.json")
    r = A.check(cli, IMAGE, ARGV, SCRIPT, cache_path=cache)
    assert r["ok"] is False and "did not run" in r["message"] and not r["cache_written"]
    assert "OCI runtime" in r["message"] or "python3" in r["message"] or "900s" in r["message"]


def test_no_image_no_check():
    with pytest.raises(A.ArgvCheckError, match="not in the local Docker"):
        A.check(FakeCli(image_id=None), "vllm/vllm-openai:v9", ARGV, SCRIPT)
    with pytest.raises(A.ArgvCheckError, match="cannot read image"):
        A.check(FakeCli(image_id=dk.DockerError("daemon down")), "x", ARGV, SCRIPT)


@pytest.mark.parametrize("text", [None, "", "{not json", "[1, 2]"])
def test_a_damaged_cache_only_costs_a_check(tmp_path, text):
    cache = tmp_path / "argv-check.json"
    if text is not None:
        cache.write_text(text)
    cli = FakeCli(accepted())
    assert A.check(cli, IMAGE, ARGV[:3], SCRIPT, cache_path=str(cache))["ok"] and len(cli.calls) == 1
    assert A.check(cli, IMAGE, ARGV[:3], SCRIPT, cache_path=str(cache))["cached"]


def test_the_check_runs_under_a_copy_of_the_profile_not_yet_written():
    opts = ["--security-opt", "seccomp=/etc/airgap-vllm/vllm/seccomp.json", "--security-opt", "no-new-privileges"]
    assert A.check_options(opts, "/tmp/x/seccomp-1.json") == [
        "--security-opt",
        "seccomp=/tmp/x/seccomp-1.json",
        "--security-opt",
        "no-new-privileges",
    ]
    assert A.check_options(["--security-opt=seccomp:/p.json"], "/t.json") == ["--security-opt", "seccomp=/t.json"]
    unconfined = ["--security-opt", "seccomp=unconfined", "--security-opt", "no-new-privileges"]
    assert A.check_options(unconfined, "/t.json") == unconfined
    assert A.check_options(["--security-opt", "no-new-privileges"], "/t.json") == [
        "--security-opt",
        "no-new-privileges",
    ]
    cli = FakeCli(accepted())
    A.check(cli, IMAGE, ARGV[:3], SCRIPT, docker_options=opts, seccomp_path="/tmp/x/seccomp-1.json")
    assert "seccomp=/tmp/x/seccomp-1.json" in cli.calls[0][0]
