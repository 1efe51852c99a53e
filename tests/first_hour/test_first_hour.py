"""A new user's first hour (issue 18), on a fresh copy of the repository.

Runs the README's commands and the usual first mistakes, and asserts what each one says:
- plan.yml, exactly as the README shows it, from a tree where nothing was linked or built yet;
- a wrong-typed variable on a fresh simulated host fails in the first play, changed=0, the host untouched;
- the bundle build (run by tests/simulate before site.yml) reports changed=0 when nothing changed, and
  --check rewrites nothing in it;
- site.yml run directly without the bundle path tests/simulate provides, with a bundle file missing,
  against a stopped host and against a missing host;
- tests/simulate restarting a stopped host (keeping its state) and replacing it only with --fresh;
- tests/simulate-chat sending the request through the host, with the key.

The simulated host here is the container airgap-kylin-firsthour (never tests/simulate's own
airgap-kylin-sim); it is removed at the end. No full converge: every site.yml run stops in the
validation play, before a task changes the host.
"""

import os
import re
import shutil
import subprocess
import sys
import time

import pytest
import yaml

pytestmark = pytest.mark.molecule

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from worktree import copy_tree  # noqa: E402

NAME = "airgap-kylin-firsthour"
WRONG = "vllm_plan_concurrency: got 'abc' (a string); wants an integer"


def sh(cmd, cwd, env=None, timeout=900):
    r = subprocess.run(
        cmd,
        cwd=cwd,
        env=env,
        shell=isinstance(cmd, str),
        executable="/bin/bash" if isinstance(cmd, str) else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        universal_newlines=True,
        timeout=timeout,
        check=False,
    )
    return r.returncode, r.stdout


def docker(*args):
    return subprocess.run(
        ("docker",) + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False
    )


def recap(out, host):
    """{'ok': .., 'changed': .., ...} of the LAST recap line of host in out."""
    lines = [ln for ln in out.splitlines() if re.match(r"^%s\s+:\s+ok=" % re.escape(host), ln)]
    assert lines, "no recap for %s in:\n%s" % (host, out[-3000:])
    return dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", lines[-1]))


def fatal_block(out):
    """The failure message of the validation task, up to the recap."""
    start = out.index("fatal: [")
    return out[start : out.index("PLAY RECAP", start)]


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """The repository as a fresh clone has it: tracked and new files, nothing ignored (no build/)."""
    dest = str(tmp_path_factory.mktemp("first-hour") / "airgap-vllm")
    copy_tree(ROOT, dest)
    docker("rm", "-fv", NAME)
    yield dest
    docker("rm", "-fv", NAME)
    shutil.rmtree(dest, ignore_errors=True)  # its bundle holds a copy of the image archive


@pytest.fixture(scope="module")
def env():
    """A new user's environment: nothing of ours exported; the host container named for this test."""
    e = dict(
        (k, v)
        for k, v in os.environ.items()
        if not k.startswith("ANSIBLE_") and k not in ("AIRGAP_TEST_BUNDLE", "PYTHONPATH")
    )
    # Its own address on the site LAN too: a developer's airgap-kylin-sim may hold the default one (10.231.8.10).
    e.update(
        AIRGAP_SIM_NAME=NAME,
        AIRGAP_SIM_ADDRESS="10.231.8.21",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
        PY_COLORS="0",
    )
    return e


def readme_block(clone, needle):
    text = open(os.path.join(clone, "README.md")).read()
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        if needle in block:
            return block
    raise AssertionError("no sh block with %r in README.md" % needle)


def test_readme_says_what_setup_does(clone):
    text = open(os.path.join(clone, "README.md")).read()
    for claim in (
        "root",
        "docker.io",
        "debootstrap",
        "gcc",
        "dkms",
        "leaves a `dockerd`",
        "bash tests/simulate-chat",
        "its own* loopback",
        "API keys",
    ):
        assert claim in text, claim
    assert "listens on the host's 127.0.0.1:8000" not in text


def test_plan_runs_as_the_readme_shows_it_in_a_fresh_clone(clone, env):
    assert not os.path.exists(os.path.join(clone, "build"))
    rc, out = sh(readme_block(clone, "playbooks/plan.yml"), clone, env, timeout=300)
    assert rc == 0, out[-3000:]
    assert "couldn't resolve module" not in out
    assert re.search(r"KV|ledger", out), out[-2000:]


