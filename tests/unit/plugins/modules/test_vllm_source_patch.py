"""vllm_source_patch as Ansible runs it: the catalogue and the madvise decision (no root: reads nothing)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


import pytest

from ansible_collections.airgap.vllm.plugins.modules import vllm_source_patch as M


def test_catalogue_only_says_nothing_about_the_decision(run_module):
    r = run_module(M)
    assert not r["changed"] and r["files"] == [] and "madvise_patch_needed" not in r
    assert r["catalogue"][0]["name"] == "madvise_populate_write"


@pytest.mark.parametrize(
    "offload,kernel,needed",
    [
        (True, "4.19.90-52.22.v2207.ky10.x86_64", True),
        (True, "5.15.0", False),
        (False, "4.19.90", False),
        (True, None, True),
        (True, "garbage", True),
    ],
)
def test_the_decision_is_the_planners_rule(run_module, offload, kernel, needed):
    args = dict(kv_offloading=offload)
    if kernel is not None:
        args["kernel_release"] = kernel
    r = run_module(M, **args)
    assert r["madvise_patch_needed"] is needed and r["madvise_patch_reason"] and not r["changed"]
