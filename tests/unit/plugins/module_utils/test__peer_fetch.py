"""Peer staging: the seed's range-capable server and the peer's resumable, verified fetch, over a real
local HTTP server (127.0.0.1, ephemeral port)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import threading

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.bundle import _peer_fetch as PF
from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_hash import StampCache
from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_stage import StageError

TOKEN = "t0ken-abcdefghijklmnopqrstuvwxyz"


def _entry(root, rel):
    data = open(os.path.join(root, rel), "rb").read()
    return {"path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


@pytest.fixture
def seed(tmp_path):
    root = tmp_path / "seed"
    (root / "artifacts" / "model").mkdir(parents=True)
    (root / "artifacts" / "image.tar").write_bytes(os.urandom(3 * 1024 * 1024 + 17))
    (root / "artifacts" / "driver.run").write_bytes(b"#!/bin/sh\necho driver\n")
    (root / "artifacts" / "model" / "config.json").write_bytes(b'{"a": 1}\n')
    (root / "artifacts" / "secret.txt").write_bytes(b"not listed\n")
    entries = [
        _entry(str(root), r) for r in ("artifacts/image.tar", "artifacts/driver.run", "artifacts/model/config.json")
    ]
    log = tmp_path / "serve.log"
    server = PF.make_server("127.0.0.1", 0, TOKEN, str(root), entries, log_path=str(log))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    yield {
        "root": root,
        "entries": entries,
        "server": server,
        "log": log,
        "url": "http://127.0.0.1:%d" % server.server_address[1],
    }
    server.shutdown()
    server.server_close()


def fetch(seed, dest, **kw):
    kw.setdefault("stamps", StampCache(str(dest) + ".stamps.json"))
    kw.setdefault("sleep", lambda s: None)
    kw.setdefault("connect_wait", 0)
    res = PF.fetch_files(seed["url"], kw.pop("token", TOKEN), str(dest), seed["entries"], **kw)
    kw["stamps"].save()
    return res


def test_full_fetch_is_byte_identical_then_converged_contacts_nobody(seed, tmp_path):
    dest = tmp_path / "peer"
    res = fetch(seed, dest)
    assert [r["state"] for r in res] == ["copied"] * 3
    assert sum(r["bytes_copied"] for r in res) == sum(e["size"] for e in seed["entries"])
    for e in seed["entries"]:
        assert (dest / e["path"]).read_bytes() == (seed["root"] / e["path"]).read_bytes()
        assert not os.path.exists(str(dest / e["path"]) + ".part")
        assert not os.path.exists(str(dest / e["path"]) + ".part.json")
    served = seed["server"].airgap_stats.as_dict()
    assert served["bytes_sent"] == sum(e["size"] for e in seed["entries"])
    assert served["clients"]["127.0.0.1"]["requests"] == 3
    again = fetch(seed, dest)
    assert [r["state"] for r in again] == ["current"] * 3
    assert not any(r["hashed_dest"] for r in again)  # stamp cache: nothing re-hashed
    assert seed["server"].airgap_stats.as_dict()["requests"] == 3  # nobody contacted
    log = seed["log"].read_text()
    assert TOKEN not in log and "artifacts/image.tar 200" in log
    assert oct(os.stat(str(seed["log"])).st_mode & 0o777) == "0o600"


def test_check_mode_fetches_nothing_and_contacts_nobody(seed, tmp_path):
    dest = tmp_path / "peer"
    res = fetch(seed, dest, check_mode=True)
    assert [r["state"] for r in res] == ["copied"] * 3 and sum(r["bytes_copied"] for r in res) == 0
    assert not dest.exists() or not any(dest.rglob("*.tar*"))
    assert seed["server"].airgap_stats.as_dict()["requests"] == 0


def test_resume_from_an_interrupted_part_fetches_only_the_rest(seed, tmp_path):
    dest = tmp_path / "peer"
    e = seed["entries"][0]
    half = e["size"] // 2
    part = dest / (e["path"] + ".part")
    part.parent.mkdir(parents=True)
    part.write_bytes((seed["root"] / e["path"]).read_bytes()[:half])
    (dest / (e["path"] + ".part.json")).write_text('{"sha256": "%s", "size": %d}' % (e["sha256"], e["size"]))
    res = fetch(seed, dest)
    img = res[0]
    assert img["state"] == "copied" and img["resumed_from"] == half
    assert img["bytes_copied"] == e["size"] - half
    assert (dest / e["path"]).read_bytes() == (seed["root"] / e["path"]).read_bytes()
    assert "artifacts/image.tar 206 %d-%d" % (half, e["size"] - 1) in seed["log"].read_text()


def test_a_connection_cut_mid_copy_keeps_the_part_and_the_next_run_resumes(seed, tmp_path, monkeypatch):
    dest = tmp_path / "peer"
    e = seed["entries"][0]
    cut_at = 1024 * 1024
    real = PF.PeerRequestHandler._serve
    cuts = []

    def cutting(self, body):
        if not cuts and self.path.endswith("image.tar"):
            cuts.append(1)  # the seed dies after cut_at bytes of a full-length answer
            self.send_response(200)
            self.send_header("Content-Length", str(e["size"]))
            self.end_headers()
            self.wfile.write((seed["root"] / e["path"]).read_bytes()[:cut_at])
            self.close_connection = True
            return None
        return real(self, body)

    monkeypatch.setattr(PF.PeerRequestHandler, "_serve", cutting)
    with pytest.raises(StageError) as err:
        fetch(seed, dest, retries=0)
    assert "the next run resumes" in str(err.value) and TOKEN not in str(err.value)
    assert os.path.getsize(str(dest / e["path"]) + ".part") == cut_at
    assert not (dest / e["path"]).exists()  # all or nothing: nothing renamed
    assert not (dest / "artifacts/driver.run").exists()
    res = fetch(seed, dest)
    assert res[0]["resumed_from"] == cut_at and res[0]["bytes_copied"] == e["size"] - cut_at
    assert (dest / e["path"]).read_bytes() == (seed["root"] / e["path"]).read_bytes()


def test_a_cut_is_resumed_within_the_same_run(seed, tmp_path, monkeypatch):
    dest = tmp_path / "peer"
    e = seed["entries"][0]
    real = PF.PeerRequestHandler._serve
    cuts = []

    def cutting(self, body):
        if not cuts and self.path.endswith("image.tar"):
            cuts.append(1)
            self.send_response(200)
            self.send_header("Content-Length", str(e["size"]))
            self.end_headers()
            self.wfile.write((seed["root"] / e["path"]).read_bytes()[:4096])
            self.close_connection = True
            return None
        return real(self, body)

    monkeypatch.setattr(PF.PeerRequestHandler, "_serve", cutting)
    res = fetch(seed, dest, retries=2)
    assert res[0]["state"] == "copied" and res[0]["attempts"] == 2
    assert res[0]["bytes_copied"] == e["size"]  # 4096 before the cut + the rest after
    assert (dest / e["path"]).read_bytes() == (seed["root"] / e["path"]).read_bytes()


def test_a_corrupt_byte_on_the_seed_is_refused_and_nothing_is_put_in_place(seed, tmp_path):
    dest = tmp_path / "peer"
    img = seed["root"] / "artifacts/image.tar"
    data = bytearray(img.read_bytes())
    data[len(data) // 2] ^= 0xFF
    img.write_bytes(bytes(data))
    with pytest.raises(StageError) as err:
        fetch(seed, dest)
    assert "artifacts/image.tar (checksum mismatch)" in str(err.value)
    for e in seed["entries"]:
        assert not (dest / e["path"]).exists()
    assert not os.path.exists(str(dest / "artifacts/image.tar.part"))  # the bad bytes are not kept


def test_a_file_missing_on_the_seed_is_a_404_named_in_the_failure(seed, tmp_path):
    (seed["root"] / "artifacts/driver.run").unlink()
    with pytest.raises(StageError) as err:
        fetch(seed, tmp_path / "peer")
    assert "artifacts/driver.run: the seed answered HTTP 404" in str(err.value)
    assert not (tmp_path / "peer" / "artifacts/image.tar").exists()


def test_a_wrong_token_gets_nothing(seed, tmp_path):
    with pytest.raises(StageError) as err:
        fetch(seed, tmp_path / "peer", token="x" * 32)
    assert "HTTP 404" in str(err.value)
    assert seed["server"].airgap_stats.as_dict()["bytes_sent"] == 0


def _get(url, method="GET", headers=None):
    from urllib.request import Request
    from urllib.error import HTTPError

    try:
        resp = PF.make_opener().open(Request(url, method=method, headers=headers or {}), timeout=5)
        return resp.getcode(), resp.headers, resp.read()
    except HTTPError as e:
        return e.code, e.headers, b""


def test_the_server_serves_only_listed_files_under_the_token_read_only(seed):
    base = seed["url"] + "/" + TOKEN
    assert _get(base + "/artifacts/driver.run")[0] == 200
    assert _get(base + "/artifacts/secret.txt")[0] == 404  # in the directory, not in the manifest
    assert _get(base + "/artifacts/../artifacts/secret.txt")[0] == 404
    assert _get(base + "/%2e%2e/%2e%2e/etc/passwd")[0] == 404
    assert _get(base + "/")[0] == 404  # no listing
    assert _get(seed["url"] + "/artifacts/driver.run")[0] == 404
    assert _get(base + "/artifacts/driver.run", method="PUT")[0] == 405
    code, headers, body = _get(base + "/artifacts/driver.run", headers={"Range": "bytes=2-5"})
    assert code == 206 and body == b"/bin" and headers["Content-Range"] == "bytes 2-5/22"
    assert _get(base + "/artifacts/driver.run", headers={"Range": "bytes=99-"})[0] == 416
    code, headers, body = _get(base + "/artifacts/driver.run", method="HEAD")
    assert code == 200 and body == b"" and headers["Content-Length"] == "22"


def test_a_seed_file_of_the_wrong_size_is_not_served(seed):
    (seed["root"] / "artifacts/driver.run").write_bytes(b"short")
    assert _get(seed["url"] + "/" + TOKEN + "/artifacts/driver.run")[0] == 409


def test_environment_proxies_are_never_used(seed, tmp_path, monkeypatch):
    monkeypatch.setenv("http_proxy", "http://192.0.2.1:3128")
    monkeypatch.setenv("HTTP_PROXY", "http://192.0.2.1:3128")
    res = fetch(seed, tmp_path / "peer", timeout=5)
    assert [r["state"] for r in res] == ["copied"] * 3


def test_a_refused_connection_fails_clearly_and_keeps_nothing(tmp_path, seed):
    port = seed["server"].server_address[1]
    seed["server"].shutdown()
    seed["server"].server_close()
    with pytest.raises(StageError) as err:
        PF.fetch_files(
            "http://127.0.0.1:%d" % port,
            TOKEN,
            str(tmp_path / "peer"),
            seed["entries"],
            retries=0,
            connect_wait=0,
            sleep=lambda s: None,
        )
    assert "refused" in str(err.value).lower()


@pytest.mark.parametrize(
    "header,size,want",
    [
        (None, 10, None),
        ("bytes=0-", 10, (0, 9)),
        ("bytes=4-", 10, (4, 9)),
        ("bytes=2-5", 10, (2, 5)),
        ("bytes=2-99", 10, (2, 9)),
        ("bytes=-3", 10, None),
        ("bytes=0-1,4-5", 10, None),
    ],
)
def test_parse_range(header, size, want):
    assert PF.parse_range(header, size) == want


@pytest.mark.parametrize("header", ["bytes=10-", "bytes=5-2"])
def test_parse_range_unsatisfiable(header):
    with pytest.raises(ValueError):
        PF.parse_range(header, 10)


@pytest.mark.parametrize(
    "url",
    [
        "https://10.0.0.1:8477",
        "http://10.0.0.1:8477/x",
        "http://u:p@10.0.0.1",
        "ftp://10.0.0.1",
        "http://10.0.0.1/?q=1",
        "",
        "10.0.0.1:8477",
    ],
)
def test_only_a_plain_seed_address_is_accepted(url):
    with pytest.raises(PF.BundleError):
        PF.check_base_url(url)


def test_urls_are_base_token_path_only():
    assert (
        PF.file_url("http://10.0.0.1:8477/", TOKEN, "artifacts/a b.tar")
        == "http://10.0.0.1:8477/%s/artifacts/a%%20b.tar" % TOKEN
    )
    with pytest.raises(PF.BundleError):
        PF.check_token("short")
    with pytest.raises(PF.BundleError):
        PF.check_token("../" + "a" * 20)


def test_serve_until_stops_on_the_stop_file(seed, tmp_path):
    server = PF.make_server("127.0.0.1", 0, TOKEN, str(seed["root"]), seed["entries"])
    stop = tmp_path / "stop"
    stop.write_text("")
    why, stats = PF.serve_until(server, str(stop), 30, poll=0.01)
    assert why == "stop_file" and stats["stopped_by"] == "stop_file" and stats["requests"] == 0


def test_a_port_in_use_fails_clearly(seed):
    port = seed["server"].server_address[1]
    with pytest.raises(PF.BundleError) as err:
        PF.make_server("127.0.0.1", port, TOKEN, str(seed["root"]), seed["entries"])
    assert "bundle_peer_port" in str(err.value)


@pytest.mark.parametrize("bind", ["0.0.0.0", "::", "[::]", " 0.0.0.0 ", "0", "seed 1", "10.0.0.1\n"])
def test_the_seed_never_listens_on_every_interface(tmp_path, bind):
    assert PF.peer_bind_problem(bind)
    with pytest.raises(PF.BundleError, match="bundle_peer_address"):
        PF.make_server(bind, 0, TOKEN, str(tmp_path), [])


@pytest.mark.parametrize("bind", ["", None, "10.231.7.11", "fd00::5", "[fd00::5]", "seed-1.site.example", "127.0.0.1"])
def test_one_address_or_name_is_a_bind_address(bind):
    assert PF.peer_bind_problem(bind) is None
