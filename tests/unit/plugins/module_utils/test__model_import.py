"""Unit tests for _model_import: validation, atomic import, stamp skip, safety checks."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import tarfile

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.model import _model_import as mi

SHA = "a" * 64


def sha_of(src):
    """The sha256 the bundle manifest gives a source: the archive's, or the digest of a directory's files."""
    if os.path.isdir(src):
        import hashlib

        lines = sorted("%s  %s" % (mi.file_sha256(read), rel) for rel, read, _size, _private in mi.scan_dir(src))
        return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()  # paths relative to the directory
    return mi.file_sha256(src)


@pytest.fixture
def model_dir(tiny_model_dir):
    """The shared tiny checkpoint (tests/unit/conftest.py); tests copy it before changing anything."""
    return tiny_model_dir


@pytest.fixture
def model_tar(model_dir, tmp_path):
    path = str(tmp_path / "model.tar")
    with tarfile.open(path, "w") as t:
        t.add(model_dir, arcname="qwen-tiny")
    return path


def test_validate_fake_model(model_dir):
    info = mi.validate_model_dir(model_dir)
    assert info["shards"] >= 1 and info["warnings"] == []


@pytest.mark.parametrize(
    "remove,match",
    [
        ("config.json", "config.json missing"),
        ("tokenizer.json", "tokenizer.json missing"),
        ("preprocessor_config.json", "preprocessor_config.json missing"),
    ],
)
def test_validate_names_missing_file(model_dir, tmp_path, remove, match):
    import shutil

    d = str(tmp_path / "copy")
    shutil.copytree(model_dir, d)
    os.unlink(os.path.join(d, remove))
    with pytest.raises(mi.ModelError, match=match):
        mi.validate_model_dir(d)
    if remove == "preprocessor_config.json":
        mi.validate_model_dir(d, language_model_only=True)


def test_a_text_only_model_needs_no_image_processor(model_dir, tmp_path):
    # A plain Qwen3ForCausalLM (the real engine's tiny model in the test world) has no vision tower.
    import shutil

    d = str(tmp_path / "text")
    shutil.copytree(model_dir, d)
    os.unlink(os.path.join(d, "preprocessor_config.json"))
    cfg = json.load(open(os.path.join(d, "config.json")))
    text_only = dict(cfg["text_config"], architectures=["Qwen3ForCausalLM"], model_type="qwen3")
    json.dump(text_only, open(os.path.join(d, "config.json"), "w"))
    assert mi.validate_model_dir(d)["shards"] >= 1


def test_validate_missing_and_truncated_shard(model_dir, tmp_path):
    import shutil

    d = str(tmp_path / "copy")
    shutil.copytree(model_dir, d)
    index = json.load(open(os.path.join(d, mi.INDEX)))
    shard = sorted(set(index["weight_map"].values()))[0]
    with open(os.path.join(d, shard), "r+b") as f:
        f.truncate(20)
    with pytest.raises(mi.ModelError, match="does not fit"):
        mi.validate_model_dir(d)
    os.unlink(os.path.join(d, shard))
    with pytest.raises(mi.ModelError, match="shard %s named in the index is missing" % shard):
        mi.validate_model_dir(d)


@pytest.mark.parametrize("use_tar", [True, False])
def test_import_then_skip_then_replace(model_dir, model_tar, tmp_path, use_tar):
    import shutil

    src = model_tar if use_tar else model_dir
    sha = sha_of(src)
    models = str(tmp_path / "models")
    r = mi.import_model(src, models, "qwen", sha)
    assert r["changed"] and r["imported"]
    dest = os.path.join(models, "qwen")
    assert os.path.isfile(os.path.join(dest, "config.json"))  # top-level dir of the tar stripped
    assert mi.read_stamp(dest)["sha256"] == sha
    assert oct(os.stat(os.path.join(dest, "config.json")).st_mode & 0o777) == "0o644"
    assert sorted(os.listdir(models)) == ["qwen"]  # no temporary sibling left
    r = mi.import_model(src, models, "qwen", sha)
    assert not r["changed"] and not r["imported"]
    # A new version of the model.
    d2 = str(tmp_path / "v2" / "qwen-tiny")
    shutil.copytree(model_dir, d2)
    with open(os.path.join(d2, "README.md"), "w") as f:
        f.write("v2\n")
    src2 = d2
    if use_tar:
        src2 = str(tmp_path / "v2.tar")
        with tarfile.open(src2, "w") as t:
            t.add(d2, arcname="qwen-tiny")
    sha2 = sha_of(src2)
    r = mi.import_model(src2, models, "qwen", sha2, check_mode=True)
    assert r["changed"] and mi.read_stamp(dest)["sha256"] == sha
    r = mi.import_model(src2, models, "qwen", sha2)
    assert r["changed"] and mi.read_stamp(dest)["sha256"] == sha2
    assert os.path.isfile(os.path.join(dest, "README.md"))
    assert sorted(os.listdir(models)) == ["qwen"]


def test_import_invalid_model_leaves_nothing(model_dir, tmp_path):
    import shutil

    d = str(tmp_path / "bad")
    shutil.copytree(model_dir, d)
    os.unlink(os.path.join(d, "tokenizer_config.json"))
    models = str(tmp_path / "models")
    with pytest.raises(mi.ModelError, match="tokenizer_config.json"):
        mi.import_model(d, models, "qwen", sha_of(d))
    assert os.listdir(models) == []


def test_free_space_checked_first(model_tar, tmp_path, monkeypatch):
    monkeypatch.setattr(mi, "free_bytes", lambda p: 1000)
    models = str(tmp_path / "models")
    with pytest.raises(mi.ModelError, match="bytes free"):
        mi.import_model(model_tar, models, "qwen", SHA)
    assert os.listdir(models) == []


@pytest.mark.parametrize("member", ["../evil", "/abs/evil"])
def test_rejects_escaping_members(tmp_path, member):
    import io

    path = str(tmp_path / "evil.tar")
    with tarfile.open(path, "w") as t:
        info = tarfile.TarInfo(member)
        info.size = 1
        t.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(mi.ModelError, match="escapes"):
        mi.import_model(path, str(tmp_path / "models"), "m", SHA)


def test_rejects_symlinks(tmp_path):
    path = str(tmp_path / "link.tar")
    with tarfile.open(path, "w") as t:
        info = tarfile.TarInfo("m/config.json")
        info.type = tarfile.SYMTYPE
        info.linkname = "/etc/shadow"
        t.addfile(info)
    with pytest.raises(mi.ModelError, match="link"):
        mi.import_model(path, str(tmp_path / "models"), "m", SHA)


def test_rejects_bad_name(tmp_path):
    with pytest.raises(mi.ModelError, match="plain directory name"):
        mi.import_model("x", str(tmp_path), "../x", SHA)


def test_check_mode_before_staging(tmp_path):
    r = mi.import_model(str(tmp_path / "nope.tar"), str(tmp_path / "models"), "m", SHA, check_mode=True)
    assert r["changed"] and r["imported"] and r["warnings"]
    assert not (tmp_path / "models").exists()
    with pytest.raises(mi.ModelError, match="not found"):
        mi.import_model(str(tmp_path / "nope.tar"), str(tmp_path / "models"), "m", SHA)


def test_no_room_keeps_the_previous_model(model_tar, tmp_path, monkeypatch):
    """Issue 46: the disk full before a model import: the path, the bytes needed, the old model untouched."""
    models = str(tmp_path / "models")
    mi.import_model(model_tar, models, "qwen", sha_of(model_tar))
    before = sorted(os.listdir(os.path.join(models, "qwen")))
    monkeypatch.setattr(mi, "free_bytes", lambda p: 1000)
    with pytest.raises(mi.ModelError) as e:
        mi.import_model(model_tar, models, "qwen", sha_of(model_tar), force=True)
    msg = str(e.value)
    assert msg.startswith("%s: 1000 bytes free" % models) and "the model needs" in msg
    assert "the model in %s is untouched" % os.path.join(models, "qwen") in msg
    assert sorted(os.listdir(os.path.join(models, "qwen"))) == before
    assert sorted(os.listdir(models)) == ["qwen"]


def test_disk_that_fills_during_the_import_leaves_no_partial_copy(model_tar, tmp_path, monkeypatch):
    import errno

    models = str(tmp_path / "models")
    mi.import_model(model_tar, models, "qwen", sha_of(model_tar))
    before = sorted(os.listdir(os.path.join(models, "qwen")))
    real = mi._extract_members

    def fills(src, tmp):
        real(src, tmp)
        with open(os.path.join(tmp, "partial.bin"), "wb") as f:
            f.write(b"x" * 10)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(mi, "_extract_members", fills)
    with pytest.raises(mi.ModelError) as e:
        mi.import_model(model_tar, models, "qwen", sha_of(model_tar), force=True)
    msg = str(e.value)
    assert msg.startswith("%s: the disk filled during the import" % models)
    assert "No space left on device" in msg and "the model needs" in msg and "was removed" in msg
    assert sorted(os.listdir(models)) == ["qwen"]  # no .qwen.importing left
    assert sorted(os.listdir(os.path.join(models, "qwen"))) == before


def _as_pooling(model_dir, tmp_path, architectures, modules=False):
    """The tiny checkpoint's files as a pooling model: its config's architectures changed, no chat template and no
    generation_config.json (bge-m3 and bge-reranker-v2-m3 ship neither)."""
    import shutil

    d = str(tmp_path / "pooling")
    shutil.copytree(model_dir, d)
    cfg = json.load(open(os.path.join(d, "config.json")))
    cfg = dict(cfg.get("text_config") or cfg, architectures=architectures)
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    for name in ("chat_template.jinja", "generation_config.json", "preprocessor_config.json"):
        if os.path.exists(os.path.join(d, name)):
            os.unlink(os.path.join(d, name))
    tok = json.load(open(os.path.join(d, "tokenizer_config.json")))
    tok.pop("chat_template", None)
    json.dump(tok, open(os.path.join(d, "tokenizer_config.json"), "w"))
    if modules:
        os.makedirs(os.path.join(d, "1_Pooling"))
        json.dump({"pooling_mode_lasttoken": True}, open(os.path.join(d, "1_Pooling", "config.json"), "w"))
        json.dump(
            [{"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}],
            open(os.path.join(d, "modules.json"), "w"),
        )
    return d


@pytest.mark.parametrize(
    "architectures,modules,task",
    [
        (["BertModel"], False, "embed"),
        (["XLMRobertaForSequenceClassification"], False, "classify"),
        (["Qwen3ForCausalLM"], True, "embed"),  # sentence-transformers' modules.json: Qwen3-Embedding
    ],
)
def test_a_pooling_model_needs_no_chat_template(model_dir, tmp_path, architectures, modules, task):
    d = _as_pooling(model_dir, tmp_path, architectures, modules)
    info = mi.validate_model_dir(d)
    assert info["pooling_task"] == task
    # No "generation_config.json missing" warning either: a pooling model samples nothing.
    assert info["warnings"] == []


def test_a_generative_model_without_a_chat_template_is_refused(model_dir, tmp_path):
    d = _as_pooling(model_dir, tmp_path, ["Qwen3ForCausalLM"])
    with pytest.raises(mi.ModelError, match="no chat template"):
        mi.validate_model_dir(d)


def test_a_broken_modules_json_is_named(model_dir, tmp_path):
    d = _as_pooling(model_dir, tmp_path, ["Qwen3ForCausalLM"], modules=True)
    with open(os.path.join(d, "modules.json"), "w") as f:
        f.write("{not json")
    with pytest.raises(mi.ModelError, match="modules.json"):
        mi.validate_model_dir(d)
