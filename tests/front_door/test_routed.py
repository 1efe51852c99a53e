"""One front door routed by model (issue 44, item 3), for real: the REAL HAProxy (the test world's haproxy:2.6) with
the configuration `render()` writes for two services on ONE front port, before two imitations of the engine
(fake_engine.py) that answer under their own names and keys.

    python3 -m pytest -q tests/front_door/test_routed.py          (needs docker; ~15 s)

The world, on a private Docker network (`--internal`): pytest --HTTP, client key--> haproxy (render(): services
`chat` (generative, --served-model-name chat-m) and `embed` (--runner pooling, --served-model-name embed-m) sharing
front port 8080) in the network namespace of the engine container, where fake engines `chat` (127.0.0.1:8000) and
`embed` (127.0.0.1:8001) run, each with its own engine key. Images: AIRGAP_TEST_HAPROXY_IMAGE (default haproxy:2.6)
and AIRGAP_TEST_PYTHON_IMAGE (default airgap-test/base:bookworm). Skipped only when docker is absent.
"""

import http.client
import json
import os
import shutil
import subprocess
import time
import uuid

import pytest

from test_balancer import HERE, HAPROXY_IMAGE, PYTHON_IMAGE, _write, docker
from ansible_collections.airgap.vllm.plugins.module_utils.front import _front as front
from ansible_collections.airgap.vllm.plugins.module_utils.front import _front_haproxy as front_haproxy
from ansible_collections.airgap.vllm.plugins.module_utils.front import _front_settings as front_settings

PORT = 8080
CHAT_KEY = "sk-engine-chat-0123456789abcdef"
EMBED_KEY = "sk-engine-embed-0123456789abcdef"
ALICE = "sk-routed-alice-0123456789abcdef"
CHATONLY = "sk-routed-chatonly-0123456789abcdef"
MAX_BODY = 32768


def services(front):
    common = dict(
        front_port=PORT, clients=[dict(name="alice", key=ALICE), dict(name="chatonly", key=CHATONLY, models=["chat-m"])]
    )
    return [
        front_settings.plan_service(
            dict(
                common,
                name="chat",
                port=8000,
                engine_key=CHAT_KEY,
                argv=["--max-num-seqs", "4", "--served-model-name", "chat-m"],
            )
        ),
        front_settings.plan_service(
            dict(
                common,
                name="embed",
                port=8001,
                engine_key=EMBED_KEY,
                argv=["--runner", "pooling", "--max-num-seqs", "4", "--served-model-name", "embed-m"],
            )
        ),
    ]


