# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Small file helpers shared by the read-only probes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


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


def read_text(path):
    """The file's text, or None when it is missing or unreadable (absence is data to probes)."""
    return read_text_report(path)[0]
