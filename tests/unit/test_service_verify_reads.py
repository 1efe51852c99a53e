"""vllm_service's verify.yml, run for real by ansible-playbook on this machine against a stand-in engine (an HTTP
server for /health, /metrics and one chat completion) and a stand-in systemctl: it reads and does not fail, and notes
the one reason a start failed in __vllm_service_start_failure (filter vllm_start_failure) - '' for a healthy engine
with the planned cache settings and a parsed tool call; the health wait's own message for a unit that failed; the
cache settings for an engine that runs another KV dtype; the smoke answer's fault for text instead of a tool call.
No `fatal:` line in any case: start.yml says the reason once, after the re-plan or the rollback (issue 42)."""

import http.server
import json
import os
import subprocess
import sys
import threading

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOOL_CALL = {"function": {"name": "get_weather", "arguments": json.dumps({"city": "Beijing"})}}
PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Verify the service as start.yml does
      ansible.builtin.include_role:
        name: airgap.vllm.vllm_service
        tasks_from: verify.yml
    - name: Say what verify noted
      ansible.builtin.debug:
        msg: "NOTED<<{{ __vllm_service_start_failure }}>>"
"""
SYSTEMCTL = """#!/bin/sh
echo "ActiveState=$FAKE_ACTIVE"
echo "SubState=$FAKE_SUB"
echo "Result=$FAKE_RESULT"
echo "NRestarts=0"
echo "ExecMainCode=1"
echo "ExecMainStatus=$FAKE_STATUS"
"""


@pytest.fixture
def engine():
    state = {"cache_dtype": "fp8", "tool": True}

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, body, kind="text/plain"):
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/metrics":
                self._send(
                    'vllm:cache_config_info{block_size="16",cache_dtype="%s",enable_prefix_caching="True"} 1.0\n'
                    % state["cache_dtype"]
                )
            else:
                self._send("")

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            message = {"role": "assistant", "content": None if state["tool"] else "It is sunny in Beijing."}
            if state["tool"]:
                message["tool_calls"] = [dict(TOOL_CALL, id="c1", type="function")]
            answer = {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
            self._send(json.dumps(answer), "application/json")

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    state["port"] = server.server_address[1]
    yield state
    server.shutdown()


def _verify(tmp_path, engine, active="active", sub="running"):
    (tmp_path / "play.yml").write_text(PLAY)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "systemctl").write_text(SYSTEMCTL)
    (bindir / "systemctl").chmod(0o755)
    extra = {
        "ansible_python_interpreter": sys.executable,
        "vllm_service_name": "vllm",
        "vllm_service_host": "127.0.0.1",
        "vllm_service_port": engine["port"],
        "vllm_service_health_timeout": 10,
        "vllm_service_api_keys": [],
        "vllm_service_smoke_test": True,
        "vllm_service_smoke_max_tokens": 64,
        "__vllm_service_argv": ["--kv-cache-dtype", "fp8", "--enable-prefix-caching", "--enable-auto-tool-choice"],
        "__vllm_service_served_name": "tiny",
    }
    # The role's tasks read the service's settings through one alias (vars/main.yml: the loop item's).
    extra["__vllm_service_settings"] = dict((k, v) for k, v in extra.items() if k.startswith("vllm_service_"))
    env = dict(
        os.environ,
        ANSIBLE_NOCOLOR="1",
        PATH="%s:%s" % (bindir, os.environ["PATH"]),
        FAKE_ACTIVE=active,
        FAKE_SUB=sub,
        FAKE_RESULT="success" if active == "active" else "exit-code",
        FAKE_STATUS="0" if active == "active" else "1",
    )
    run = subprocess.run(
        ["ansible-playbook", "-i", "localhost,", "-c", "local", str(tmp_path / "play.yml"), "-e", json.dumps(extra)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        universal_newlines=True,
        check=False,
        env=env,
    )
    out = " ".join(run.stdout.split())
    assert run.returncode == 0 and "fatal:" not in out, run.stdout
    return out.split("NOTED<<", 1)[1].split(">>", 1)[0]


def test_a_healthy_planned_answering_engine_notes_nothing(tmp_path, engine):
    assert _verify(tmp_path, engine) == ""


def test_a_failed_unit_is_noted_with_the_health_waits_words(tmp_path, engine):
    noted = _verify(tmp_path, engine, active="failed", sub="failed")
    assert noted.startswith(
        "vllm will not answer http://127.0.0.1:%d/health: the unit is failed/failed" % engine["port"]
    )


def test_an_engine_on_another_kv_dtype_is_noted(tmp_path, engine):
    engine["cache_dtype"] = "auto"
    noted = _verify(tmp_path, engine)
    assert noted.startswith("/metrics does not show the planned cache settings (kv dtype fp8, prefix caching True)")


def test_text_instead_of_a_tool_call_is_noted(tmp_path, engine):
    engine["tool"] = False
    noted = _verify(tmp_path, engine)
    assert noted.startswith("The smoke-test completion was not what a working server returns:")
    assert "It is sunny in Beijing." in noted
