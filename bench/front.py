"""Bench 7 - the front door's cost: the same streaming chat workload through HAProxy (TLS, a client key, from a
client workstation on the site LAN) divided by the same workload straight to the engine on the host's loopback.

FULL mode (by hand, after `bash tests/simulate` converged with the front door on; it does not run tests/simulate):
the simulated host `airgap-kylin-sim` (AIRGAP_SIM_NAME) serves the real vLLM 0.27.1 CPU engine on its own
127.0.0.1:<engine port> and HAProxy on <LAN address>:<front port>. Two client containers of the test world's image
(airgap-test/front-client:bookworm, the real `openai` client):

- "direct": shares the host's network namespace (`--network container:airgap-kylin-sim`) and calls
  http://127.0.0.1:<engine port>/v1 with the engine's own key - what a program on the server itself does;
- "front":  sits on the site LAN (airgap-sim-lan) and calls https://<LAN address>:<front port>/v1 with a client
  key of the inventory, verifying the site CA the host serves (/etc/airgap-vllm/front/ca.crt).

Per concurrency (1 and the front door's total cap, the plan's --max-num-seqs; more would queue in HAProxy, whose
5 s queue timeout is a limit by design, not a cost), one warm-up round per path, then ROUNDS rounds per path in
ABBA order (direct, front, front, direct, ...) so that drift of the shared machine cancels. A round is
`docker exec <client> python3 /bench/front.py client ...`: REQS_PER_ROUND x concurrency streaming chat requests,
each with a unique prompt head (no prefix-cache hit across requests or paths) and exactly MAX_TOKENS output tokens
(ignore_eos + min_tokens). Measured inside the client: TTFT (request sent -> first event with text) per request,
and output tokens/s of the round (the usage's completion tokens / round wall time). Reported as ratios front ÷
direct (TTFT p50 and p95 of all requests of a path; tokens/s the median of the rounds' figures).
Targets (issue 25): TTFT p50 <= 1.05x, throughput >= 0.97x; TTFT p95 <= 1.10x (tails of a 2-core machine).

CI mode (--small): no docker, no simulated host: an in-process stand-in engine (SSE, a few ms per token) and a
plain TCP relay in place of the proxy, the same client code (stdlib HTTP when `openai` is not importable), the
same ABBA schedule, statistics and result lines; targets shown, never judged.
"""

import argparse
import json
import os
import socket
import socketserver
import statistics
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

NAME = "front"
HOST = os.environ.get("AIRGAP_SIM_NAME", "airgap-kylin-sim")
LAN = os.environ.get("AIRGAP_SIM_LAN", "airgap-sim-lan")
CLIENT_IMAGE = os.environ.get("AIRGAP_FRONT_CLIENT_IMAGE", "airgap-test/front-client:bookworm")
CLIENT_PY = "/opt/venv/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, ".."))
INVENTORY_VARS = os.path.join(ROOT, "inventories", "simulated", "group_vars", "vllm_servers.yml")
CONF = "/etc/airgap-vllm/front"  # the front door's configuration directory on the host (roles/vllm_front)

TARGETS = {"ttft_p50": "<= 1.05", "ttft_p95": "<= 1.10", "tokens_per_s": ">= 0.97"}
WORDS = (
    "the quick brown fox jumps over a lazy dog while seven engineers measure latency through "
    "a proxy that forwards every streamed token without buffering"
).split()


# ------------------------------------------------------------------------------------------------ statistics


def percentile(xs, q):
    """The q-th percentile (0-100) with linear interpolation between closest ranks (numpy's default)."""
    xs = sorted(xs)
    if not xs:
        return None
    if len(xs) == 1:
        return float(xs[0])
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))


def abba(rounds, first="direct", second="front"):
    """The interleaved order of `rounds` rounds per path: A B B A A B B A ... (each path equally often first)."""
    out = []
    for i in range(rounds):
        out += [first, second] if i % 2 == 0 else [second, first]
    return out


