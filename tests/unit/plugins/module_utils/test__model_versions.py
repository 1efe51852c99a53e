"""Model versions side by side: migration of the older layout, atomic switch, retention, hostile names."""
import json
import os

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils import _model_versions as V

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
