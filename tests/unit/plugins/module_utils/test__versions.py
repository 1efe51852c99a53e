"""Retention of model versions and images: the serving one and its predecessor are never removed."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.common._versions import prunable, record_activation


def test_keep_one_previous_removes_older_and_never_activated():
    hist = ["v1", "v2", "v3"]
    assert prunable(["v1", "v2", "v3", "v4", "junk"], hist, "v4", keep=1, replaced="v3") == ["junk", "v1", "v2"]


def test_replaced_version_survives_keep_zero_until_the_next_run():
    # Run that switches v1 -> v2: v1 still serves until v2 is healthy, so it stays.
    assert prunable(["v1", "v2"], ["v1"], "v2", keep=0, replaced="v1") == []
    # Next run, v2 proven and still active: now v1 goes.
    assert prunable(["v1", "v2"], ["v1", "v2"], "v2", keep=0, replaced="v2") == ["v1"]


def test_protected_and_active_always_stay():
    assert prunable(["a", "b", "c"], ["a", "b", "c"], "c", keep=0, replaced="c", protect=["a", ""]) == ["b"]


def test_rollback_to_an_older_version_keeps_the_newer_ones_by_history():
    hist = record_activation(["v1", "v2"], "v1")
    assert hist == ["v2", "v1"]
    assert prunable(["v1", "v2"], hist, "v1", keep=1, replaced="v2") == []


def test_history_is_bounded_and_unique():
    h = []
    for i in range(60):
        h = record_activation(h, "v%d" % (i % 7))
    assert len(h) == len(set(h)) == 7 and h[-1] == "v3"
    assert len(record_activation(["x%d" % i for i in range(100)], "new", limit=10)) == 10


@pytest.mark.parametrize("keep", [-1, None])
def test_bad_keep_is_refused(keep):
    with pytest.raises(ValueError):
        prunable(["a"], [], "a", keep=keep)


from ansible_collections.airgap.vllm.plugins.module_utils.common._versions import image_retention  # noqa: E402

# Full image IDs, as the image stage records them (retention removes nothing else).
I = dict(
    (k, "sha256:" + ("%02x" % n) * 32) for n, k in enumerate(["d1", "d2", "d3", "b1", "b2", "b3", "i1", "i2", "b"])
)


def test_first_image_removes_nothing():
    r = image_retention(None, I["d1"], I["b1"], keep=1)
    assert r == {"history": [I["d1"]], "bases": {I["d1"]: I["b1"]}, "remove": [], "held": []}


def test_upgrade_keeps_the_replaced_image_then_prunes_it_with_its_base():
    prev = {"history": [I["d1"]], "bases": {I["d1"]: I["b1"]}, "facts": {"vllm_image_ref": I["d1"]}}
    r = image_retention(prev, I["d2"], I["b2"], keep=0)
    assert r["remove"] == [] and r["history"] == [I["d1"], I["d2"]]
    nxt = {"history": r["history"], "bases": r["bases"], "facts": {"vllm_image_ref": I["d2"]}}
    r = image_retention(nxt, I["d2"], I["b2"], keep=0)
    assert r["remove"] == [I["d1"], I["b1"]] and r["history"] == [I["d2"]]


def test_a_base_shared_with_a_kept_image_stays_and_protect_holds():
    prev = {
        "history": [I["d1"], I["d2"], I["d3"]],
        "bases": {I["d1"]: I["b"], I["d2"]: I["b"], I["d3"]: I["b3"]},
        "facts": {"vllm_image_ref": I["d3"]},
    }
    r = image_retention(prev, I["d3"], I["b3"], keep=1, protect=[I["d1"]])
    assert r["remove"] == []
    r = image_retention(prev, I["d3"], I["b3"], keep=0, protect=[])
    assert r["remove"] == [I["d1"], I["d2"], I["b"]]
    # An unpatched image is its own base: nothing derived to remove first.
    prev = {"history": [I["i1"], I["i2"]], "bases": {}, "facts": {"vllm_image_ref": I["i2"]}}
    assert image_retention(prev, I["i2"], "", keep=0)["remove"] == [I["i1"]]


@pytest.mark.parametrize(
    "record",
    [
        {"history": ["ubuntu:22.04", I["d1"]], "bases": {}, "facts": {"vllm_image_ref": I["d1"]}},
        {"history": [I["d1"]], "bases": {I["d1"]: "postgres"}, "facts": {"vllm_image_ref": I["d1"]}},
        {"history": ["abc123", I["d1"]], "bases": {}, "facts": {"vllm_image_ref": I["d1"]}},
    ],
)
def test_a_record_naming_something_that_is_not_an_image_id_never_removes_it(record):
    """Failed on 9dce105: a tag or a short prefix in the record was handed to `docker image rm --force`."""
    r = image_retention(record, I["d2"], "", keep=0)
    assert all(x.startswith("sha256:") and len(x) == 71 for x in r["remove"]) and r["held"]
    assert not any(x in ("ubuntu:22.04", "postgres", "abc123") for x in r["remove"] + r["history"])


@pytest.mark.parametrize("record", ["{oops", ["x"], {"history": "sha256:" + "a" * 64}, {"bases": ["x"]}])
def test_a_damaged_image_record_removes_nothing(record):
    r = image_retention(record, I["d2"], I["b2"], keep=0)
    assert r["remove"] == [] and r["held"] and r["history"] == [I["d2"]]
