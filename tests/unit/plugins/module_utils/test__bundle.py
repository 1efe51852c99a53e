"""Unit tests for _bundle: manifest checks, verification states, stamp cache, resumable staging."""
import hashlib
import os
import subprocess

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils import _bundle as b


def make_bundle(root, files):
    entries = []
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        entries.append({"kind": "file", "name": rel, "path": rel, "size": len(data),
                        "sha256": hashlib.sha256(data).hexdigest()})
    return entries


FILES = {
    "artifacts/driver.run": b"#!/bin/sh\n" + b"d" * 5000,
    "artifacts/image.tar": os.urandom(3 * 1024 * 1024 + 7),
    "wheels/ansible_core-2.17.0-py3-none-any.whl": b"w" * 100,
}


@pytest.fixture
def bundle(tmp_path):
    root = tmp_path / "bundle"
    return root, make_bundle(root, FILES)


@pytest.mark.parametrize("entry,match", [
    ({"path": "/etc/passwd", "size": 1, "sha256": "a" * 64}, "inside the bundle"),
    ({"path": "../x", "size": 1, "sha256": "a" * 64}, "inside the bundle"),
    ({"path": "a", "size": 1, "sha256": "xyz"}, "64 hex"),
    ({"path": "a", "size": "big", "sha256": "a" * 64}, "not an integer"),
    ({"size": 1, "sha256": "a" * 64}, "no path"),
])
def test_validate_rejects(entry, match):
    with pytest.raises(b.BundleError, match=match):
        b.validate_entries([entry])


def test_validate_rejects_duplicates():
    e = {"path": "a/b", "size": 1, "sha256": "A" * 64}
    with pytest.raises(b.BundleError, match="twice"):
        b.validate_entries([e, dict(e, path="a/./b")])
    assert b.validate_entries([e])[0]["sha256"] == "a" * 64


def test_hash_file_matches_hashlib(tmp_path):
    p = tmp_path / "f"
    data = os.urandom(1000003)
    p.write_bytes(data)
    h, n = b.hash_file(str(p), bufsize=4096)
    assert n == len(data) and h.hexdigest() == hashlib.sha256(data).hexdigest()
    h, n = b.hash_file(str(p), offset=10, length=100)
    assert h.hexdigest() == hashlib.sha256(data[10:110]).hexdigest()


def test_verify_all_ok_then_cached(bundle, tmp_path):
    root, entries = bundle
    stamps = b.StampCache(str(tmp_path / "stamps.json"))
    results, summary = b.verify_bundle(str(root), entries, stamps=stamps, workers=3)
    assert summary["ok"] == 3 and summary["hashed_files"] == 3
    assert stamps.save()
    # fresh cache object from disk: nothing hashed
    stamps2 = b.StampCache(str(tmp_path / "stamps.json"))
    results, summary = b.verify_bundle(str(root), entries, stamps=stamps2)
    assert summary["ok"] == 3 and summary["hashed_files"] == 0 and summary["hashed_bytes"] == 0
    assert b.verify_failures(results) == []


def test_verify_reports_each_state(bundle, tmp_path):
    root, entries = bundle
    stamps = b.StampCache(str(tmp_path / "stamps.json"))
    b.verify_bundle(str(root), entries, stamps=stamps)
    # corrupt one byte in place keeping size (mtime changes -> stamp miss -> re-hash)
    img = root / "artifacts/image.tar"
    data = bytearray(img.read_bytes())
    data[12345] ^= 0xFF
    img.write_bytes(bytes(data))
    (root / "artifacts/driver.run").write_bytes(b"short")
    os.unlink(str(root / "wheels/ansible_core-2.17.0-py3-none-any.whl"))
    (root / "artifacts/stray.rpm").write_bytes(b"x")
    results, summary = b.verify_bundle(str(root), entries, stamps=stamps)
    states = dict((r["path"], r["state"]) for r in results)
    assert states == {
        "artifacts/driver.run": "size_mismatch",
        "artifacts/image.tar": "checksum_mismatch",
        "wheels/ansible_core-2.17.0-py3-none-any.whl": "missing",
        "artifacts/stray.rpm": "unlisted",
    }
    fails = b.verify_failures(results)
    assert "artifacts/image.tar: checksum mismatch" in fails and len(fails) == 4
    assert len(b.verify_failures(results, allow_unlisted=True)) == 3


def test_stamp_keyed_by_inode(bundle, tmp_path):
    """A file replaced by another with the same size and mtime (new inode) is hashed again."""
    root, entries = bundle
    stamps = b.StampCache(str(tmp_path / "s.json"))
    b.verify_bundle(str(root), entries, stamps=stamps)
    p = root / "artifacts/driver.run"
    st = os.stat(str(p))
    tmp = root / "artifacts/driver.run.new"
    tmp.write_bytes(b"#!/bin/sh\n" + b"e" * 5000)
    os.utime(str(tmp), ns=(st.st_atime_ns, st.st_mtime_ns))
    os.rename(str(tmp), str(p))
    results, _summary = b.verify_bundle(str(root), entries, stamps=stamps)
    r = [x for x in results if x["path"] == "artifacts/driver.run"][0]
    assert r["hashed"] and r["state"] == "checksum_mismatch"


