"""The front door as a client workstation of the site sees it (issue 25): over TLS with the site CA.

    check_front.py --base-url https://HOST:PORT --ca ca.crt --keys keys.json [--only a,b] [--skip c]
                   [--model NAME] [--max-body-bytes N] [--request-timeout S] [--deadline S]

keys.json (only "good" is required; a check whose key is absent is reported as skipped, never as passed):
    {"good": "sk-...",            a client of the front door
     "second": "sk-...",          another client (its own key)
     "bad": "sk-nobody",          a key no client has (default: a random one)
     "revoked": "sk-...",         a client removed from the inventory (and the proxy reloaded)
     "limited": {"key": "sk-...", "concurrency": 1, "rate": 5},
                                  a client with a per-client concurrency limit and/or a request rate limit
     "metrics": "sk-..."}         Prometheus' token on the metrics listener (--metrics-url)

The real `openai` client speaks for the chats (tool call, streaming, keys); http.client/raw TLS sockets send
what the openai client would normalise away (path tricks, duplicate headers, huge and slow requests).
Prints one JSON object per check ({"check", "ok", "detail"}; "ok": null = skipped) and a summary line;
exits 1 when any check failed, 2 on bad arguments. Every socket has a timeout and the whole run a
deadline. It only ever connects to the base URL's host and port (the test world's own address).

What counts as refused: a 4xx status (the proxy decides) and no engine answer in the body (no
"choices", no tokens, no metrics, no OpenAPI document). A 2xx, 3xx or 5xx for a refused path is a failure.
"""

import argparse
import base64
import concurrent.futures
import http.client
import ipaddress
import json
import os
import signal
import socket
import ssl
import sys
import threading
import time
import urllib.parse

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
QUESTION = "What is the weather in Beijing?"
# What an engine answer looks like in a body: a completion, tokens, metrics, its OpenAPI document.
ENGINE_MARKS = ('"choices"', '"tokens"', "vllm:", '"openapi"', "swagger", '"max_model_len"', '"prompt"')
# Routes the engine has (vLLM 0.27.1's /openapi.json) that a client must never reach through the front door.
REFUSED = [
    ("POST", "/invocations", "chat"),
    ("POST", "/tokenize", "tokenize"),
    ("POST", "/detokenize", "detokenize"),
    ("GET", "/metrics", None),
    ("GET", "/version", None),
    ("GET", "/load", None),
    ("GET", "/ping", None),
    ("POST", "/ping", None),
    ("GET", "/openapi.json", None),
    ("GET", "/docs", None),
    ("GET", "/redoc", None),
    ("GET", "/is_scaling_elastic_ep", None),
    ("POST", "/scale_elastic_ep", None),
    ("POST", "/pooling", "chat"),
    ("POST", "/classify", "chat"),
    ("POST", "/score", "chat"),
    ("POST", "/rerank", "chat"),
    ("POST", "/v1/load_lora_adapter", None),
    ("POST", "/v1/unload_lora_adapter", None),
    ("POST", "/reset_prefix_cache", None),
    ("POST", "/sleep", None),
    ("POST", "/wake_up", None),
    ("GET", "/nope", None),
    ("GET", "/v1/nope", None),
    ("GET", "/", None),
]
# Path tricks, each sent with the good key and without a key: none may reach a refused route (or an
# allowed one without a key). vLLM's server decodes %XX before routing (/%69nvocations -> /invocations).
TRICKS = [
    ("POST", "/v1/../invocations", "chat"),
    ("POST", "/v1/%2e%2e/invocations", "chat"),
    ("POST", "/v1/%2E%2E/invocations", "chat"),
    ("POST", "/v1/chat/completions/../../../invocations", "chat"),
    ("POST", "/v1/chat/%2e%2e/%2e%2e/invocations", "chat"),
    ("POST", "//invocations", "chat"),
    ("POST", "/./invocations", "chat"),
    ("POST", "/%69nvocations", "chat"),
    ("POST", "/%2finvocations", "chat"),
    ("POST", "/invocations?x=/v1/chat/completions", "chat"),
    ("POST", "/invocations#/v1/chat/completions", "chat"),
    ("POST", "/invocations/", "chat"),
    ("POST", "/tokenize%00", "tokenize"),
    ("POST", "/%74okenize", "tokenize"),
    ("GET", "/%6detrics", None),
    ("GET", "//metrics", None),
    ("GET", "/v1/../metrics", None),
]
# Allowed routes spelled so that vLLM's own key check (case-sensitive prefixes /v1, /v2, /inference,
# /cohere) would not look at them: without a key they must not answer 2xx.
NO_KEY_TRICKS = [
    ("POST", "/V1/chat/completions", "chat"),
    ("POST", "//v1/chat/completions", "chat"),
    ("POST", "/v1%2fchat%2fcompletions", "chat"),
    ("POST", "/%761/chat/completions", "chat"),
    ("POST", "/./v1/chat/completions", "chat"),
    ("POST", "/x/../v1/chat/completions", "chat"),
    ("GET", "/V1/models", None),
    ("GET", "/%761/models", None),
]


