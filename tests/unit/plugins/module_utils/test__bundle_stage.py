"""Unit tests for _bundle_stage: resumable all-or-nothing staging, the controller protocol (probe, append,
commit), split files reassembled in one pass, hostile input (issue 12: #1, #8, #9, #10, #11)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.bundle import _bundle_hash as H
from ansible_collections.airgap.vllm.plugins.module_utils.bundle import _bundle_manifest as M
from ansible_collections.airgap.vllm.plugins.module_utils.bundle import _bundle_push as SP
from ansible_collections.airgap.vllm.plugins.module_utils.bundle import _bundle_stage as S

from .test__bundle_hash import _edit_in_place_keeping_mtime
from .test__bundle_manifest import FILES, PART, make_bundle, sha, split_bundle


def append(dest, rel, chunk, offset, entry=None):
    """One file's next bytes through the controller's append step (a chunk of one segment): the part's size."""
    seg = {"path": rel, "offset": offset, "length": os.path.getsize(str(chunk))}
    return SP.append_segments(str(dest), str(chunk), [seg], [entry] if entry else None)[rel]


@pytest.fixture
def bundle(tmp_path):
    root = tmp_path / "bundle"
    return root, make_bundle(root, FILES)


def test_stage_copies_then_converges(bundle, tmp_path):
    root, entries = bundle
    dest = tmp_path / "stage"
    log = tmp_path / "stage.log"
    stamps = H.StampCache(str(tmp_path / "st.json"))
    res = S.stage_files(str(root), str(dest), entries, stamps=stamps, log_path=str(log), bufsize=65536)
    assert all(r["state"] == "copied" for r in res)
    assert sum(r["bytes_copied"] for r in res) == sum(len(v) for v in FILES.values())
    for rel, data in FILES.items():
        assert (dest / rel).read_bytes() == data
    assert "100.0%" in log.read_text() and "ETA" in log.read_text()
    stamps.save()
    stamps = H.StampCache(str(tmp_path / "st.json"))
    res = S.stage_files(str(root), str(dest), entries, stamps=stamps)
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
        n = self.f.readinto(view[: min(len(view), self.limit - self.pos)])
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
        S.copy_resumable(src, dest, entry, bufsize=65536, reader=reader)
    reader.close()
    assert os.path.getsize(dest + ".part") == 1024 * 1024 + 5
    log = str(tmp_path / "log")
    out = S.copy_resumable(src, dest, entry, bufsize=65536, progress=S.Progress(log, "image.tar", entry["size"]))
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
    with pytest.raises(S.StageError, match=r"artifacts/image.tar \(checksum mismatch\)") as ei:
        S.stage_files(str(root), str(dest), entries)
    states = dict((r["path"], r["state"]) for r in ei.value.results)
    assert states["artifacts/image.tar"] == "checksum_mismatch"
    # nothing renamed into place; the good files wait as verified parts, the bad part is gone
    for rel in FILES:
        assert not (dest / rel).exists()
    assert not (dest / "artifacts/image.tar.part").exists()
    assert (dest / "artifacts/driver.run.part").exists()


def test_stage_check_mode_moves_nothing(bundle, tmp_path):
    root, entries = bundle
    res = S.stage_files(str(root), str(tmp_path / "stage"), entries, check_mode=True)
    assert all(r["state"] == "copied" and r["bytes_copied"] == 0 for r in res)
    assert not (tmp_path / "stage").exists()


def test_controller_protocol_probe_append_commit(bundle, tmp_path):
    """What the action plugin does: probe, append chunks from an offset, commit all-or-nothing."""
    root, entries = bundle
    dest = tmp_path / "stage"
    stamps = H.StampCache(None)
    probe = SP.probe_dest(str(dest), entries, stamps)
    assert all(p["state"] == "partial" and p["offset"] == 0 for p in probe)
    chunk_size = 1000000
    for e in entries:
        data = (root / e["path"]).read_bytes()
        off = 0
        while off < len(data):
            chunk = tmp_path / "chunk"
            chunk.write_bytes(data[off : off + chunk_size])
            off = append(dest, e["path"], chunk, off)
            assert not chunk.exists()
        if not data:
            continue
    with pytest.raises(M.BundleError, match="probe again"):
        chunk = tmp_path / "chunk"
        chunk.write_bytes(b"x")
        append(dest, "artifacts/driver.run", chunk, 0)
    done = SP.commit_parts(str(dest), entries, stamps)
    assert sorted(r["path"] for r in done) == sorted(FILES)
    assert (dest / "artifacts/image.tar").read_bytes() == FILES["artifacts/image.tar"]
    probe = SP.probe_dest(str(dest), entries, stamps)
    assert all(p["state"] == "current" and not p["hashed_dest"] for p in probe)


