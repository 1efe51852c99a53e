"""A test-world imitation of vLLM 0.27.1's API server for the fleet balancer test (tests/front_door/test_balancer.py).

    python3 fake_engine.py --name a --key ENGINE_KEY [--port 8000] [--down-file /tmp/down] [--log /tmp/requests.log]

It answers and fails the way the real engine does, as far as a balancer and a front door can tell:

- GET /health: 200 with an empty body; **503** while the engine is dead (here: while --down-file exists);
- /v1/*: the key is checked only on the prefixes vLLM guards (/v1, /v2, /inference, /cohere: 401
  {"error": "Unauthorized"} without `Authorization: Bearer <key>`); POST /v1/chat/completions answers a completion, or
  SSE events one per token (`min_tokens` or `max_tokens` of them, `token_delay` seconds apart, default 0.01) with
  `stream: true`, the response's end `done_delay` seconds after its `[DONE]` event (default 0); **500** with an EngineDeadError body while dead;
- unguarded routes answer WITHOUT a key as the real engine does (/invocations runs a chat, /tokenize, /metrics, /version,
  /ping, /openapi.json): a front door or balancer that lets them through is caught by the body and by the log;
- the path is percent-decoded before routing, as the real server does (/%69nvocations is /invocations);
- everything else: 404 {"detail": "Not Found"}.

Every response carries `X-Fake-Engine: <name>` (the test counts which member answered); every request is appended to
--log as a JSON line {"method", "path" (raw), "route" (decoded), "key_ok"}.

The one fake engine of the tree: bench/front.py's CI mode serves it in process (make_server: any key, a few ms per
token, no log) in place of the real engine.
"""

import argparse
import json
import os
import socket
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GUARDED = ("/v1", "/v2", "/inference", "/cohere")
UNGUARDED = {"/invocations", "/tokenize", "/detokenize", "/metrics", "/version", "/ping", "/openapi.json", "/load"}
LOCK = threading.Lock()


class Engine(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""

    def setup(self):
        BaseHTTPRequestHandler.setup(self)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *a):
        pass

    @property
    def cfg(self):
        return self.server.engine

    def dead(self):
        return bool(self.cfg.down_file) and os.path.exists(self.cfg.down_file)

    def send(self, status, body, ctype="application/json"):
        data = body if isinstance(body, bytes) else (json.dumps(body) if not isinstance(body, str) else body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Fake-Engine", self.cfg.name)
        self.end_headers()
        self.wfile.write(data)

    def handle_any(self, method):
        raw = self.path
        route = urllib.parse.unquote(urllib.parse.urlsplit(raw).path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        auth = self.headers.get_all("Authorization") or []
        key_ok = self.cfg.key is None or auth == ["Bearer %s" % self.cfg.key]
        if self.cfg.log:
            with LOCK, open(self.cfg.log, "a") as log:
                log.write(json.dumps({"method": method, "path": raw, "route": route, "key_ok": key_ok}) + "\n")
        if route == "/health" and method == "GET":
            return self.send(503, b"", "text/plain") if self.dead() else self.send(200, b"", "text/plain")
        if route.startswith(GUARDED) and not key_ok:
            return self.send(401, {"error": "Unauthorized"})
        if route == "/v1/models" and method == "GET":
            return self.send(
                200, {"object": "list", "data": [{"id": self.cfg.model, "object": "model", "max_model_len": 2048}]}
            )
        if route in ("/v1/chat/completions", "/invocations") and method == "POST":
            if self.dead():
                return self.send(
                    500,
                    {
                        "error": {
                            "message": "EngineDeadError: the engine core died",
                            "type": "InternalServerError",
                            "code": 500,
                        }
                    },
                )
            try:
                req = json.loads(body or b"{}")
            except ValueError:
                return self.send(400, {"error": {"message": "invalid JSON", "code": 400}})
            if req.get("stream"):
                return self.stream(req)
            return self.send(
                200,
                {
                    "id": "chatcmpl-%s" % self.cfg.name,
                    "object": "chat.completion",
                    "model": self.cfg.model,
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": "hello from %s" % self.cfg.name},
                        }
                    ],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
                },
            )
        if route in UNGUARDED:
            # The real engine answers these without any key.
            if route == "/metrics":
                return self.send(200, "vllm:num_requests_running{engine=\"0\"} 0\n", "text/plain")
            return self.send(200, {"tokens": [1, 2, 3], "version": "0.27.1", "openapi": "3.1.0"})
        return self.send(404, {"detail": "Not Found"})

    def stream(self, req):
        n = int(req.get("min_tokens") or req.get("max_tokens") or 16)
        delay = float(req.get("token_delay", self.cfg.token_s))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("X-Fake-Engine", self.cfg.name)
        self.end_headers()

        def event(obj):
            data = ("data: %s\n\n" % (obj if isinstance(obj, str) else json.dumps(obj))).encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        base = {"id": "chatcmpl-%s" % self.cfg.name, "object": "chat.completion.chunk", "model": self.cfg.model}
        event(dict(base, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""}}]))
        for i in range(n):
            time.sleep(delay)
            event(
                dict(
                    base,
                    choices=[
                        {
                            "index": 0,
                            "delta": {"content": "t%d " % i},
                            "finish_reason": "length" if i == n - 1 else None,
                        }
                    ],
                )
            )
        event(dict(base, choices=[], usage={"prompt_tokens": 5, "completion_tokens": n, "total_tokens": n + 5}))
        event("[DONE]")
        # The engine's response ends a moment after its last event (its generator returns): done_delay seconds.
        time.sleep(float(req.get("done_delay", 0)))
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_GET(self):
        self.handle_any("GET")

    def do_POST(self):
        self.handle_any("POST")

    def do_PUT(self):
        self.handle_any("PUT")

    def do_DELETE(self):
        self.handle_any("DELETE")


def make_server(port=0, name="stand-in", key=None, down_file=None, log=None, model="fake", token_s=0.01):
    """The engine on 127.0.0.1:port (0: any free port), not yet serving. key None: any key (or none) is accepted;
    down_file None: never dead; log None: requests are not logged; token_s: the default pause between SSE tokens."""
    server = ThreadingHTTPServer(("127.0.0.1", port), Engine)
    server.daemon_threads = True
    server.engine = argparse.Namespace(name=name, key=key, down_file=down_file, log=log, model=model, token_s=token_s)
    return server


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--name", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--down-file", default="/tmp/down")
    p.add_argument("--log", default="/tmp/requests.log")
    args = p.parse_args()
    server = make_server(args.port, args.name, args.key, args.down_file, args.log)
    print("fake engine %s on 127.0.0.1:%d" % (args.name, args.port), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
