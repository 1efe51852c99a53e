# -*- coding: utf-8 -*-
"""The control-node image the bundle may carry (issue 47): what bundle_build builds or takes, and whether an image
will do as a base or as the control node, from what the probe prints inside it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess
import sys

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.bundle import _bundle_pack as P
from ansible_collections.airgap.vllm.plugins.module_utils.bundle import _control_image as C


# ------------------------------------------------------------------------------------------------------- plan
def test_off_means_nothing_to_do():
    out = C.plan(False, source="x:1", base="y:2", version="0.1.0")
    assert out["enabled"] is False and out["build"] is False and out["artifact"] is None and out["problems"] == []


def test_a_base_means_a_build_tagged_with_the_collection_version():
    out = C.plan(True, base="debian-py311:1", version="0.1.0", wheels=True, wheel_pythons=["3.11"])
    assert out["problems"] == []
    assert out["build"] is True and out["image"] == out["tag"] == "airgap-vllm-control:0.1.0"
    assert out["artifact"] == {
        "kind": "control",
        "name": "airgap-vllm-control",
        "version": "0.1.0",
        "image": "airgap-vllm-control:0.1.0",
    }


def test_a_source_image_is_saved_as_named_without_a_build():
    out = C.plan(True, source="airgap-vllm-ee:0.1.0", version="0.1.0", wheels=False)
    assert out["problems"] == [] and out["build"] is False
    assert out["image"] == "airgap-vllm-ee:0.1.0" and out["artifact"]["image"] == "airgap-vllm-ee:0.1.0"
    assert out["artifact"]["kind"] == C.CONTROL_KIND


@pytest.mark.parametrize(
    "kw, words",
    [
        (dict(), "neither bundle_build_control_image_source"),
        (dict(source="a:1", base="b:1"), "both set"),
        (dict(base="b:1", wheels=False), "set bundle_build_wheels true"),
        (dict(base="b:1", wheel_pythons=["3.11", "py3"]), "py3 is not X.Y"),
    ],
)
def test_what_cannot_be_done_says_which_variable_to_set(kw, words):
    out = C.plan(True, version="0.1.0", **kw)
    assert out["artifact"] is None
    assert len(out["problems"]) == 1 and words in out["problems"][0], out["problems"]


def test_the_control_kind_is_packed_but_not_one_an_operator_lists():
    assert C.CONTROL_KIND in P.PACK_KINDS and C.CONTROL_KIND not in P.ARTIFACT_KINDS
    art = C.plan(True, base="b:1", version="0.1.0", wheel_pythons=["3.11"])["artifact"]
    assert P.kind_problem(art, 0, P.PACK_KINDS) is None
    assert "is not one of" in P.kind_problem(art, 0)


# ------------------------------------------------------------------------------------------------------- probe
BASE_OK = """python /usr/bin/python3.11 3.11 venv
python /usr/bin/python3 3.11 venv
ssh /usr/bin/ssh
ansible-playbook
collection
"""

EE_OK = """python /usr/bin/python3.11 3.11 novenv
python /usr/bin/python3 3.9 venv
ssh /usr/bin/ssh
ansible-playbook ansible-playbook [core 2.17.14]
collection 0.1.0
"""


def test_parse_probe_keeps_each_python_version_once_newest_first():
    facts = C.parse_probe(BASE_OK)
    assert facts["pythons"] == [{"path": "/usr/bin/python3.11", "version": "3.11", "venv": True}]
    assert facts["ssh"] == "/usr/bin/ssh" and facts["ansible_core"] == "" and facts["collection"] == ""
    ee = C.parse_probe(EE_OK)
    assert [p["version"] for p in ee["pythons"]] == ["3.11", "3.9"]
    assert ee["ansible_core"] == "2.17.14" and ee["collection"] == "0.1.0"


def test_a_base_with_python_venv_and_ssh_will_do():
    v = C.verdict(BASE_OK, "base", image="b:1", wheel_pythons=["3.10", "3.11", "3.12"])
    assert v["problems"] == [] and v["python"] == "3.11" and v["python_path"] == "/usr/bin/python3.11"


@pytest.mark.parametrize(
    "text, pythons, words",
    [
        (
            "python /usr/bin/python3 3.7 venv\nssh /usr/bin/ssh\n",
            ["3.11"],
            "no Python >= 3.10 that the bundle has wheels",
        ),
        (BASE_OK, ["3.12"], "no Python >= 3.10 that the bundle has wheels for (bundle_build_wheels_pythons: 3.12"),
        (BASE_OK.replace(" venv", " novenv"), ["3.11"], "has no venv/ensurepip module"),
        (BASE_OK.replace("ssh /usr/bin/ssh", "ssh none"), ["3.11"], "has no ssh client"),
    ],
)
def test_a_base_that_will_not_do_says_why(text, pythons, words):
    v = C.verdict(text, "base", image="b:1", wheel_pythons=pythons)
    assert len(v["problems"]) == 1 and words in v["problems"][0], v["problems"]


def test_a_control_image_with_core_in_range_and_this_collection_will_do():
    v = C.verdict(EE_OK, "control", image="ee:1", requires_ansible=">=2.16.0,<2.18.0", collection_version="0.1.0")
    assert v["problems"] == [] and v["python"] == "3.11" and v["ansible_core"] == "2.17.14"


@pytest.mark.parametrize(
    "text, version, words",
    [
        (
            EE_OK.replace("2.17.14", "2.18.1"),
            "0.1.0",
            "has ansible-core 2.18.1; this collection needs >=2.16.0,<2.18.0",
        ),
        (EE_OK.replace("collection 0.1.0", "collection "), "0.1.0", "does not have the collection airgap.vllm"),
        (EE_OK, "0.2.0", "has airgap.vllm 0.1.0; this bundle carries 0.2.0"),
        (EE_OK.replace("ansible-playbook [core 2.17.14]", ""), "0.1.0", "no ansible-playbook on its PATH"),
        (
            EE_OK.replace("3.11 novenv", "3.9 novenv"),
            "0.1.0",
            "has no Python >= 3.10 (found: /usr/bin/python3.11 (3.9)",
        ),
    ],
)
def test_a_control_image_that_will_not_do_says_why(text, version, words):
    v = C.verdict(text, "control", image="ee:1", requires_ansible=">=2.16.0,<2.18.0", collection_version=version)
    assert len(v["problems"]) == 1 and words in v["problems"][0], v["problems"]


def test_verdict_refuses_an_unknown_role():
    with pytest.raises(C.ControlImageError):
        C.verdict(BASE_OK, "engine")


@pytest.mark.parametrize(
    "version, spec, ok",
    [
        ("2.17.14", ">=2.16.0,<2.18.0", True),
        ("2.16.0", ">=2.16.0,<2.18.0", True),
        ("2.18.0", ">=2.16.0,<2.18.0", False),
        ("2.15.13", ">=2.16.0,<2.18.0", False),
        ("2.17.1", "==2.17.1", True),
        ("2.17.1", "!=2.17.1", False),
        ("2.17", ">2.16.9, <=2.17.0", True),
        ("", ">=2.16", False),
    ],
)
def test_in_range(version, spec, ok):
    assert C.in_range(version, spec) is ok


def test_in_range_refuses_what_it_cannot_read():
    with pytest.raises(C.ControlImageError):
        C.in_range("2.17.0", "~=2.17")


def _tool(bindir, name, body):
    path = os.path.join(str(bindir), name)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body + "\n")
    os.chmod(path, 0o755)


def test_the_probe_reports_a_real_python_and_fake_tools(tmp_path):
    """PROBE as the role runs it (sh -c), on a PATH of this test's Python and stand-ins for ssh and ansible."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    ver = "%d.%d" % sys.version_info[:2]
    os.symlink(sys.executable, str(bindir / ("python" + ver)))
    _tool(bindir, "ssh", "exit 0")
    _tool(bindir, "ansible-playbook", "echo 'ansible-playbook [core 2.17.14]'; echo '  config file = None'")
    _tool(
        bindir,
        "ansible-galaxy",
        "printf '\\n# /usr/share/ansible/collections/ansible_collections\\nCollection  Version\\n"
        "----------- -------\\nairgap.vllm 0.1.0\\n'",
    )
    for tool in ("awk", "head"):
        os.symlink(subprocess.check_output(["sh", "-c", "command -v " + tool]).decode().strip(), str(bindir / tool))
    out = subprocess.run(
        ["/bin/sh", "-c", C.PROBE],
        env={"PATH": str(bindir)},
        stdout=subprocess.PIPE,
        universal_newlines=True,
        check=True,
    ).stdout
    facts = C.parse_probe(out)
    assert [(p["path"], p["version"]) for p in facts["pythons"]] == [(str(bindir / ("python" + ver)), ver)]
    assert facts["ssh"] == str(bindir / "ssh")
    assert facts["ansible_core"] == "2.17.14" and facts["collection"] == "0.1.0"
    v = C.verdict(out, "control", requires_ansible=">=2.16.0,<2.18.0", collection_version="0.1.0")
    assert v["problems"] == ([] if sys.version_info[:2] >= C.MIN_PYTHON else v["problems"])
    # Without ssh and ansible: both said.
    os.unlink(str(bindir / "ssh"))
    os.unlink(str(bindir / "ansible-playbook"))
    out = subprocess.run(
        ["/bin/sh", "-c", C.PROBE],
        env={"PATH": str(bindir)},
        stdout=subprocess.PIPE,
        universal_newlines=True,
        check=True,
    ).stdout
    v = C.verdict(out, "control", requires_ansible=">=2.16.0,<2.18.0", collection_version="0.1.0")
    assert any("no ansible-playbook" in p for p in v["problems"]) and any("no ssh client" in p for p in v["problems"])


# --------------------------------------------------------------------------------------------------- dockerfile
def test_the_dockerfile_installs_from_the_bundles_wheels_and_tarball_offline():
    text = C.dockerfile(
        "b:1", "/usr/bin/python3.11", "3.11", ["ansible-core>=2.17,<2.18"], "airgap-vllm-0.1.0.tar.gz", version="0.1.0"
    )
    lines = text.splitlines()
    assert "FROM b:1" in lines
    assert "RUN /usr/bin/python3.11 -m venv /opt/airgap-vllm/venv \\" in lines
    assert "--no-index" in text and "--find-links /tmp/airgap-vllm-build/wheels 'ansible-core>=2.17,<2.18'" in text
    assert (
        "ansible-galaxy collection install --offline -p /usr/share/ansible/collections "
        "/tmp/airgap-vllm-build/airgap-vllm-0.1.0.tar.gz"
    ) in text
    assert "ENV PATH=/opt/airgap-vllm/venv/bin:" in text
    assert 'org.airgap.vllm.control-node="0.1.0"' in text


def test_the_dockerfile_needs_a_python_the_base_verdict_chose():
    with pytest.raises(C.ControlImageError):
        C.dockerfile("b:1", "", "", ["ansible-core"], "t.tar.gz")
