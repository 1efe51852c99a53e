# -*- coding: utf-8 -*-
"""execution-environment.yml (AWX/AAP) validates without a network: `ansible-builder create` writes a
build context whose requirements install this collection, and only it, from the file it ships."""

import os
import shutil
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EE = os.path.join(ROOT, "execution-environment.yml")


def galaxy():
    with open(os.path.join(ROOT, "galaxy.yml")) as f:
        return yaml.safe_load(f)


def builder():
    exe = shutil.which("ansible-builder") or os.path.join(os.path.dirname(sys.executable), "ansible-builder")
    if not os.path.exists(exe):
        pytest.fail("ansible-builder is not installed: pip install -r tests/requirements-ci.txt")
    return exe


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    """The build context from a copy of the repository root (build/ee gets the collection tarball)."""
    work = tmp_path_factory.mktemp("ee")
    out = work / "build" / "ee"
    out.mkdir(parents=True)
    subprocess.run(
        ["ansible-galaxy", "collection", "build", "--force", "--output-path", str(out), ROOT],
        check=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    shutil.copy(EE, str(work / "execution-environment.yml"))
    ctx = work / "context"
    env = dict(os.environ, http_proxy="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9", no_proxy="")
    p = subprocess.run(
        [
            builder(),
            "create",
            "-f",
            "execution-environment.yml",
            "--context",
            str(ctx),
            "--output-filename",
            "Containerfile",
        ],
        cwd=str(work),
        env=env,
        check=False,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        universal_newlines=True,
    )
    assert p.returncode == 0, p.stdout
    return ctx


def test_schema_3_ansible_core_217_and_no_other_collection():
    with open(EE) as f:
        ee = yaml.safe_load(f)
    assert ee["version"] == 3
    core = ee["dependencies"]["ansible_core"]["package_pip"]
    assert core.replace(" ", "") == "ansible-core>=2.17,<2.18"
    colls = ee["dependencies"]["galaxy"]["collections"]
    assert len(colls) == 1 and colls[0]["type"] == "file"
    g = galaxy()
    name = "%s-%s-%s.tar.gz" % (g["namespace"], g["name"], g["version"])
    assert os.path.basename(colls[0]["name"]) == name, "execution-environment.yml names %s; galaxy.yml builds %s" % (
        colls[0]["name"],
        name,
    )
    assert [os.path.basename(f["src"]) for f in ee["additional_build_files"]] == [name]
    assert not g.get("dependencies"), "the collection must not pull other collections into the EE"


def test_builder_create_writes_a_context_that_installs_the_collection_offline(context, tmp_path):
    containerfile = (context / "Containerfile").read_text()
    assert "COPY _build /build" in containerfile
    assert "ansible-galaxy collection install" in containerfile
    reqs = yaml.safe_load((context / "_build" / "requirements.yml").read_text())
    (coll,) = reqs["collections"]
    shipped = context / "_build" / os.path.relpath(coll["name"], "/build")
    assert shipped.is_file(), "the requirement %s is not in the build context" % coll["name"]
    # What the galaxy stage runs, here, without a network: the tarball installs, with no dependency to fetch.
    p = subprocess.run(
        ["ansible-galaxy", "collection", "install", "--offline", "--force", "-p", str(tmp_path), str(shipped)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        universal_newlines=True,
        check=False,
    )
    assert p.returncode == 0, p.stdout
    installed = tmp_path / "ansible_collections"
    assert sorted(os.listdir(str(installed))) == ["airgap"]
    assert (installed / "airgap" / "vllm" / "roles" / "bundle_build" / "tasks" / "main.yml").is_file()
    assert (installed / "airgap" / "vllm" / "playbooks" / "site.yml").is_file()
