"""vllm_load_check as Ansible runs it, against a stand-in docker CLI (a script that answers inspect/exec).

The stand-in records every call, so the tests see the real argv the module sends: the bench at the
planned concurrency, the API key only in the environment, the result read back, thresholds and failures.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from ansible_collections.airgap.vllm.plugins.modules import vllm_load_check as M

from ..module_utils.test__loadcheck import ARGS, result

KEY = "sk-load-check-0123456789"

FAKE_DOCKER = r'''#!{python}
import json, os, re, sys, time
state = os.environ["FAKE_DOCKER_STATE"]
argv = sys.argv[1:]
with open(os.path.join(state, "calls.jsonl"), "a") as f:
    f.write(json.dumps({{"argv": argv, "key": os.environ.get("OPENAI_API_KEY")}}) + "\n")
if argv[:1] == ["inspect"]:
    if argv[-1] != "vllm":
        sys.stderr.write("Error: No such object: %s\n" % argv[-1])
        sys.exit(1)
    sys.stdout.write(open(os.path.join(state, "args.json")).read())
    sys.exit(0)
if argv[:1] == ["exec"]:
    rest = argv[1:]
    while rest[0] in ("-e", "-i"):
        rest = rest[2:] if rest[0] == "-e" else rest[1:]
    rest = rest[1:]  # the container
    limit = None
    if rest[:1] == ["timeout"]:  # coreutils timeout --kill-after=N SECONDS, as in the image
        assert rest[1].startswith("--kill-after="), rest
        limit, rest = float(rest[2]), rest[3:]
    if rest[:3] == ["vllm", "bench", "serve"]:
        sleep = float(os.environ.get("FAKE_BENCH_SLEEP", "0"))
        if limit is not None and sleep > limit:
            time.sleep(limit)
            sys.exit(124)
        time.sleep(sleep)
        rc = int(open(os.path.join(state, "bench_rc")).read()) if os.path.exists(os.path.join(state, "bench_rc")) else 0
        sys.stdout.write("============ Serving Benchmark Result ============\n")
        if rc:
            sys.stderr.write("ConnectionRefusedError: [Errno 111] Connection refused\n")
        sys.exit(rc)
    if rest[:2] == ["python3", "-c"]:  # the API profiles' client: a job on stdin, records out
        job = json.load(sys.stdin)
        call = {{"function": {{"name": "get_weather", "arguments": json.dumps({{"city": "Beijing"}})}}}}
        if job["path"] == "/v1/chat/completions":
            recs = [{{"choices": [{{"message": {{"tool_calls": [call], "reasoning": "r"}}}}]}} for _b in job["bodies"]]
        elif not job["bodies"][0].get("stream"):  # the needle profile: an engine that copies, counting its prompt
            recs = []
            for b in job["bodies"]:
                name = re.search(r"magic number of (\w+)[?]", b["prompt"]).group(1)
                num = re.search(r"The magic number of %s is (\d+)[.]" % name, b["prompt"]).group(1)
                recs.append({{"choices": [{{"text": " " + num}}], "usage": {{"prompt_tokens": len(b["prompt"]) // 4}}}})
        else:
            recs = [{{"ttft": 0.1, "e2e": 0.1 + 0.01 * (b["max_tokens"] - 1), "prompt_tokens": len(b["prompt"]),
                     "completion_tokens": b["max_tokens"], "first": 100.1, "last": 100.1 + 0.01 * (b["max_tokens"] - 1)}}
                    for b in job["bodies"]]
        sys.stdout.write(json.dumps({{"records": recs, "duration": 1.0, "peak": job["concurrency"]}}) + "\n")
        sys.exit(0)
    if rest[:1] == ["cat"] and rest[1].endswith("/config.json"):
        sys.stdout.write(json.dumps({{"vocab_size": 1024}}))
        sys.exit(0)
    if rest[:1] == ["cat"]:
        sys.stdout.write(open(os.path.join(state, "result.json")).read())
        sys.exit(0)
sys.stderr.write("fake docker: unexpected %r\n" % argv)
sys.exit(2)
'''


def bench_result(**kw):
    """A `vllm bench serve` result with the per-request lists the module leaves out of the report."""
    return result(**dict(dict(itls=[[0.02] * 63] * 32, generated_texts=["x" * 64] * 32), **kw))


@pytest.fixture
def docker(tmp_path, monkeypatch):
    state = tmp_path / "docker-state"
    state.mkdir()
    (state / "args.json").write_text(json.dumps(ARGS))
    (state / "result.json").write_text(json.dumps(bench_result()))
    script = tmp_path / "docker"
    script.write_text(FAKE_DOCKER.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("FAKE_DOCKER_STATE", str(state))

    class Docker(object):
        bin = str(script)
        dir = state

        @staticmethod
        def calls():
            path = state / "calls.jsonl"
            return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

        @staticmethod
        def bench_call():
            found = [c for c in Docker.calls() if "bench" in c["argv"]]
            assert len(found) == 1, Docker.calls()
            return found[0]

    return Docker


def keys_file(tmp_path):
    path = tmp_path / "keys.yaml"
    path.write_text('api-key:\n  - "%s"\n  - "sk-second"\n' % KEY)
    path.chmod(0o600)
    return str(path)


def test_check_mode_sends_nothing(run_module, docker):
    r = run_module(M, check_mode=True, container="vllm", docker_bin=docker.bin)
    assert r["changed"] is False and r["skipped"] is True
    assert docker.calls() == []


def test_bench_runs_at_the_containers_concurrency_with_the_key_only_in_its_environment(run_module, docker, tmp_path):
    saved = tmp_path / "report" / "loadcheck.json"
    saved.parent.mkdir()
    r = run_module(M, container="vllm", docker_bin=docker.bin, keys_file=keys_file(tmp_path), result_path=str(saved))
    assert "failed" not in r, r.get("msg")
    assert r["changed"] is False
    assert r["figures"]["p95_ttft_ms"] == 120.0 and r["warnings_list"] == []
    assert "32 requests at concurrency 4: 32 ok, 0 failed" in r["summary"]
    call = docker.bench_call()
    argv = call["argv"]
    assert argv[argv.index("--max-concurrency") + 1] == "4"
    assert argv[argv.index("--tokenizer") + 1] == ARGS[0]
    assert call["key"] == KEY, "the bench gets the first key through its environment"
    assert not any(KEY in a for a in argv), "the key is never on a command line"
    assert ["-e", "OPENAI_API_KEY"] == argv[argv.index("OPENAI_API_KEY") - 1 : argv.index("OPENAI_API_KEY") + 1]
    assert "HF_HUB_OFFLINE=1" in argv
    assert KEY not in json.dumps(r), "the key is not in the result"
    data = json.loads(saved.read_text())
    assert data["airgap_vllm"]["figures"]["p95_ttft_ms"] == 120.0
    assert oct(saved.stat().st_mode & 0o777) == "0o600"


def test_concurrency_given_overrides_the_containers(run_module, docker):
    r = run_module(M, container="vllm", docker_bin=docker.bin, concurrency=2, num_prompts=8)
    assert "failed" not in r, r.get("msg")
    argv = docker.bench_call()["argv"]
    assert argv[argv.index("--max-concurrency") + 1] == "2"
    assert argv[argv.index("--num-prompts") + 1] == "8"
    assert docker.bench_call()["key"] is None


def test_a_missing_container_fails_naming_it(run_module, docker):
    r = run_module(M, container="nosuch", docker_bin=docker.bin)
    assert r["failed"] and "container nosuch is not there to load-check" in r["msg"]
    assert "No such object" in r["msg"]


def test_a_container_that_does_not_serve_a_model_fails_clearly(run_module, docker):
    (docker.dir / "args.json").write_text(json.dumps(["--help"]))
    r = run_module(M, container="vllm", docker_bin=docker.bin)
    assert r["failed"] and r["msg"].startswith("cannot read how vllm serves")


def test_a_failed_bench_fails_with_its_output(run_module, docker):
    (docker.dir / "bench_rc").write_text("1")
    r = run_module(M, container="vllm", docker_bin=docker.bin)
    assert r["failed"] and r["msg"].startswith("vllm bench serve failed (rc 1)")
    assert "Connection refused" in r["stderr"]


def test_failed_requests_fail_the_check_with_the_servers_error(run_module, docker):
    (docker.dir / "result.json").write_text(
        json.dumps(bench_result(completed=30, failed=2, errors=[""] * 30 + ["HTTP 500 boom", ""]))
    )
    r = run_module(M, container="vllm", docker_bin=docker.bin)
    assert r["failed"] and "2 of 32 requests failed: HTTP 500 boom" in r["msg"]


def test_an_unreadable_result_fails_clearly(run_module, docker):
    (docker.dir / "result.json").write_text('{"detail": "Not Found"}')
    r = run_module(M, container="vllm", docker_bin=docker.bin)
    assert r["failed"] and r["msg"].startswith("the bench result is unreadable")


def test_a_threshold_warns_and_fails_only_when_asked(run_module, docker):
    r = run_module(M, container="vllm", docker_bin=docker.bin, ttft_p95_max_ms=100)
    assert "failed" not in r
    assert r["warnings_list"] == ["TTFT p95 120.0 ms is over the threshold of 100.0 ms"]
    assert r["warnings_list"][0] in r["warnings"]
    r = run_module(M, container="vllm", docker_bin=docker.bin, ttft_p95_max_ms=100, fail_on_threshold=True)
    assert r["failed"] and "TTFT p95 120.0 ms" in r["msg"]


def test_the_peak_of_running_requests_is_sampled_from_metrics(run_module, docker, monkeypatch):
    class Metrics(BaseHTTPRequestHandler):
        def do_GET(self):
            body = (
                'vllm:num_requests_running{engine="0",model_name="qwen3-tiny"} 3.0\n'
                'vllm:num_requests_running{engine="1",model_name="qwen3-tiny"} 1.0\n'
            ).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Metrics)
    thread = threading.Thread(target=server.serve_forever)
    thread.daemon = True
    thread.start()
    monkeypatch.setenv("FAKE_BENCH_SLEEP", "1.0")
    try:
        r = run_module(
            M,
            container="vllm",
            docker_bin=docker.bin,
            metrics_url="http://127.0.0.1:%d/metrics" % server.server_address[1],
        )
    finally:
        server.shutdown()
    assert "failed" not in r, r.get("msg")
    assert r["figures"]["peak_running_in_metrics"] == 4.0


def test_bad_arguments_fail_before_docker_is_called(run_module, docker):
    r = run_module(M, docker_bin=docker.bin)
    assert r["failed"] and "container" in r["msg"]
    r = run_module(M, container="vllm", docker_bin=docker.bin, concurrency="many")
    assert r["failed"] and "concurrency" in r["msg"]
    assert docker.calls() == []
    assert os.path.exists(docker.bin)


def test_the_bench_runs_under_the_timeout_in_the_container(run_module, docker):
    r = run_module(M, container="vllm", docker_bin=docker.bin, timeout=77)
    assert "failed" not in r, r.get("msg")
    argv = docker.bench_call()["argv"]
    at = argv.index("timeout")
    assert argv[at : at + 3] == ["timeout", "--kill-after=30", "77"] and argv[at + 3 : at + 6] == [
        "vllm",
        "bench",
        "serve",
    ]


def test_a_bench_over_its_timeout_fails_saying_so(run_module, docker, monkeypatch):
    monkeypatch.setenv("FAKE_BENCH_SLEEP", "5")
    r = run_module(M, container="vllm", docker_bin=docker.bin, timeout=1)
    assert r["failed"] and "did not finish within timeout (1s)" in r["msg"]


@pytest.mark.parametrize(
    "args, word",
    [
        (dict(num_prompts=0), "num_prompts"),
        (dict(num_prompts=-3), "num_prompts"),
        (dict(timeout=0), "timeout"),
        (dict(concurrency=0), "concurrency"),
        (dict(input_len=0), "input_len"),
        (dict(ttft_p95_max_ms=float("nan")), "ttft_p95_max_ms"),
        (dict(ttft_p95_max_ms="nan"), "ttft_p95_max_ms"),
        (dict(tpot_p95_max_ms=float("inf")), "tpot_p95_max_ms"),
        (dict(tpot_p95_max_ms=-1), "tpot_p95_max_ms"),
    ],
)
def test_settings_that_would_pass_without_checking_are_refused_before_docker(run_module, docker, args, word):
    r = run_module(M, container="vllm", docker_bin=docker.bin, **args)
    assert r["failed"] and r["msg"].startswith("load check settings refused") and word in r["msg"], r
    assert docker.calls() == []


def minimal_report(**over):
    report = {
        "verdict": "confirmed",
        "restart": False,
        "is_replan": False,
        "planned": {
            "kv_cache_memory_bytes": 1 << 30,
            "num_gpu_blocks": 2048,
            "block_size": 128,
            "kv_cache_size_tokens": 262144,
            "weights_bytes": 0,
            "max_model_len": 16384,
            "concurrency": 4,
            "max_concurrency": 16.0,
        },
        "measured": {"budget_bytes": 1 << 30, "source": ["metrics"], "enable_prefix_caching": True},
        "delta": {},
        "replan": None,
        "final": {"max_model_len": 16384, "concurrency": 4, "max_concurrency_at_len": 16.0},
        "memory": {},
        "tradeoff": None,
        "notes": [],
        "ledger": {"num_speculative_tokens": 0},
    }
    report.update(over)
    return report


def test_profiles_write_the_promises_into_the_report(run_module, docker, tmp_path):
    report_dir = tmp_path / "report"
    report_dir.mkdir()
    (report_dir / "report.json").write_text(json.dumps(minimal_report()))
    (docker.dir / "args.json").write_text(
        json.dumps(ARGS + ["--enable-auto-tool-choice", "--tool-call-parser", "qwen3_coder"])
    )
    r = run_module(
        M,
        container="vllm",
        docker_bin=docker.bin,
        profiles=["random", "tools"],
        report_dir=str(report_dir),
        promise_thresholds={"tool_call_parse_rate": 0.5},
    )
    assert "failed" not in r, r.get("msg")
    rows = dict((row["key"], row) for row in r["promises"])
    assert rows["tool_call_parse_rate"]["status"] == "MET" and "8 of 8" in rows["tool_call_parse_rate"]["measured"]
    assert rows["context"]["status"] == "not measured" and rows["mtp_accepted_length"]["status"] == "not measured"
    assert r["profiles"]["tools"]["figures"]["tool_calls_parsed"] == 8
    tools_call = [c for c in docker.calls() if "python3" in c["argv"]][0]
    assert tools_call["key"] == KEY or tools_call["key"] is None
    assert "-i" in tools_call["argv"] and not any(KEY in a for a in tools_call["argv"])
    saved = json.loads((report_dir / "report.json").read_text())
    assert saved["promises"] == r["promises"] and saved["verdict"] == "confirmed"
    md = (report_dir / "report.md").read_text()
    assert "## Promises" in md and "| tool calls parse |" in md
    assert "promises:" in r["summary"] and "tools" in r["summary"]


def test_an_unknown_threshold_or_profile_setting_is_refused(run_module, docker):
    r = run_module(M, container="vllm", docker_bin=docker.bin, promise_thresholds={"speed": 1})
    assert r["failed"] and "unknown promise threshold speed" in r["msg"]
    r = run_module(M, container="vllm", docker_bin=docker.bin, profiles=["long-context"])
    assert r["failed"] and "long-context needs the engine's --max-model-len" in r["msg"]


def test_api_profiles_time_their_streams(run_module, docker):
    (docker.dir / "args.json").write_text(json.dumps(ARGS + ["--max-model-len", "4096"]))
    r = run_module(
        M, container="vllm", docker_bin=docker.bin, profiles=["long-context", "shared-prefix", "single-stream"]
    )
    assert "failed" not in r, r.get("msg")
    lc = r["profiles"]["long-context"]["figures"]
    assert lc["completed"] == 1 and lc["mean_prompt_tokens"] == 4096 - 16 - 64
    ss = r["profiles"]["single-stream"]["figures"]
    assert abs(ss["decode_tok_s"] - 100.0) < 1e-6 and abs(ss["prefill_tok_s"] - 2048 / 0.1) < 1e-3
    rows = dict((row["key"], row) for row in r["promises"])
    assert rows["context"]["status"] == "MET"
    assert not [c for c in docker.calls() if "bench" in c["argv"]], "no vllm bench serve start-up for these"


def test_the_needle_profile_asks_for_a_new_fact_and_counts_the_answers(run_module, docker):
    (docker.dir / "args.json").write_text(json.dumps(ARGS + ["--max-model-len", "4096"]))
    runs = [run_module(M, container="vllm", docker_bin=docker.bin, profiles=["needle"]) for _i in range(2)]
    for r in runs:
        assert "failed" not in r, r.get("msg")
        needle = r["profiles"]["needle"]
        assert needle["settings"]["context_len"] == 4096 - 16 - 256
        assert needle["figures"]["recalled"] == 3
        row = [row for row in r["promises"] if row["key"] == "needle_recall"][0]
        assert row["status"] == "MET" and row["measured"].startswith("3 of 3 at depths 17 %, 50 %, 83 %")
        assert "the fact recalled at 3 of 3 depths" in r["summary"]
    assert runs[0]["profiles"]["needle"]["settings"]["seed"] != runs[1]["profiles"]["needle"]["settings"]["seed"]


def test_a_failing_profile_stops_the_rest(run_module, docker):
    (docker.dir / "result.json").write_text(json.dumps(bench_result(completed=30, failed=2)))
    r = run_module(M, container="vllm", docker_bin=docker.bin, profiles=["random", "tools"])
    assert r["failed"] and "2 of 32 requests failed" in r["msg"]
    assert not [c for c in docker.calls() if "python3" in c["argv"]], "tools did not run after random failed"


def test_tools_are_not_sent_to_a_server_without_a_tool_parser(run_module, docker):
    r = run_module(M, container="vllm", docker_bin=docker.bin, profiles=["random", "tools"])
    assert "failed" not in r, r.get("msg")
    assert "tools" not in r["profiles"] and not [c for c in docker.calls() if "python3" in c["argv"]]
    row = [x for x in r["promises"] if x["key"] == "tool_call_parse_rate"][0]
    assert row["status"] == "not measured" and "--enable-auto-tool-choice" in row["advice"]


def test_on_vllms_cpu_build_the_field_notes_speeds_are_not_judged(run_module, docker, tmp_path):
    """Issue 42: tests/simulate's green run warned "promise MISSED: single_stream_decode_tok_s" with a GPU's advice:
    the deployment report's engine (vLLM 0.27.1+cpu) tells the load check its speeds are not a GPU's."""
    report_dir = tmp_path / "report"
    report_dir.mkdir()
    engine = {"known": True, "text": "vLLM 0.27.1+cpu", "version": "0.27.1+cpu"}
    (report_dir / "report.json").write_text(json.dumps(minimal_report(engine=engine)))
    (docker.dir / "result.json").write_text(json.dumps(bench_result(mean_tpot_ms=40.0)))  # 25 tok/s each
    r = run_module(M, container="vllm", docker_bin=docker.bin, profiles=["random"], report_dir=str(report_dir))
    assert "failed" not in r, r.get("msg")
    row = dict((x["key"], x) for x in r["promises"])["per_stream_decode_tok_s"]
    assert row["status"] == "not measured" and row["measured"] == "25.0 on vLLM's CPU build (0.27.1+cpu), not a GPU", (
        row
    )
    assert not [w for w in r.get("warnings") or [] if "_tok_s" in w], r.get("warnings")
