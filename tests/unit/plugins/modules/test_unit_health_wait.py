"""unit_health_wait as Ansible runs it: a stand-in systemctl on the PATH and a local HTTP endpoint."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import stat
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from ansible_collections.airgap.vllm.plugins.modules import unit_health_wait as M

SYSTEMCTL = r'''import os
assert sys.argv[1:3] == ["show", "vllm.service"], sys.argv
sys.stdout.write(open(os.environ["FAKE_UNIT_STATE"]).read())
'''


class Health(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self):
        if self.path == "/metrics":
            body = b'vllm:cache_config_info{cache_dtype="fp8"} 1.0\n'
            self.send_response(getattr(self.server, "metrics_status", 200))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(self.server.status)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def world(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    path = bin_dir / "systemctl"
    path.write_text("#!%s\nimport sys\n%s" % (sys.executable, SYSTEMCTL))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    unit = tmp_path / "unit"
    monkeypatch.setenv("FAKE_UNIT_STATE", str(unit))
    monkeypatch.setenv("PATH", "%s:/usr/bin:/bin" % bin_dir)
    server = HTTPServer(("127.0.0.1", 0), Health)
    server.status = 200
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield unit, server
    server.shutdown()


def props(active="active", sub="running", restarts=0):
    return "ActiveState=%s\nSubState=%s\nResult=success\nNRestarts=%d\nExecMainCode=0\nExecMainStatus=0\n" % (
        active,
        sub,
        restarts,
    )


def test_healthy_unit_answers_200(run_module, world):
    unit, server = world
    unit.write_text(props())
    r = run_module(M, unit="vllm.service", url="http://127.0.0.1:%d/health" % server.server_port)
    assert not r["changed"] and "failed" not in r and r["status"] == 200 and r["polls"] == 1
    assert r["unit_state"]["ActiveState"] == "active"


def test_a_failed_unit_stops_the_wait_at_once(run_module, world):
    unit, server = world
    unit.write_text(props(active="failed", sub="failed"))
    r = run_module(M, unit="vllm.service", url="http://127.0.0.1:%d/health" % server.server_port, timeout=60)
    assert r["failed"] and "will not answer" in r["msg"] and "the unit is failed/failed" in r["msg"]
    assert r["elapsed"] < 30


def test_no_200_within_the_timeout_fails_with_the_last_status(run_module, world):
    unit, server = world
    unit.write_text(props())
    server.status = 503
    r = run_module(M, unit="vllm.service", url="http://127.0.0.1:%d/health" % server.server_port, timeout=1, interval=1)
    assert r["failed"] and "did not answer HTTP 200 within 1s (last status: 503)" in r["msg"]
    assert r["polls"] >= 1


def test_once_healthy_the_same_task_reads_metrics(run_module, world):
    unit, server = world
    unit.write_text(props())
    base = "http://127.0.0.1:%d" % server.server_port
    r = run_module(M, unit="vllm.service", url=base + "/health", read_url=base + "/metrics")
    assert "failed" not in r and r["content"] == 'vllm:cache_config_info{cache_dtype="fp8"} 1.0\n'
    server.metrics_status = 503
    r = run_module(M, unit="vllm.service", url=base + "/health", read_url=base + "/metrics")
    assert r["failed"] and r["msg"].startswith("vllm.service is healthy but %s/metrics answered 503" % base)
    assert "content" not in r