def test_progress_line_has_percent_rate_eta():
    t = [100.0]
    p = S.Progress(None, "x.tar", 1000, clock=lambda: t[0])
    p.done = 250
    t[0] = 101.0
    line = p.line()
    assert " 25.0% " in line and "250 B/s" in line and "ETA 0:00:03" in line


def test_stage_refuses_without_space(bundle, tmp_path, monkeypatch):
    root, entries = bundle

    class St(object):
        f_bavail = 10
        f_frsize = 4096

    monkeypatch.setattr(S.os, "statvfs", lambda p: St())
    with pytest.raises(M.BundleError, match="nothing was copied"):
        S.stage_files(str(root), str(tmp_path / "stage"), entries)
    assert not (tmp_path / "stage").exists()
    with pytest.raises(M.BundleError, match="free"):
        SP.probe_dest(str(tmp_path / "stage"), entries, None)


def test_commit_refuses_corrupt_part(bundle, tmp_path):
    root, entries = bundle
    dest = tmp_path / "stage"
    for e in entries:
        data = bytearray((root / e["path"]).read_bytes())
        if e["path"] == "artifacts/image.tar":
            data[100] ^= 1
        chunk = tmp_path / "chunk"
        chunk.write_bytes(bytes(data))
        append(dest, e["path"], chunk, 0)
    with pytest.raises(S.StageError, match=r"artifacts/image.tar \(checksum mismatch\)"):
        SP.commit_parts(str(dest), entries, H.StampCache(None))
    assert not (dest / "artifacts/image.tar.part").exists()
    assert not (dest / "artifacts/driver.run").exists() and (dest / "artifacts/driver.run.part").exists()


# ---------------------------------------------------------------- stamp caches cannot be fooled (issue 12: #1)


def test_stage_stamp_cache_rehashes_staged_file_when_ctime_changes(bundle, tmp_path):
    root, entries = bundle
    dest = tmp_path / "stage"
    stamps = H.StampCache(str(tmp_path / "stage-stamps.json"))
    S.stage_files(str(root), str(dest), entries, stamps=stamps)
    stamps.save()
    _edit_in_place_keeping_mtime(dest / "artifacts/image.tar")
    stamps = H.StampCache(str(tmp_path / "stage-stamps.json"))
    res = dict((r["path"], r) for r in S.stage_files(str(root), str(dest), entries, stamps=stamps))
    assert res["artifacts/image.tar"]["state"] == "copied" and res["artifacts/image.tar"]["hashed_dest"]
    assert (dest / "artifacts/image.tar").read_bytes() == FILES["artifacts/image.tar"]


# ---------------------------------------------------------------- all-or-nothing is all or nothing (issue 12: #8)


def test_stage_failed_rename_undoes_the_renames_already_done(bundle, tmp_path, monkeypatch):
    root, entries = bundle
    dest = tmp_path / "stage"
    # A first good run, then a new bundle version of every file.
    S.stage_files(str(root), str(dest), entries)
    old = dict((rel, (dest / rel).read_bytes()) for rel in FILES)
    new_files = dict((rel, data + b"-v2") for rel, data in FILES.items())
    entries = make_bundle(root, new_files)
    real_rename = os.rename
    calls = []

    def rename(src, dst):
        if src.endswith(".part"):
            calls.append(src)
            if len(calls) == 2:
                raise OSError(5, "Input/output error")
        return real_rename(src, dst)

    monkeypatch.setattr(S.os, "rename", rename)
    with pytest.raises(S.StageError, match="put back, nothing changed"):
        S.stage_files(str(root), str(dest), entries)
    monkeypatch.setattr(S.os, "rename", real_rename)
    for rel in FILES:
        assert (dest / rel).read_bytes() == old[rel], rel
        assert not os.path.exists(str(dest / rel) + ".airgap-old")
    # The verified parts wait: the next run only renames them (nothing re-read from the medium).
    res = S.stage_files(str(root), str(dest), entries)
    assert all(r["resumed_from"] == r["size"] for r in res if r["state"] == "copied")
    for rel, data in new_files.items():
        assert (dest / rel).read_bytes() == data


def test_stage_unwritable_stamp_file_fails_before_anything_is_renamed(bundle, tmp_path):
    root, entries = bundle
    dest = tmp_path / "stage"
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the stamp directory should be")
    stamps = H.StampCache(str(blocker / "stage-stamps.json"))
    with pytest.raises(M.BundleError, match=r"stamp file .*not-a-dir/stage-stamps.json cannot be written.*stamp_file"):
        S.stage_files(str(root), str(dest), entries, stamps=stamps)
    for rel in FILES:
        assert not (dest / rel).exists()