def summarise(rounds):
    """rounds: [{'path', 'ttft': [s], 'tokens': n, 'wall': s, 'errors': n}] of one concurrency ->
    {path: {'ttft_p50', 'ttft_p95', 'tokens_per_s' (median of the rounds), 'requests', 'errors', 'rounds'}}."""
    out = {}
    for path in sorted(set(r["path"] for r in rounds)):
        rs = [r for r in rounds if r["path"] == path]
        ttft = [t for r in rs for t in r["ttft"]]
        # Requests on a connection already open (not the first of their worker): the proxy's cost without handshakes.
        warm = [t for r in rs for t, first in zip(r["ttft"], r.get("first") or [True] * len(r["ttft"])) if not first]
        tps = [r["tokens"] / r["wall"] for r in rs if r["wall"] > 0]
        out[path] = {
            "ttft_p50": percentile(ttft, 50),
            "ttft_p95": percentile(ttft, 95),
            "ttft_p50_warm": percentile(warm, 50),
            "tokens_per_s": statistics.median(tps) if tps else None,
            "requests": len(ttft),
            "errors": sum(r["errors"] for r in rs),
            "rounds": len(rs),
        }
    return out


def ratios(summary, front="front", direct="direct"):
    """front ÷ direct for each figure (None when a side is missing or 0)."""
    out = {}
    for k in ("ttft_p50", "ttft_p95", "tokens_per_s", "ttft_p50_warm"):
        a, b = summary.get(front, {}).get(k), summary.get(direct, {}).get(k)
        out[k] = (a / b) if a is not None and b else None
    return out


# ------------------------------------------------------------------------------------------------ the client


def prompt(i, words):
    """A prompt with a unique head (no prefix-cache hit across requests, rounds or paths) of about `words` words."""
    body = " ".join(WORDS[(i + j) % len(WORDS)] for j in range(words))
    return "%s: %s" % (uuid.uuid4().hex[:12], body)


def _stream_openai(base_url, key, ca, model, text, max_tokens, timeout):
    """One streaming chat with the real openai client: (ttft s, completion tokens, errors)."""
    import openai

    client = _OPENAI.get((base_url, key))
    if client is None:
        import ssl

        verify = ssl.create_default_context(cafile=ca) if (ca and base_url.startswith("https")) else False
        http = openai.DefaultHttpxClient(verify=verify, trust_env=False)
        client = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=timeout, http_client=http)
        _OPENAI[(base_url, key)] = client
    t0 = time.perf_counter()
    stream = client.chat.completions.create(
        model=model,
        max_tokens=max_tokens,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True, "min_tokens": max_tokens},
        messages=[{"role": "user", "content": text}],
    )
    ttft, tokens = None, None
    for chunk in stream:
        if ttft is None and chunk.choices:
            d = chunk.choices[0].delta
            if d.content or getattr(d, "reasoning", None) or getattr(d, "reasoning_content", None) or d.tool_calls:
                ttft = time.perf_counter() - t0
        if getattr(chunk, "usage", None):
            tokens = chunk.usage.completion_tokens
    return ttft, tokens


_OPENAI = {}
_LOCAL = threading.local()


