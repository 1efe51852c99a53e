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
- ``remove_tree(path)``: remove a directory with all below it, or a file or a link (a link, also one to a
  directory, is removed itself and never followed).
- ``free_space(path)``: what `df --output=avail,target` says of a path (or of its nearest existing parent).
- ``path_state(path)`` and ``paths_differing(states, expected)``: what a path is on the host (type, mode,
  owner, SHA-1 of a file) and which of the paths a role would write differ from what it would write, so a
  converged re-run reads its files in one probe instead of one task per file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import io
import os
import shutil
import stat
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
            % (path, exc.start)
        )


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


def path_state(path):
    """{'type' (file, directory, link, other), 'mode' ('0600'), 'uid', 'gid', 'sha1' (files only), 'mtime'}, None
    when absent.

    A link is reported as a link (never followed): a role that writes a file there would replace it.
    """
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISREG(st.st_mode):
        kind = 'file'
    elif stat.S_ISDIR(st.st_mode):
        kind = 'directory'
    elif stat.S_ISLNK(st.st_mode):
        kind = 'link'
    else:
        kind = 'other'
    state = {
        'type': kind,
        'mode': '%04o' % stat.S_IMODE(st.st_mode),
        'uid': st.st_uid,
        'gid': st.st_gid,
        'sha1': None,
        'mtime': st.st_mtime,
    }
    if kind == 'file':
        digest = hashlib.sha1()
        try:
            with open(path, 'rb') as handle:
                for block in iter(lambda: handle.read(1 << 20), b''):
                    digest.update(block)
            state['sha1'] = digest.hexdigest()
        except (IOError, OSError):
            pass  # unreadable: no checksum, so it never counts as converged
    return state


def paths_differing(states, expected):
    """The paths of `expected` whose state differs from what a role would write, in the order given.

    states: {path: path_state(path)}. expected: [{'path', 'type' (file or directory), 'mode' ('0600'), 'uid',
    'gid' (default 0), 'sha1' (files: the content's SHA-1; None = any content)}]. Modes compare as numbers
    ('600' == '0600').
    """
    differing = []
    for want in expected:
        have = states.get(want['path'])
        same = (
            have is not None
            and have['type'] == want.get('type', 'file')
            and int(str(have['mode']), 8) == int(str(want['mode']), 8)
            and have['uid'] == want.get('uid', 0)
            and have['gid'] == want.get('gid', 0)
            and (want.get('sha1') is None or have['sha1'] == want['sha1'])
        )
        if not same:
            differing.append(want['path'])
    return differing


def remove_tree(path):
    """Remove ``path``: a directory with everything below it, else the file or link itself (a link to a
    directory is removed, never followed). IOError/OSError are the caller's."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def free_space(path):
    """{'free': bytes available to unprivileged users, 'mount': the mount point} of `path`, or of its nearest
    existing parent when it does not exist yet (what `df -B1 --output=avail,target` shows); free -1 when unreadable."""
    current = os.path.abspath(path)
    while not os.path.exists(current) and current != os.path.dirname(current):
        current = os.path.dirname(current)
    mount = current
    while not os.path.ismount(mount) and mount != os.path.dirname(mount):
        mount = os.path.dirname(mount)
    try:
        st = os.statvfs(current)
    except OSError:
        return {'free': -1, 'mount': mount}
    return {'free': st.f_bavail * st.f_frsize, 'mount': mount}
