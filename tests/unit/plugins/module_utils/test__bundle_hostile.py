"""Hostile/broken input for bundle_verify and bundle_stage (issue 12: #1, #8, #9, #10, #11).

Each test name states what is defended.
"""
import hashlib
import json
import os

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils import _bundle as b

FILES = {
    "artifacts/driver.run": b"#!/bin/sh\n" + b"d" * 5000,
    "artifacts/image.tar": os.urandom(256 * 1024 + 7),
    "wheels/x-1.0-py3-none-any.whl": b"w" * 100,
}


def make_bundle(root, files):
    entries = []
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        entries.append({"path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    return entries


@pytest.fixture
def bundle(tmp_path):
    root = tmp_path / "bundle"
    return root, make_bundle(root, FILES)


def _edit_in_place_keeping_mtime(path):
    """Same size, same inode, mtime set back: only ctime shows the change."""
    st = os.stat(str(path))
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    with open(str(path), "r+b") as f:
        f.write(bytes(data))
    os.utime(str(path), ns=(st.st_atime_ns, st.st_mtime_ns))
    after = os.stat(str(path))
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (st.st_size, st.st_mtime_ns, st.st_ino)
    assert after.st_ctime_ns != st.st_ctime_ns


# ---------------------------------------------------------------- 1. stamp caches cannot be fooled

def test_verify_stamp_cache_rehashes_when_ctime_changes(bundle, tmp_path):
    root, entries = bundle
    stamps = b.StampCache(str(tmp_path / "verify-stamps.json"))
    results = b.verify_bundle(str(root), entries, stamps=stamps)[0]
    assert all(r["state"] == "ok" for r in results)
    stamps.save()
    _edit_in_place_keeping_mtime(root / "artifacts/image.tar")
    results = b.verify_bundle(str(root), entries, stamps=b.StampCache(str(tmp_path / "verify-stamps.json")))[0]
    r = dict((x["path"], x) for x in results)["artifacts/image.tar"]
    assert r["hashed"] and r["state"] == "checksum_mismatch"


def test_stage_stamp_cache_rehashes_staged_file_when_ctime_changes(bundle, tmp_path):
    root, entries = bundle
    dest = tmp_path / "stage"
    stamps = b.StampCache(str(tmp_path / "stage-stamps.json"))
    b.stage_files(str(root), str(dest), entries, stamps=stamps)
    stamps.save()
    _edit_in_place_keeping_mtime(dest / "artifacts/image.tar")
    stamps = b.StampCache(str(tmp_path / "stage-stamps.json"))
    res = dict((r["path"], r) for r in b.stage_files(str(root), str(dest), entries, stamps=stamps))
    assert res["artifacts/image.tar"]["state"] == "copied" and res["artifacts/image.tar"]["hashed_dest"]
    assert (dest / "artifacts/image.tar").read_bytes() == FILES["artifacts/image.tar"]


# ---------------------------------------------------------------- 8. all-or-nothing is all or nothing

def test_stage_failed_rename_undoes_the_renames_already_done(bundle, tmp_path, monkeypatch):
    root, entries = bundle
    dest = tmp_path / "stage"
    # A first good run, then a new bundle version of every file.
    b.stage_files(str(root), str(dest), entries)
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

    monkeypatch.setattr(b.os, "rename", rename)
    with pytest.raises(b.StageError, match="put back, nothing changed"):
        b.stage_files(str(root), str(dest), entries)
    monkeypatch.setattr(b.os, "rename", real_rename)
    for rel in FILES:
        assert (dest / rel).read_bytes() == old[rel], rel
        assert not os.path.exists(str(dest / rel) + ".airgap-old")
    # The verified parts wait: the next run only renames them (nothing re-read from the medium).
    res = b.stage_files(str(root), str(dest), entries)
    assert all(r["resumed_from"] == r["size"] for r in res if r["state"] == "copied")
    for rel, data in new_files.items():
        assert (dest / rel).read_bytes() == data


def test_stage_unwritable_stamp_file_fails_before_anything_is_renamed(bundle, tmp_path):
    root, entries = bundle
    dest = tmp_path / "stage"
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the stamp directory should be")
    stamps = b.StampCache(str(blocker / "stage-stamps.json"))
    with pytest.raises(b.BundleError, match=r"stamp file .*not-a-dir/stage-stamps.json cannot be written.*stamp_file"):
        b.stage_files(str(root), str(dest), entries, stamps=stamps)
    for rel in FILES:
        assert not (dest / rel).exists()


def test_commit_parts_unwritable_stamp_file_fails_before_anything_is_renamed(bundle, tmp_path):
    root, entries = bundle
    dest = tmp_path / "stage"
    for e in entries:
        chunk = tmp_path / "chunk"
        chunk.write_bytes((root / e["path"]).read_bytes())
        b.append_chunk(str(dest), e["path"], str(chunk), 0, entry=e)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    with pytest.raises(b.BundleError, match="cannot be written"):
        b.commit_parts(str(dest), entries, b.StampCache(str(blocker / "s.json")))
    for rel in FILES:
        assert not (dest / rel).exists() and (dest / (rel + ".part")).exists()


# ---------------------------------------------------------------- 9. no tracebacks, clear errors

def test_verify_dangling_symlink_in_artifacts_is_reported_not_a_traceback(bundle, tmp_path):
    root, entries = bundle
    os.symlink(str(tmp_path / "gone"), str(root / "artifacts/extra.bin"))
    (root / "artifacts/driver.run").unlink()
    os.symlink(str(tmp_path / "gone-too"), str(root / "artifacts/driver.run"))
    results, summary = b.verify_bundle(str(root), entries)
    states = dict((r["path"], r["state"]) for r in results)
    assert states["artifacts/extra.bin"] == "unlisted"
    assert states["artifacts/driver.run"] == "missing"
    msgs = b.verify_failures(results)
    assert any("artifacts/driver.run: missing" in m and "dangling symlink" in m for m in msgs)


def test_verify_manifest_entry_that_is_a_directory_is_reported_not_a_traceback(bundle):
    root, entries = bundle
    (root / "artifacts/adir").mkdir()
    entries = entries + [{"path": "artifacts/adir", "size": os.stat(str(root / "artifacts/adir")).st_size,
                          "sha256": "0" * 64}]
    results, summary = b.verify_bundle(str(root), entries)
    assert dict((r["path"], r["state"]) for r in results)["artifacts/adir"] == "not_a_file"
    assert summary["not_a_file"] == 1
    assert any("artifacts/adir: not a file" in m and "replace" in m for m in b.verify_failures(results))


def test_stage_manifest_entry_that_is_a_directory_fails_clearly(bundle, tmp_path):
    root, entries = bundle
    (root / "artifacts/adir").mkdir()
    entries = entries + [{"path": "artifacts/adir", "size": 4096, "sha256": "0" * 64}]
    with pytest.raises(b.StageError, match=r"artifacts/adir \(not a file\)"):
        b.stage_files(str(root), str(tmp_path / "stage"), entries)


def test_stage_directory_at_destination_fails_naming_it(bundle, tmp_path):
    root, entries = bundle
    dest = tmp_path / "stage"
    (dest / "artifacts/image.tar").mkdir(parents=True)
    entries = [e for e in entries if e["path"] == "artifacts/image.tar"]
    entries[0]["size"] = os.stat(str(dest / "artifacts/image.tar")).st_size
    with pytest.raises(b.BundleError, match=r"image.tar is not a regular file.*remove it"):
        b.stage_files(str(root), str(dest), entries)


def test_manifest_path_with_nul_byte_is_refused_naming_the_entry():
    with pytest.raises(b.BundleError, match="NUL byte"):
        b.validate_entries([{"path": "artifacts/a\x00b", "size": 1, "sha256": "a" * 64}])


@pytest.mark.parametrize("content", ["[]", "null", '{"files": []}', '{"files": {"/x": []}}', '"x"', "{", "\xff"])
def test_stamp_cache_of_the_wrong_shape_only_costs_a_rehash(bundle, tmp_path, content):
    root, entries = bundle
    path = tmp_path / "stamps.json"
    path.write_bytes(content.encode("latin-1"))
    stamps = b.StampCache(str(path))
    results, summary = b.verify_bundle(str(root), entries, stamps=stamps)
    assert summary["ok"] == len(FILES) and summary["hashed_files"] == len(FILES)
    stamps.save()
    assert json.loads(path.read_text())["files"]


@pytest.mark.parametrize("mode", ["rw-r--r--", "0999", "12345", None, True, -1, 0o10000, [420]])
def test_non_octal_mode_fails_saying_how_to_write_it(mode):
    with pytest.raises(b.BundleError, match=r"quoted octal string"):
        b.parse_mode(mode)


def test_unwritable_stamp_file_on_save_names_the_file_and_the_fix(tmp_path):
    blocker = tmp_path / "f"
    blocker.write_text("x")
    stamps = b.StampCache(str(blocker / "stamps.json"))
    stamps.put(str(blocker), "0" * 64)
    with pytest.raises(b.BundleError, match=r"f/stamps.json cannot be written.*stamp_file"):
        stamps.save()


# ---------------------------------------------------------------- 10. mode like ansible.builtin.file

@pytest.mark.parametrize("mode,expected", [
    (420, 0o644),       # YAML `mode: 0644` unquoted: the int 420
    (0o600, 0o600),
    ("0644", 0o644),
    ("644", 0o644),
    ("0o640", 0o640),
    ("0755", 0o755),
])
def test_mode_is_taken_like_ansible_builtin_file(mode, expected):
    assert b.parse_mode(mode) == expected


def test_unquoted_yaml_0644_stages_files_0644_not_0420(bundle, tmp_path):
    import yaml
    mode = yaml.safe_load("mode: 0644")["mode"]
    assert mode == 420
    root, entries = bundle
    dest = tmp_path / "stage"
    b.stage_files(str(root), str(dest), entries, mode=b.parse_mode(mode))
    for rel in FILES:
        assert os.stat(str(dest / rel)).st_mode & 0o7777 == 0o644


# ---------------------------------------------------------------- 11. stale .part from an older bundle

def _older_part(dest, rel, data):
    part = dest / (rel + ".part")
    part.parent.mkdir(parents=True, exist_ok=True)
    part.write_bytes(data)
    (dest / (rel + ".part.json")).write_text(json.dumps(
        {"sha256": hashlib.sha256(b"older bundle").hexdigest(), "size": 99999}))


def test_stale_part_from_older_bundle_is_restarted_not_blamed_as_checksum_mismatch(bundle, tmp_path):
    root, entries = bundle
    dest = tmp_path / "stage"
    rel = "artifacts/image.tar"
    _older_part(dest, rel, b"x" * 1000)  # shorter than the new file: would be "resumed"
    res = dict((r["path"], r) for r in b.stage_files(str(root), str(dest), entries))
    assert res[rel]["state"] == "copied" and res[rel]["resumed_from"] == 0 and res[rel]["restarted_stale_part"]
    assert (dest / rel).read_bytes() == FILES[rel]
    assert not (dest / (rel + ".part.json")).exists()


def test_part_without_record_is_restarted_not_blamed(bundle, tmp_path):
    root, entries = bundle
    dest = tmp_path / "stage"
    rel = "artifacts/image.tar"
    (dest / "artifacts").mkdir(parents=True)
    (dest / (rel + ".part")).write_bytes(b"y" * 1000)
    res = dict((r["path"], r) for r in b.stage_files(str(root), str(dest), entries))
    assert res[rel]["state"] == "copied" and res[rel]["restarted_stale_part"]


def test_controller_probe_discards_stale_part_from_older_bundle(bundle, tmp_path):
    root, entries = bundle
    dest = tmp_path / "stage"
    rel = "artifacts/image.tar"
    _older_part(dest, rel, b"x" * 1000)
    probe = dict((p["path"], p) for p in b.probe_dest(str(dest), entries, None))
    assert probe[rel]["offset"] == 0 and probe[rel]["restarted_stale_part"]
    assert not (dest / (rel + ".part")).exists()
    for e in entries:
        chunk = tmp_path / "chunk"
        chunk.write_bytes((root / e["path"]).read_bytes())
        b.append_chunk(str(dest), e["path"], str(chunk), 0, entry=e)
    done = b.commit_parts(str(dest), entries, b.StampCache(None))
    assert sorted(r["path"] for r in done) == sorted(FILES)


def test_interrupted_part_of_the_same_file_still_resumes(bundle, tmp_path):
    root, entries = bundle
    dest = tmp_path / "stage"
    rel = "artifacts/image.tar"
    entry = [e for e in entries if e["path"] == rel][0]
    (dest / "artifacts").mkdir(parents=True)
    (dest / (rel + ".part")).write_bytes(FILES[rel][:5000])
    b.write_part_meta(str(dest / rel), entry)
    res = dict((r["path"], r) for r in b.stage_files(str(root), str(dest), entries))
    assert res[rel]["resumed_from"] == 5000 and not res[rel]["restarted_stale_part"]


def test_bundle_stage_module_takes_mode_as_raw_like_ansible_builtin_file():
    """type: str turned the YAML int 420 (`mode: 0644` unquoted) into "420", then 0o420."""
    import yaml
    path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "plugins", "modules", "bundle_stage.py")
    with open(path) as f:
        source = f.read()
    doc = yaml.safe_load(source.split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0])
    assert doc["options"]["mode"]["type"] == "raw"
    assert 'mode=dict(type="raw"' in source
