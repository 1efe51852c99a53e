"""Disk space before a large write (module_utils/common/_disk_space.py, issue 46)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import gzip
import os

from ansible_collections.airgap.vllm.plugins.module_utils.common import _disk_space as S

GIB = 1024**3


def test_shortfall_names_path_and_bytes():
    assert S.shortfall("/var/lib/models", 10 * GIB, 5 * GIB, 64 << 20, "the model") is None
    assert S.shortfall("/var/lib/models", 5 * GIB + (64 << 20), 5 * GIB, 64 << 20) is None  # exactly enough
    msg = S.shortfall("/var/lib/models", GIB, 5 * GIB, 64 << 20, "the model", "the model in /m/q is untouched")
    assert msg == (
        "/var/lib/models: 1073741824 bytes free (1.0 GiB), the model needs 5435817984 bytes (5.1 GiB) including "
        "64.0 MiB headroom; nothing was written, the model in /m/q is untouched"
    )
    assert S.shortfall("/x", 0, 1).startswith("/x: 0 bytes free (0 bytes), the write needs 1 bytes")
    assert S.shortfall("/x", -1, GIB) is None  # unreadable: not judged here


def test_disk_full_recognised():
    assert S.is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert S.is_disk_full(IOError(errno.EDQUOT, "Disk quota exceeded"))
    assert not S.is_disk_full(OSError(errno.EACCES, "Permission denied"))
    assert not S.is_disk_full(ValueError("x"))
    assert S.said_disk_full("write /var/lib/docker/tmp/x: No space left on device")
    assert not S.said_disk_full("Cannot connect to the Docker daemon")
    assert not S.said_disk_full(None)


def test_image_load_need(tmp_path):
    assert S.image_load_need(1000) == 2000
    path = str(tmp_path / "a.tar.gz")
    with gzip.open(path, "wb") as f:
        f.write(b"\0" * 100000)
    isize = S.gzip_isize(path)
    assert isize == 100000
    assert S.image_load_need(os.path.getsize(path), True, isize) == 200000
    # ISIZE wraps at 4 GiB: never below the compressed size.
    assert S.image_load_need(5000, True, 10) == 10000
    assert S.gzip_isize(str(tmp_path / "absent")) is None


def test_free_bytes_reads_statvfs(tmp_path):
    st = os.statvfs(str(tmp_path))
    assert abs(S.free_bytes(str(tmp_path)) - st.f_bavail * st.f_frsize) < 64 * 1024 * 1024
