"""The guard's idea of "an API key / an all-interfaces --host on the argv" equals vLLM 0.27.1's parser's.

Every prefix of --api-key / --api_key / --host (with a separate value and with `=`) is parsed by the real
parser (the cached CPU venv of tests/vllm_parser/setup-venv.sh) and by the guard: they must agree.
"""

import json
import os
import subprocess

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.service import _service_guard as g

pytestmark = pytest.mark.slow

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SETUP = os.path.join(ROOT, "tests", "vllm_parser", "setup-venv.sh")
MODEL = "/opt/models/qwen"

PARSE = r"""
import contextlib, io, json, sys
from vllm.entrypoints.openai.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser
out = []
for argv in json.load(sys.stdin):
    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            ns = parser.parse_args(argv)
        out.append({"api_key": ns.api_key, "host": ns.host})
    except SystemExit:
        out.append(None)
with open(sys.argv[1], "w") as f:
    json.dump(out, f)
"""


@pytest.fixture(scope="module")
def venv_python():
    try:
        proc = subprocess.run(
            ["bash", SETUP],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            universal_newlines=True,
            timeout=3600,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip("vLLM 0.27.1 venv could not be built, the REAL PARSER check did NOT run: %s" % exc)
    if proc.returncode != 0:
        pytest.skip("vLLM 0.27.1 venv could not be built, the REAL PARSER check did NOT run:\n%s" % proc.stdout[-2000:])
    return os.path.join(proc.stdout.strip().splitlines()[-1], "bin", "python")


def _parse(venv_python, tmp_path, argvs):
    out = tmp_path / "parsed.json"
    subprocess.run(
        [venv_python, "-c", PARSE, str(out)],
        input=json.dumps(argvs),
        universal_newlines=True,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=600,
    )
    return json.loads(out.read_text())


def _prefixes(option):
    return [option[:n] for n in range(3, len(option) + 1)]


def test_guard_flags_exactly_the_api_key_spellings_the_real_parser_accepts(venv_python, tmp_path):
    cands = []
    for spelled in (
        _prefixes("--api-key") + _prefixes("--api_key") + ["--API-KEY", "-api-key", "--api-key-", "--apikey"]
    ):
        cands.append([MODEL, spelled, "sk-1"])
        cands.append([MODEL, spelled + "=sk-1"])
    parsed = _parse(venv_python, tmp_path, cands)
    accepted_by_vllm = [argv for argv, ns in zip(cands, parsed) if ns and ns["api_key"]]
    flagged = [argv for argv in cands if g.api_key_args(argv)]
    assert flagged == accepted_by_vllm
    assert len(accepted_by_vllm) >= 12  # --api-k, --api-ke, --api-key and the _ forms, each with and without =


def test_guard_flags_exactly_the_all_interface_hosts_the_real_parser_accepts(venv_python, tmp_path):
    cands = []
    for spelled in _prefixes("--host") + ["--HOST", "-host"]:
        for value in ("0.0.0.0", "::", "127.0.0.1"):
            cands.append([MODEL, spelled, value])
            cands.append([MODEL, spelled + "=" + value])
    parsed = _parse(venv_python, tmp_path, cands)
    all_interfaces = [argv for argv, ns in zip(cands, parsed) if ns and ns["host"] in ("0.0.0.0", "::")]
    flagged = [argv for argv in cands if g.check_argv(argv)]
    assert flagged == all_interfaces
    assert all_interfaces
