# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Disk space before a large write (issue 46: the disk full during an image load or a model import).

One home for the decision "is there room, and if not what does the operator read": a clear error naming the path
and the bytes needed, decided before anything is written, and the same words when the disk fills anyway during
the write (ENOSPC from another writer): the previous image or model is untouched and the partial files are gone.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import struct

MIB = 1024 * 1024


def human(n):
    """'2.5 GiB' / '640.0 MiB' / '512 bytes'."""
    n = int(n)
    if n >= 1024**3:
        return '%.1f GiB' % (n / 1024.0**3)
    if n >= MIB:
        return '%.1f MiB' % (n / float(MIB))
    return '%d bytes' % n


def shortfall(path, free, needed, margin=0, what='the write', kept=''):
    """None when `free` bytes at `path` hold `needed` + `margin`, else the error: the path, the bytes needed, the
    bytes free, and what was left as it was (`kept`). free < 0 (unreadable) is not judged: None."""
    free, needed, margin = int(free), int(needed), int(margin)
    if free < 0 or free >= needed + margin:
        return None
    return '%s: %d bytes free (%s), %s needs %d bytes (%s)%s; nothing was written%s' % (
        path,
        free,
        human(free),
        what,
        needed + margin,
        human(needed + margin),
        ' including %s headroom' % human(margin) if margin else '',
        ', ' + kept if kept else '',
    )


def free_bytes(path):
    """Bytes available to unprivileged writers at `path` (statvfs f_bavail x f_frsize)."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def is_disk_full(exc):
    """Whether an exception is the disk (or the quota) running out."""
    return isinstance(exc, EnvironmentError) and getattr(exc, 'errno', None) in (errno.ENOSPC, errno.EDQUOT)


def said_disk_full(text):
    """Whether a tool's message (docker load's stderr) says the disk ran out."""
    return 'no space left on device' in (text or '').lower() or 'disk quota exceeded' in (text or '').lower()


def gzip_isize(path):
    """The uncompressed size a gzip file's trailer records (ISIZE, modulo 4 GiB), None when unreadable."""
    try:
        with open(path, 'rb') as f:
            f.seek(-4, os.SEEK_END)
            return struct.unpack('<I', f.read(4))[0]
    except (OSError, IOError, struct.error):
        return None


def image_load_need(size, compressed=False, isize=None):
    """Bytes `docker load` writes under Docker's root directory at its peak for an archive of `size` bytes: the
    daemon first untars the whole archive into a temporary directory (DOCKER_TMPDIR, <root>/tmp by default) and then
    unpacks each layer (stored uncompressed in a docker-save tar) into the storage driver, so twice the archive's
    uncompressed size. A gzip archive's uncompressed size is its trailer's ISIZE (modulo 4 GiB: never taken below the
    compressed size). The vfs storage driver copies each layer's parents too and needs more; this is the floor."""
    size = int(size)
    if compressed and isize is not None:
        size = max(size, int(isize))
    return 2 * size