def test_commit_parts_unwritable_stamp_file_fails_before_anything_is_renamed(bundle, tmp_path):
    root, entries = bundle
    dest = tmp_path / "stage"
    for e in entries:
        chunk = tmp_path / "chunk"
        chunk.write_bytes((root / e["path"]).read_bytes())
        append(dest, e["path"], chunk, 0, entry=e)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    with pytest.raises(M.BundleError, match="cannot be written"):
        SP.commit_parts(str(dest), entries, H.StampCache(str(blocker / "s.json")))
    for rel in FILES:
        assert not (dest / rel).exists() and (dest / (rel + ".part")).exists()


# ---------------------------------------------------------------- no tracebacks, clear errors (issue 12: #9)


def test_stage_manifest_entry_that_is_a_directory_fails_clearly(bundle, tmp_path):
    root, entries = bundle
    (root / "artifacts/adir").mkdir()
    entries = entries + [{"path": "artifacts/adir", "size": 4096, "sha256": "0" * 64}]
    with pytest.raises(S.StageError, match=r"artifacts/adir \(not a file\)"):
        S.stage_files(str(root), str(tmp_path / "stage"), entries)


def test_stage_directory_at_destination_fails_naming_it(bundle, tmp_path):
    root, entries = bundle
    dest = tmp_path / "stage"
    (dest / "artifacts/image.tar").mkdir(parents=True)
    entries = [e for e in entries if e["path"] == "artifacts/image.tar"]
    entries[0]["size"] = os.stat(str(dest / "artifacts/image.tar")).st_size
    with pytest.raises(M.BundleError, match=r"image.tar is not a regular file.*remove it"):
        S.stage_files(str(root), str(dest), entries)


@pytest.mark.parametrize("mode", ["rw-r--r--", "0999", "12345", None, True, -1, 0o10000, [420]])
def test_non_octal_mode_fails_saying_how_to_write_it(mode):
    with pytest.raises(M.BundleError, match=r"quoted octal string"):
        S.parse_mode(mode)


# ---------------------------------------------------------------- mode like ansible.builtin.file (issue 12: #10)


@pytest.mark.parametrize(
    "mode,expected",
    [
        (420, 0o644),  # YAML `mode: 0644` unquoted: the int 420
        (0o600, 0o600),
        ("0644", 0o644),
        ("644", 0o644),
        ("0o640", 0o640),
        ("0755", 0o755),
    ],
)
def test_mode_is_taken_like_ansible_builtin_file(mode, expected):
    assert S.parse_mode(mode) == expected


def test_unquoted_yaml_0644_stages_files_0644_not_0420(bundle, tmp_path):
    import yaml

    mode = yaml.safe_load("mode: 0644")["mode"]
    assert mode == 420
    root, entries = bundle
    dest = tmp_path / "stage"
    S.stage_files(str(root), str(dest), entries, mode=S.parse_mode(mode))
    for rel in FILES:
        assert os.stat(str(dest / rel)).st_mode & 0o7777 == 0o644


def test_bundle_stage_module_takes_mode_as_raw_like_ansible_builtin_file():
    """type: str turned the YAML int 420 (`mode: 0644` unquoted) into "420", then 0o420."""
    import yaml

    path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "plugins", "modules", "bundle_stage.py")
    with open(path) as f:
        source = f.read()
    doc = yaml.safe_load(source.split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0])
    assert doc["options"]["mode"]["type"] == "raw"
    assert 'mode=dict(type="raw"' in source


# ---------------------------------------------------------------- stale .part from an older bundle (issue 12: #11)


def _older_part(dest, rel, data):
    part = dest / (rel + ".part")
    part.parent.mkdir(parents=True, exist_ok=True)
    part.write_bytes(data)
    (dest / (rel + ".part.json")).write_text(
        json.dumps({"sha256": hashlib.sha256(b"older bundle").hexdigest(), "size": 99999})
    )


def test_stale_part_from_older_bundle_is_restarted_not_blamed_as_checksum_mismatch(bundle, tmp_path):
    root, entries = bundle
    dest = tmp_path / "stage"
    rel = "artifacts/image.tar"
    _older_part(dest, rel, b"x" * 1000)  # shorter than the new file: would be "resumed"
    res = dict((r["path"], r) for r in S.stage_files(str(root), str(dest), entries))
    assert res[rel]["state"] == "copied" and res[rel]["resumed_from"] == 0 and res[rel]["restarted_stale_part"]
    assert (dest / rel).read_bytes() == FILES[rel]
    assert not (dest / (rel + ".part.json")).exists()


