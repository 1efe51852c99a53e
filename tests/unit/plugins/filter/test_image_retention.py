"""airgap.vllm.image_retention as vllm_image's retain.yml calls it: the recorded stage state in, the new
history and the images to remove out (the replaced image, keep earlier ones and protected IDs stay)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


EXPR = "{{ state | airgap.vllm.image_retention(ref, base, keep, protect) }}"


def sha(c):
    return "sha256:" + c * 64


def recorded(history, ref, bases=None):
    return {"history": history, "bases": bases or {}, "facts": {"vllm_image_ref": ref}}


def test_a_first_deployment_removes_nothing(render):
    r = render(EXPR, state={}, ref=sha("a"), base="", keep=1, protect=[""])
    assert r == {"history": [sha("a")], "bases": {}, "remove": [], "held": []}


def test_an_upgrade_keeps_the_replaced_image_and_keep_earlier_ones(render):
    state = recorded([sha("a"), sha("b"), sha("c")], sha("c"))
    r = render(EXPR, state=state, ref=sha("d"), base="", keep=1, protect=[])
    # c is replaced (serves until d is proven) and is also the one kept; a and b go, oldest first
    assert r["remove"] == [sha("a"), sha("b")]
    assert r["history"] == [sha("c"), sha("d")]
    again = render(EXPR, state=dict(r, facts={"vllm_image_ref": sha("d")}), ref=sha("d"), base="", keep=1, protect=[])
    assert again["remove"] == [], "a converged re-run removes nothing"


def test_a_derived_image_goes_before_the_base_it_was_built_from(render):
    state = recorded([sha("1"), sha("2")], sha("2"), bases={sha("1"): sha("0")})
    r = render(EXPR, state=state, ref=sha("3"), base="", keep=0, protect=[])
    assert r["remove"] == [sha("1"), sha("0")]
    assert r["bases"] == {}


def test_a_base_still_in_use_and_a_protected_image_stay(render):
    state = recorded([sha("1"), sha("2")], sha("2"), bases={sha("1"): sha("0")})
    r = render(EXPR, state=state, ref=sha("3"), base=sha("0"), keep=0, protect=[sha("1")])
    assert sha("0") not in r["remove"], "the new image is derived from it"
    assert sha("1") not in r["remove"], "protected (the service's last good image)"
    assert r["bases"] == {sha("1"): sha("0"), sha("3"): sha("0")}, "both still in use, both remembered"
    assert r["remove"] == [], "2 is the image 3 replaces: it stays until 3 is proven"


def test_keep_given_as_text_from_yaml_is_taken_as_a_number(render):
    state = recorded([sha("a"), sha("b"), sha("c")], sha("c"))
    assert render(EXPR, state=state, ref=sha("d"), base="", keep="2", protect=None)["remove"] == [sha("a")]