class Front:
    def __init__(self, args, keys):
        self.args = args
        self.keys = keys
        u = urllib.parse.urlsplit(args.base_url)
        if u.scheme not in ("https", "http") or not u.hostname:
            raise SystemExit("--base-url must be https://HOST[:PORT] (http:// only with --plain-http)")
        if u.scheme == "http" and not args.plain_http:
            raise SystemExit("--base-url is http://: the front door is TLS by default (--plain-http for an opt-out)")
        self.tls = u.scheme == "https"
        self.host = u.hostname
        self.port = u.port or (443 if self.tls else 80)
        self.server_name = args.server_name or self.host
        self.prefix = u.path.rstrip("/")
        self.ctx = ssl.create_default_context(cafile=args.ca) if self.tls else None
        self.model = args.model
        self.check_addresses()

    def check_addresses(self):
        """The script talks to the test world only: the base URL must resolve to private addresses."""
        if self.args.any_address:
            return
        addrs = {ai[4][0] for ai in socket.getaddrinfo(self.host, self.port, proto=socket.IPPROTO_TCP)}
        public = [a for a in addrs if not (ipaddress.ip_address(a).is_private or ipaddress.ip_address(a).is_loopback)]
        if public:
            raise SystemExit(
                "%s resolves to %s: not a test-world address (--any-address to allow)"
                % (self.host, ", ".join(sorted(public)))
            )

    # ------------------------------------------------------------------ the openai client
    def client(self, key, timeout=None):
        import openai  # the real client, from the image's venv

        http = openai.DefaultHttpxClient(verify=self.ctx if self.tls else False, trust_env=False)
        return openai.OpenAI(
            base_url=self.args.base_url.rstrip("/") + "/v1",
            api_key=key,
            max_retries=0,
            timeout=timeout or self.args.chat_timeout,
            http_client=http,
        )

    def served_model(self):
        if not self.model:
            self.model = self.client(self.keys["good"]).models.list().data[0].id
        return self.model

    # ------------------------------------------------------------------ raw HTTP over TLS
    def connect(self, timeout):
        sock = socket.create_connection((self.host, self.port), timeout=timeout)
        if self.tls:
            sock = self.ctx.wrap_socket(sock, server_hostname=self.server_name)
        return sock

    def head(self, method, path, headers, length=None):
        lines = [
            "%s %s HTTP/1.1" % (method, path),
            "Host: %s:%d" % (self.server_name, self.port),
            "User-Agent: airgap-front-check",
            "Connection: close",
        ]
        lines += ["%s: %s" % h for h in headers]
        if length is not None:
            lines.append("Content-Length: %d" % length)
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def raw(self, method, path, headers=(), body=None, timeout=None, max_body=65536):
        """Send exactly this request line and these headers; (status, headers, body text) or raises."""
        timeout = timeout or self.args.io_timeout
        sock = self.connect(timeout)
        try:
            data = body.encode() if isinstance(body, str) else body
            sock.sendall(
                self.head(method, self.prefix + path, list(headers), None if data is None else len(data))
                + (data or b"")
            )
            resp = http.client.HTTPResponse(sock, method=method)
            resp.begin()
            text = resp.read(max_body).decode("utf-8", "replace")
            return resp.status, dict((k.lower(), v) for k, v in resp.getheaders()), text
        finally:
            sock.close()