class World:
    def __init__(self):
        tag = "%d-%s" % (os.getpid(), uuid.uuid4().hex[:6])
        self.net = "airgap-routed-%s" % tag
        self.engine = "airgap-routed-%s-engines" % tag
        self.front = "airgap-routed-%s-front" % tag
        self.ip = None

    def request(self, method, path, key=ALICE, body=None, raw=None):
        conn = http.client.HTTPConnection(self.ip, PORT, timeout=10)
        try:
            headers = {"Authorization": "Bearer %s" % key} if key else {}
            data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
            if data is not None or method == "POST":
                headers["Content-Type"] = "application/json"
                headers["Content-Length"] = str(len(data or b""))
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            text = resp.read().decode("utf-8", "replace")
            return resp.status, dict((k.lower(), v) for k, v in resp.getheaders()), text
        finally:
            conn.close()

    def log(self, engine):
        r = docker("exec", self.engine, "cat", "/tmp/%s.log" % engine, check=False)
        return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    if not shutil.which("docker"):
        pytest.skip("docker is absent")
    if subprocess.call(["docker", "info"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) != 0:
        pytest.skip("docker is installed but no daemon answers (docker info)")
    for image in (HAPROXY_IMAGE, PYTHON_IMAGE):
        if docker("image", "inspect", image, check=False).returncode != 0:
            pytest.fail("image %s is missing: bash tests/world/build.sh front" % image)

    tmp = str(tmp_path_factory.mktemp("routed"))
    w = World()
    conf = front_haproxy.CONTAINER_CONF_DIR
    files = front.render(dict(addresses=["0.0.0.0"], tls=False, services=services(front), max_body_bytes=MAX_BODY))
    _write(os.path.join(tmp, "front"), dict((n, f["content"]) for n, f in files.items()))
    w.cfg = files["haproxy.cfg"]["content"]
    script = (
        "python3 /opt/fake_engine.py --name chat --key %s --port 8000 --log /tmp/chat.log & "
        "exec python3 /opt/fake_engine.py --name embed --key %s --port 8001 --log /tmp/embed.log"
        % (CHAT_KEY, EMBED_KEY)
    )
    try:
        docker("network", "create", "--internal", w.net)
        docker(
            "run",
            "-d",
            "--name",
            w.engine,
            "--network",
            w.net,
            "-v",
            "%s:/opt/fake_engine.py:ro" % os.path.join(HERE, "fake_engine.py"),
            "--entrypoint",
            "sh",
            PYTHON_IMAGE,
            "-c",
            script,
        )
        docker(
            "run",
            "-d",
            "--name",
            w.front,
            "--network",
            "container:" + w.engine,
            "--user",
            "0:0",
            "-v",
            "%s:%s:ro" % (os.path.join(tmp, "front"), conf),
            "--entrypoint",
            "haproxy",
            HAPROXY_IMAGE,
            "-W",
            "-db",
            "-f",
            conf + "/haproxy.cfg",
        )
        w.ip = docker(
            "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", w.engine
        ).stdout.strip()
        deadline, up = time.monotonic() + 20, False
        while time.monotonic() < deadline and not up:
            try:
                up = w.request("GET", "/health", key=None)[0] == 200
            except OSError:
                time.sleep(0.3)
        if not up:
            raise AssertionError(
                "the routed door did not come up: %s" % docker("logs", w.front, check=False).stderr[-1500:]
            )
        yield w
    finally:
        for name in (w.front, w.engine):
            docker("rm", "-f", name, check=False)
        docker("network", "rm", w.net, check=False)


def chat(model, **extra):
    return dict({"model": model, "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}, **extra)


def test_requests_go_to_the_service_that_serves_the_model_with_its_own_engine_key(world):
    status, headers, _body = world.request("POST", "/v1/chat/completions", body=chat("chat-m"))
    assert (status, headers.get("x-fake-engine")) == (200, "chat")
    status, headers, _body = world.request("POST", "/v1/embeddings", body={"model": "embed-m", "input": "hi"})
    # The fake engine has no embeddings route (404 from it), but the request reached the embedder, with its key.
    assert headers.get("x-fake-engine") == "embed", (status, _body)
    hits = [r for r in world.log("embed") if r["path"] == "/v1/embeddings"]
    assert hits and all(r["key_ok"] for r in hits)
    assert all(r["path"] != "/v1/embeddings" for r in world.log("chat"))


def test_the_model_is_read_from_the_whole_body_wherever_it_stands(world):
    body = {"messages": [{"role": "user", "content": "x" * 20000}], "max_tokens": 2, "model": "chat-m"}
    status, headers, _body = world.request("POST", "/v1/chat/completions", body=body)
    assert (status, headers.get("x-fake-engine")) == (200, "chat")


def test_an_unknown_or_missing_model_gets_openai_shaped_errors(world):
    status, headers, body = world.request("POST", "/v1/chat/completions", body=chat("gpt-4"))
    err = json.loads(body)["error"]
    assert status == 404 and "x-fake-engine" not in headers
    assert (err["type"], err["param"], err["code"]) == ("invalid_request_error", "model", "model_not_found")
    status, _h, body = world.request("POST", "/v1/chat/completions", body={"messages": []})
    assert status == 400 and json.loads(body)["error"]["code"] == "model_missing"
    status, _h, body = world.request("POST", "/v1/chat/completions", raw=b"not json")
    assert status == 400


def test_a_client_limited_to_one_model_gets_403_on_the_other(world):
    status, headers, _body = world.request("POST", "/v1/chat/completions", key=CHATONLY, body=chat("chat-m"))
    assert (status, headers.get("x-fake-engine")) == (200, "chat")
    status, headers, body = world.request(
        "POST", "/v1/embeddings", key=CHATONLY, body={"model": "embed-m", "input": "x"}
    )
    assert status == 403 and "x-fake-engine" not in headers
    assert json.loads(body)["error"]["code"] == "model_not_allowed"


def test_the_pooling_routes_go_only_to_pooling_services_and_back(world):
    before = len(world.log("chat"))
    status, headers, body = world.request("POST", "/v1/embeddings", body={"model": "chat-m", "input": "hi"})
    assert status == 400 and "x-fake-engine" not in headers
    assert json.loads(body)["error"]["code"] == "route_not_served"
    status, headers, body = world.request("POST", "/v1/chat/completions", body=chat("embed-m"))
    assert status == 400 and json.loads(body)["error"]["code"] == "route_not_served"
    assert len(world.log("chat")) == before


def test_models_lists_the_union_the_client_may_use(world):
    status, _h, body = world.request("GET", "/v1/models")
    assert status == 200 and sorted(m["id"] for m in json.loads(body)["data"]) == ["chat-m", "embed-m"]
    status, _h, body = world.request("GET", "/v1/models", key=CHATONLY)
    assert status == 200 and [m["id"] for m in json.loads(body)["data"]] == ["chat-m"]


def test_keys_and_refused_routes_stay_as_at_the_single_service_door(world):
    assert world.request("POST", "/v1/chat/completions", key=None, body=chat("chat-m"))[0] == 401
    assert (
        world.request("POST", "/v1/chat/completions", key="sk-nobody-0123456789abcdef", body=chat("chat-m"))[0] == 401
    )
    assert world.request("POST", "/invocations", body=chat("chat-m"))[0] == 404
    assert world.request("GET", "/v1/embeddings")[0] == 405
    status, _h, _b = world.request(
        "POST", "/v1/chat/completions", raw=json.dumps(chat("chat-m", pad="y" * MAX_BODY)).encode()
    )
    assert status == 413