def _stream_stdlib(base_url, key, ca, model, text, max_tokens, timeout):
    """The same request with http.client (CI mode, or where `openai` is absent): one kept-alive connection per
    thread, SSE read line by line."""
    import http.client
    import ssl
    import urllib.parse

    u = urllib.parse.urlsplit(base_url)
    conns = getattr(_LOCAL, "conns", None)
    if conns is None:
        conns = _LOCAL.conns = {}
    conn = conns.get(base_url)
    if conn is None:
        if u.scheme == "https":
            ctx = ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()
            conn = http.client.HTTPSConnection(u.hostname, u.port or 443, timeout=timeout, context=ctx)
        else:
            conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)
        conns[base_url] = conn
    body = json.dumps(
        {
            "model": model,
            "max_tokens": max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
            "ignore_eos": True,
            "min_tokens": max_tokens,
            "messages": [{"role": "user", "content": text}],
        }
    ).encode()
    headers = {"Content-Type": "application/json", "Authorization": "Bearer %s" % key}
    t0 = time.perf_counter()
    try:
        conn.request("POST", u.path.rstrip("/") + "/chat/completions", body=body, headers=headers)
        resp = conn.getresponse()
    except (OSError, http.client.HTTPException):
        conns.pop(base_url, None)
        conn.close()
        raise
    if resp.status != 200:
        detail = resp.read()[:200]
        raise RuntimeError("HTTP %d: %r" % (resp.status, detail))
    ttft, tokens = None, None
    for raw in resp:
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        event = json.loads(data)
        choices = event.get("choices") or []
        if ttft is None and choices:
            d = choices[0].get("delta") or {}
            if d.get("content") or d.get("reasoning") or d.get("reasoning_content") or d.get("tool_calls"):
                ttft = time.perf_counter() - t0
        if event.get("usage"):
            tokens = event["usage"].get("completion_tokens")
    resp.read()
    return ttft, tokens


def served_model(base_url, key, ca, timeout=30):
    """GET /v1/models -> the first model's id (stdlib: the same on both paths, before any timing)."""
    import ssl
    import urllib.request

    ctx = ssl.create_default_context(cafile=ca) if (ca and base_url.startswith("https")) else None
    req = urllib.request.Request(base_url.rstrip("/") + "/models", headers={"Authorization": "Bearer %s" % key})
    with urllib.request.urlopen(req, timeout=timeout, context=ctx) as r:
        return json.loads(r.read().decode())["data"][0]["id"]


def run_round(
    base_url,
    key,
    ca=None,
    model=None,
    concurrency=1,
    requests=4,
    max_tokens=64,
    prompt_words=48,
    timeout=300,
    use_openai=None,
):
    """One round: `requests` streaming chats, `concurrency` at a time. Returns {'ttft': [s], 'tokens', 'wall',
    'errors', 'error_samples', 'client'}; errors are counted, not raised."""
    if use_openai is None:
        try:
            import openai  # noqa: F401

            use_openai = True
        except ImportError:
            use_openai = False
    one = _stream_openai if use_openai else _stream_stdlib
    model = model or served_model(base_url, key, ca)
    ttfts, firsts, tokens, errors, samples = [], [], [0], [0], []
    lock = threading.Lock()
    local = threading.local()

    def job(i):
        # The first request of a worker opens its connection (TCP, and TLS through the front door); later ones reuse it.
        first = not getattr(local, "used", False)
        local.used = True
        try:
            ttft, n = one(base_url, key, ca, model, prompt(i, prompt_words), max_tokens, timeout)
        except Exception as e:  # a failed request is a result of the bench, not a crash of it
            with lock:
                errors[0] += 1
                if len(samples) < 3:
                    samples.append("%s: %s" % (type(e).__name__, str(e)[:160]))
            return
        with lock:
            if ttft is not None:
                ttfts.append(ttft)
                firsts.append(first)
            tokens[0] += n or 0

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(job, range(requests)))
    wall = time.perf_counter() - t0
    return {
        "ttft": ttfts,
        "first": firsts,
        "tokens": tokens[0],
        "wall": wall,
        "errors": errors[0],
        "error_samples": samples,
        "client": "openai" if use_openai else "stdlib",
        "model": model,
    }


def client_main(argv):
    """`front.py client ...`: one round, its JSON on stdout (what the orchestrator runs in a client container)."""
    p = argparse.ArgumentParser(prog="front.py client")
    p.add_argument("--base-url", required=True)
    p.add_argument("--key", default=os.environ.get("BENCH_KEY", ""))
    p.add_argument("--ca")
    p.add_argument("--model")
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--requests", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--prompt-words", type=int, default=48)
    p.add_argument("--stdlib", action="store_true", help="http.client instead of the openai client")
    a = p.parse_args(argv)
    r = run_round(
        a.base_url,
        a.key,
        a.ca,
        a.model,
        a.concurrency,
        a.requests,
        a.max_tokens,
        a.prompt_words,
        use_openai=False if a.stdlib else None,
    )
    print(json.dumps(r))
    return 0