def body_for(kind, model):
    if kind == "chat":
        return json.dumps({"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": "Hello"}]})
    if kind == "tokenize":
        return json.dumps({"model": model, "prompt": "Hello"})
    if kind == "detokenize":
        return json.dumps({"model": model, "tokens": [1, 2, 3]})
    return None


def refused(status, text):
    marks = [m for m in ENGINE_MARKS if m in text]
    return 400 <= status < 500 and not marks, marks


# ---------------------------------------------------------------------------------------- checks
def check_health(f):
    status, _headers, text = f.raw("GET", "/health")
    return status == 200, {"status": status, "body": text[:200]}


def check_tls_needs_site_ca(f):
    """The server certificate chains to the site CA only: the system's trust store refuses it."""
    if not f.tls:
        return None, "plain HTTP (opt-out)"
    sock = socket.create_connection((f.host, f.port), timeout=f.args.io_timeout)
    try:
        ssl.create_default_context().wrap_socket(sock, server_hostname=f.server_name).close()
        return False, "the system trust store accepted the server certificate"
    except ssl.SSLCertVerificationError as e:
        return True, "system trust store: %s" % e.verify_message
    finally:
        sock.close()


def check_plain_http_refused(f):
    """Plain HTTP to the TLS port gets no engine answer."""
    if not f.tls:
        return None, "plain HTTP (opt-out)"
    sock = socket.create_connection((f.host, f.port), timeout=f.args.io_timeout)
    try:
        sock.sendall(f.head("GET", "/v1/models", [("Authorization", "Bearer " + f.keys["good"])]))
        data = b""
        try:
            while len(data) < 65536:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
        except (TimeoutError, ConnectionError) as e:
            return True, "connection %s" % type(e).__name__
        text = data.decode("latin-1")
        ok = not text.startswith("HTTP/1.1 2") and '"data"' not in text
        return ok, {"answer": text[:120]}
    finally:
        sock.close()


def check_models(f):
    ids = [m.id for m in f.client(f.keys["good"]).models.list().data]
    if f.model is None and ids:
        f.model = ids[0]
    return bool(ids), {"models": ids}


def check_chat_tool_call(f):
    t0 = time.monotonic()
    r = f.client(f.keys["good"]).chat.completions.create(
        model=f.served_model(),
        max_tokens=256,
        tools=[WEATHER],
        tool_choice="auto",
        messages=[{"role": "user", "content": QUESTION}],
    )
    msg = r.choices[0].message
    calls = [{"name": c.function.name, "arguments": json.loads(c.function.arguments)} for c in msg.tool_calls or []]
    ok = calls[:1] == [{"name": "get_weather", "arguments": {"city": "Beijing"}}]
    return ok, {"tool_calls": calls, "content": (msg.content or "")[:200], "seconds": round(time.monotonic() - t0, 2)}


def stream_times(f, key, max_tokens, ignore_eos=False, question="Say hello.", on_first=None):
    """Arrival times of the SSE events that carry a choice, the text, the total time and the usage.

    on_first, when given, is called once, when the first event arrives (the stream is then open end to end)."""
    t0 = time.monotonic()
    stream = f.client(key).chat.completions.create(
        model=f.served_model(),
        max_tokens=max_tokens,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True, "min_tokens": max_tokens} if ignore_eos else None,
        messages=[{"role": "user", "content": question}],
    )
    times, text, usage, finish = [], [], None, None
    for chunk in stream:
        # The engine may put several tokens in one event when it runs ahead of its API server; every event
        # counts, its arrival time is what tells a buffering proxy from a streaming one.
        if chunk.choices:
            if on_first is not None and not times:
                on_first()
            times.append(time.monotonic() - t0)
            d = chunk.choices[0].delta
            text.append(d.content or getattr(d, "reasoning", None) or getattr(d, "reasoning_content", None) or "")
            finish = chunk.choices[0].finish_reason or finish
        if getattr(chunk, "usage", None):
            usage = chunk.usage.completion_tokens
    return {
        "times": times,
        "text": "".join(text),
        "total": time.monotonic() - t0,
        "tokens": usage,
        "finish_reason": finish,
    }


