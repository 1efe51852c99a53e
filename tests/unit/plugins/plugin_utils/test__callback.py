"""The callbacks' base (plugins/plugin_utils/_callback.py): an aggregate callback, on when enabled, that prints its
table under a banner."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.airgap.vllm.plugins.callback import driver_summary, phase_times
from ansible_collections.airgap.vllm.plugins.plugin_utils._callback import SummaryCallback


class DisplayRecorder:
    """Ansible's Display as the callbacks use it, keeping what they print (the callbacks' tests share it)."""

    def __init__(self):
        self.lines = []

    def banner(self, text):
        self.lines.append("== " + text)

    def display(self, text):
        self.lines.append(text)


def test_summary_is_the_banner_the_lines_and_a_blank_line():
    callback = SummaryCallback()
    callback._display = DisplayRecorder()
    callback.summary("TITLE", iter(["a", "b"]))
    assert callback._display.lines == ["== TITLE", "a", "b", ""]


def test_every_callback_is_an_aggregate_enabled_by_name():
    for plugin in (driver_summary, phase_times):
        cls = plugin.CallbackModule
        assert issubclass(cls, SummaryCallback)
        assert (cls.CALLBACK_VERSION, cls.CALLBACK_TYPE, cls.CALLBACK_NEEDS_ENABLED) == (2.0, "aggregate", True)
