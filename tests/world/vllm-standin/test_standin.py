"""The stand-in vllm/vllm-openai:v0.27.1 image behaves like the real server where roles can see it.

Runs the image on the host docker with the tiny fake model mounted read-only, the way the vllm
role runs the real one. Skipped only when docker is absent.
"""

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import pytest

pytestmark = pytest.mark.world
HERE = os.path.dirname(os.path.abspath(__file__))
IMAGE = "airgap-test/vllm-standin:v0.27.1"
OLD_KERNEL = "4.19.90-52.22.v2207.ky10.x86_64"
MODEL_IN = "/models/qwen3.x-27b-fp8-tiny"
COMMON = ["--served-model-name", "qwen", "--max-model-len", "32k"]

if shutil.which("docker") is None:
    pytest.skip("docker is not installed", allow_module_level=True)


def sh(*cmd, timeout=60):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    out = tmp_path_factory.mktemp("artifacts")
    r = sh("bash", os.path.join(HERE, "build.sh"), str(out), timeout=300)
    assert r.returncode == 0, r.stderr
    return IMAGE


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    out = tmp_path_factory.mktemp("model")
    r = sh("bash", os.path.join(HERE, "..", "fake-model", "make-model.sh"), str(out), "-")
    assert r.returncode == 0, r.stderr
    return str(out / "qwen3.x-27b-fp8-tiny")


class Container:
    def __init__(self, image, model, args, env=(), docker_opts=(), mounts=()):
        self.name = "standin-test-" + uuid.uuid4().hex[:10]
        cmd = [
            "docker",
            "run",
            "-d",
            "--name",
            self.name,
            "-p",
            "127.0.0.1::8000",
            "-e",
            "VLLM_STANDIN_LOAD_SECONDS=1",
            "-e",
            "HF_HUB_OFFLINE=1",
            "-v",
            "%s:%s:ro" % (model, MODEL_IN),
        ]
        for e in env:
            cmd += ["-e", e]
        for m in mounts:
            cmd += ["-v", m]
        r = sh(*(cmd + list(docker_opts) + [image, MODEL_IN] + list(args)))
        assert r.returncode == 0, r.stderr
        port = sh("docker", "port", self.name, "8000/tcp").stdout.strip().rsplit(":", 1)[-1]
        self.base = "http://127.0.0.1:%s" % port

    def logs(self):
        r = sh("docker", "logs", self.name)
        return r.stdout + r.stderr

    def status(self):
        return sh("docker", "inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", self.name).stdout.split()

    def wait_healthy(self, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.status()[0] == "exited":
                break
            try:
                if self.get("/health")[0] == 200:
                    return True
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.3)
        return False

    def wait_exit(self, timeout=30):
        r = sh("docker", "wait", self.name, timeout=timeout)
        return int(r.stdout.strip())

    def request(self, path, body=None, key=None):
        req = urllib.request.Request(self.base + path, data=None if body is None else json.dumps(body).encode())
        req.add_header("Content-Type", "application/json")
        if key:
            req.add_header("Authorization", "Bearer " + key)
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def get(self, path, key=None):
        return self.request(path, key=key)

    def remove(self):
        sh("docker", "rm", "-f", self.name)


@pytest.fixture
def run(image, model):
    started = []

    def _run(args, **kw):
        c = Container(image, kw.pop("model", model), args, **kw)
        started.append(c)
        return c

    yield _run
    for c in started:
        c.remove()


def parse_metric_labels(text, name):
    for line in text.splitlines():
        if line.startswith(name + "{"):
            inner = line[len(name) + 1 : line.rindex("}")]
            return dict(kv.split("=", 1) for kv in _split_labels(inner)), float(line.rsplit(" ", 1)[1])
    raise AssertionError("%s not in /metrics" % name)


def _split_labels(inner):
    out, cur, quoted = [], "", False
    for ch in inner:
        if ch == '"':
            quoted = not quoted
            continue
        if ch == "," and not quoted:
            out.append(cur)
            cur = ""
            continue
        cur += ch
    return out + [cur] if cur else out


