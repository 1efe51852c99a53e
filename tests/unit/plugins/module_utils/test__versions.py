"""Retention of model versions and images: the serving one and its predecessor are never removed."""
import pytest

from ansible_collections.airgap.vllm.plugins.module_utils._versions import prunable, record_activation


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


from ansible_collections.airgap.vllm.plugins.module_utils._versions import image_retention  # noqa: E402


def test_first_image_removes_nothing():
    r = image_retention(None, "sha256:d1", "sha256:b1", keep=1)
    assert r == {"history": ["sha256:d1"], "bases": {"sha256:d1": "sha256:b1"}, "remove": []}


def test_upgrade_keeps_the_replaced_image_then_prunes_it_with_its_base():
    prev = {"history": ["d1"], "bases": {"d1": "b1"}, "facts": {"vllm_image_ref": "d1"}}
    r = image_retention(prev, "d2", "b2", keep=0)
    assert r["remove"] == [] and r["history"] == ["d1", "d2"]
    nxt = {"history": r["history"], "bases": r["bases"], "facts": {"vllm_image_ref": "d2"}}
    r = image_retention(nxt, "d2", "b2", keep=0)
    assert r["remove"] == ["d1", "b1"] and r["history"] == ["d2"]


def test_a_base_shared_with_a_kept_image_stays_and_protect_holds():
    prev = {"history": ["d1", "d2", "d3"], "bases": {"d1": "b", "d2": "b", "d3": "b3"},
            "facts": {"vllm_image_ref": "d3"}}
    r = image_retention(prev, "d3", "b3", keep=1, protect=["d1"])
    assert r["remove"] == []
    r = image_retention(prev, "d3", "b3", keep=0, protect=[])
    assert r["remove"] == ["d1", "d2", "b"]
    # An unpatched image is its own base: nothing derived to remove first.
    prev = {"history": ["i1", "i2"], "bases": {}, "facts": {"vllm_image_ref": "i2"}}
    assert image_retention(prev, "i2", "", keep=0)["remove"] == ["i1"]
