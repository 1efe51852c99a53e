# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one base of the collection's callbacks: an aggregate callback, on only when enabled by name, that prints
a table under a banner at the end of the run."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.callback import CallbackBase


class SummaryCallback(CallbackBase):
    """A callback plugin's CallbackModule sets CALLBACK_NAME and says its lines with summary()."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NEEDS_ENABLED = True

    def summary(self, title, lines):
        """The banner, each line, then a blank line."""
        self._display.banner(title)
        for line in lines:
            self._display.display(line)
        self._display.display("")