def streamed(times, total):
    """(ok, why) of a stream's event arrival times and its total time: the first event arrived while the engine was
    still generating.

    A buffering proxy hands the answer over only once the engine has finished it: its first event then arrives
    near the end (after the prefill and every decode step), and the rest within the client's parse time. A
    streaming door's first event arrives after the prefill alone. So with an answer long enough that its decoding
    outlasts the prefill (2,048 tokens here), the first event in the first half of the request is the proof. The
    gaps between events prove nothing: a client starved of CPU on a loaded machine reads a streaming door's events in
    a few bursts too (CI once saw 475 events in 3 bursts over 0.96 s)."""
    if len(times) < 16:
        return False, "%d events: too few to judge" % len(times)
    if times[0] > total / 2:
        return False, "the first event came at %.2f s of %.2f s: the answer was held back, not streamed" % (
            times[0],
            total,
        )
    if times[-1] - times[0] < 0.5:
        return False, "every event within %.2f s: one burst" % (times[-1] - times[0])
    return True, "the first event at %.2f s of %.2f s, the rest over %.2f s" % (times[0], total, times[-1] - times[0])


def check_stream(f):
    """SSE is not buffered: the first event arrives while the engine is still generating (see streamed)."""
    r = stream_times(f, f.keys["good"], 2048, ignore_eos=True)
    times, total = r["times"], r["total"]
    ok, why = streamed(times, total)
    return ok, {
        "why": why,
        "events": len(times),
        "tokens": r["tokens"],
        "first_s": round(times[0], 3) if times else None,
        "last_s": round(times[-1], 3) if times else None,
        "total_s": round(total, 3),
        "text": r["text"][:80],
    }


def check_long_stream(f):
    """A long stream that outlives a proxy reload.

    When its first event arrives it prints {"stream_open": <epoch s>} at once (flushed), so that the caller reloads
    the proxy while the stream is known to be open end to end, not at a time it guessed. With --long-stream-hold it
    then stops reading until the caller says (SIGUSR1) that the reload happened: the stream cannot end before it,
    however fast the engine or slow the reload (CI once saw a reload land only after an 8000-token stream ended)."""
    n = f.args.long_stream_tokens
    hold = f.args.long_stream_hold
    held = {}
    # SIGUSR1 (docker kill -s USR1) ends the hold. Blocked from here on, so that one sent early stays pending; the
    # handler keeps it from being dropped (this process is the container's PID 1).
    signal.signal(signal.SIGUSR1, lambda *_signal: None)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    started = time.time()

    def opened():
        print(json.dumps({"stream_open": round(time.time(), 3)}), flush=True)
        if hold > 0:
            # Stop reading: the connection stays open end to end (the engine's output waits in the socket buffers
            # and the proxy), so the caller's reload lands while this stream is open whatever the engine's pace.
            t = time.monotonic()
            held["released"] = signal.sigtimedwait({signal.SIGUSR1}, hold) is not None
            held["held_s"] = round(time.monotonic() - t, 2)

    r = stream_times(f, f.keys["good"], n, ignore_eos=True, on_first=opened)
    # Whole = every token asked for arrived and the stream closed with a finish reason. The reason is "length"
    # (ignore_eos), or "tool_calls" when the served tool parser read a tool call into the tiny model's random text
    # (vLLM 0.27.1 sets it then even though the length limit stopped the stream; seen in molecule).
    ok = r["tokens"] == n and r["finish_reason"] in ("length", "tool_calls") and held.get("released", True)
    return ok, {
        "events": len(r["times"]),
        "tokens": r["tokens"],
        "wanted": n,
        "finish_reason": r["finish_reason"],
        "total_s": round(r["total"], 2),
        "started_at": round(started, 3),
        "ended_at": round(time.time(), 3),
        **held,
    }


def check_second_client(f):
    key = f.keys.get("second")
    if not key:
        return None, "no second client key"
    r = f.client(key).chat.completions.create(
        model=f.served_model(), max_tokens=8, messages=[{"role": "user", "content": "Hello"}]
    )
    return bool(r.choices), {"finish_reason": r.choices[0].finish_reason}


