"""Hostile/broken input for model_import (issue 12: #5, #7, #9).

Each test name states what is defended.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import gzip
import json
import os
import shutil
import tarfile

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.model import _model_import as mi


@pytest.fixture
def src(tiny_model_dir, tmp_path):
    d = str(tmp_path / "bundle" / "artifacts" / "qwen-tiny")
    shutil.copytree(tiny_model_dir, d)
    return d


def dir_sha(src):
    lines = [(rel, mi.file_sha256(read)) for rel, read, _s, _p in mi.scan_dir(src)]
    return mi.directory_digests(src, lines)[0]


def make_tar(src, path, mode="w"):
    with tarfile.open(path, mode) as t:
        t.add(src, arcname="qwen-tiny")
    return path


# ---------------------------------------------------------------- 5. directory sources cannot reach out


def test_directory_import_refuses_symlink_out_of_the_source(src, tmp_path):
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$secret")
    os.symlink(str(secret), os.path.join(src, "notes.txt"))
    models = tmp_path / "models"
    with pytest.raises(mi.ModelError, match=r"notes.txt is a symlink to .*shadow, outside the model source"):
        mi.import_model(src, str(models), "qwen", "0" * 64)
    assert not models.exists() or os.listdir(str(models)) == []


def test_directory_import_follows_symlink_that_stays_inside(src, tmp_path):
    os.symlink("tokenizer.json", os.path.join(src, "tokenizer-alias.json"))
    models = tmp_path / "models"
    r = mi.import_model(src, str(models), "qwen", dir_sha(src))
    copied = models / "qwen" / "tokenizer-alias.json"
    assert r["imported"] and copied.is_file() and not copied.is_symlink()


def test_directory_import_refuses_symlinked_directory(src, tmp_path):
    os.symlink("/etc", os.path.join(src, "etc"))
    with pytest.raises(mi.ModelError, match="symlink to a directory"):
        mi.import_model(src, str(tmp_path / "models"), "qwen", "0" * 64)


def test_directory_import_never_copies_a_fifo(src, tmp_path):
    os.mkfifo(os.path.join(src, "pipe"))
    with pytest.raises(mi.ModelError, match=r"pipe is a device, FIFO or socket"):
        mi.import_model(src, str(tmp_path / "models"), "qwen", "0" * 64)


def test_directory_import_never_copies_a_device(src, tmp_path):
    os.symlink("/dev/zero", os.path.join(src, "zero"))  # a link to a device outside: refused either way
    with pytest.raises(mi.ModelError, match="outside the model source|device"):
        mi.import_model(src, str(tmp_path / "models"), "qwen", "0" * 64)


def test_private_file_in_directory_source_is_never_made_world_readable(src, tmp_path):
    os.chmod(os.path.join(src, "generation_config.json"), 0o600)
    models = tmp_path / "models"
    mi.import_model(src, str(models), "qwen", dir_sha(src))
    assert os.stat(str(models / "qwen" / "generation_config.json")).st_mode & 0o777 == 0o640
    assert os.stat(str(models / "qwen" / "config.json")).st_mode & 0o777 == 0o644


def test_private_member_in_tar_source_is_never_made_world_readable(src, tmp_path):
    os.chmod(os.path.join(src, "generation_config.json"), 0o600)
    tar = make_tar(src, str(tmp_path / "m.tar"))
    models = tmp_path / "models"
    mi.import_model(tar, str(models), "qwen", mi.file_sha256(tar))
    assert os.stat(str(models / "qwen" / "generation_config.json")).st_mode & 0o007 == 0


def test_wrong_sha256_of_a_tar_is_refused_before_anything_is_swapped(src, tmp_path):
    models = tmp_path / "models"
    good = make_tar(src, str(tmp_path / "good.tar"))
    mi.import_model(good, str(models), "qwen", mi.file_sha256(good))
    with open(os.path.join(src, "README.md"), "w") as f:
        f.write("tampered\n")
    other = make_tar(src, str(tmp_path / "other.tar"))
    with pytest.raises(mi.ModelError, match="sha256 is .* expected"):
        mi.import_model(other, str(models), "qwen", "f" * 64)
    assert mi.read_stamp(str(models / "qwen"))["sha256"] == mi.file_sha256(good)
    assert not (models / "qwen" / "README.md").exists()
    assert sorted(os.listdir(str(models))) == ["qwen"]


def test_wrong_sha256_of_a_directory_is_refused_and_not_recorded(src, tmp_path):
    models = tmp_path / "models"
    with pytest.raises(mi.ModelError, match="digest of its files"):
        mi.import_model(src, str(models), "qwen", "f" * 64)
    assert os.listdir(str(models)) == []


def test_directory_digest_matches_the_bundle_roles_definition(src):
    # roles/bundle/templates/staged.j2: sha256 of the sorted "sha256  <bundle path>" lines joined by \n.
    import hashlib

    lines = []
    for rel, read, _s, _p in mi.scan_dir(src):
        lines.append("%s  artifacts/qwen-tiny/%s" % (mi.file_sha256(read), rel))
    expected = hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()
    assert dir_sha(src) == expected


# ---------------------------------------------------------------- 7. never delete the only good copy


def test_run_killed_between_the_two_renames_is_recovered_next_run(src, tmp_path):
    models = tmp_path / "models"
    tar = make_tar(src, str(tmp_path / "m.tar"))
    sha = mi.file_sha256(tar)
    mi.import_model(tar, str(models), "qwen", sha)
    # The state a SIGKILL between rename(dest -> .replaced) and rename(.importing -> dest) leaves:
    os.rename(str(models / "qwen"), str(models / ".qwen.replaced"))
    os.makedirs(str(models / ".qwen.importing"))
    # The next run's source is broken: the old model must survive it.
    broken = tmp_path / "broken.tar"
    broken.write_bytes(b"not a tar at all" * 100)
    with pytest.raises(mi.ModelError):
        mi.import_model(str(broken), str(models), "qwen", mi.file_sha256(str(broken)))
    assert mi.read_stamp(str(models / "qwen"))["sha256"] == sha
    assert sorted(os.listdir(str(models))) == ["qwen"]


def test_run_killed_between_renames_then_same_model_is_kept_without_reimport(src, tmp_path):
    models = tmp_path / "models"
    tar = make_tar(src, str(tmp_path / "m.tar"))
    sha = mi.file_sha256(tar)
    mi.import_model(tar, str(models), "qwen", sha)
    os.rename(str(models / "qwen"), str(models / ".qwen.replaced"))
    r = mi.import_model(tar, str(models), "qwen", sha)
    assert not r["imported"] and any("put back" in w for w in r["warnings"])


def test_failed_second_rename_puts_the_previous_model_back(src, tmp_path, monkeypatch):
    models = tmp_path / "models"
    tar = make_tar(src, str(tmp_path / "m.tar"))
    sha = mi.file_sha256(tar)
    mi.import_model(tar, str(models), "qwen", sha)
    real = os.rename

    def rename(a, b):
        if a.endswith(".qwen.importing"):
            raise OSError(5, "Input/output error")
        return real(a, b)

    monkeypatch.setattr(mi.os, "rename", rename)
    with pytest.raises(OSError):
        mi.import_model(tar, str(models), "qwen", sha, force=True)
    monkeypatch.setattr(mi.os, "rename", real)
    assert mi.read_stamp(str(models / "qwen"))["sha256"] == sha


def test_model_directory_that_is_a_symlink_is_imported_at_its_target_twice(src, tmp_path):
    models = tmp_path / "models"
    data = tmp_path / "bigdisk"
    models.mkdir()
    data.mkdir()
    os.symlink(str(data / "qwen"), str(models / "qwen"))
    tar = make_tar(src, str(tmp_path / "m.tar"))
    mi.import_model(tar, str(models), "qwen", mi.file_sha256(tar))
    assert os.path.islink(str(models / "qwen"))
    assert (data / "qwen" / "config.json").is_file()
    with open(os.path.join(src, "README.md"), "w") as f:
        f.write("v2\n")
    tar2 = make_tar(src, str(tmp_path / "m2.tar"))
    r = mi.import_model(tar2, str(models), "qwen", mi.file_sha256(tar2))
    assert r["imported"] and os.path.islink(str(models / "qwen"))
    assert (models / "qwen" / "README.md").is_file()
    assert sorted(os.listdir(str(data))) == ["qwen"] and sorted(os.listdir(str(models))) == ["qwen"]


# ---------------------------------------------------------------- 9. no tracebacks


@pytest.mark.parametrize("kind", ["garbage", "truncated_tar", "truncated_tgz", "garbage_gz"])
def test_garbage_or_truncated_model_archive_fails_naming_the_file(src, tmp_path, kind):
    path = tmp_path / ("m.tar.gz" if "gz" in kind else "m.tar")
    if kind == "garbage":
        path.write_bytes(os.urandom(5000))
    elif kind == "truncated_tar":
        data = open(make_tar(src, str(tmp_path / "full.tar")), "rb").read()
        path.write_bytes(data[: len(data) // 2 + 100])
    elif kind == "truncated_tgz":
        data = open(make_tar(src, str(tmp_path / "full.tgz"), "w:gz"), "rb").read()
        path.write_bytes(data[: len(data) // 2])
    else:
        path.write_bytes(gzip.compress(b"not a tar" * 1000)[:-30])
    with pytest.raises(mi.ModelError, match=r"%s: not a readable tar archive.*stage the bundle again" % path.name):
        mi.import_model(str(path), str(tmp_path / "models"), "qwen", mi.file_sha256(str(path)))
    assert os.listdir(str(tmp_path / "models")) == [] if (tmp_path / "models").exists() else True


@pytest.mark.parametrize("value", [5, None, ["a"], {"x": 1}])
def test_non_string_shard_name_in_index_fails_naming_the_index(src, value):
    path = os.path.join(src, mi.INDEX)
    index = json.load(open(path))
    key = sorted(index["weight_map"])[0]
    index["weight_map"][key] = value
    with open(path, "w") as f:
        json.dump(index, f)
    with pytest.raises(mi.ModelError, match=r"model.safetensors.index.json: weight_map names shard .* not a file name"):
        mi.validate_model_dir(src)


@pytest.mark.parametrize("content", [b"[]", b"null", b"\xff\xfe", b'"x"'])
def test_stamp_of_the_wrong_shape_means_import_again(src, tmp_path, content):
    models = tmp_path / "models"
    tar = make_tar(src, str(tmp_path / "m.tar"))
    mi.import_model(tar, str(models), "qwen", mi.file_sha256(tar))
    (models / "qwen" / mi.STAMP).write_bytes(content)
    r = mi.import_model(tar, str(models), "qwen", mi.file_sha256(tar))
    assert r["imported"]
