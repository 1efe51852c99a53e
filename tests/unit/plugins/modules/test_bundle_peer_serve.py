"""bundle_peer_serve as the bundle role runs it on a site's seed: a read-only server of the listed files
under the token, with ranges, until the stop file appears; what it sent to whom is returned."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from ansible_collections.airgap.vllm.plugins.modules import bundle_peer_serve as M

TOKEN = "t0ken-0123456789abcdef"
DATA = bytes(bytearray(i % 251 for i in range(10000)))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture
def seed(tmp_path):
    root = tmp_path / "staged"
    (root / "artifacts").mkdir(parents=True)
    (root / "artifacts" / "image.tar").write_bytes(DATA)
    (root / "artifacts" / "secret.txt").write_bytes(b"not in the manifest")
    port = free_port()
    args = dict(
        bind="127.0.0.1",
        port=port,
        token=TOKEN,
        root=str(root),
        artifacts=[{"path": "artifacts/image.tar", "size": len(DATA), "sha256": hashlib.sha256(DATA).hexdigest()}],
        stop_file=str(tmp_path / "run" / "stop"),
        pid_file=str(tmp_path / "run" / "serve.pid"),
        max_seconds=60,
        log_path=str(tmp_path / "serve.log"),
    )
    return dict(args=args, base="http://127.0.0.1:%d" % port, tmp=tmp_path)


def get(url, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, b""


def test_check_mode_starts_nothing(run_module, seed):
    r = run_module(M, check_mode=True, **seed["args"])
    assert r["changed"] is False and r["stopped_by"] == "check_mode" and r["requests"] == 0
    assert not os.path.exists(seed["args"]["pid_file"])


def test_serves_the_listed_files_with_ranges_until_the_stop_file(run_module, seed):
    seen = {}

    def peer():
        pid_file = seed["args"]["pid_file"]
        for dummy in range(100):
            if os.path.exists(pid_file):
                break
            time.sleep(0.05)
        base = "%s/%s/" % (seed["base"], TOKEN)
        seen["whole"] = get(base + "artifacts/image.tar")
        seen["range"] = get(base + "artifacts/image.tar", {"Range": "bytes=4000-"})
        seen["unlisted"] = get(base + "artifacts/secret.txt")
        seen["no_token"] = get(seed["base"] + "/artifacts/image.tar")
        seen["wrong_token"] = get("%s/%s/artifacts/image.tar" % (seed["base"], "x" * 22))
        open(seed["args"]["stop_file"], "w").close()

    thread = threading.Thread(target=peer)
    thread.start()
    r = run_module(M, **seed["args"])
    thread.join(30)
    assert "failed" not in r, r.get("msg")
    assert seen["whole"] == (200, DATA)
    assert seen["range"] == (206, DATA[4000:])
    for name in ("unlisted", "no_token", "wrong_token"):
        assert seen[name][0] in (403, 404), (name, seen[name])
    assert r["stopped_by"] == "stop_file"
    assert r["bytes_sent"] == len(DATA) + len(DATA) - 4000
    assert r["clients"]["127.0.0.1"]["bytes_sent"] == r["bytes_sent"]
    assert not os.path.exists(seed["args"]["pid_file"]) and not os.path.exists(seed["args"]["stop_file"])
    log = (seed["tmp"] / "serve.log").read_text()
    assert "image.tar" in log and TOKEN not in log, "the log never holds the token"
    assert oct(os.stat(str(seed["tmp"] / "serve.log")).st_mode & 0o777) == "0o600"
    assert TOKEN not in repr(r)


def test_max_seconds_stops_a_server_nobody_stops(run_module, seed):
    r = run_module(M, **dict(seed["args"], max_seconds=1))
    assert r["stopped_by"] == "max_seconds" and r["requests"] == 0


@pytest.mark.parametrize(
    "extra,message",
    [
        (dict(token="short"), "token must be 16-128 characters"),
        (dict(root="/nonexistent/staged"), "stage the bundle on the seed first"),
        (dict(bind="192.0.2.1"), "cannot listen on 192.0.2.1"),
    ],
)
def test_bad_input_fails_before_serving(run_module, seed, extra, message):
    r = run_module(M, **dict(seed["args"], **extra))
    assert r["failed"] is True and message in r["msg"], r["msg"]
    assert not os.path.exists(seed["args"]["pid_file"])