def test_part_without_record_is_restarted_not_blamed(bundle, tmp_path):
    root, entries = bundle
    dest = tmp_path / "stage"
    rel = "artifacts/image.tar"
    (dest / "artifacts").mkdir(parents=True)
    (dest / (rel + ".part")).write_bytes(b"y" * 1000)
    res = dict((r["path"], r) for r in S.stage_files(str(root), str(dest), entries))
    assert res[rel]["state"] == "copied" and res[rel]["restarted_stale_part"]


def test_controller_probe_discards_stale_part_from_older_bundle(bundle, tmp_path):
    root, entries = bundle
    dest = tmp_path / "stage"
    rel = "artifacts/image.tar"
    _older_part(dest, rel, b"x" * 1000)
    probe = dict((p["path"], p) for p in SP.probe_dest(str(dest), entries, None))
    assert probe[rel]["offset"] == 0 and probe[rel]["restarted_stale_part"]
    assert not (dest / (rel + ".part")).exists()
    for e in entries:
        chunk = tmp_path / "chunk"
        chunk.write_bytes((root / e["path"]).read_bytes())
        append(dest, e["path"], chunk, 0, entry=e)
    done = SP.commit_parts(str(dest), entries, H.StampCache(None))
    assert sorted(r["path"] for r in done) == sorted(FILES)


def test_interrupted_part_of_the_same_file_still_resumes(bundle, tmp_path):
    root, entries = bundle
    dest = tmp_path / "stage"
    rel = "artifacts/image.tar"
    entry = [e for e in entries if e["path"] == rel][0]
    (dest / "artifacts").mkdir(parents=True)
    (dest / (rel + ".part")).write_bytes(FILES[rel][:5000])
    S.write_part_meta(str(dest / rel), entry)
    res = dict((r["path"], r) for r in S.stage_files(str(root), str(dest), entries))
    assert res[rel]["resumed_from"] == 5000 and not res[rel]["restarted_stale_part"]


# ---------------------------------------------------------------- split files (FAT32)


def test_stage_reassembles_byte_identical_in_one_pass_and_rerun_is_current(tmp_path, monkeypatch):
    root, dest = tmp_path / "medium", tmp_path / "stage"
    entries, data = split_bundle(root)
    reads = []
    real_open = open

    def counting_open(path, *a, **kw):
        f = real_open(path, *a, **kw)
        if str(path).startswith(str(root)) and "b" in (a[0] if a else kw.get("mode", "r")):
            reads.append(str(path))
        return f

    for module in (M, H, S):  # SourceReader reads the medium (_bundle_manifest); nothing else may
        monkeypatch.setattr(module, "open", counting_open, raising=False)
    res = S.stage_files(str(root), str(dest), entries, bufsize=1000)
    assert (dest / "artifacts/image.tar").read_bytes() == data
    assert not (dest / "artifacts/image.tar.part000").exists(), "the host gets the whole file, not the parts"
    assert sorted(reads) == sorted(
        [str(root / p["path"]) for p in entries[0]["parts"]] + [str(root / "artifacts/driver.run")]
    ), "each part opened once: one pass over the medium"
    assert [r["state"] for r in res] == ["copied", "copied"]
    again = S.stage_files(str(root), str(dest), entries, stamps=H.StampCache(str(tmp_path / "s.json")))
    assert [r["state"] for r in again] == ["current", "current"]


def test_interrupted_reassembly_resumes_at_the_last_complete_chunk(tmp_path):
    root, dest = tmp_path / "medium", tmp_path / "stage"
    entries, data = split_bundle(root)
    entry = M.validate_entries(entries)[0]
    target = str(dest / entry["path"])
    os.makedirs(os.path.dirname(target))
    # An earlier run stopped inside the second part, after 1.5 parts.
    cut = PART + PART // 2
    with open(target + ".part", "wb") as f:
        f.write(data[:cut])
    S.write_part_meta(target, entry)
    res = S.stage_files(str(root), str(dest), entries, bufsize=1000)
    img = [r for r in res if r["path"] == entry["path"]][0]
    assert img["resumed_from"] == cut and img["bytes_copied"] == len(data) - cut
    assert (dest / entry["path"]).read_bytes() == data