def auth_refused(f, key):
    import openai

    out = {}
    try:
        f.client(key).models.list()
        out["models"] = "answered"
    except openai.AuthenticationError as e:
        out["models"] = e.status_code
    except openai.APIStatusError as e:
        out["models"] = e.status_code
    try:
        f.client(key).chat.completions.create(
            model=f.served_model(), max_tokens=8, messages=[{"role": "user", "content": "Hello"}]
        )
        out["chat"] = "answered"
    except openai.APIStatusError as e:
        out["chat"] = e.status_code
    return out["models"] == 401 and out["chat"] == 401, out


def check_bad_key(f):
    return auth_refused(f, f.keys.get("bad") or "sk-nobody-" + base64.b32encode(os.urandom(10)).decode().lower())


def check_revoked_key(f):
    key = f.keys.get("revoked")
    if not key:
        return None, "no revoked key"
    return auth_refused(f, key)


def check_no_key(f):
    out = {}
    for method, path, kind in (
        ("GET", "/v1/models", None),
        ("POST", "/v1/chat/completions", "chat"),
        ("POST", "/v1/completions", "chat"),
        ("POST", "/v1/responses", "chat"),
    ):
        status, _headers, text = f.raw(
            method, path, [("Content-Type", "application/json")], body_for(kind, f.served_model())
        )
        out[path] = status
    return all(s == 401 for s in out.values()), out


def probe_all(f, probes, keyed):
    fails, seen = [], {}
    hdr = [("Content-Type", "application/json")]
    for method, path, kind in probes:
        for key in ["good", None] if keyed else [None]:
            h = hdr + ([("Authorization", "Bearer " + f.keys[key])] if key else [])
            try:
                status, _headers, text = f.raw(method, path, h, body_for(kind, f.served_model()))
            except (TimeoutError, ConnectionError, http.client.HTTPException) as e:
                # A proxy that drops the request outright refuses it too.
                seen["%s %s %s" % (method, path, key or "no-key")] = type(e).__name__
                continue
            ok, marks = refused(status, text)
            seen["%s %s %s" % (method, path, key or "no-key")] = status
            if not ok:
                fails.append(
                    {
                        "request": "%s %s" % (method, path),
                        "key": key or "none",
                        "status": status,
                        "engine_marks": marks,
                        "body": text[:160],
                    }
                )
    return not fails, {"failed": fails, "seen": seen}


def check_refused_routes(f):
    return probe_all(f, REFUSED, keyed=True)


def check_path_tricks(f):
    ok1, d1 = probe_all(f, TRICKS, keyed=True)
    ok2, d2 = probe_all(f, NO_KEY_TRICKS, keyed=False)
    return ok1 and ok2, {"failed": d1["failed"] + d2["failed"], "seen": dict(d1["seen"], **d2["seen"])}


def check_duplicate_authorization(f):
    """Two Authorization headers (either order, or one header with two credentials) are refused."""
    good, bad = f.keys["good"], f.keys.get("bad") or "sk-nobody"
    body = body_for("chat", f.served_model())
    cases = {
        "good+bad": [("Authorization", "Bearer " + good), ("Authorization", "Bearer " + bad)],
        "bad+good": [("Authorization", "Bearer " + bad), ("Authorization", "Bearer " + good)],
        "good+good": [("Authorization", "Bearer " + good), ("Authorization", "Bearer " + good)],
        "one header, two credentials": [("Authorization", "Bearer %s, Bearer %s" % (bad, good))],
        "lower-case duplicate": [("Authorization", "Bearer " + bad), ("authorization", "Bearer " + good)],
    }
    out, ok = {}, True
    for name, hdrs in cases.items():
        status, _headers, text = f.raw(
            "POST", "/v1/chat/completions", [("Content-Type", "application/json")] + hdrs, body
        )
        good_refusal, _why = refused(status, text)
        out[name] = status
        ok = ok and good_refusal
    return ok, out


