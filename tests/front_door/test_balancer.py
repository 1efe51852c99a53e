"""The fleet balancer for real (issue 25, item 9): the REAL HAProxy with the configuration `render_fleet()` writes, in
front of two members that each run the REAL single-host front door (`render()`) before a test-world imitation of the
engine (fake_engine.py: /health 503 and chats 500 when dead, unguarded routes answering without a key as vLLM's do).

    python3 -m pytest -q tests/front_door/test_balancer.py          (needs docker; ~30 s)

The world, on a private Docker network (`--internal`: nothing leaves it), named per test run:

    pytest (this machine) --TLS, client key--> balancer (haproxy, render_fleet: leastconn, httpchk /health, TLS to
        the members verified against the site CA by member name) --TLS--> member-a / member-b: haproxy with render()
        (routes, keys, limits, the engine's own key) in the network namespace of engine-a / engine-b (127.0.0.1:8000)

Certificates come from the role's own PKI code (plugins/action/vllm_front_pki.py: the site CA, one certificate per
member named by its inventory name, one for the balancer). Images: AIRGAP_TEST_HAPROXY_IMAGE (default haproxy:2.6,
the bundle's proxy image of the test world: bash tests/world/build.sh front) and AIRGAP_TEST_PYTHON_IMAGE (default
airgap-test/base:bookworm) for the engines. Skipped only when docker is absent.
"""

