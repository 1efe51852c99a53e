# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one file helper of the collection: read text with an explicit missing-file contract, write atomically.

- ``read_text(path)``: the text, or None when the file is missing or unreadable (absence is data to probes);
  ``read_text(path, missing_ok=False)``: the text, raising IOError/OSError when it cannot be read and
  UnicodeDecodeError when it is not UTF-8 (a file about to be edited must be read exactly). Line endings are
  kept as they are in the file either way.
- ``read_text_report(path)``: (text, problem) for probes that warn about non-UTF-8 bytes instead of failing.
- ``write_atomic(path, data, ...)``: write beside the target, fsync the file, rename over the target, fsync
  the directory: readers see the old or the new file, never half of one, also after a power cut.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import os
import tempfile


def read_text_report(path):
    """(text, problem): the file's text, or None when missing/unreadable (absence is data to probes).

    Bytes that are not UTF-8 never raise (the locale of a Python 3.7 target may even be ASCII): they are
    replaced by U+FFFD and `problem` names the file and the fix.
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except (IOError, OSError):
        return None, None
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return data.decode("utf-8", "replace"), (
            "%s is not valid UTF-8 (byte %d): undecodable bytes were replaced; re-save the file as UTF-8"
            % (path, exc.start))


def read_text(path, missing_ok=True):
    """The file's text (line endings as stored).

    missing_ok=True: None when the file is missing or unreadable, undecodable bytes replaced.
    missing_ok=False: IOError/OSError when it cannot be read, UnicodeDecodeError when it is not UTF-8.
    """
    if missing_ok:
        return read_text_report(path)[0]
    with io.open(path, "r", encoding="utf-8", newline="") as handle:
        return handle.read()


def fsync_dir(directory):
    """Make a rename in `directory` durable (best effort where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path, data, mode=None, makedirs=None, prefix=".airgap-vllm-"):
    """Replace `path` with `data` (str is written as UTF-8, bytes as they are), atomically and durably.

    mode: the new file's permission bits; None keeps those of the file replaced (and, as root, its owner),
    or 0644 for a new file. makedirs: create a missing parent directory with these permission bits
    (None: a missing parent is an error). Nothing is left behind when a step fails.
    """
    directory = os.path.dirname(os.path.abspath(path))
    if makedirs is not None and not os.path.isdir(directory):
        os.makedirs(directory, makedirs)
    try:
        old = os.stat(path)
    except OSError:
        old = None
    if isinstance(data, bytes):
        payload = data
    else:
        payload = data.encode("utf-8")
    fd, tmp = tempfile.mkstemp(prefix=prefix, dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        elif old is not None:
            os.chmod(tmp, old.st_mode & 0o7777)
            try:
                os.chown(tmp, old.st_uid, old.st_gid)
            except OSError:
                pass  # not root: the file keeps our ownership, as any edit by this user would
        else:
            os.chmod(tmp, 0o644)
        os.rename(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    fsync_dir(directory)
