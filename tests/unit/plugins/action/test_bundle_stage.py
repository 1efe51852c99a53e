# -*- coding: utf-8 -*-
"""The controller side of airgap.vllm.bundle_stage, end to end in one process.

The action plugin runs against a stand-in connection whose "target" is a temporary directory: each
_execute_module call runs the real bundle_stage module's main() (probe, append, commit), each
_transfer_file copies the chunk, so the whole protocol is exercised: chunking, resume after an
interruption, check mode, all-or-nothing commit, and the failures raised before anything moves.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import shutil

import pytest
import yaml
from ansible.errors import AnsibleActionFail

from ansible_collections.airgap.vllm.plugins.action import bundle_stage as A
from ansible_collections.airgap.vllm.plugins.modules import bundle_stage as M

FILES = {
    "artifacts/driver.run": b"#!/bin/sh\n" + b"d" * 9000,
    "artifacts/image.tar": bytes(bytearray(i % 251 for i in range(20000))),
    "wheels/x-1.0-py3-none-any.whl": b"w" * 100,
}
CHUNK = 4096


class Interrupted(Exception):
    """The connection dropped in the middle of a transfer."""


class Shell(object):
    def __init__(self):
        self.tmpdir = None

    @staticmethod
    def join_path(*parts):
        return os.path.join(*parts)


class Connection(object):
    def __init__(self):
        self._shell = Shell()


class SshConnection(Connection):
    """The ssh plugin's options as ansible-core's defaults set them (ssh_args compress, share a master)."""

    transport = "ssh"

    def __init__(self, **options):
        super(SshConnection, self).__init__()
        self.options = dict(
            ssh_args="-C -o ControlMaster=auto -o ControlPersist=60s",
            ssh_common_args=None,
            ssh_extra_args=None,
            sftp_extra_args=None,
            scp_extra_args=None,
        )
        self.options.update(options)

    def get_option(self, name):
        return self.options[name]

    def set_option(self, name, value):
        self.options[name] = value


class Task(object):
    def __init__(self, args, check_mode=False):
        self.args = args
        self.action = "airgap.vllm.bundle_stage"
        self.async_val = 0
        self.check_mode = check_mode


class PlayContext(object):
    def __init__(self, check_mode):
        self.check_mode = check_mode


def make_bundle(root, files=None):
    entries = []
    for rel, data in sorted((files or FILES).items()):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        entries.append({"path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "kind": "artifact"})
    (root / "manifest.yml").write_text(yaml.safe_dump({"artifacts": entries}))
    return entries


@pytest.fixture
def world(tmp_path):
    src = tmp_path / "bundle"
    entries = make_bundle(src)
    dest = tmp_path / "target" / "staged"
    return dict(src=src, dest=dest, entries=entries, tmp=tmp_path)


@pytest.fixture
def stage(run_module, world):
    """stage(check_mode=False, fail_after=None, **args) -> (result, calls): one task run of the action plugin."""

    def run(check_mode=False, fail_after=None, connection=None, **args):
        args = dict(
            dict(
                src=str(world["src"]),
                dest=str(world["dest"]),
                chunk_size=CHUNK,
                log_path="",
                stamp_file=str(world["tmp"] / "target" / "stamps.json"),
            ),
            **args,
        )
        action = A.ActionModule(
            Task(args, check_mode), connection or Connection(), PlayContext(check_mode), None, None, None
        )
        calls = {"modules": [], "transfers": 0, "ssh_args": {"put": [], "module": []}}

        def ssh_args(kind):
            if hasattr(action._connection, "options"):
                calls["ssh_args"][kind].append(action._connection.get_option("ssh_args"))

        remote_tmp = world["tmp"] / "remote-tmp"

        def make_tmp_path(remote_user=None):
            calls["tmp_made"] = calls.get("tmp_made", 0) + 1
            remote_tmp.mkdir(exist_ok=True)
            action._connection._shell.tmpdir = str(remote_tmp)
            return str(remote_tmp)

        def remove_tmp_path(path, force=False):
            if path:
                shutil.rmtree(path, ignore_errors=True)
            action._connection._shell.tmpdir = None

        def transfer_file(local, remote):
            if fail_after is not None and calls["transfers"] >= fail_after:
                raise Interrupted("connection lost")
            calls["transfers"] += 1
            ssh_args("put")
            shutil.copyfile(local, remote)
            return remote

        def execute_module(module_name=None, module_args=None, task_vars=None, **kw):
            assert module_name == "airgap.vllm.bundle_stage"
            calls["modules"].append(module_args.get("_op", "stage"))
            ssh_args("module")
            return run_module(M, check_mode=check_mode, **module_args)

        action._make_tmp_path = make_tmp_path
        action._remove_tmp_path = remove_tmp_path
        action._transfer_file = transfer_file
        action._fixup_perms2 = lambda paths, **kw: None
        action._execute_module = execute_module
        return action.run(task_vars={}), calls

    return run


def staged(world):
    out = {}
    for rel in FILES:
        path = world["dest"] / rel
        if path.exists():
            out[rel] = path.read_bytes()
    return out


def test_stages_every_file_in_chunks_then_a_rerun_moves_nothing(stage, world):
    result, calls = stage()
    assert result["changed"] is True
    assert staged(world) == FILES
    assert result["bytes_copied"] == sum(len(d) for d in FILES.values())
    assert sorted(f["path"] for f in result["files"]) == sorted(FILES)
    assert all(f["state"] == "copied" and f["resumed_from"] == 0 for f in result["files"])
    # One stream cut into chunks: a chunk carries the end of one file and the start of the next.
    expected_chunks = -(-sum(len(d) for d in FILES.values()) // CHUNK)
    assert calls["transfers"] == expected_chunks
    assert calls["modules"] == ["probe"] + ["append"] * expected_chunks + ["commit"]
    for rel in FILES:
        assert oct(os.stat(str(world["dest"] / rel)).st_mode & 0o7777) == "0o644"
        assert not os.path.exists(str(world["dest"] / rel) + ".part")
    assert not (world["tmp"] / "remote-tmp").exists(), "the remote tmp dir is removed after the run"

    again, calls = stage()
    assert again["changed"] is False and again["bytes_copied"] == 0
    assert all(f["state"] == "current" for f in again["files"])
    assert calls["transfers"] == 0 and "append" not in calls["modules"]
    # A converged target costs one module run: the probe; no upload directory, no commit.
    assert calls["modules"] == ["probe"] and "tmp_made" not in calls


def test_check_mode_reports_what_would_be_copied_and_writes_nothing(stage, world):
    result, calls = stage(check_mode=True)
    assert result["changed"] is True and result["bytes_copied"] == 0
    assert all(f["state"] == "copied" for f in result["files"])
    assert calls["transfers"] == 0 and calls["modules"] == ["probe"]
    assert not world["dest"].exists() or staged(world) == {}


def test_an_interrupted_copy_resumes_where_it_stopped(stage, world):
    with pytest.raises(Interrupted):
        stage(fail_after=3)
    assert staged(world) == {}, "nothing is renamed into place before every file is verified"
    result, calls = stage()
    assert staged(world) == FILES
    resumed = [f for f in result["files"] if f["resumed_from"]]
    assert resumed, "the second run starts from the .part the first one left"
    total = sum(len(d) for d in FILES.values())
    assert result["bytes_copied"] == total - sum(f["resumed_from"] for f in resumed)
    assert result["bytes_copied"] < total


def test_a_corrupt_bundle_file_fails_the_commit_naming_it_and_stages_nothing(stage, world):
    path = world["src"] / "artifacts" / "image.tar"
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF  # same size, other bytes: only the hash can tell
    path.write_bytes(bytes(data))
    result, _calls = stage()
    assert result["failed"] is True
    assert "artifacts/image.tar" in result["msg"]
    states = dict((f["path"], f["state"]) for f in result["files"])
    assert states["artifacts/image.tar"] == "checksum_mismatch"
    assert staged(world) == {}, "all or nothing: the good files are not renamed into place either"


@pytest.mark.parametrize(
    "damage,message",
    [
        (lambda p: p.unlink(), "is missing"),
        (lambda p: p.write_bytes(b"short"), "size 5, manifest says"),
        (lambda p: (p.unlink(), p.mkdir()), "is not a regular file"),
        (lambda p: (p.unlink(), p.symlink_to(p.parent / "nowhere")), "dangling symlink"),
    ],
)
def test_a_bad_bundle_file_fails_before_anything_is_sent(stage, world, damage, message):
    damage(world["src"] / "artifacts" / "driver.run")
    with pytest.raises(AnsibleActionFail, match=message):
        stage()
    _result, calls = stage(check_mode=True)  # check mode reports; it sends nothing either way
    assert calls["transfers"] == 0


def test_a_bad_mode_or_manifest_fails_before_the_target_is_asked(stage, world):
    with pytest.raises(AnsibleActionFail, match="not an octal file mode"):
        stage(mode="rw-r--r--")
    (world["src"] / "manifest.yml").write_text("artifacts: [{path: a}]\n")
    with pytest.raises(AnsibleActionFail):
        stage()
    assert not world["dest"].exists()


@pytest.mark.parametrize("missing", ["src", "dest"])
def test_src_and_dest_are_required(stage, missing):
    with pytest.raises(AnsibleActionFail, match="%s is required" % missing):
        stage(**{missing: ""})


def test_an_unknown_option_is_refused(stage):
    with pytest.raises(AnsibleActionFail, match="Invalid options.*bogus"):
        stage(bogus=1)


def test_artifacts_given_inline_stage_only_those(stage, world):
    one = [e for e in world["entries"] if e["path"] == "wheels/x-1.0-py3-none-any.whl"]
    result, _calls = stage(artifacts=one)
    assert result["changed"] is True
    assert list(staged(world)) == ["wheels/x-1.0-py3-none-any.whl"]


def test_a_zero_byte_artifact_stages_from_the_controller(stage, world):
    (world["src"] / "artifacts" / "empty.txt").write_bytes(b"")
    entries = world["entries"] + [
        {"path": "artifacts/empty.txt", "size": 0, "kind": "file", "sha256": hashlib.sha256(b"").hexdigest()}
    ]
    (world["src"] / "manifest.yml").write_text(yaml.safe_dump({"artifacts": entries}))
    result, _calls = stage()
    assert not result.get("failed"), result.get("msg")
    assert (world["dest"] / "artifacts" / "empty.txt").read_bytes() == b""
    again, _calls = stage()
    assert again["changed"] is False


def test_many_small_files_share_chunks_a_round_trip_per_chunk_not_per_file(stage, world):
    small = dict(("artifacts/rpms/p%03d.rpm" % i, bytes(bytearray([i % 256])) * (50 + i)) for i in range(60))
    entries = make_bundle(world["src"], dict(FILES, **small))
    result, calls = stage(chunk_size=1 << 20)
    assert not result.get("failed"), result.get("msg")
    assert calls["transfers"] == 1 and calls["modules"] == ["probe", "append", "commit"]
    for rel, data in small.items():
        assert (world["dest"] / rel).read_bytes() == data
    assert len(result["files"]) == len(entries)


def split_world(world, part=5000):
    """Replace image.tar on the medium by parts, the way the bundle build stores a file over the split size."""
    data = FILES["artifacts/image.tar"]
    img = world["src"] / "artifacts" / "image.tar"
    img.unlink()
    parts = []
    for i, off in enumerate(range(0, len(data), part)):
        piece = data[off : off + part]
        (world["src"] / ("artifacts/image.tar.part%03d" % i)).write_bytes(piece)
        parts.append(
            {
                "path": "artifacts/image.tar.part%03d" % i,
                "size": len(piece),
                "sha256": hashlib.sha256(piece).hexdigest(),
            }
        )
    entries = [dict(e, parts=parts) if e["path"] == "artifacts/image.tar" else e for e in world["entries"]]
    (world["src"] / "manifest.yml").write_text(yaml.safe_dump({"artifacts": entries}))
    return parts


def test_a_split_file_is_staged_whole_from_its_parts(stage, world):
    split_world(world)
    result, _calls = stage()
    assert not result.get("failed"), result.get("msg")
    assert staged(world) == FILES
    assert not list((world["dest"] / "artifacts").glob("image.tar.part0*"))


def test_a_split_file_resumes_after_an_interrupted_transfer(stage, world):
    split_world(world)
    with pytest.raises(Interrupted):
        stage(fail_after=4)
    result, _calls = stage()
    assert staged(world) == FILES
    img = [f for f in result["files"] if f["path"] == "artifacts/image.tar"][0]
    assert 0 < img["resumed_from"] < len(FILES["artifacts/image.tar"])


def test_a_bad_part_fails_naming_it_and_the_good_parts_stay_on_the_target(stage, world):
    split_world(world)
    bad = world["src"] / "artifacts" / "image.tar.part002"
    good = bad.read_bytes()
    bad.write_bytes(b"\0" * len(good))
    with pytest.raises(AnsibleActionFail, match="image.tar.part002"):
        stage()
    assert (world["dest"] / "artifacts" / "image.tar.part").stat().st_size == 10000, "cut back to part002's start"
    bad.write_bytes(good)
    result, _calls = stage()
    assert staged(world) == FILES
    img = [f for f in result["files"] if f["path"] == "artifacts/image.tar"][0]
    assert img["resumed_from"] == 10000


def test_a_missing_part_fails_before_anything_is_sent(stage, world):
    split_world(world)
    (world["src"] / "artifacts" / "image.tar.part001").unlink()
    with pytest.raises(AnsibleActionFail, match="image.tar.part001 is missing"):
        stage()
    assert not world["dest"].exists() or staged(world) == {}


DEFAULT_SSH_ARGS = "-C -o ControlMaster=auto -o ControlPersist=60s"


def test_over_ssh_chunks_go_without_the_default_compression_modules_keep_it(stage, world):
    """ansible-core's default ssh_args compress (zlib caps a LAN upload at tens of MiB/s): the uploads drop
    it, on a connection of their own; module runs keep the shared master; the options are put back."""
    conn = SshConnection()
    result, calls = stage(connection=conn)
    assert not result.get("failed"), result.get("msg")
    assert staged(world) == FILES
    assert calls["ssh_args"]["put"] == ["-o ControlPath=none"] * calls["transfers"]
    assert set(calls["ssh_args"]["module"]) == {DEFAULT_SSH_ARGS}
    assert conn.options["ssh_args"] == DEFAULT_SSH_ARGS


def test_over_ssh_compression_asked_for_by_the_operator_is_kept(stage, world):
    conn = SshConnection(ssh_extra_args="-C")
    result, calls = stage(connection=conn)
    assert not result.get("failed"), result.get("msg")
    assert set(calls["ssh_args"]["put"]) == {DEFAULT_SSH_ARGS}


def test_an_interrupted_upload_over_ssh_puts_the_options_back(stage, world):
    conn = SshConnection()
    with pytest.raises(Interrupted):
        stage(connection=conn, fail_after=2)
    assert conn.options["ssh_args"] == DEFAULT_SSH_ARGS
    result, _calls = stage(connection=conn)
    assert staged(world) == FILES and any(f["resumed_from"] for f in result["files"])


def test_reads_of_a_big_chunk_are_one_segment_per_file(stage, world, monkeypatch):
    """The medium is read in pieces (one buffer, not a chunk-sized string); the target still gets one
    segment per file per chunk."""
    big = {"artifacts/model.bin": (bytes(bytearray(range(253))) * (3 * A.BUF_SIZE // 253 + 1))[: 3 * A.BUF_SIZE + 5]}
    make_bundle(world["src"], dict(FILES, **big))
    seen = []
    real = M.append_segments

    def spy(dest_root, chunk, segments, entries=None, **kw):
        seen.append([(s_["path"], s_["offset"], s_["length"]) for s_ in segments])
        return real(dest_root, chunk, segments, entries, **kw)

    monkeypatch.setattr(M, "append_segments", spy)
    result, calls = stage(chunk_size=64 * 1024 * 1024)
    assert not result.get("failed"), result.get("msg")
    assert (world["dest"] / "artifacts" / "model.bin").read_bytes() == big["artifacts/model.bin"]
    assert calls["transfers"] == 1
    assert [p for p, _o, _n in seen[0]] == sorted(list(FILES) + list(big))
    assert dict((p, n) for p, _o, n in seen[0])["artifacts/model.bin"] == 3 * A.BUF_SIZE + 5