def check_huge_body(f):
    """A body over the limit: 413 for a declared length, never an answer for a chunked one."""
    limit = f.args.max_body_bytes
    over = limit + 65536
    hdrs = [("Content-Type", "application/json"), ("Authorization", "Bearer " + f.keys["good"])]
    out = {"limit": limit}
    # 1. Content-Length over the limit, the body following: the proxy answers 413 (at once or after reading).
    sock = f.connect(f.args.io_timeout)
    try:
        sock.sendall(f.head("POST", f.prefix + "/v1/chat/completions", hdrs, over))
        prefix = b'{"model": "x", "messages": [{"role": "user", "content": "'
        sent, chunk = 0, prefix + b"a" * (65536 - len(prefix))
        try:
            while sent < over:
                n = min(len(chunk), over - sent)
                sock.sendall(chunk[:n])
                sent += n
                chunk = b"a" * 65536
        except (TimeoutError, ConnectionError, ssl.SSLError):
            pass  # the proxy answered and closed while we were still sending: read its answer
        resp = http.client.HTTPResponse(sock, method="POST")
        try:
            resp.begin()
            out["content_length"] = resp.status
        except (TimeoutError, ConnectionError, http.client.HTTPException, ssl.SSLError) as e:
            out["content_length"] = type(e).__name__
        out["sent_bytes"] = sent
    finally:
        sock.close()
    # 2. The same size chunked (no Content-Length): refused or cut, never answered.
    sock = f.connect(f.args.io_timeout)
    try:
        lines = [
            "POST %s/v1/chat/completions HTTP/1.1" % f.prefix,
            "Host: %s:%d" % (f.server_name, f.port),
            "Connection: close",
            "Transfer-Encoding: chunked",
        ] + ["%s: %s" % h for h in hdrs]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        sent = 0
        try:
            while sent < over:
                sock.sendall(b"10000\r\n" + b"a" * 65536 + b"\r\n")
                sent += 65536
            sock.sendall(b"0\r\n\r\n")
        except (TimeoutError, ConnectionError, ssl.SSLError):
            pass
        resp = http.client.HTTPResponse(sock, method="POST")
        try:
            resp.begin()
            out["chunked"] = resp.status
        except (TimeoutError, ConnectionError, http.client.HTTPException, ssl.SSLError) as e:
            out["chunked"] = type(e).__name__
    finally:
        sock.close()
    ok = out["content_length"] == 413 and (isinstance(out["chunked"], str) or 400 <= out["chunked"] < 500)
    return ok, out


def check_slow_client(f):
    """Headers trickled a byte a second: the proxy closes (or answers 408) within its request timeout."""
    bound = f.args.request_timeout + 5
    sock = f.connect(bound + 5)
    t0 = time.monotonic()
    head = f.head(
        "POST",
        f.prefix + "/v1/chat/completions",
        [("Authorization", "Bearer " + f.keys["good"]), ("Content-Type", "application/json")],
        100,
    )
    status, sent = None, 0
    try:
        sock.sendall(head[:40])
        sent = 40
        sock.settimeout(1.0)
        while time.monotonic() - t0 < bound + 5 and sent < len(head) - 4:
            sock.sendall(head[sent : sent + 1])
            sent += 1
            try:
                data = sock.recv(4096)
            except TimeoutError:
                continue
            if not data:
                status = "closed"
            else:
                status = data.split(b"\r\n", 1)[0].decode("latin-1")
            break
    except (ConnectionError, ssl.SSLError) as e:
        status = type(e).__name__
    finally:
        sock.close()
    took = time.monotonic() - t0
    ok = status is not None and ("408" in status or not status.startswith("HTTP/")) and took <= bound
    return ok, {"answer": status, "seconds": round(took, 1), "bound_s": bound, "header_bytes_sent": sent}


