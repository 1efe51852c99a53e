# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one filter base: a filter calls its module_utils function, and the errors it names become AnsibleFilterError."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools

from ansible.errors import AnsibleFilterError


def filter_errors(*errors, **options):
    """Decorator: an exception of ``errors`` raised by the filter becomes AnsibleFilterError, its message after
    ``prefix`` (an option: what the playbook author should read first)."""
    prefix = options.pop("prefix", "")

    def decorate(fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except errors as exc:
                raise AnsibleFilterError(prefix + str(exc))

        return wrapped

    return decorate