def test_wrong_type_on_a_fresh_host_fails_first_with_changed_0(clone, env):
    rc, out = sh(["bash", "tests/simulate", "-e", "vllm_plan_concurrency=abc"], clone, env)
    assert rc != 0, out[-3000:]
    assert "simulated host %s: creating it" % NAME in out
    msg = fatal_block(out)
    assert WRONG in msg, msg
    assert len(msg.splitlines()) <= 6, msg  # one short line per problem, no spec dump
    assert "argument_specs" not in msg
    # site.yml's own check comes first; only the bundle builder (tests/simulate, before site.yml) validates its role.
    assert not [line for line in out.splitlines() if "Validating arguments" in line and "bundle_build" not in line]
    site = recap(out, "airgap-kylin-sim")
    assert site["changed"] == 0 and site["failed"] == 1, site
    # Nothing on the host: no staged bundle, no nouveau blacklist, the old RPM driver still there.
    assert docker("exec", NAME, "test", "-e", "/var/lib/airgap-vllm").returncode != 0
    assert docker("exec", NAME, "test", "-e", "/etc/modprobe.d/blacklist-nouveau.conf").returncode != 0


def bundle_stamps(bundle):
    out = {}
    for top, _dirs, files in os.walk(bundle):
        for f in files:
            out[os.path.relpath(os.path.join(top, f), bundle)] = os.stat(os.path.join(top, f)).st_mtime_ns
    return out


def test_unchanged_bundle_build_is_changed_0_and_check_writes_nothing(clone, env):
    bundle = os.path.join(clone, "build", "simulated-bundle")
    cmd = [
        "ansible-playbook",
        "playbooks/bundle_build.yml",
        "-e",
        "@tests/world/bundle-vars.yml",
        "-e",
        "bundle_build_dir=" + bundle,
    ]
    rc, out = sh(cmd, clone, env)
    assert rc == 0, out[-3000:]
    if recap(out, "localhost")["changed"]:
        # The shared test world was rebuilt since tests/simulate built the bundle (another checkout's
        # build.sh on this machine): this run took that in, the next must find nothing to do.
        rc, out = sh(cmd, clone, env)
    assert recap(out, "localhost")["changed"] == 0, out[-4000:]
    before = bundle_stamps(bundle)
    rc, out = sh(cmd + ["--check", "--diff"], clone, env)
    assert rc == 0, out[-3000:]
    assert recap(out, "localhost")["changed"] == 0, out[-4000:]
    assert bundle_stamps(bundle) == before


def test_site_without_tests_simulate_says_where_the_bundle_path_comes_from(clone, env):
    rc, out = sh(["ansible-playbook", "site.yml", "-i", "inventories/simulated"], clone, env, timeout=300)
    assert rc != 0
    msg = fatal_block(out)
    assert "bundle_path: got an empty string" in msg, msg
    assert "The simulated bundle path comes from tests/simulate" in msg
    assert "export AIRGAP_TEST_BUNDLE=$PWD/build/simulated-bundle" in msg
    assert recap(out, "airgap-kylin-sim")["changed"] == 0


def test_missing_bundle_file_is_named_with_its_manifest(clone, env, tmp_path):
    bundle = str(tmp_path / "bundle")
    shutil.copytree(os.path.join(clone, "build", "simulated-bundle"), bundle, symlinks=True, copy_function=os.link)
    with open(os.path.join(bundle, "manifest.yml")) as f:
        model = [a["path"] for a in yaml.safe_load(f)["artifacts"] if a["kind"] == "model"][0]
    os.unlink(os.path.join(bundle, model))
    e = dict(env, AIRGAP_TEST_BUNDLE=bundle)
    try:
        rc, out = sh(["ansible-playbook", "site.yml", "-i", "inventories/simulated"], clone, e, timeout=300)
    finally:
        shutil.rmtree(bundle, ignore_errors=True)  # hard links, but the only ones once the clone is gone
    assert rc != 0
    msg = fatal_block(out)
    assert "lacks %s" % model in msg, msg
    assert "%s/manifest.yml" % bundle in msg
    assert recap(out, "airgap-kylin-sim")["changed"] == 0