def test_sha256sums_accepted_by_sha256sum(bundle):
    root, entries = bundle
    (root / "SHA256SUMS").write_text(b.sha256sums_text(entries))
    p = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=str(root), stdout=subprocess.PIPE, check=False)
    assert p.returncode == 0, p.stdout


def test_load_manifest_yaml(tmp_path, bundle):
    root, entries = bundle
    import yaml
    (root / "manifest.yml").write_text(yaml.safe_dump({"format": 1, "artifacts": entries}))
    assert [e["path"] for e in b.load_manifest(str(root / "manifest.yml"))] == [e["path"] for e in entries]
    (root / "bad.yml").write_text("format: 1\n")
    with pytest.raises(b.BundleError, match="no 'artifacts'"):
        b.load_manifest(str(root / "bad.yml"))


def test_stage_copies_then_converges(bundle, tmp_path):
    root, entries = bundle
    dest = tmp_path / "stage"
    log = tmp_path / "stage.log"
    stamps = b.StampCache(str(tmp_path / "st.json"))
    res = b.stage_files(str(root), str(dest), entries, stamps=stamps, log_path=str(log), bufsize=65536)
    assert all(r["state"] == "copied" for r in res)
    assert sum(r["bytes_copied"] for r in res) == sum(len(v) for v in FILES.values())
    for rel, data in FILES.items():
        assert (dest / rel).read_bytes() == data
    assert "100.0%" in log.read_text() and "ETA" in log.read_text()
    stamps.save()
    stamps = b.StampCache(str(tmp_path / "st.json"))
    res = b.stage_files(str(root), str(dest), entries, stamps=stamps)
    assert all(r["state"] == "current" and r["bytes_copied"] == 0 and not r["hashed_dest"] for r in res)


class Boom(Exception):
    pass


class FailingReader(object):
    """Source that dies after `limit` bytes, like a USB disk pulled out mid-copy."""

    def __init__(self, path, limit):
        self.f = open(path, "rb", buffering=0)
        self.limit = limit
        self.pos = 0

    def seek(self, off):
        self.f.seek(off)
        self.pos = off

    def readinto(self, view):
        if self.pos >= self.limit:
            raise Boom()
        n = self.f.readinto(view[:min(len(view), self.limit - self.pos)])
        self.pos += n
        return n

    def close(self):
        self.f.close()


def test_interrupted_copy_resumes(bundle, tmp_path):
    root, entries = bundle
    entry = [e for e in entries if e["path"] == "artifacts/image.tar"][0]
    src = str(root / entry["path"])
    dest = str(tmp_path / "image.tar")
    reader = FailingReader(src, 1024 * 1024 + 5)
    with pytest.raises(Boom):
        b.copy_resumable(src, dest, entry, bufsize=65536, reader=reader)
    reader.close()
    assert os.path.getsize(dest + ".part") == 1024 * 1024 + 5
    log = str(tmp_path / "log")
    out = b.copy_resumable(src, dest, entry, bufsize=65536, progress=b.Progress(log, "image.tar", entry["size"]))
    assert out["resumed_from"] == 1024 * 1024 + 5
    assert out["bytes_copied"] == entry["size"] - out["resumed_from"]
    assert out["sha256"] == entry["sha256"]
    assert "resuming at 1.0 MiB" in open(log).read()


def test_stage_corrupt_file_puts_nothing_in_place(bundle, tmp_path):
    root, entries = bundle
    img = root / "artifacts/image.tar"
    data = bytearray(img.read_bytes())
    data[-1] ^= 1
    img.write_bytes(bytes(data))
    dest = tmp_path / "stage"
    with pytest.raises(b.StageError, match=r"artifacts/image.tar \(checksum mismatch\)") as ei:
        b.stage_files(str(root), str(dest), entries)
    states = dict((r["path"], r["state"]) for r in ei.value.results)
    assert states["artifacts/image.tar"] == "checksum_mismatch"
    # nothing renamed into place; the good files wait as verified parts, the bad part is gone
    for rel in FILES:
        assert not (dest / rel).exists()
    assert not (dest / "artifacts/image.tar.part").exists()
    assert (dest / "artifacts/driver.run.part").exists()


def test_stage_check_mode_moves_nothing(bundle, tmp_path):
    root, entries = bundle
    res = b.stage_files(str(root), str(tmp_path / "stage"), entries, check_mode=True)
    assert all(r["state"] == "copied" and r["bytes_copied"] == 0 for r in res)
    assert not (tmp_path / "stage").exists()