# ------------------------------------------------------------------------------------------------ CI stand-ins


def stand_in_engine():
    """The test world's fake engine (tests/front_door/fake_engine.py) in process, not yet serving: SSE a few ms per
    token as vLLM's chat endpoint streams them (role chunk, text chunks, finish, usage, [DONE]), any key."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "front_door"))
    import fake_engine  # noqa: PLC0415 (the CI mode only: the client containers have no tests/)

    return fake_engine.make_server(model="stand-in", token_s=0.002)


class _Relay(socketserver.ThreadingTCPServer):
    """A plain TCP relay: the CI mode's stand-in for the proxy hop (no TLS, no HTTP parsing)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, target):
        self.target = target
        socketserver.ThreadingTCPServer.__init__(self, ("127.0.0.1", 0), _RelayHandler)


class _RelayHandler(socketserver.BaseRequestHandler):
    def handle(self):
        up = socket.create_connection(self.server.target)
        for sock in (up, self.request):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        done = threading.Event()

        def pump(a, b):
            try:
                while True:
                    data = a.recv(65536)
                    if not data:
                        break
                    b.sendall(data)
            except OSError:
                pass
            finally:
                done.set()

        t = threading.Thread(target=pump, args=(up, self.request), daemon=True)
        t.start()
        pump(self.request, up)
        done.wait(5)
        up.close()


def _serve(server):
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# ------------------------------------------------------------------------------------------------ FULL: the host


def docker(*args, check=True, capture=True, timeout=None):
    r = subprocess.run(
        ["docker"] + list(args),
        stdout=subprocess.PIPE if capture else None,
        stderr=subprocess.PIPE if capture else None,
        universal_newlines=True,
        timeout=timeout,
        check=False,
    )
    if check and r.returncode != 0:
        raise SystemExit(
            "docker %s failed (rc %d): %s" % (" ".join(args[:3]), r.returncode, (r.stderr or "").strip()[-400:])
        )
    return r


def parse_front_cfg(text, service="vllm"):
    """(LAN address, front port, engine port, total cap) of one service from the host's haproxy.cfg
    (plugins/module_utils/front/_front.py render(): 'frontend front_<svc>' binds, 'backend engine_<svc>' server line)."""
    section, addr, fport, eport, cap = None, None, None, None, None
    for line in text.splitlines():
        s = line.strip()
        if line[:1] not in (" ", "\t", "") and s:
            section = s
            continue
        words = s.split()
        if section == "frontend front_%s" % service and words[:1] == ["bind"] and addr is None:
            host, _sep, port = words[1].rpartition(":")
            addr, fport = host.strip("[]"), int(port)
        if section == "backend engine_%s" % service and words[:1] == ["server"]:
            eport = int(words[2].rpartition(":")[2])
            if "maxconn" in words:
                cap = int(words[words.index("maxconn") + 1])
    if None in (addr, fport, eport):
        raise ValueError("no front_%s bind or engine_%s server in the host's haproxy.cfg" % (service, service))
    return addr, fport, eport, cap


def inventory_keys(path=INVENTORY_VARS):
    """(the engine's key, a front door client key without limits) from the simulated inventory."""
    import yaml

    with open(path) as f:
        v = yaml.safe_load(f) or {}
    engine = (v.get("vllm_service_api_keys") or [""])[0]
    clients = [
        c
        for c in v.get("vllm_front_clients") or []
        if c.get("key") and not c.get("max_concurrent") and not c.get("rate_per_minute")
    ]
    if not clients:
        raise SystemExit("%s names no front door client without limits (max_concurrent, rate_per_minute)" % path)
    return engine, clients[0]["key"], clients[0]["name"]