def test_unknown_and_bad_flags_exit_2(image, model):
    base = ["docker", "run", "--rm", "-v", "%s:%s:ro" % (model, MODEL_IN), image, MODEL_IN]
    r = sh(*(base + ["--swap-space", "4"]))
    assert r.returncode == 2 and "unrecognized arguments: --swap-space 4" in r.stderr
    r = sh(*(base + ["--kv-cache-dtype", "fp9"]))
    assert r.returncode == 2 and "invalid choice: 'fp9'" in r.stderr
    r = sh(*(base + ["--max-model-len", "1.5K"]))
    assert r.returncode == 2 and "Decimals are not allowed" in r.stderr


def test_serves_like_vllm(run, tmp_path):
    cfg = tmp_path / "serve.yaml"
    cfg.write_text("api-key:\n  - sk-one\n  - sk-two\nenable-prefix-caching: true\n")
    os.chmod(str(tmp_path), 0o755)
    c = run(
        COMMON
        + [
            "--config",
            "/etc/vllm/serve.yaml",
            "--kv-cache-dtype",
            "fp8_e4m3",
            "--block-size",
            "32",
            "--gpu-memory-utilization",
            "0.9",
            "--enable-auto-tool-choice",
            "--tool-call-parser",
            "qwen3_coder",
            "--reasoning-parser",
            "qwen3",
            "--speculative-config",
            '{"method":"mtp","num_speculative_tokens":3}',
        ],
        mounts=["%s:/etc/vllm/serve.yaml:ro" % cfg],
    )
    assert c.wait_healthy(), c.logs()

    code, text = c.get("/metrics")  # open without a key
    assert code == 200
    labels, value = parse_metric_labels(text, "vllm:cache_config_info")
    assert value == 1.0
    assert labels["block_size"] == "32" and labels["cache_dtype"] == "fp8_e4m3"
    assert labels["gpu_memory_utilization"] == "0.9"
    assert labels["enable_prefix_caching"] == "True"
    assert labels["kv_offloading_size"] == "None" and labels["engine"] == "0"
    assert 'vllm:spec_decode_num_drafts_total{engine="0",model_name="qwen"}' in text

    assert c.get("/v1/models")[0] == 401
    code, body = c.get("/v1/models", key="sk-two")
    assert code == 200 and [m["id"] for m in json.loads(body)["data"]] == ["qwen"]
    assert c.get("/v1/models", key="sk-three")[0] == 401

    tool = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
    prompt = " ".join("word%d" % i for i in range(80))
    req = {"model": "qwen", "messages": [{"role": "user", "content": prompt}], "tools": [tool]}
    for _attempt in range(2):
        code, body = c.request("/v1/chat/completions", req, key="sk-one")
        assert code == 200, body
    msg = json.loads(body)["choices"][0]["message"]
    assert msg["tool_calls"][0]["function"]["name"] == "get_weather"
    assert json.loads(msg["tool_calls"][0]["function"]["arguments"]).keys() == {"city"}
    assert msg["reasoning"]
    code, body = c.request("/v1/chat/completions", dict(req, model="other"), key="sk-one")
    assert code == 404

    text = c.get("/metrics")[1]
    queries = parse_metric_labels(text, "vllm:prefix_cache_queries_total")[1]
    hits = parse_metric_labels(text, "vllm:prefix_cache_hits_total")[1]
    assert queries == 160 and 0 < hits < queries


def test_auto_tool_choice_needs_parser_flags(run):
    c = run(COMMON)
    assert c.wait_healthy(), c.logs()
    req = {
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
    }
    code, body = c.request("/v1/chat/completions", req)
    assert code == 400 and "--enable-auto-tool-choice" in body


def test_missing_preprocessor_config_fails_start(run, model, tmp_path):
    broken = tmp_path / "m"
    shutil.copytree(model, str(broken))
    os.remove(str(broken / "preprocessor_config.json"))
    c = run(COMMON, model=str(broken))
    assert c.wait_exit() == 1
    assert "Can't load image processor for '%s'" % MODEL_IN in c.logs()


def test_hub_model_id_fails_offline(image):
    r = sh("docker", "run", "--rm", "-e", "HF_HUB_OFFLINE=1", image, "Qwen/Qwen3.6-27B-FP8")
    assert r.returncode == 1 and "LocalEntryNotFoundError" in r.stderr


OFFLOAD = COMMON + ["--kv-offloading-size", "0.5"]