def check_over_limit(f):
    """The limited client over its concurrency (held streams) and its rate: 429 at once, others unaffected."""
    lim = f.keys.get("limited")
    if not lim:
        return None, "no limited client"
    if isinstance(lim, str):
        lim = {"key": lim}
    import openai

    key, out, ok = lim["key"], {}, True
    # A run a moment ago may have spent this client's rate (a window of a minute): start from a clean slate.
    try:
        f.client(key).models.list()
    except openai.RateLimitError:
        out["waited_for_rate_window_s"] = 61
        time.sleep(61)
    conc = lim.get("concurrency")
    if conc:
        n = int(conc) + 2
        barrier = threading.Barrier(n)

        def one(_index):
            barrier.wait(timeout=30)
            t0 = time.monotonic()
            try:
                stream = f.client(key).chat.completions.create(
                    model=f.served_model(),
                    max_tokens=48,
                    stream=True,
                    extra_body={"ignore_eos": True, "min_tokens": 48},
                    messages=[{"role": "user", "content": "Count."}],
                )
                for _chunk in stream:
                    pass
                return 200, time.monotonic() - t0
            except openai.APIStatusError as e:
                return e.status_code, time.monotonic() - t0

        with concurrent.futures.ThreadPoolExecutor(n) as pool:
            res = list(pool.map(one, range(n)))
        codes = [c for c, _seconds in res]
        fast = all(t < 5 for c, t in res if c == 429)
        out["concurrency"] = {
            "limit": conc,
            "sent": n,
            "statuses": codes,
            "seconds_429": [round(t, 2) for c, t in res if c == 429],
        }
        ok = ok and codes.count(429) >= 1 and codes.count(200) >= 1 and set(codes) <= {200, 429} and fast
    rate = lim.get("rate")
    if rate:
        codes = []
        for _attempt in range(int(rate) * 2 + 5):
            try:
                f.client(key).models.list()
                codes.append(200)
            except openai.APIStatusError as e:
                codes.append(e.status_code)
            if 429 in codes:
                break
        out["rate"] = {"limit": rate, "statuses": codes}
        ok = ok and 429 in codes and set(codes) <= {200, 429}
    if not conc and not rate:
        return None, "the limited client has neither concurrency nor rate"
    # Another client is not held back by this one's limit.
    f.client(f.keys["good"]).models.list()
    return ok, out


def check_metrics_listener(f):
    """/metrics on the front door's own metrics listener: its token gets the engine's metrics, nothing else does,
    and no other route answers there."""
    url, token = f.args.metrics_url, f.keys.get("metrics")
    if not url or not token:
        return None, "no --metrics-url or no metrics token"
    u = urllib.parse.urlsplit(url)
    if u.hostname != f.host:
        return False, "the metrics listener must be on the front door's host (%s), not %s" % (f.host, u.hostname)

    def get(path, key):
        sock = socket.create_connection((u.hostname, u.port or 443), timeout=f.args.io_timeout)
        if u.scheme == "https":
            sock = f.ctx.wrap_socket(sock, server_hostname=f.server_name)
        try:
            hdrs = [("Authorization", "Bearer " + key)] if key else []
            lines = ["GET %s HTTP/1.1" % path, "Host: %s:%d" % (f.server_name, u.port or 443), "Connection: close"]
            sock.sendall(("\r\n".join(lines + ["%s: %s" % h for h in hdrs]) + "\r\n\r\n").encode())
            resp = http.client.HTTPResponse(sock, method="GET")
            resp.begin()
            return resp.status, resp.read(1 << 20).decode("utf-8", "replace")
        finally:
            sock.close()

    out, ok = {}, True
    status, text = get("/metrics", token)
    out["token"] = status
    ok = status == 200 and "vllm:" in text
    for name, key in (("no token", None), ("bad token", "sk-nobody"), ("a client's key", f.keys["good"])):
        status, text = get("/metrics", key)
        out[name] = status
        ok = ok and status in (401, 403) and "vllm:" not in text
    for path in ("/v1/models", "/invocations", "/v1/chat/completions", "/%6detrics", "//metrics"):
        status, text = get(path, token)
        out[path] = status
        ok = ok and refused(status, text)[0]
    return ok, out