def full(args):
    if subprocess.call(["docker", "version"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) != 0:
        import benchlib as B

        B.skipped(NAME, "ttft_p50", "docker is not running here: the simulated host needs it")
        return 0
    state = docker("inspect", "-f", "{{.State.Status}}", HOST, check=False)
    if state.returncode != 0 or state.stdout.strip() != "running":
        raise SystemExit(
            "the simulated host %s is not running: bash tests/simulate first (with the front door on, as "
            "inventories/simulated has it)" % HOST
        )
    if docker("exec", HOST, "systemctl", "is-active", "vllm", "vllm-front", check=False).returncode != 0:
        raise SystemExit("vllm and vllm-front are not both active on %s: bash tests/simulate first" % HOST)
    cfg = docker("exec", HOST, "cat", "%s/haproxy.cfg" % CONF).stdout
    addr, fport, eport, cap = parse_front_cfg(cfg)
    engine_key, client_key, client_name = inventory_keys()
    import benchlib as B

    work = B.scratch(NAME)
    with open(os.path.join(work, "ca.crt"), "w") as f:
        f.write(docker("exec", HOST, "cat", "%s/ca.crt" % CONF).stdout)
    concurrencies = sorted(set([1, cap or 4])) if not args.concurrency else args.concurrency
    tag = "airgap-bench-front-%d" % os.getpid()
    names = {"direct": tag + "-direct", "front": tag + "-front"}
    nets = {"direct": "container:%s" % HOST, "front": LAN}
    urls = {"direct": "http://127.0.0.1:%d/v1" % eport, "front": "https://%s:%d/v1" % (addr, fport)}
    keys = {"direct": engine_key, "front": client_key}
    print(
        "  host %s: engine 127.0.0.1:%d (inside the host), front door %s (client %s), cap %s; concurrency %s, "
        "%d rounds x %d requests per concurrency step, %d output tokens each"
        % (HOST, eport, urls["front"], client_name, cap, concurrencies, args.rounds, args.requests, args.max_tokens)
    )
    try:
        for path in ("direct", "front"):
            docker(
                "run",
                "-d",
                "--rm",
                "--name",
                names[path],
                "--network",
                nets[path],
                "--entrypoint",
                "sleep",
                "-v",
                "%s:/bench/front.py:ro" % os.path.abspath(__file__),
                "-v",
                "%s:/work:ro" % work,
                CLIENT_IMAGE,
                "infinity",
            )
        served = {}  # the model's name, from the first warm-up (GET /v1/models once, not in every round)
        records = []
        for c in concurrencies:
            n = args.requests * c

            def one(path, c=c, n=n):
                cmd = [
                    "exec",
                    "-e",
                    "BENCH_KEY=%s" % keys[path],
                    names[path],
                    CLIENT_PY,
                    "/bench/front.py",
                    "client",
                    "--base-url",
                    urls[path],
                    "--ca",
                    "/work/ca.crt",
                    "--concurrency",
                    str(c),
                    "--requests",
                    str(n),
                    "--max-tokens",
                    str(args.max_tokens),
                    "--prompt-words",
                    str(args.prompt_words),
                ]
                if served.get("model"):
                    cmd += ["--model", served["model"]]
                r = json.loads(docker(*cmd, timeout=900).stdout.strip().splitlines()[-1])
                r.update(path=path, concurrency=c)
                return r

            for path in ("direct", "front"):  # warm-up: connections, the engine's first batch at this size
                w = one(path)
                served.setdefault("model", w["model"])
                if w["errors"]:
                    print("  warm-up %s c=%d: %d errors: %s" % (path, c, w["errors"], w["error_samples"]))
            rounds = []
            for i, path in enumerate(abba(args.rounds)):
                r = one(path)
                rounds.append(r)
                print(
                    "  c=%d round %2d %-6s: TTFT p50 %6.1f ms, %6.1f tokens/s, %d errors%s"
                    % (
                        c,
                        i // 2 + 1,
                        path,
                        (percentile(r["ttft"], 50) or 0) * 1000,
                        r["tokens"] / r["wall"] if r["wall"] else 0,
                        r["errors"],
                        (" " + "; ".join(r["error_samples"])) if r["errors"] else "",
                    )
                )
            records += rounds
            report(c, rounds, "simulated host, real vLLM 0.27.1 CPU engine, %s client" % rounds[0]["client"])
        raw = os.path.join(
            os.environ.get("AIRGAP_BENCH_DIR", "/var/tmp/airgap-bench"),
            "front-rounds-%s.json" % time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()),
        )
        with open(raw, "w") as f:
            json.dump(records, f)
        print("  every round's figures: %s" % raw)
    finally:
        for name in names.values():
            docker("rm", "-f", name, check=False)
        B.cleanup(work)
    return 0


