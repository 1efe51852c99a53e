"""The load check's runner: its API client as the image's Python runs it, and the /metrics sampler."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import http.server
import json
import subprocess
import sys
import threading
import time

from ansible_collections.airgap.vllm.plugins.module_utils.service import _loadcheck as L
from ansible_collections.airgap.vllm.plugins.module_utils.service import _loadcheck_metrics as LM
from ansible_collections.airgap.vllm.plugins.module_utils.service import _loadcheck_profiles as LP
from ansible_collections.airgap.vllm.plugins.module_utils.service import _loadcheck_runner as R


def test_the_client_times_each_streams_first_and_last_token(tmp_path):
    # The API profiles' client as the image's Python runs it, against a local server that streams like vLLM's
    # (SSE chunks, usage last): two requests at once overlap, and each record says when its tokens came. The server
    # starts streaming once both requests are in (a barrier), and its tokens come 0.2 s apart: a client thread that a
    # busy machine schedules late still sees them spread (0.05 s apart, the first token was read late under load).
    both_in = threading.Barrier(2, timeout=30)

    class Streamer(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            both_in.wait()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for _i in range(5):
                time.sleep(0.2)
                self.wfile.write(b'data: {"choices": [{"text": "x"}]}\n\n')
                self.wfile.flush()
            self.wfile.write(b'data: {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 5}}\n\n')
            self.wfile.write(b"data: [DONE]\n\n")

        def log_message(self, *_a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Streamer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        job = {
            "path": "/v1/completions",
            "port": server.server_address[1],
            "concurrency": 2,
            "bodies": [{"prompt": [1, 2, 3], "max_tokens": 5, "stream": True}] * 2,
        }
        out = subprocess.run(
            [sys.executable, "-c", R.CLIENT],
            input=json.dumps(job),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    finally:
        server.shutdown()
    got = json.loads(out.stdout)
    recs = got["records"]
    assert all(r["completion_tokens"] == 5 and r["last"] - r["first"] >= 0.4 for r in recs), recs
    raw = LP.api_result(recs, got["duration"], got["peak"])
    assert LM.streaming_at_once(LM.stream_intervals(raw)) == 2 and "stream_intervals" not in L.compact(raw)


def test_the_sampler_says_how_often_it_read_the_engines_gauge(monkeypatch):
    # issue 42: the concurrency promise counts the gauge's peak only from reads close enough to see a run of 1 s
    reads = iter([{"num_requests_running": 1.0}, {}, {"num_requests_running": 3.0, "kv_cache_usage_perc": 0.5}])
    monkeypatch.setattr(R, "scrape", lambda _url: next(reads, {"num_requests_running": 2.0}))
    sampler = R.MetricsSampler("http://127.0.0.1:1/metrics")
    sampler.start()
    time.sleep(1.2)
    sampler.stop.set()
    sampler.join(2)
    got = sampler.sampling(time.time())
    assert sampler.peak == 3.0 and sampler.peak_kv == 0.5
    assert got["samples"] >= 3 and 0.2 <= got["max_gap_s"] < 1.2, got
    # nothing read: no gap to speak of, so nothing witnessed
    assert R.MetricsSampler("x").sampling(time.time()) == {"samples": 0, "max_gap_s": None}
