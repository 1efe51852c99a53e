"""Model versions side by side: migration of the older layout, atomic switch, retention, hostile names."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.model import _model_versions as V

SHA_A = "a" * 64
SHA_B = "b" * 64
SHA_C = "c" * 64


def make_version(models, name, vid, sha):
    d = models / ("%s@%s" % (name, vid))
    d.mkdir(parents=True)
    (d / "config.json").write_text("{}")
    (d / V.STAMP).write_text(json.dumps({"sha256": sha}))
    return d


def test_version_id_names_and_refuses():
    assert V.version_id("1", SHA_A) == "1-aaaaaaaa"
    assert V.version_id("", SHA_B) == "b" * 12
    for bad in ("../x", "a b", "x" * 60):
        with pytest.raises(V.ModelVersionError):
            V.version_id(bad, SHA_A)
    with pytest.raises(V.ModelVersionError, match="checksum"):
        V.version_id("1", "nothex")


def test_older_layout_is_migrated_in_place_without_copy(tmp_path):
    legacy = tmp_path / "q"
    legacy.mkdir()
    (legacy / V.STAMP).write_text(json.dumps({"sha256": SHA_A}))
    inode = legacy.stat().st_ino
    vid = V.version_id("1", SHA_A)
    assert V.prepare(str(tmp_path), "q", vid, SHA_A, check_mode=True)[0] and legacy.is_dir() and not legacy.is_symlink()
    changed, msg = V.prepare(str(tmp_path), "q", vid, SHA_A)
    assert changed and os.readlink(str(legacy)) == "q@" + vid
    assert (tmp_path / ("q@" + vid)).stat().st_ino == inode
    assert V.current_version(str(tmp_path), "q") == vid
    assert V.prepare(str(tmp_path), "q", vid, SHA_A) == (False, "")


def test_older_layout_of_another_model_becomes_a_legacy_version(tmp_path):
    legacy = tmp_path / "q"
    legacy.mkdir()
    (legacy / V.STAMP).write_text(json.dumps({"sha256": SHA_C}))
    V.prepare(str(tmp_path), "q", V.version_id("2", SHA_A), SHA_A)
    assert V.current_version(str(tmp_path), "q") == "legacy-" + "c" * 12


def test_switch_keeps_replaced_then_prunes_beyond_keep(tmp_path):
    m = str(tmp_path)
    make_version(tmp_path, "q", "v1", SHA_A)
    r = V.activate(m, "q", "v1", keep=0)
    assert r["changed"] and r["switched"] and r["previous"] == ""
    assert V.activate(m, "q", "v1", keep=0)["changed"] is False
    make_version(tmp_path, "q", "v2", SHA_B)
    r = V.activate(m, "q", "v2", keep=0)
    assert r["previous"] == "v1" and r["removed"] == [] and os.path.isdir(os.path.join(m, "q@v1"))
    r = V.activate(m, "q", "v2", keep=0)
    assert r["removed"] == ["v1"] and not os.path.exists(os.path.join(m, "q@v1"))
    assert os.readlink(os.path.join(m, "q")) == "q@v2"


def test_rollback_switches_back_and_protect_holds(tmp_path):
    m = str(tmp_path)
    for v, s in (("v1", SHA_A), ("v2", SHA_B), ("v3", SHA_C)):
        make_version(tmp_path, "q", v, s)
        V.activate(m, "q", v, keep=5)
    r = V.activate(m, "q", "v2", keep=0, protect=["v1"])
    assert r["previous"] == "v3" and r["removed"] == [] and V.current_version(m, "q") == "v2"
    r = V.activate(m, "q", "v2", keep=0, protect=["v1"])
    assert r["removed"] == ["v3"]


def test_check_mode_changes_nothing(tmp_path):
    m = str(tmp_path)
    make_version(tmp_path, "q", "v1", SHA_A)
    V.activate(m, "q", "v1", keep=1)
    make_version(tmp_path, "q", "v2", SHA_B)
    r = V.activate(m, "q", "v2", keep=1, check_mode=True)
    assert r["changed"] and V.current_version(m, "q") == "v1"


def test_missing_version_and_hostile_names(tmp_path):
    with pytest.raises(V.ModelVersionError, match="import the model version first"):
        V.activate(str(tmp_path), "q", "v9", keep=1)
    for bad in ("../etc", "a@b", "", "x/y"):
        with pytest.raises(V.ModelVersionError, match="model name"):
            V.activate(str(tmp_path), bad, "v1", keep=1)
    (tmp_path / "f").write_text("not a dir")
    with pytest.raises(V.ModelVersionError, match="neither"):
        V.prepare(str(tmp_path), "f", "v1", SHA_A)


# ------------------------------------------------------------------ issue 24: retention fails safe


def _three(tmp_path):
    m = str(tmp_path)
    for vid, sha in (("v1", SHA_A), ("v2", SHA_B)):
        make_version(tmp_path, "q", vid, sha)
        V.activate(m, "q", vid, keep=2)
    make_version(tmp_path, "q", "v3", SHA_C)
    return m


def test_intact_history_keeps_the_two_previous_versions(tmp_path):
    m = _three(tmp_path)
    r = V.activate(m, "q", "v3", keep=2)
    assert r["removed"] == [] and r["held"] == [] and r["versions"] == ["v1", "v2", "v3"]


@pytest.mark.parametrize("damage", ['["v1", "v2"', "{}", '["v1", 2]', "\xff"])
def test_a_damaged_history_keeps_every_version(tmp_path, damage):
    """Failed on 9dce105: the damaged history read as empty, so v1 counted as never activated and was removed."""
    m = _three(tmp_path)
    with open(V.history_path(m, "q"), "w", encoding="latin-1") as f:
        f.write(damage)
    r = V.activate(m, "q", "v3", keep=2, check_mode=True)
    assert r["removed"] == [] and "damaged" in r["held"][0]
    r = V.activate(m, "q", "v3", keep=2)
    assert r["removed"] == [] and r["switched"] and os.readlink(os.path.join(m, "q")) == "q@v3"
    assert all(os.path.isdir(os.path.join(m, "q@" + v)) for v in ("v1", "v2", "v3"))
    with open(V.history_path(m, "q"), encoding="latin-1") as f:
        assert f.read() == damage  # left for the operator, not overwritten
    assert V.read_history_report(m, "q")[1]


def test_a_damaged_history_is_never_in_place(tmp_path):
    """Failed before: a converged run found the version in place and skipped the activation, so the damaged
    history (and that retention keeps every version) was never reported again."""
    m = _three(tmp_path)
    V.activate(m, "q", "v3", keep=2)
    with open(V.history_path(m, "q"), "w") as f:
        f.write("{not json")
    assert V.current_version(m, "q") == "v3"
    assert V.in_place(m, "q", "v3", SHA_C, keep=2) is False
    r = V.activate(m, "q", "v3", keep=2)
    assert r["changed"] is False and r["removed"] == [] and "damaged" in r["held"][0]


def test_only_versions_model_import_stamped_are_removed(tmp_path):
    m = str(tmp_path)
    make_version(tmp_path, "q", "v1", SHA_A)
    V.activate(m, "q", "v1", keep=0)
    foreign = tmp_path / "q@someone-elses"
    foreign.mkdir()
    (foreign / "weights").write_text("x")
    make_version(tmp_path, "q", "v2", SHA_B)
    V.activate(m, "q", "v2", keep=0)
    r = V.activate(m, "q", "v2", keep=0)
    assert r["removed"] == ["v1"] and foreign.is_dir()
    assert any("someone-elses" in h and V.STAMP in h for h in r["held"])
