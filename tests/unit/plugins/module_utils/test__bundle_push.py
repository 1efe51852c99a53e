"""Unit tests for _bundle_push: the controller's append steps (one file, several in one chunk; no path outside the
stage) and the ssh arguments its uploads use."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.bundle import _bundle_manifest as M
from ansible_collections.airgap.vllm.plugins.module_utils.bundle import _bundle_push as SP

from .test__bundle_manifest import sha


def test_append_refuses_escape(tmp_path):
    with pytest.raises(M.BundleError, match="inside"):
        (tmp_path / "c").write_bytes(b"x")
        SP.append_segments(str(tmp_path), str(tmp_path / "c"), [{"path": "../evil", "offset": 0, "length": 1}])


def test_append_segments_carries_several_files_in_one_chunk(tmp_path):
    dest = tmp_path / "stage"
    files = {"a/one": b"1" * 10, "a/two": b"", "b/three": b"3" * 7}
    entries = [{"path": k, "size": len(v), "sha256": sha(v)} for k, v in sorted(files.items())]
    chunk = tmp_path / "chunk"
    chunk.write_bytes(b"".join(files[k] for k in sorted(files)))
    segs = [{"path": k, "offset": 0, "length": len(files[k])} for k in sorted(files)]
    sizes = SP.append_segments(str(dest), str(chunk), segs, M.validate_entries(entries))
    assert sizes == {"a/one": 10, "a/two": 0, "b/three": 7}
    assert not chunk.exists()
    SP.commit_parts(str(dest), entries, None)
    for k, v in files.items():
        assert (dest / k).read_bytes() == v
    chunk.write_bytes(b"x")
    with pytest.raises(M.BundleError, match="probe again"):
        SP.append_segments(str(dest), str(chunk), [{"path": "a/one.x", "offset": 5, "length": 1}])
    chunk.write_bytes(b"xy")
    with pytest.raises(M.BundleError, match="ended 3 bytes early"):
        SP.append_segments(str(dest), str(chunk), [{"path": "c/new", "offset": 0, "length": 5}])


@pytest.mark.parametrize(
    "ssh_args,expected",
    [
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
    ],
)
def test_bulk_ssh_args_drop_only_the_default_compression(ssh_args, expected):
    assert SP.bulk_ssh_args(ssh_args) == expected


@pytest.mark.parametrize("other", [["-C"], [None, "-o Compression=yes"], ["", None, None, "-Cv"]])
def test_bulk_ssh_args_keep_compression_asked_for_elsewhere(other):
    """Compression in ssh_common_args, ssh_extra_args, sftp/scp_extra_args is the operator's own choice."""
    assert SP.bulk_ssh_args("-C -o ControlMaster=auto -o ControlPersist=60s", other) is None


def test_bulk_ssh_args_ignore_compression_turned_off_elsewhere():
    assert SP.bulk_ssh_args("-C", ["-o Compression=no"]) == "-o ControlPath=none"


def test_bulk_ssh_args_are_read_back_by_ssh_as_written():
    """The connection splits the string again (shlex): quoting survives the round trip."""
    import shlex

    out = SP.bulk_ssh_args('-C -o "ProxyCommand=ssh -q -W %h:%p bastion" -o ControlPersist=60s')
    assert shlex.split(out) == ["-o", "ControlPath=none", "-o", "ProxyCommand=ssh -q -W %h:%p bastion"]
