"""The one file helper: explicit missing-file contract, atomic and durable writes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.common import _files
from ansible_collections.airgap.vllm.plugins.module_utils.common._files import read_text, read_text_report, write_atomic


def test_read_text_missing_file_contract(tmp_path):
    missing = str(tmp_path / "nope")
    assert read_text(missing) is None
    with pytest.raises((IOError, OSError)):
        read_text(missing, missing_ok=False)


def test_read_text_keeps_line_endings_and_is_strict_only_when_asked(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"a\r\nb\n")
    assert read_text(str(p)) == "a\r\nb\n" == read_text(str(p), missing_ok=False)
    p.write_bytes(b"ok \xff\n")
    assert read_text(str(p)) == "ok \ufffd\n"
    text, problem = read_text_report(str(p))
    assert "not valid UTF-8 (byte 3)" in problem
    with pytest.raises(UnicodeDecodeError):
        read_text(str(p), missing_ok=False)


def test_write_atomic_new_file_mode_and_directory(tmp_path):
    target = tmp_path / "sub" / "state.json"
    with pytest.raises(OSError):
        write_atomic(str(target), "x")
    write_atomic(str(target), "caf\u00e9\n", mode=0o600, makedirs=0o700)
    assert target.read_bytes() == b"caf\xc3\xa9\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert stat.S_IMODE(target.parent.stat().st_mode) == 0o700
    plain = tmp_path / "plain"
    write_atomic(str(plain), b"\x00bytes")
    assert plain.read_bytes() == b"\x00bytes" and stat.S_IMODE(plain.stat().st_mode) == 0o644


def test_write_atomic_keeps_the_replaced_files_mode(tmp_path):
    target = tmp_path / "script.py"
    target.write_text("old")
    target.chmod(0o751)
    write_atomic(str(target), "new")
    assert target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o751
    assert os.listdir(str(tmp_path)) == ["script.py"]


def test_write_atomic_fsyncs_file_and_directory(tmp_path, monkeypatch):
    synced = []
    real = os.fsync

    def spy(fd):
        synced.append(os.path.isdir("/proc/self/fd/%d" % fd) if os.path.exists("/proc/self/fd") else None)
        return real(fd)

    monkeypatch.setattr(_files.os, "fsync", spy)
    write_atomic(str(tmp_path / "f"), "x")
    assert len(synced) == 2
    if synced[0] is not None:
        assert synced == [False, True]  # the file, then its directory


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "f"
    target.write_text("old")

    def boom(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_files.os, "rename", boom)
    with pytest.raises(OSError, match="No space"):
        write_atomic(str(target), "new")
    assert target.read_text() == "old" and os.listdir(str(tmp_path)) == ["f"]


def test_path_state_of_files_directories_links_and_absence(tmp_path):
    import hashlib

    f = tmp_path / "unit.service"
    f.write_bytes(b"[Unit]\n")
    os.chmod(str(f), 0o640)
    state = _files.path_state(str(f))
    assert state == {
        "type": "file",
        "mode": "0640",
        "uid": os.getuid(),
        "gid": os.getgid(),
        "sha1": hashlib.sha1(b"[Unit]\n").hexdigest(),
        "mtime": os.stat(str(f)).st_mtime,
    }
    d = tmp_path / "conf"
    d.mkdir(mode=0o700)
    os.chmod(str(d), 0o700)
    assert _files.path_state(str(d))["type"] == "directory" and _files.path_state(str(d))["sha1"] is None
    link = tmp_path / "link"
    link.symlink_to(f)
    assert _files.path_state(str(link))["type"] == "link"  # never followed
    assert _files.path_state(str(tmp_path / "absent")) is None


def test_paths_differing_names_every_path_a_write_would_change(tmp_path):
    f = tmp_path / "keys.yaml"
    f.write_bytes(b"k\n")
    os.chmod(str(f), 0o600)
    d = tmp_path / "conf"
    d.mkdir()
    os.chmod(str(d), 0o700)
    paths = [str(f), str(d), str(tmp_path / "absent"), str(tmp_path)]
    states = dict((p, _files.path_state(p)) for p in paths)
    me = {"uid": os.getuid(), "gid": os.getgid()}
    sha1 = _files.path_state(str(f))["sha1"]
    same = [
        dict(me, path=str(f), type="file", mode="0600", sha1=sha1),
        dict(me, path=str(d), type="directory", mode="700"),
    ]  # modes compare as numbers
    assert _files.paths_differing(states, same) == []
    assert _files.paths_differing(states, [dict(same[0], sha1=None)]) == []  # any content
    wrong = [
        dict(same[0], sha1="0" * 40),  # content
        dict(same[1], mode="0755"),  # mode
        dict(me, path=str(tmp_path / "absent"), mode="0644"),  # absent
        dict(same[1], path=str(f)),  # a file where a directory belongs
        dict(same[0], uid=me["uid"] + 1),
    ]  # owner
    assert _files.paths_differing(states, wrong) == [str(f), str(d), str(tmp_path / "absent"), str(f), str(f)]
    assert _files.paths_differing(states, [{"path": str(f), "mode": "0600", "sha1": sha1}]) == (
        [] if os.getuid() == 0 and os.getgid() == 0 else [str(f)]
    )  # uid/gid default to root


def test_free_space_is_that_of_the_nearest_existing_parent(tmp_path):
    st = os.statvfs(str(tmp_path))
    got = _files.free_space(str(tmp_path / "not" / "yet"))
    assert abs(got["free"] - st.f_bavail * st.f_frsize) < 64 * 1024 * 1024  # the filesystem is shared: close
    assert os.path.ismount(got["mount"]) and str(tmp_path).startswith(got["mount"])
    assert _files.free_space("/")["mount"] == "/"


def test_remove_tree_removes_a_tree_a_file_and_a_link_never_what_it_points_at(tmp_path):
    target = tmp_path / "kept"
    (target / "sub").mkdir(parents=True)
    (target / "sub" / "f").write_text("x")
    tree = tmp_path / "tree"
    (tree / "a").mkdir(parents=True)
    (tree / "a" / "f").write_text("x")
    link = tmp_path / "link"
    link.symlink_to(target, target_is_directory=True)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    plain = tmp_path / "plain"
    plain.write_text("x")
    for path in (tree, link, dangling, plain):
        _files.remove_tree(str(path))
        assert not os.path.lexists(str(path))
    assert (target / "sub" / "f").read_text() == "x"
    with pytest.raises((IOError, OSError)):
        _files.remove_tree(str(tmp_path / "missing"))