CHECKS = [
    ("health_without_key", check_health),
    ("tls_needs_site_ca", check_tls_needs_site_ca),
    ("plain_http_refused", check_plain_http_refused),
    ("models", check_models),
    ("chat_tool_call", check_chat_tool_call),
    ("stream", check_stream),
    ("second_client", check_second_client),
    ("no_key", check_no_key),
    ("bad_key", check_bad_key),
    ("revoked_key", check_revoked_key),
    ("refused_routes", check_refused_routes),
    ("path_tricks", check_path_tricks),
    ("duplicate_authorization", check_duplicate_authorization),
    ("huge_body", check_huge_body),
    ("slow_client", check_slow_client),
    ("over_limit", check_over_limit),
    ("metrics_listener", check_metrics_listener),
    ("long_stream", check_long_stream),
]
# Run only when asked for by --only (it takes as long as it is told to).
ON_REQUEST = {"long_stream"}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--base-url", help="https://HOST:PORT of the front door (required)")
    p.add_argument("--ca", help="the site CA certificate (PEM)")
    p.add_argument("--keys", help="JSON file of keys (see the module doc; required)")
    p.add_argument("--model", help="the served model name (default: the first of /v1/models)")
    p.add_argument("--metrics-url", help="https://HOST:PORT of the front door's metrics listener")
    p.add_argument("--server-name", help="TLS server name when it differs from the URL's host")
    p.add_argument("--only", default="", help="comma-separated checks to run (default: all but long_stream)")
    p.add_argument("--skip", default="", help="comma-separated checks not to run")
    p.add_argument("--max-body-bytes", type=int, default=1048576, help="the front door's request body limit")
    p.add_argument(
        "--request-timeout",
        type=float,
        default=10,
        help="the proxy's timeout for a request's headers (slow client bound = this + 5 s)",
    )
    p.add_argument("--long-stream-tokens", type=int, default=1500)
    p.add_argument(
        "--long-stream-hold",
        type=float,
        default=0,
        help="long_stream stops reading after its first event until SIGUSR1 or this many seconds",
    )
    p.add_argument("--chat-timeout", type=float, default=120)
    p.add_argument("--io-timeout", type=float, default=15)
    p.add_argument("--deadline", type=float, default=600, help="the whole run, seconds")
    p.add_argument("--plain-http", action="store_true", help="the front door's plain-HTTP opt-out")
    p.add_argument("--any-address", action="store_true", help="allow a base URL outside private addresses")
    p.add_argument("--list", action="store_true", help="list the checks and exit")
    args = p.parse_args(argv)
    if args.list:
        print("\n".join(n for n, _check in CHECKS))
        return 0
    if not args.base_url or not args.keys:
        p.error("--base-url and --keys are required")
    if args.base_url.startswith("https") and not args.ca:
        p.error("--ca is required for https")
    with open(args.keys) as fh:
        keys = json.load(fh)
    if not keys.get("good"):
        p.error("the keys file needs a 'good' key")
    names = [n for n, _check in CHECKS]
    only = [n for n in args.only.split(",") if n]
    skip = [n for n in args.skip.split(",") if n]
    unknown = [n for n in only + skip if n not in names]
    if unknown:
        p.error("unknown checks: %s (one of %s)" % (", ".join(unknown), ", ".join(names)))

    def overdue(*_signal):
        print(
            json.dumps({"check": "deadline", "ok": False, "detail": "the run passed %s s" % args.deadline}), flush=True
        )
        os._exit(1)

    signal.signal(signal.SIGALRM, overdue)
    signal.alarm(int(args.deadline))
    f = Front(args, keys)
    results = []
    for name, fn in CHECKS:
        if (only and name not in only) or name in skip or (not only and name in ON_REQUEST):
            continue
        t0 = time.monotonic()
        try:
            ok, detail = fn(f)
        except Exception as e:  # one check's surprise is that check's failure, not the run's end
            ok, detail = False, "%s: %s" % (type(e).__name__, str(e)[:500])
        rec = {"check": name, "ok": ok, "seconds": round(time.monotonic() - t0, 2), "detail": detail}
        results.append(rec)
        print(json.dumps(rec, sort_keys=True), flush=True)
    failed = [r["check"] for r in results if r["ok"] is False]
    skipped = [r["check"] for r in results if r["ok"] is None]
    print(
        json.dumps({"summary": {"passed": sum(1 for r in results if r["ok"]), "failed": failed, "skipped": skipped}}),
        flush=True,
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
