"""vllm_release: what the image's version read printed -> the release and the known rules for it (issue 30)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.airgap.vllm.plugins.filter.vllm_release import FilterModule

F = FilterModule().filters()["vllm_release"]


def test_release():
    assert F("INFO noise\n0.27.1+cpu\n") == {
        "version": "0.27.1+cpu",
        "known": True,
        "rules": "0.27.1",
        "relation": "known",
    }
    assert F("0.33.0") == {"version": "0.33.0", "known": False, "rules": "0.30.0", "relation": "newer"}


def test_unreadable_is_empty_never_an_error():
    for text in (None, "", "importlib.metadata.PackageNotFoundError: No package metadata was found for vllm"):
        assert F(text) == {"version": "", "known": False, "rules": "", "relation": "unreadable"}