@pytest.mark.parametrize(
    "damage,state,part",
    [
        (lambda root: (root / "artifacts/image.tar.part001").unlink(), "missing", "artifacts/image.tar.part001"),
        (
            lambda root: (root / "artifacts/image.tar.part002").write_bytes(b"short"),
            "size_mismatch",
            "artifacts/image.tar.part002",
        ),
    ],
)
def test_missing_or_short_part_fails_before_anything_is_copied(tmp_path, damage, state, part):
    root, dest = tmp_path / "medium", tmp_path / "stage"
    entries, _data = split_bundle(root)
    damage(root)
    with pytest.raises(S.StageError) as err:
        S.stage_files(str(root), str(dest), entries)
    assert "artifacts/image.tar (%s in %s)" % (state.replace("_", " "), part) in str(err.value)
    assert not (dest / "artifacts/image.tar.part").exists()
    assert not (dest / "artifacts/driver.run").exists(), "all or nothing"


def test_reordered_parts_fail_naming_the_first_wrong_part_and_keep_the_good_prefix(tmp_path):
    root, dest = tmp_path / "medium", tmp_path / "stage"
    entries, data = split_bundle(root)
    p0, p1 = root / "artifacts/image.tar.part000", root / "artifacts/image.tar.part001"
    a, c = p0.read_bytes(), p1.read_bytes()
    p0.write_bytes(c)
    p1.write_bytes(a)  # same sizes, swapped: only the per-part hashes can tell which
    with pytest.raises(S.StageError, match=r"checksum mismatch in artifacts/image.tar.part000"):
        S.stage_files(str(root), str(dest), entries, bufsize=1000)
    part = dest / "artifacts/image.tar.part"
    assert part.exists() and part.stat().st_size == 0, "cut back to the start of the bad part"
    # Put the parts right: the next run copies and commits.
    p0.write_bytes(a)
    p1.write_bytes(c)
    S.stage_files(str(root), str(dest), entries, bufsize=1000)
    assert (dest / "artifacts/image.tar").read_bytes() == data


def test_a_bad_later_part_keeps_the_parts_before_it_for_the_next_run(tmp_path):
    root, dest = tmp_path / "medium", tmp_path / "stage"
    entries, data = split_bundle(root)
    p2 = root / "artifacts/image.tar.part002"
    good = p2.read_bytes()
    p2.write_bytes(b"\0" * len(good))
    with pytest.raises(S.StageError, match="part002"):
        S.stage_files(str(root), str(dest), entries, bufsize=1000)
    assert (dest / "artifacts/image.tar.part").stat().st_size == 2 * PART
    p2.write_bytes(good)
    res = S.stage_files(str(root), str(dest), entries, bufsize=1000)
    img = [r for r in res if r["path"] == "artifacts/image.tar"][0]
    assert img["resumed_from"] == 2 * PART, "the two good parts are not read again"
    assert (dest / "artifacts/image.tar").read_bytes() == data


def test_wrong_whole_hash_after_correct_parts_fails_and_discards(tmp_path):
    root, dest = tmp_path / "medium", tmp_path / "stage"
    entries, _data = split_bundle(root)
    entries[0]["sha256"] = "f" * 64  # every part matches its own hash, the whole does not
    with pytest.raises(S.StageError, match=r"artifacts/image.tar \(checksum mismatch\)"):
        S.stage_files(str(root), str(dest), entries, bufsize=1000)
    assert not (dest / "artifacts/image.tar.part").exists()
    assert not (dest / "artifacts/image.tar").exists()


def test_zero_byte_file_stages_on_both_paths(tmp_path):
    root, dest = tmp_path / "medium", tmp_path / "stage"
    (root / "artifacts").mkdir(parents=True)
    (root / "artifacts/empty").write_bytes(b"")
    entries = [{"path": "artifacts/empty", "size": 0, "sha256": sha(b"")}]
    S.stage_files(str(root), str(dest), entries)
    assert (dest / "artifacts/empty").read_bytes() == b""
    # Controller protocol without an upload: commit creates the empty part itself.
    dest2 = tmp_path / "stage2"
    done = SP.commit_parts(str(dest2), entries, None)
    assert [r["state"] for r in done] == ["copied"]
    assert (dest2 / "artifacts/empty").read_bytes() == b""


def test_a_staged_copy_with_whole_files_is_a_source_too(tmp_path):
    """Staging again from a directory that holds the whole file (a host's staged copy, a disk written
    without splitting): the manifest's parts are not looked for."""
    root, dest, dest2 = tmp_path / "medium", tmp_path / "stage", tmp_path / "stage2"
    entries, data = split_bundle(root)
    S.stage_files(str(root), str(dest), entries)
    S.stage_files(str(dest), str(dest2), entries)
    assert (dest2 / "artifacts/image.tar").read_bytes() == data


# ---------------------------------------------------------------- uploading chunks over ssh