import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
LINK_BASE = os.path.join(ROOT, "build", "collections")
LINK = os.path.join(LINK_BASE, "ansible_collections", "airgap", "vllm")
if not os.path.islink(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    try:
        os.symlink(ROOT, LINK)
    except FileExistsError:
        pass
if LINK_BASE not in sys.path:
    sys.path.insert(0, LINK_BASE)

# The collection is importable from here on (the link above).
from ansible_collections.airgap.vllm.plugins.module_utils.front import _front as front  # noqa: E402
from ansible_collections.airgap.vllm.plugins.module_utils.front import _front_haproxy as front_haproxy  # noqa: E402
from ansible_collections.airgap.vllm.plugins.module_utils.front import _front_settings as front_settings  # noqa: E402

HAPROXY_IMAGE = os.environ.get("AIRGAP_TEST_HAPROXY_IMAGE", "haproxy:2.6")
PYTHON_IMAGE = os.environ.get("AIRGAP_TEST_PYTHON_IMAGE", "airgap-test/base:bookworm")
ENGINE_KEY = "sk-engine-only-0123456789abcdef"
ALICE = "sk-fleet-alice-0123456789abcdef"
LIMITED = "sk-fleet-limited-0123456789abcdef"
PORT = 8443
CHECK_INTERVAL = 1  # render_fleet: check inter 1s fall 2 rise 2
MEMBERS = ("a", "b")
CHAT = {"model": "fake", "max_tokens": 4, "messages": [{"role": "user", "content": "hello"}]}
ENGINE_MARKS = ('"choices"', '"tokens"', "vllm:", '"openapi"', '"version"')

# Refused at every member's door, so at the balancer too: routes of the engine (unguarded ones answer there without a
# key) and path spellings that the engine would decode or normalise into them.
REFUSED = [
    ("POST", "/invocations"),
    ("POST", "/tokenize"),
    ("GET", "/metrics"),
    ("GET", "/version"),
    ("GET", "/ping"),
    ("GET", "/openapi.json"),
    ("POST", "/v1/../invocations"),
    ("POST", "/v1/%2e%2e/invocations"),
    ("POST", "//invocations"),
    ("POST", "/%69nvocations"),
    ("POST", "/V1/chat/completions"),
    ("POST", "/v1/chat/completions/batch"),
    ("GET", "/nope"),
]


def docker(*args, check=True, timeout=60):
    r = subprocess.run(
        ["docker"] + list(args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        universal_newlines=True,
        timeout=timeout,
        check=False,
    )
    if check and r.returncode != 0:
        raise AssertionError("docker %s: rc %d: %s" % (" ".join(args[:4]), r.returncode, r.stderr.strip()[-500:]))
    return r


class _TLS(http.client.HTTPSConnection):
    """HTTPS to an address, verifying the certificate for another name (the balancer's DNS name)."""

    def __init__(self, host, port, context, sni, timeout):
        http.client.HTTPSConnection.__init__(self, host, port, context=context, timeout=timeout)
        self._sni = sni

    def connect(self):
        sock = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self._sni)


class World:
    def __init__(self, tag, tmp):
        self.tag, self.tmp = tag, tmp
        self.net = "airgap-lbtest-%s" % tag
        self.names = {"lb": "airgap-lbtest-%s-balancer" % tag}
        for m in MEMBERS:
            self.names["engine-" + m] = "airgap-lbtest-%s-engine-%s" % (tag, m)
            self.names["front-" + m] = "airgap-lbtest-%s-front-%s" % (tag, m)
        self.lb_ip = None
        self.ctx = None

    # ---------------------------------------------------------------- requests through the balancer
    def request(self, method, path, key=None, body=None, auth=None, timeout=10):
        """(status, headers, body text) of one request on a new connection (the balancer picks a member per request)."""
        conn = _TLS(self.lb_ip, PORT, self.ctx, "fleet.test", timeout)
        try:
            conn.putrequest(method, path, skip_accept_encoding=True)
            for value in auth if auth is not None else (["Bearer %s" % key] if key else []):
                conn.putheader("Authorization", value)
            data = json.dumps(body).encode() if body is not None else b""
            if body is not None or method == "POST":
                conn.putheader("Content-Type", "application/json")
                conn.putheader("Content-Length", str(len(data)))
            conn.endheaders(data or None)
            resp = conn.getresponse()
            return (
                resp.status,
                dict((k.lower(), v) for k, v in resp.getheaders()),
                resp.read().decode("utf-8", "replace"),
            )
        finally:
            conn.close()

    def chats(self, n, key=ALICE):
        """n chats one after the other: [(status, engine name or None)]."""
        out = []
        for _i in range(n):
            status, headers, _body = self.request("POST", "/v1/chat/completions", ALICE if key is None else key, CHAT)
            out.append((status, headers.get("x-fake-engine")))
        return out

    def open_stream(self, tokens, delay, key=ALICE):
        """A streaming chat held open: (connection, response); read it with read_stream()."""
        conn = _TLS(self.lb_ip, PORT, self.ctx, "fleet.test", 30)
        body = json.dumps(dict(CHAT, stream=True, max_tokens=tokens, min_tokens=tokens, token_delay=delay)).encode()
        conn.request(
            "POST",
            "/v1/chat/completions",
            body=body,
            headers={"Authorization": "Bearer %s" % key, "Content-Type": "application/json"},
        )
        return conn, conn.getresponse()

    @staticmethod
    def read_stream(resp):
        """(content events, saw [DONE]) of an open SSE response."""
        events, done = 0, False
        for raw in resp:
            line = raw.strip()
            if line == b"data: [DONE]":
                done = True
            elif line.startswith(b"data: ") and b'"content": "t' in line:
                events += 1
        return events, done

    # ---------------------------------------------------------------- what the engines saw, the balancer's log
    def engine_log(self, m):
        r = docker("exec", self.names["engine-" + m], "cat", "/tmp/requests.log", check=False)
        return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]

    def lb_log(self):
        r = docker("logs", self.names["lb"], check=False)
        return r.stdout + r.stderr

    def wait_lb_log(self, needle, since, timeout):
        """Seconds until the balancer's log has `needle` more often than `since` times (a state change), or fail."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.lb_log().count(needle) > since:
                return time.monotonic() - t0
            time.sleep(0.2)
        raise AssertionError("the balancer did not log %r within %d s:\n%s" % (needle, timeout, self.lb_log()[-2000:]))

    def set_dead(self, m, dead):
        docker("exec", self.names["engine-" + m], *(["touch", "/tmp/down"] if dead else ["rm", "-f", "/tmp/down"]))


def _write(directory, files):
    os.makedirs(directory, exist_ok=True)
    for name, content in files.items():
        path = os.path.join(directory, name)
        with open(path, "w") as f:
            f.write(content)
        # The test's copy only: the proxy runs as root in its container (as the role's unit does) and reads them.
        os.chmod(path, 0o644)


def member_files(front, tls_dir, name, draining=False):
    """The single-host front door of one member, as the role renders it (plus its certificate)."""
    svc = front_settings.plan_service(
        dict(
            name="vllm",
            port=8000,
            front_port=PORT,
            argv=["--max-num-seqs", "4"],
            engine_key=ENGINE_KEY,
            clients=[dict(name="alice", key=ALICE), dict(name="limited", key=LIMITED, max_concurrent=1)],
        )
    )
    files = dict(
        (n, f["content"])
        for n, f in front.render(dict(addresses=["0.0.0.0"], tls=True, services=[svc], draining=draining)).items()
    )
    files.update(_pem(tls_dir, name))
    return files


def _pem(tls_dir, name):
    with (
        open(os.path.join(tls_dir, "%s.crt" % name)) as c,
        open(os.path.join(tls_dir, "%s.key" % name)) as k,
        open(os.path.join(tls_dir, "ca.crt")) as ca,
    ):
        return {"server.pem": c.read(), "server.pem.key": k.read(), "ca.crt": ca.read()}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    if not shutil.which("docker"):
        pytest.skip("docker is absent")
    if subprocess.call(["docker", "info"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) != 0:
        pytest.skip("docker is installed but no daemon answers (docker info)")
    for image in (HAPROXY_IMAGE, PYTHON_IMAGE):
        if docker("image", "inspect", image, check=False).returncode != 0:
            pytest.fail(
                "image %s is missing: bash tests/world/build.sh front (the test world's HAProxy and base images)"
                % image
            )
    from ansible_collections.airgap.vllm.plugins.action import vllm_front_pki as pki

    tmp = str(tmp_path_factory.mktemp("fleet"))
    w = World("%d-%s" % (os.getpid(), uuid.uuid4().hex[:6]), tmp)
    tls_dir = os.path.join(tmp, "pki")
    for host in ("member-a", "member-b"):
        pki.ensure(tls_dir, host, [host])  # the site CA (made once) and each member's certificate, by inventory name
    pki.ensure(tls_dir, "fleet", ["fleet.test"])
    w.ctx = ssl.create_default_context(cafile=os.path.join(tls_dir, "ca.crt"))
    w.front, w.tls_dir = front, tls_dir
    conf = front_haproxy.CONTAINER_CONF_DIR
    try:
        docker("network", "create", "--internal", w.net)
        for m in MEMBERS:
            docker(
                "run",
                "-d",
                "--name",
                w.names["engine-" + m],
                "--network",
                w.net,
                "-v",
                "%s:/opt/fake_engine.py:ro" % os.path.join(HERE, "fake_engine.py"),
                "--entrypoint",
                "python3",
                PYTHON_IMAGE,
                "/opt/fake_engine.py",
                "--name",
                m,
                "--key",
                ENGINE_KEY,
            )
            _write(os.path.join(tmp, "member-" + m), member_files(front, tls_dir, "member-" + m))
            # The member's front door in the engine's network namespace: it reaches 127.0.0.1:8000 as on a host.
            docker(
                "run",
                "-d",
                "--name",
                w.names["front-" + m],
                "--network",
                "container:" + w.names["engine-" + m],
                "--user",
                "0:0",
                "-v",
                "%s:%s:ro" % (os.path.join(tmp, "member-" + m), conf),
                "--entrypoint",
                "haproxy",
                HAPROXY_IMAGE,
                "-W",
                "-db",
                "-f",
                conf + "/haproxy.cfg",
            )
        fleet_cfg = front.render_fleet(
            dict(
                addresses=["0.0.0.0"],
                tls=True,
                services=[dict(name="vllm", front_port=PORT)],
                members=[dict(name="member-" + m, address=w.names["engine-" + m]) for m in MEMBERS],
                check_interval=CHECK_INTERVAL,
            )
        )
        lb_files = dict(_pem(tls_dir, "fleet"), **{"haproxy.cfg": fleet_cfg})
        _write(os.path.join(tmp, "balancer"), lb_files)
        w.fleet_cfg = fleet_cfg
        docker(
            "run",
            "-d",
            "--name",
            w.names["lb"],
            "--network",
            w.net,
            "--user",
            "0:0",
            "-v",
            "%s:%s:ro" % (os.path.join(tmp, "balancer"), conf),
            "--entrypoint",
            "haproxy",
            HAPROXY_IMAGE,
            "-W",
            "-db",
            "-f",
            conf + "/haproxy.cfg",
        )
        w.lb_ip = docker(
            "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", w.names["lb"]
        ).stdout.strip()
        # Up: both members answer /health through the balancer (each member's door and engine are running).
        deadline = time.monotonic() + 20
        seen = set()
        while time.monotonic() < deadline and seen != set(MEMBERS):
            try:
                seen.update(e for s, e in w.chats(4) if s == 200)
            except OSError:
                pass
            if seen != set(MEMBERS):
                time.sleep(0.3)
        if seen != set(MEMBERS):
            logs = "\n".join("%s: %s" % (n, docker("logs", c, check=False).stderr[-800:]) for n, c in w.names.items())
            raise AssertionError("the fleet did not come up (answered: %s)\n%s" % (sorted(seen), logs))
        yield w
    finally:
        for name in w.names.values():
            docker("rm", "-f", name, check=False)
        docker("network", "rm", w.net, check=False)


# ------------------------------------------------------------------------------------------------------------ tests


def test_requests_are_spread_over_both_members(world):
    got = world.chats(20)
    assert [s for s, _e in got] == [200] * 20
    counts = dict((m, sum(1 for _s, e in got if e == m)) for m in MEMBERS)
    # leastconn, one request at a time: ties go round-robin, so both get a fair share.
    assert min(counts.values()) >= 6, counts


def test_keys_are_checked_as_at_the_single_host_door(world):
    for label, auth in (
        ("no key", []),
        ("unknown key", ["Bearer sk-nobody-0123456789abcdef"]),
        ("the engine's own key", ["Bearer %s" % ENGINE_KEY]),
        ("two Authorization headers", ["Bearer %s" % ALICE, "Bearer %s" % ALICE]),
        ("not Bearer", ["Basic %s" % ALICE]),
    ):
        for _i in range(4):  # both members answer the same
            status, headers, body = world.request("POST", "/v1/chat/completions", body=CHAT, auth=auth)
            assert status == 401, (label, status, body)
            assert json.loads(body)["error"]["type"] == "AuthenticationError", (label, body)
            assert "www-authenticate" in headers and "x-fake-engine" not in headers, (label, headers)
    assert world.request("POST", "/v1/chat/completions", body=CHAT, auth=["bearer %s" % ALICE])[0] == 200
    status, _h, body = world.request("GET", "/health")
    assert status == 200 and body == "", (status, body)  # no key: load balancers and monitoring
    # The engines saw only requests carrying their own key on /v1 (the door swaps the client key for it).
    for m in MEMBERS:
        v1 = [r for r in world.engine_log(m) if r["route"].startswith("/v1")]
        assert v1 and all(r["key_ok"] for r in v1), [r for r in v1 if not r["key_ok"]]


def test_refused_routes_stay_refused_at_the_balancer(world):
    # The imitation is a real threat: inside a member, the engine runs a chat on /invocations without a key.
    r = docker(
        "exec",
        world.names["engine-a"],
        "python3",
        "-c",
        "import urllib.request as u; r = u.urlopen(u.Request('http://127.0.0.1:8000/invocations', "
        "data=b'{}', headers={'Content-Type': 'application/json'})); print(r.status, r.read().decode())",
    )
    assert r.stdout.startswith("200") and '"choices"' in r.stdout, r.stdout + r.stderr
    before = dict((m, len(world.engine_log(m))) for m in MEMBERS)
    for method, path in REFUSED:
        for key in (ALICE, None):
            for _i in range(2):  # both members
                status, headers, body = world.request(method, path, key, CHAT if method == "POST" else None)
                assert status in (404, 405), (method, path, key is not None, status, body)
                assert not any(mark in body for mark in ENGINE_MARKS), (method, path, body)
                assert "x-fake-engine" not in headers, (method, path, headers)
    # Nothing of it reached an engine (the balancer's health checks, /health through each door, keep arriving).
    reached = [r for m in MEMBERS for r in world.engine_log(m)[before[m] :] if r["route"] != "/health"]
    assert not reached, reached


def test_a_member_whose_health_fails_is_taken_out_and_traffic_continues(world):
    downs = world.lb_log().count("member-a is DOWN")
    ups = world.lb_log().count("member-a is UP")
    world.set_dead("a", True)
    try:
        t0 = time.monotonic()
        # While the checks have not seen it yet, member-a's requests fail as the dead engine's do (500).
        during = []
        while world.lb_log().count("member-a is DOWN") <= downs and time.monotonic() - t0 < 3 * CHECK_INTERVAL + 5:
            during += world.chats(1)
        took = world.wait_lb_log("member-a is DOWN", downs, 1)
        assert took < 1 and time.monotonic() - t0 <= (2 + 1) * CHECK_INTERVAL + 3, time.monotonic() - t0
        assert all(s == 200 and e == "b" or s == 500 and e == "a" for s, e in during), during
        assert "Layer7 wrong status" in world.lb_log() and "code: 503" in world.lb_log()
        print(
            "\nengine-a dead: out of rotation after %.1f s (check inter %d s, fall 2); %d requests meanwhile, %d of "
            "them answered by the dead engine (500)"
            % (time.monotonic() - t0, CHECK_INTERVAL, len(during), sum(1 for s, _e in during if s == 500))
        )
        # Out of rotation: every request goes to member-b, none fails.
        after = world.chats(20)
        assert after == [(200, "b")] * 20, after
    finally:
        world.set_dead("a", False)
    world.wait_lb_log("member-a is UP", ups, (2 + 1) * CHECK_INTERVAL + 5)
    back = world.chats(10)
    assert all(s == 200 for s, _e in back) and {e for _s, e in back} == set(MEMBERS), back


def test_a_draining_member_gets_no_new_request_and_its_streams_finish(world):
    """The rollout's drain (roles/vllm_front/tasks/drain.yml): the member's door re-rendered with draining=True and
    reloaded (USR2): /health 503, the balancer takes it out, the stream it is serving ends whole."""
    conn, resp = world.open_stream(tokens=40, delay=0.1)  # ~4 s
    member = resp.getheader("X-Fake-Engine")
    other = [m for m in MEMBERS if m != member][0]
    result = {}
    reader = threading.Thread(target=lambda: result.update(zip(("events", "done"), world.read_stream(resp))))
    reader.start()
    downs = world.lb_log().count("member-%s is DOWN" % member)
    ups = world.lb_log().count("member-%s is UP" % member)
    directory = os.path.join(world.tmp, "member-" + member)
    try:
        _write(directory, member_files(world.front, world.tls_dir, "member-" + member, draining=True))
        docker("kill", "-s", "USR2", world.names["front-" + member])
        world.wait_lb_log("member-%s is DOWN" % member, downs, (2 + 1) * CHECK_INTERVAL + 5)
        assert world.chats(10) == [(200, other)] * 10
        reader.join(15)
        assert result == {"events": 40, "done": True}, result  # not cut by the drain, the reload or the balancer
    finally:
        conn.close()
        _write(directory, member_files(world.front, world.tls_dir, "member-" + member))
        docker("kill", "-s", "USR2", world.names["front-" + member])
    world.wait_lb_log("member-%s is UP" % member, ups, (2 + 1) * CHECK_INTERVAL + 5)


def test_per_client_limits_are_each_members_own(world):
    """A client's max_concurrent is counted by each member's door: through the balancer a client may hold one
    stream per member (here 2 with max_concurrent 1), the next one is refused (429) by the member it lands on."""
    held = [world.open_stream(tokens=30, delay=0.1, key=LIMITED) for _i in range(2)]
    try:
        assert [r.status for _c, r in held] == [200, 200]
        assert {r.getheader("X-Fake-Engine") for _c, r in held} == set(MEMBERS)  # leastconn: one on each
        status, headers, body = world.request("POST", "/v1/chat/completions", LIMITED, CHAT)
        assert status == 429 and headers.get("retry-after") == "1", (status, body)
        assert all(s == 200 for s, _e in world.chats(4))  # another client is not limited by it
    finally:
        for conn, _r in held:
            conn.close()


def test_a_client_at_its_limit_starting_its_next_request_as_the_last_ends_gets_no_429(world):
    """docs/performance.md finding 5: a client exactly at its limit (here 1) that starts its next request the moment
    its last one ended - it has read the [DONE] event - while the door still holds that stream (the engine ends the
    response 50 ms later) is counted without the finished stream: 200, not 429. A second request while a stream is
    really open is still refused."""
    address = docker(
        "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", world.names["engine-a"]
    ).stdout.strip()

    def post(body, timeout=30):
        conn = _TLS(address, PORT, world.ctx, "member-a", timeout)
        conn.request(
            "POST",
            "/v1/chat/completions",
            body=json.dumps(body).encode(),
            headers={"Authorization": "Bearer %s" % LIMITED, "Content-Type": "application/json"},
        )
        return conn, conn.getresponse()

    for _round in range(3):
        conn, resp = post(dict(CHAT, stream=True, max_tokens=2, min_tokens=2, token_delay=0.01, done_delay=0.05))
        try:
            assert resp.status == 200, resp.read()
            for raw in resp.fp:
                if raw.strip() == b"data: [DONE]":
                    break
            nconn, nresp = post(CHAT)
            status, body = nresp.status, nresp.read()
            nconn.close()
            assert status == 200, (status, body)
        finally:
            conn.close()
    conn, resp = post(dict(CHAT, stream=True, max_tokens=20, min_tokens=20, token_delay=0.1))
    try:
        assert resp.status == 200
        nconn, nresp = post(CHAT)
        status, headers = nresp.status, dict((k.lower(), v) for k, v in nresp.getheaders())
        nconn.close()
        assert status == 429 and headers.get("retry-after") == "1", status
    finally:
        conn.close()


def test_a_stopped_member_door_costs_no_new_request(world):
    """The member's door process is gone (host down): connections to it are refused, the balancer retries and
    redispatches to the other member (retries 2, option redispatch) before its checks have even noticed."""
    downs = world.lb_log().count("member-b is DOWN")
    docker("kill", world.names["front-b"])
    try:
        got = world.chats(20)
        assert got == [(200, "a")] * 20, got
        world.wait_lb_log("member-b is DOWN", downs, (2 + 1) * CHECK_INTERVAL + 5)
        assert world.chats(10) == [(200, "a")] * 10
    finally:
        docker("start", world.names["front-b"], check=False)
