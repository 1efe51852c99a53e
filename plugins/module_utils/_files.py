# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Small file helpers shared by the read-only probes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def read_text(path):
    """The file's text, or None when it is missing or unreadable (absence is data to probes)."""
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return None
