"""Make the work tree importable as ansible_collections.airgap.vllm for unit tests."""

import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LINK_BASE = os.path.join(ROOT, "build", "collections")
LINK = os.path.join(LINK_BASE, "ansible_collections", "airgap", "vllm")

if not os.path.islink(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink(ROOT, LINK)
if LINK_BASE not in sys.path:
    sys.path.insert(0, LINK_BASE)


# ------------------------------------------------------------------ shared fixtures
import subprocess  # noqa: E402

import pytest  # noqa: E402

MAKE_MODEL = os.path.join(ROOT, "tests", "world", "fake-model", "make_model.py")
MODEL_CONFIG = os.path.join(ROOT, "tests", "fixtures", "models", "qwen3.x-27b-fp8", "config.json")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A real (tiny) Qwen3 checkpoint made by the test world's make_model.py: config, tokenizer, safetensors.

    Session-scoped and shared: a test that changes files must copy it first (see model_src fixtures)."""
    out = str(tmp_path_factory.mktemp("model") / "qwen-tiny")
    if not os.path.exists(MAKE_MODEL):
        pytest.skip("tests/world/fake-model/make_model.py not present")
    subprocess.run([sys.executable, MAKE_MODEL, out, MODEL_CONFIG], check=True)
    return out


@pytest.fixture
def run_module(monkeypatch, capsys):
    """Run a module's main() as Ansible would, in this process: run_module(M, check_mode=False, diff=False,
    **args) -> the result exit_json or fail_json printed (a failure is a result with `failed`, not an exception).

    The one module-test harness of tests/unit: every test of a module's main() runs it through this fixture.
    The arguments go through AnsibleModule's own parsing (types, choices, required), so a bad argument
    gives the same fail_json the user sees."""
    import json

    from ansible.module_utils import basic
    from ansible.module_utils.common.text.converters import to_bytes

    def run(module, check_mode=False, diff=False, **args):
        args = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)
        monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args})))
        monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
        capsys.readouterr()
        with pytest.raises(SystemExit):
            module.main()
        return json.loads(capsys.readouterr().out)

    return run
