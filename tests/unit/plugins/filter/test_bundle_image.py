"""airgap.vllm.bundle_image as vllm_image's and vllm_front's defaults call it: each role's image from the bundle
role's bundle_staged by name, whatever the order of the manifest."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from ansible.errors import AnsibleFilterError

ENGINE = "{{ ((staged | default({})) | airgap.vllm.bundle_image('engine')).path | default('DEFAULT') }}"
FRONT = "{{ ((staged | default({})) | airgap.vllm.bundle_image('front')).path | default('DEFAULT') }}"


def art(name):
    return {"name": name, "version": "1", "path": "/stage/" + name + ".tar", "sha256": "0" * 64, "size": 1}


@pytest.mark.parametrize("order", [["haproxy", "vllm-openai"], ["vllm-openai", "haproxy"]])
def test_each_role_gets_its_own_image_in_either_order(render, order):
    staged = {"image": [art(n) for n in order], "model": [art("qwen")]}
    assert render(ENGINE, staged=staged) == "/stage/vllm-openai.tar"
    assert render(FRONT, staged=staged) == "/stage/haproxy.tar"


def test_an_engine_image_of_another_name_is_the_one_that_is_not_haproxy(render):
    staged = {"image": [art("haproxy"), art("my-vllm")]}
    assert render(ENGINE, staged=staged) == "/stage/my-vllm.tar"
    assert render(ENGINE, staged={"image": [art("my-vllm")]}) == "/stage/my-vllm.tar"


def test_no_bundle_or_no_image_gives_the_roles_default(render):
    for staged in ({}, {"image": []}, {"model": [art("qwen")]}, None):
        assert render(ENGINE, staged=staged) == "DEFAULT"
        assert render(FRONT, staged=staged) == "DEFAULT"
    assert render(ENGINE, staged={"image": [art("haproxy")]}) == "DEFAULT", "the front's image is never the engine's"
    assert render(FRONT, staged={"image": [art("vllm-openai")]}) == "DEFAULT"


def test_two_unnamed_engine_candidates_are_refused_naming_the_variable(render):
    with pytest.raises(AnsibleFilterError, match="vllm_image_archive") as e:
        render(ENGINE, staged={"image": [art("a"), art("haproxy"), art("b")]})
    assert "'a', 'b'" in str(e.value)


def test_an_unknown_role_is_refused(render):
    with pytest.raises(AnsibleFilterError, match="engine, front"):
        render("{{ staged | airgap.vllm.bundle_image('gpu') }}", staged={})
