"""check_front.py (the front door's client-side checks) judged against two local stand-ins, no docker, no openai:
an engine port opened as is (answers /invocations, /%69nvocations, /metrics without a key, as vLLM 0.27.1 does)
must fail the refusal checks; a door that refuses every such path must pass them."""

import http.server
import json
import os
import subprocess
import sys
import threading
import urllib.parse

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(HERE, "..", "front-client", "check_front.py")
RAW_CHECKS = "health_without_key,no_key,refused_routes,path_tricks,duplicate_authorization"
GOOD = "sk-good"


class OpenEngine(http.server.BaseHTTPRequestHandler):
    """vLLM 0.27.1's behaviour on its own port: --api-key guards only /v1..., the path is %-decoded."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def route(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        auths = self.headers.get_all("Authorization") or []
        if path.startswith("/v1") and (not auths or auths[0] != "Bearer " + GOOD):
            return self.answer(401, {"error": "Unauthorized"})
        if path == "/health":
            return self.answer(200, {})
        if path in ("/invocations", "/v1/chat/completions"):
            return self.answer(200, {"choices": [{"message": {"content": "hi"}}]})
        if path == "/metrics":
            return self.answer(200, {"m": "vllm:num_requests_running 0"})
        if path in ("/version", "/load", "/ping"):
            return self.answer(200, {"version": "0.27.1"})
        return self.answer(404, {"detail": "Not Found"})

    do_GET = do_POST = route


class Door(OpenEngine):
    """A door that serves /health and refuses everything else without a valid single key."""

    def route(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        if self.path == "/health":
            return self.answer(200, {})
        auths = self.headers.get_all("Authorization") or []
        if len(auths) != 1 or auths[0] != "Bearer " + GOOD:
            return self.answer(401, {"error": "Invalid or missing API key"})
        return self.answer(404, {"error": "not served here"})

    do_GET = do_POST = route


def serve(handler):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def run_check(port, tmp_path):
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"good": GOOD, "bad": "sk-bad"}))
    proc = subprocess.run(
        [
            sys.executable,
            CHECK,
            "--base-url",
            "http://127.0.0.1:%d" % port,
            "--plain-http",
            "--keys",
            str(keys),
            "--model",
            "m",
            "--only",
            RAW_CHECKS,
            "--deadline",
            "60",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        universal_newlines=True,
        timeout=90,
        check=False,
    )
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    return proc.returncode, {r["check"]: r for r in lines if "check" in r}, proc.stderr


@pytest.mark.parametrize("handler,rc", [(OpenEngine, 1), (Door, 0)])
def test_refusal_checks_tell_an_open_engine_from_a_door(handler, rc, tmp_path):
    srv = serve(handler)
    try:
        got, results, err = run_check(srv.server_address[1], tmp_path)
    finally:
        srv.shutdown()
    assert got == rc, (results, err)
    if handler is OpenEngine:
        failed = {n for n, r in results.items() if r["ok"] is False}
        assert failed == {"refused_routes", "path_tricks", "duplicate_authorization"}, results
        tricks = {f["request"] for f in results["path_tricks"]["detail"]["failed"]}
        assert "POST /%69nvocations" in tricks and "GET /%6detrics" in tricks, tricks
    else:
        assert all(r["ok"] for r in results.values()), results


def test_list_and_arguments():
    out = subprocess.run(
        [sys.executable, CHECK, "--list"], stdout=subprocess.PIPE, universal_newlines=True, check=True
    ).stdout.split()
    assert {"chat_tool_call", "stream", "path_tricks", "huge_body", "slow_client", "over_limit"} <= set(out)
    bad = subprocess.run(
        [sys.executable, CHECK, "--base-url", "https://10.0.0.1:8443", "--keys", "/dev/null"],
        stderr=subprocess.PIPE,
        universal_newlines=True,
        check=False,
    )
    assert bad.returncode == 2 and "--ca is required" in bad.stderr


def test_only_test_world_addresses(tmp_path):
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"good": GOOD}))
    proc = subprocess.run(
        [sys.executable, CHECK, "--base-url", "http://8.8.8.8:80", "--plain-http", "--keys", str(keys)],
        stderr=subprocess.PIPE,
        universal_newlines=True,
        check=False,
        timeout=30,
    )
    assert proc.returncode != 0 and "not a test-world address" in proc.stderr
