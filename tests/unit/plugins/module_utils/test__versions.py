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