def test_controller_protocol_probe_append_commit(bundle, tmp_path):
    """What the action plugin does: probe, append chunks from an offset, commit all-or-nothing."""
    root, entries = bundle
    dest = tmp_path / "stage"
    stamps = b.StampCache(None)
    probe = b.probe_dest(str(dest), entries, stamps)
    assert all(p["state"] == "partial" and p["offset"] == 0 for p in probe)
    chunk_size = 1000000
    for e in entries:
        data = (root / e["path"]).read_bytes()
        off = 0
        while off < len(data):
            chunk = tmp_path / "chunk"
            chunk.write_bytes(data[off:off + chunk_size])
            off = b.append_chunk(str(dest), e["path"], str(chunk), off)
            assert not chunk.exists()
        if not data:
            continue
    with pytest.raises(b.BundleError, match="probe again"):
        chunk = tmp_path / "chunk"
        chunk.write_bytes(b"x")
        b.append_chunk(str(dest), "artifacts/driver.run", str(chunk), 0)
    done = b.commit_parts(str(dest), entries, stamps)
    assert sorted(r["path"] for r in done) == sorted(FILES)
    assert (dest / "artifacts/image.tar").read_bytes() == FILES["artifacts/image.tar"]
    probe = b.probe_dest(str(dest), entries, stamps)
    assert all(p["state"] == "current" and not p["hashed_dest"] for p in probe)


def test_append_refuses_escape(tmp_path):
    with pytest.raises(b.BundleError, match="inside"):
        b.append_chunk(str(tmp_path), "../evil", str(tmp_path / "c"), 0)


def test_progress_line_has_percent_rate_eta():
    t = [100.0]
    p = b.Progress(None, "x.tar", 1000, clock=lambda: t[0])
    p.done = 250
    t[0] = 101.0
    line = p.line()
    assert " 25.0% " in line and "250 B/s" in line and "ETA 0:00:03" in line


def test_stage_refuses_without_space(bundle, tmp_path, monkeypatch):
    root, entries = bundle

    class St(object):
        f_bavail = 10
        f_frsize = 4096

    monkeypatch.setattr(b.os, "statvfs", lambda p: St())
    with pytest.raises(b.BundleError, match="nothing was copied"):
        b.stage_files(str(root), str(tmp_path / "stage"), entries)
    assert not (tmp_path / "stage").exists()
    with pytest.raises(b.BundleError, match="free"):
        b.probe_dest(str(tmp_path / "stage"), entries, None)


def test_commit_refuses_corrupt_part(bundle, tmp_path):
    root, entries = bundle
    dest = tmp_path / "stage"
    for e in entries:
        data = bytearray((root / e["path"]).read_bytes())
        if e["path"] == "artifacts/image.tar":
            data[100] ^= 1
        chunk = tmp_path / "chunk"
        chunk.write_bytes(bytes(data))
        b.append_chunk(str(dest), e["path"], str(chunk), 0)
    with pytest.raises(b.StageError, match=r"artifacts/image.tar \(checksum mismatch\)"):
        b.commit_parts(str(dest), entries, b.StampCache(None))
    assert not (dest / "artifacts/image.tar.part").exists()
    assert not (dest / "artifacts/driver.run").exists() and (dest / "artifacts/driver.run.part").exists()


# ---------------------------------------------------------------- uploading chunks over ssh

@pytest.mark.parametrize("ssh_args,expected", [
    # ansible-core's default: compression and a shared (compressed) master; the upload opens its own.
    ("-C -o ControlMaster=auto -o ControlPersist=60s", "-o ControlPath=none"),
    ("-o Compression=yes -o ControlPath=/tmp/cp-%C", "-o ControlPath=none"),
    ("-oCompression=yes", "-o ControlPath=none"),
    ('-o "Compression yes"', "-o ControlPath=none"),
    ("-4Cq -o ServerAliveInterval=30", "-o ControlPath=none -4q -o ServerAliveInterval=30"),
    ('-C -o "ProxyCommand=ssh -W %h:%p jump"', "-o ControlPath=none -o 'ProxyCommand=ssh -W %h:%p jump'"),
    # No compression asked for: upload as configured, shared master and all.
    ("-o ControlMaster=auto -o ControlPersist=60s", None),
    ("-o Compression=no", None),
    ("-c aes128-gcm@openssh.com -q", None),
    ("", None),
    (None, None),
    ('-C -o "ProxyCommand=ssh jump', None),  # unbalanced: the connection reports it, as without this
])
def test_bulk_ssh_args_drop_only_the_default_compression(ssh_args, expected):
    assert b.bulk_ssh_args(ssh_args) == expected


@pytest.mark.parametrize("other", [["-C"], [None, "-o Compression=yes"], ["", None, None, "-Cv"]])
def test_bulk_ssh_args_keep_compression_asked_for_elsewhere(other):
    """Compression in ssh_common_args, ssh_extra_args, sftp/scp_extra_args is the operator's own choice."""
    assert b.bulk_ssh_args("-C -o ControlMaster=auto -o ControlPersist=60s", other) is None


def test_bulk_ssh_args_ignore_compression_turned_off_elsewhere():
    assert b.bulk_ssh_args("-C", ["-o Compression=no"]) == "-o ControlPath=none"


def test_bulk_ssh_args_are_read_back_by_ssh_as_written():
    """The connection splits the string again (shlex): quoting survives the round trip."""
    import shlex
    out = b.bulk_ssh_args('-C -o "ProxyCommand=ssh -q -W %h:%p bastion" -o ControlPersist=60s')
    assert shlex.split(out) == ["-o", "ControlPath=none", "-o", "ProxyCommand=ssh -q -W %h:%p bastion"]
