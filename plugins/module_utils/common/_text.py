# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one text coercion of the collection: whatever a setting, a command or a C library gives, as text."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def as_text(value):
    """None as "", bytes decoded as UTF-8 (undecodable bytes replaced, never an error), anything else as "%s"."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "%s" % (value,)
