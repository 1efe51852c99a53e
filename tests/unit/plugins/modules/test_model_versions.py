"""model_versions as Ansible runs it: the older layout migrated, the link switched, old versions pruned,
check mode honest, diff shown, bad input refused with a message."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.model._model_versions import STAMP
from ansible_collections.airgap.vllm.plugins.modules import model_versions as M

NAME = "qwen3.x-27b-fp8"
SHA1 = "3f2a9c01" + "a" * 56
SHA2 = "77b1e0d2" + "b" * 56
SHA3 = "0c0ffee0" + "c" * 56
SHA4 = "4d4d4d4d" + "d" * 56


def version_dir(models, version, sha):
    """A version directory as model_import leaves it (name@<version>-<sha8>, with its stamp)."""
    d = models / ("%s@%s-%s" % (NAME, version, sha[:8]))
    d.mkdir()
    (d / "config.json").write_text('{"model_type": "qwen3"}')
    (d / STAMP).write_text(json.dumps({"sha256": sha}))
    return d


def snapshot(models):
    """Everything under the models directory: names, link targets and file contents."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(str(models)):
        for n in sorted(dirnames + filenames):
            path = os.path.join(dirpath, n)
            rel = os.path.relpath(path, str(models))
            if os.path.islink(path):
                out[rel] = "-> " + os.readlink(path)
            elif os.path.isfile(path):
                with open(path) as f:
                    out[rel] = f.read()
            else:
                out[rel] = "dir"
    return out


@pytest.fixture
def models(tmp_path):
    d = tmp_path / "models"
    d.mkdir()
    return d


def test_prepared_names_the_version_and_changes_nothing_on_a_new_host(run_module, models):
    r = run_module(M, models_dir=str(models), name=NAME, version="2026.11", sha256=SHA1)
    assert r["changed"] is False
    assert r["version"] == "2026.11-3f2a9c01"
    assert r["version_name"] == NAME + "@2026.11-3f2a9c01"
    assert r["dir"] == str(models / NAME)
    assert snapshot(models) == {}


def test_prepared_migrates_the_older_layout_and_check_mode_only_says_so(run_module, models):
    old = models / NAME
    old.mkdir()
    (old / "config.json").write_text("{}")
    (old / STAMP).write_text(json.dumps({"sha256": SHA1}))
    before = snapshot(models)
    r = run_module(M, check_mode=True, models_dir=str(models), name=NAME, version="2026.11", sha256=SHA1)
    assert r["changed"] is True and "made %s a link" % NAME in r["msg"]
    assert snapshot(models) == before
    r = run_module(M, models_dir=str(models), name=NAME, version="2026.11", sha256=SHA1)
    assert r["changed"] is True
    assert os.readlink(str(models / NAME)) == NAME + "@2026.11-3f2a9c01"
    assert (models / NAME / "config.json").read_text() == "{}", "the files moved with the directory"
    again = run_module(M, models_dir=str(models), name=NAME, version="2026.11", sha256=SHA1)
    assert again["changed"] is False


def test_active_switches_the_link_prunes_beyond_keep_and_keeps_the_replaced_one(run_module, models):
    args = dict(models_dir=str(models), name=NAME, state="active", keep=1)
    for version, sha in (("1", SHA1), ("2", SHA2), ("3", SHA3), ("4", SHA4)):
        version_dir(models, version, sha)
        r = run_module(M, version=version, sha256=sha, **args)
        assert r["changed"] is True and r["switched"] is True
        assert os.readlink(str(models / NAME)) == "%s@%s-%s" % (NAME, version, sha[:8])
    # 4 replaced 3, which stays (it serves until 4 is healthy, keep=1 too); 2 went now, 1 the run before
    assert r["previous"] == "3-0c0ffee0"
    assert r["removed"] == ["2-77b1e0d2"]
    assert r["versions"] == ["3-0c0ffee0", "4-4d4d4d4d"]
    assert sorted(p.name for p in models.iterdir() if "@" in p.name) == [NAME + "@3-0c0ffee0", NAME + "@4-4d4d4d4d"]
    assert "link -> 3-0c0ffee0" in r["diff"]["before"] and "link -> 4-4d4d4d4d" in r["diff"]["after"]
    again = run_module(M, version="4", sha256=SHA4, **args)
    assert again["changed"] is False and again["removed"] == [] and again["switched"] is False


def test_active_in_check_mode_reports_the_switch_and_removals_and_changes_nothing(run_module, models):
    args = dict(models_dir=str(models), name=NAME, state="active", keep=0)
    version_dir(models, "1", SHA1)
    run_module(M, version="1", sha256=SHA1, **args)
    version_dir(models, "2", SHA2)
    run_module(M, version="2", sha256=SHA2, **args)
    version_dir(models, "3", SHA3)
    before = snapshot(models)
    r = run_module(M, check_mode=True, version="3", sha256=SHA3, **args)
    assert r["changed"] is True and r["switched"] is True and r["removed"] == ["1-3f2a9c01"]
    assert snapshot(models) == before