def test_offload_on_old_kernel_dies_with_einval(run):
    c = run(OFFLOAD, env=["VLLM_STANDIN_KERNEL_RELEASE=" + OLD_KERNEL], docker_opts=["--shm-size", "1g"])
    assert c.wait_exit() == 1
    logs = c.logs()
    assert "shared_offload_region.py" in logs and "OSError: [Errno 22] Invalid argument" in logs
    assert "Application startup complete" not in logs


def test_offload_on_new_kernel_is_healthy(run):
    c = run(OFFLOAD, env=["VLLM_STANDIN_KERNEL_RELEASE=6.1.0-28-amd64"], docker_opts=["--shm-size", "1g"])
    assert c.wait_healthy(), c.logs()
    labels, _value = parse_metric_labels(c.get("/metrics")[1], "vllm:cache_config_info")
    assert labels["kv_offloading_size"] == "0.5" and labels["kv_offloading_backend"] == "native"
    r = sh("docker", "exec", c.name, "sh", "-c", "stat -c %s /dev/shm/vllm_offload_*.mmap")
    assert r.stdout.strip() == str(512 << 20), r.stdout + r.stderr


def test_offload_needs_shm_bigger_than_the_region(run):
    c = run(OFFLOAD, env=["VLLM_STANDIN_KERNEL_RELEASE=6.1.0-28-amd64"])  # docker's 64m /dev/shm
    assert c.wait_exit() == 1
    assert "OSError: [Errno 14] Bad address" in c.logs()


def _patched_region(tmp_path, image):
    """A minimal try/except around both madvise calls (what a source patch does)."""
    path = "/usr/lib/python3/dist-packages/vllm/v1/kv_offload/cpu/shared_offload_region.py"
    src = sh("docker", "run", "--rm", "--entrypoint", "cat", image, path).stdout
    loop = (
        "                self.mmap_obj.madvise(\n"
        "                    _MADV_POPULATE_WRITE, aligned_offset, aligned_length\n"
        "                )\n"
    )
    whole = "            self.mmap_obj.madvise(_MADV_POPULATE_WRITE, 0, self.total_size_bytes)\n"
    assert src.count(loop) == 1 and src.count(whole) == 1
    src = src.replace(
        loop,
        "                try:\n"
        + loop.replace("\n    ", "\n        ").replace("                self", "                    self", 1)
        + "                except OSError:\n                    break\n",
    )
    src = src.replace(whole, "            try:\n    " + whole + "            except OSError:\n                pass\n")
    out = tmp_path / "shared_offload_region.py"
    out.write_text(src)
    os.chmod(str(tmp_path), 0o755)
    return "%s:%s:ro" % (out, path)


def test_patched_offload_survives_old_kernel(run, image, tmp_path):
    c = run(
        OFFLOAD,
        env=["VLLM_STANDIN_KERNEL_RELEASE=" + OLD_KERNEL],
        docker_opts=["--shm-size", "1g"],
        mounts=[_patched_region(tmp_path, image)],
    )
    assert c.wait_healthy(), c.logs()


def test_patched_offload_with_small_shm_dies_of_sigbus(run, image, tmp_path):
    c = run(OFFLOAD, env=["VLLM_STANDIN_KERNEL_RELEASE=" + OLD_KERNEL], mounts=[_patched_region(tmp_path, image)])
    assert c.wait_exit() == 1, c.logs()
    logs = c.logs()
    assert "Bus error" in logs and "'EngineCore_DP0': -7" in logs  # -7 = SIGBUS


def test_flags_table_is_the_real_parsers():
    """flags.json must be what gen_flags.py reads from the real 0.27.1 parser (venv optional)."""
    venv = os.path.join(
        os.environ.get("AIRGAP_CACHE", os.path.expanduser("~/.cache/airgap-vllm")), "vllm-0.27.1-venv", "bin", "python"
    )
    if not os.path.exists(venv):
        pytest.skip("real vLLM venv not built (tests/vllm_parser/setup-venv.sh)")
    out = os.path.join(os.environ.get("TMPDIR", "/tmp"), "flags-%s.json" % uuid.uuid4().hex)
    try:
        r = sh(venv, os.path.join(HERE, "gen_flags.py"), out, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        with open(out) as fh, open(os.path.join(HERE, "flags.json")) as committed:
            assert json.load(fh) == json.load(committed)
    finally:
        if os.path.exists(out):
            os.remove(out)