def report(c, rounds, source):
    import benchlib as B

    s = summarise(rounds)
    q = ratios(s)
    d, f = s["direct"], s["front"]
    what = {
        "ttft_p50": "TTFT p50 through the front door ÷ direct, concurrency %d" % c,
        "ttft_p95": "TTFT p95 through the front door ÷ direct, concurrency %d" % c,
        "tokens_per_s": "output tokens/s through the front door ÷ direct, concurrency %d" % c,
    }
    for k in ("ttft_p50", "ttft_p95", "tokens_per_s"):
        if k == "tokens_per_s":
            detail = "%.1f vs %.1f tokens/s" % (f[k] or 0, d[k] or 0)
        else:
            detail = "%.1f vs %.1f ms" % ((f[k] or 0) * 1000, (d[k] or 0) * 1000)
        detail += "; %d+%d requests, %d+%d errors; %s" % (
            f["requests"],
            d["requests"],
            f["errors"],
            d["errors"],
            source,
        )
        B.result(NAME, "%s_c%d" % (k, c), q[k], what[k], target=TARGETS[k], detail=detail)
    B.result(
        NAME,
        "ttft_p50_warm_c%d" % c,
        q["ttft_p50_warm"],
        "TTFT p50 ÷ direct, concurrency %d, requests on a connection already open (no TCP/TLS handshake)" % c,
        detail="%.1f vs %.1f ms" % ((f["ttft_p50_warm"] or 0) * 1000, (d["ttft_p50_warm"] or 0) * 1000),
    )
    B.result(
        NAME,
        "errors_c%d" % c,
        f["errors"] + d["errors"],
        "failed requests, both paths, concurrency %d" % c,
        unit="requests",
        target="<= 0",
    )


def small(args):
    engine = _serve(stand_in_engine())
    relay = _serve(_Relay(engine.server_address))
    urls = {
        "direct": "http://127.0.0.1:%d/v1" % engine.server_address[1],
        "front": "http://127.0.0.1:%d/v1" % relay.server_address[1],
    }
    try:
        for c in (1, 2):
            rounds = []
            for path in abba(2):
                r = run_round(urls[path], "sk-ci", concurrency=c, requests=2 * c, max_tokens=8, use_openai=False)
                r.update(path=path, concurrency=c)
                rounds.append(r)
            report(c, rounds, "CI stand-ins: in-process SSE engine, TCP relay for the proxy")
    finally:
        relay.shutdown()
        engine.shutdown()
    return 0


def main(argv):
    if argv[:1] == ["client"]:
        return client_main(argv[1:])
    sys.path.insert(0, HERE)
    import benchlib as B

    p = argparse.ArgumentParser(prog="front.py")
    p.add_argument("--small", action="store_true")
    p.add_argument(
        "--rounds",
        type=int,
        default=int(os.environ.get("AIRGAP_BENCH_FRONT_ROUNDS", 8)),
        help="rounds per path and concurrency (ABBA order)",
    )
    p.add_argument("--requests", type=int, default=4, help="requests per round, times the concurrency")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--prompt-words", type=int, default=48)
    p.add_argument("--concurrency", type=int, action="append", help="default: 1 and the front door's cap")
    args = p.parse_args(argv)
    return small(args) if B.small() else full(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