def test_simulate_chat_goes_through_the_host_with_the_key(clone, env):
    # A stand-in endpoint on the host's own loopback that insists on the inventory's key (no converge);
    # it goes with the container, which the next test stops.
    server = (
        "import http.server, json\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def reply(self, body):\n"
        "        if self.headers.get('Authorization') != 'Bearer sk-simulated-one':\n"
        "            self.send_response(401); self.end_headers(); return\n"
        "        data = json.dumps(body).encode(); self.send_response(200)\n"
        "        self.send_header('Content-Length', str(len(data))); self.end_headers(); self.wfile.write(data)\n"
        "    def do_GET(self): self.reply({'data': [{'id': 'tiny'}]})\n"
        "    def do_POST(self):\n"
        "        n = int(self.headers['Content-Length']); q = json.loads(self.rfile.read(n))\n"
        "        self.reply({'choices': [{'message': {'content': 'echo: ' + q['messages'][0]['content']}}]})\n"
        "http.server.HTTPServer(('127.0.0.1', 8000), H).serve_forever()\n"
    )
    assert docker("exec", "-d", NAME, "python3", "-c", server).returncode == 0
    for dummy in range(30):
        if (
            docker(
                "exec", NAME, "python3", "-c", "import socket; socket.create_connection(('127.0.0.1', 8000), 1)"
            ).returncode
            == 0
        ):
            break
        time.sleep(0.3)
    rc, out = sh(["bash", "tests/simulate-chat", "hello there"], clone, env, timeout=120)
    assert rc == 0, out
    assert "echo: hello there" in out


def test_stopped_host_is_named_and_restarted_with_its_state(clone, env):
    assert docker("exec", NAME, "touch", "/root/first-hour-marker").returncode == 0
    assert docker("stop", NAME).returncode == 0
    e = dict(env, AIRGAP_TEST_BUNDLE=os.path.join(clone, "build", "simulated-bundle"))
    rc, out = sh(["ansible-playbook", "site.yml", "-i", "inventories/simulated"], clone, e, timeout=300)
    assert rc != 0
    msg = fatal_block(out)
    assert "the container %s exists but is stopped" % NAME in msg, msg
    assert "`bash tests/simulate` creates it, or starts a stopped one again with its state" in msg
    assert "Failed to create temporary directory" not in msg

    rc, out = sh(["bash", "tests/simulate", "-e", "vllm_plan_concurrency=abc"], clone, env)
    assert rc != 0
    assert "simulated host %s: it exists but is exited (stopped); starting it again with its state" % NAME in out
    assert "bash tests/simulate --fresh" in out
    assert WRONG in fatal_block(out)
    assert docker("exec", NAME, "test", "-e", "/root/first-hour-marker").returncode == 0


def test_fresh_replaces_the_host_and_says_so_and_check_changes_nothing(clone, env):
    bundle = os.path.join(clone, "build", "simulated-bundle")
    stamps = bundle_stamps(bundle)
    rc, out = sh(["bash", "tests/simulate", "--fresh", "--check", "-e", "vllm_plan_concurrency=abc"], clone, env)
    assert rc != 0
    assert "simulated host %s: replacing it with a fresh one (--fresh)" % NAME in out
    assert docker("exec", NAME, "test", "-e", "/root/first-hour-marker").returncode != 0
    assert bundle_stamps(bundle) == stamps  # --check passed on to the bundle build
    assert WRONG in fatal_block(out)
    assert recap(out, "airgap-kylin-sim")["changed"] == 0


def test_missing_host_is_named(clone, env):
    docker("rm", "-fv", NAME)
    e = dict(env, AIRGAP_TEST_BUNDLE=os.path.join(clone, "build", "simulated-bundle"))
    rc, out = sh(["ansible-playbook", "site.yml", "-i", "inventories/simulated"], clone, e, timeout=300)
    assert rc != 0
    msg = fatal_block(out)
    assert "there is no container named %s" % NAME in msg, msg
    rc, out = sh(["bash", "tests/simulate-chat"], clone, env, timeout=60)
    assert rc != 0 and "there is no such container. bash tests/simulate creates it" in out
