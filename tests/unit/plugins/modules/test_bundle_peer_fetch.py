"""bundle_peer_fetch and bundle_peer_serve as Ansible runs them: arguments, check mode, no_log token."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import threading

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.bundle import _peer_fetch as PF
from ansible_collections.airgap.vllm.plugins.modules import bundle_peer_fetch as M
from ansible_collections.airgap.vllm.plugins.modules import bundle_peer_serve as S

TOKEN = "Tok3n-0123456789abcdefghij"


@pytest.fixture
def seed(tmp_path):
    root = tmp_path / "seed"
    (root / "artifacts").mkdir(parents=True)
    data = os.urandom(2 * 1024 * 1024 + 5)
    (root / "artifacts" / "img.tar").write_bytes(data)
    entries = [
        {
            "path": "artifacts/img.tar",
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "kind": "image",
            "name": "img",
        }
    ]
    server = PF.make_server("127.0.0.1", 0, TOKEN, str(root), entries)
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    t.daemon = True
    t.start()
    yield {"url": "http://127.0.0.1:%d" % server.server_address[1], "entries": entries, "server": server}
    server.shutdown()
    server.server_close()


def test_check_mode_then_fetch_then_converged(run_module, seed, tmp_path):
    args = dict(
        url=seed["url"],
        token=TOKEN,
        dest=str(tmp_path / "peer"),
        artifacts=seed["entries"],
        stamp_file=str(tmp_path / "stamps.json"),
        log_path=str(tmp_path / "fetch.log"),
    )
    r = run_module(M, check_mode=True, **args)
    assert r["changed"] and r["bytes_copied"] == 0 and not (tmp_path / "peer" / "artifacts/img.tar").exists()
    assert seed["server"].airgap_stats.as_dict()["requests"] == 0
    r = run_module(M, **args)
    assert r["changed"] and r["bytes_copied"] == seed["entries"][0]["size"]
    assert TOKEN not in json.dumps(r)
    r = run_module(M, **args)
    assert not r["changed"] and r["bytes_copied"] == 0 and r["files"][0]["state"] == "current"
    assert seed["server"].airgap_stats.as_dict()["requests"] == 1


def test_bad_url_and_mode_fail_clearly(run_module, seed, tmp_path):
    args = dict(token=TOKEN, dest=str(tmp_path / "peer"), artifacts=seed["entries"], stamp_file="")
    r = run_module(M, url="https://10.0.0.1:8477", **args)
    assert r["failed"] and "plain http" in r["msg"]
    r = run_module(M, url=seed["url"], mode="rw", **args)
    assert r["failed"] and "octal" in r["msg"]


def test_serve_module_starts_nothing_in_check_mode(run_module, seed, tmp_path):
    r = run_module(
        S,
        check_mode=True,
        bind="127.0.0.1",
        token=TOKEN,
        root=str(tmp_path),
        artifacts=seed["entries"],
        stop_file=str(tmp_path / "stop"),
        pid_file=str(tmp_path / "pid"),
    )
    assert not r["changed"] and r["stopped_by"] == "check_mode" and not (tmp_path / "pid").exists()


def test_serve_module_serves_until_the_stop_file(run_module, seed, tmp_path):
    stop = tmp_path / "run" / "stop"

    def stopper():
        import time

        for dummy in range(100):
            if (tmp_path / "run" / "pid").exists():
                break
            time.sleep(0.05)
        stop.write_text("")

    t = threading.Thread(target=stopper)
    t.start()
    r = run_module(
        S,
        bind="127.0.0.1",
        port=0,
        token=TOKEN,
        root=str(tmp_path),
        artifacts=seed["entries"],
        stop_file=str(stop),
        pid_file=str(tmp_path / "run" / "pid"),
        log_path=str(tmp_path / "serve.log"),
    )
    t.join()
    assert r["stopped_by"] == "stop_file" and r["requests"] == 0
    assert not stop.exists() and not (tmp_path / "run" / "pid").exists()