def test_a_protected_version_is_never_removed(run_module, models):
    args = dict(models_dir=str(models), name=NAME, state="active", keep=0)
    for version, sha in (("1", SHA1), ("2", SHA2), ("3", SHA3)):
        version_dir(models, version, sha)
        r = run_module(M, version=version, sha256=sha, protect=["1-3f2a9c01"], **args)
    assert r["removed"] == [] and "1-3f2a9c01" in r["versions"]
    assert (models / (NAME + "@1-3f2a9c01")).is_dir()


@pytest.mark.parametrize(
    "args,message",
    [
        (dict(sha256="abc"), "is not a 64-hex-digit checksum"),
        (dict(version="v 1/../x"), "use letters, digits"),
        (dict(name="../etc"), "use letters, digits and . _ + - only"),
        (dict(keep=-1), "keep must be 0 or more"),
        (dict(state="active"), "does not exist: import the model version first"),
        (dict(state="gone"), "state"),
    ],
)
def test_bad_input_fails_with_a_message_and_touches_nothing(run_module, models, args, message):
    full = dict(dict(models_dir=str(models), name=NAME, version="2026.11", sha256=SHA1), **args)
    r = run_module(M, **full)
    assert r["failed"] is True and message in r["msg"], r["msg"]
    assert snapshot(models) == {}


def test_a_file_where_the_link_goes_is_refused(run_module, models):
    (models / NAME).write_text("not a model")
    r = run_module(M, models_dir=str(models), name=NAME, version="1", sha256=SHA1)
    assert r["failed"] is True and "neither a directory nor a link" in r["msg"]
    assert (models / NAME).read_text() == "not a model"


def test_prepared_says_in_place_only_when_nothing_is_left_to_do(run_module, models, monkeypatch):
    checked = []
    monkeypatch.setattr(M, "validate_model_dir", lambda path, lmo: checked.append((path, lmo)) or {})
    prepared = dict(models_dir=str(models), name=NAME, state="prepared")
    active = dict(models_dir=str(models), name=NAME, state="active", keep=0)
    # Not imported yet, then imported but not active: the full path has work to do.
    assert run_module(M, version="1", sha256=SHA1, **prepared)["in_place"] is False
    version_dir(models, "1", SHA1)
    assert run_module(M, version="1", sha256=SHA1, **prepared)["in_place"] is False
    run_module(M, version="1", sha256=SHA1, **active)
    r = run_module(M, version="1", sha256=SHA1, language_model_only=True, **prepared)
    assert r["in_place"] is True and r["changed"] is False
    assert checked == [(str(models / (NAME + "@1-3f2a9c01")), True)]
    # Version 2 active, 1 kept as the replaced one: with keep=0 the next activation prunes 1 -> not in place.
    version_dir(models, "2", SHA2)
    run_module(M, version="2", sha256=SHA2, **active)
    assert run_module(M, version="2", sha256=SHA2, keep=1, **prepared)["in_place"] is True
    assert run_module(M, version="2", sha256=SHA2, keep=0, **prepared)["in_place"] is False
    # A stamp of another checksum (a re-import is due), or a directory the validation refuses.
    (models / (NAME + "@2-77b1e0d2") / STAMP).write_text(json.dumps({"sha256": SHA3}))
    assert run_module(M, version="2", sha256=SHA2, keep=1, **prepared)["in_place"] is False
    (models / (NAME + "@2-77b1e0d2") / STAMP).write_text(json.dumps({"sha256": SHA2}))

    def refuse(path, lmo):
        raise M.ModelError("no weights")

    monkeypatch.setattr(M, "validate_model_dir", refuse)
    assert run_module(M, version="2", sha256=SHA2, keep=1, **prepared)["in_place"] is False


def test_a_damaged_history_prunes_nothing_and_says_so(run_module, tmp_path):
    """Failed on 9dce105: a damaged history made model_versions delete a version it should keep."""
    models = tmp_path / "models"
    models.mkdir()
    for version, sha in (("1", SHA1), ("2", SHA2)):
        version_dir(models, version, sha)
        assert not run_module(
            M, models_dir=str(models), name=NAME, version=version, sha256=sha, keep=2, state="active"
        ).get("failed")
    version_dir(models, "3", SHA3)
    (models / (".%s.history.json" % NAME)).write_text('["1-3f2a9c01", ')
    r = run_module(M, models_dir=str(models), name=NAME, version="3", sha256=SHA3, keep=2, state="active")
    assert r["changed"] and r["removed"] == [] and "damaged" in r["held"][0]
    assert any("damaged" in w for w in r["warnings"])
    assert sorted(os.listdir(str(models))) == sorted(
        [".%s.history.json" % NAME, NAME, NAME + "@1-3f2a9c01", NAME + "@2-77b1e0d2", NAME + "@3-0c0ffee0"]
    )
