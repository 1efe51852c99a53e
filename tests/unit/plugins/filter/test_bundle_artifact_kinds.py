"""airgap.vllm.bundle_artifact_kinds as bundle_build's preflight calls it: the kinds bundle_pack takes (its own list,
module_utils/bundle/_bundle_pack.py) and one line per artifact of another kind."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_pack import ARTIFACT_KINDS

CHECK = "{{ artifacts | airgap.vllm.bundle_artifact_kinds }}"
FAIL_MSG = (
    "{{ (c.problems | join('; ') ~ '.') if c.problems else '' }} needs entries with kind ({{ c.kinds | join('/') }})"
)


def test_known_kinds_pass_and_the_list_is_bundle_packs(render):
    arts = [{"kind": "driver", "src": "/d.run"}, {"kind": "image", "image": "vllm-openai:v1", "name": "vllm-openai"}]
    assert render(CHECK, artifacts=arts) == {"kinds": list(ARTIFACT_KINDS), "problems": []}
    assert render(CHECK, artifacts=[])["problems"] == []


def test_an_unknown_or_missing_kind_is_named_in_the_preflights_message(render):
    arts = [{"kind": "weights", "src": "/w"}, {"src": "/y"}]
    check = render(CHECK, artifacts=arts)
    assert check["problems"] == [
        "artifact /w: kind 'weights' is not one of driver, fabricmanager, toolkit, rpms, image, model, file",
        "artifact /y: kind None is not one of driver, fabricmanager, toolkit, rpms, image, model, file",
    ]
    msg = render(FAIL_MSG, c=check)
    assert msg.startswith("artifact /w: kind 'weights' is not one of") and msg.endswith(
        "needs entries with kind (driver/fabricmanager/toolkit/rpms/image/model/file)"
    )
