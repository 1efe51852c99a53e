# -*- coding: utf-8 -*-
"""An air-gapped control node from the bundle alone, for two Pythons.

The bundle is built by playbooks/bundle_build.yml (the bundle_build role) with ansible-core wheels for
Python 3.11 and 3.13 (pip download from PyPI, the path an operator's connected machine takes). Each
control node is a bare Debian (bookworm: Python 3.11, trixie: 3.13; tests/offline_control/build-images.sh
debootstraps them from the Debian archive, cached by input hash) started with `--network none`: from
the bundle root, `sh setup-controller.sh` must make a working controller, and `ansible-playbook site.yml
-i kylin-prod --syntax-check` and `ansible-inventory --list` must run with the bundled collection.
Cold cost: two debootstraps (~2-4 min together, then cached) and ~16 MB of wheels; warm: ~1 min.
"""

import json
import os
import shutil
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SUITES = {"bookworm": "3.11", "trixie": "3.13"}


def run(cmd, **kw):
    return subprocess.run(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        universal_newlines=True,
        check=kw.pop("check", False),
        **kw,
    )


@pytest.fixture(scope="session")
def images():
    if not shutil.which("docker") or run(["docker", "info"]).returncode != 0:
        pytest.skip("needs Docker (the control nodes are network-none containers)")
    p = run(["bash", os.path.join(ROOT, "tests", "offline_control", "build-images.sh")] + sorted(SUITES))
    assert p.returncode == 0, p.stdout[-3000:]
    return dict(line.split() for line in p.stdout.splitlines() if line.count(" ") == 1 and ":" in line)


TINY = "airgap-test/offline-control-tiny:1"


@pytest.fixture(scope="session")
def bundle(tmp_path_factory, images):
    work = tmp_path_factory.mktemp("offline-control")
    notes = work / "site-notes.txt"
    notes.write_text("rack 4, row B\n")
    # An image given by name (the role saves it with docker save): a one-file image made here.
    empty = work / "tiny-rootfs.tar"
    p = run(
        [
            "bash",
            "-c",
            "set -e; d=$(mktemp -d); echo hi > $d/hello; tar -C $d -cf %s hello; rm -rf $d; "
            "docker import %s %s >/dev/null" % (empty, empty, TINY),
        ]
    )
    assert p.returncode == 0, p.stdout
    vars_file = work / "bundle-vars.json"
    vars_file.write_text(
        json.dumps(
            {
                "bundle_build_dir": str(work / "bundle"),
                "bundle_build_hash_stamps": str(work / "stamps.json"),
                "bundle_build_wheels_pythons": sorted(SUITES.values()),
                "bundle_build_image_save_dir": str(work / "images"),
                "bundle_build_artifacts": [
                    {"kind": "file", "name": "site-notes", "version": "1", "src": str(notes)},
                    {"kind": "image", "name": "tiny", "version": "1", "image": TINY},
                ],
            }
        )
    )
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"))
    run(["bash", os.path.join(ROOT, "tests", "link-collection.sh")], cwd=ROOT, env=env)
    p = run(["ansible-playbook", "playbooks/bundle_build.yml", "-e", "@" + str(vars_file)], cwd=ROOT, env=env)
    assert p.returncode == 0, p.stdout[-4000:]
    root = work / "bundle"
    image_id = run(["docker", "image", "inspect", "--format", "{{.Id}}", TINY]).stdout.strip()
    assert (work / "images" / "tiny-1.tar.id").read_text().strip() == image_id
    with open(str(root / "manifest.yml")) as f:
        assert "path: artifacts/tiny-1.tar" in f.read()
    assert run(["tar", "-tf", str(root / "artifacts" / "tiny-1.tar")]).returncode == 0
    for v in SUITES.values():
        assert list((root / "wheels" / ("py" + v)).glob("ansible_core-2.17.*.whl")), "no ansible-core wheel for %s" % v
    os.chmod(str(work), 0o755)
    yield root
    run(["docker", "rmi", TINY])


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_setup_controller_makes_a_working_control_node_without_a_network(images, bundle, suite):
    script = r"""
set -eu
cd /bundle
python3 --version
sh setup-controller.sh
. "$HOME/.airgap-vllm/venv/bin/activate"
python -c 'import ansible, sys; print("ansible-core", ansible.__version__ if hasattr(ansible, "__version__") else "?", sys.version.split()[0])'
ansible-playbook site.yml -i kylin-prod --syntax-check
ansible-inventory -i kylin-prod --list > /tmp/inventory.json
python -c 'import json; d = json.load(open("/tmp/inventory.json")); print("GROUPS", sorted(d))'
ansible-doc airgap.vllm.bundle_stage | head -n 1
# A Python the bundle has no wheels for is named, with the ones it has.
cp -r /bundle /tmp/other && rm -rf "/tmp/other/wheels/py$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
if sh /tmp/other/setup-controller.sh /tmp/venv2 2>/tmp/err; then echo "UNEXPECTED SUCCESS"; exit 1; fi
cat /tmp/err
"""
    p = run(
        [
            "docker",
            "run",
            "--rm",
            "--network",
            "none",
            "-v",
            "%s:/bundle:ro" % bundle,
            images[suite],
            "sh",
            "-c",
            script,
        ]
    )
    out = p.stdout
    assert p.returncode == 0, out[-4000:]
    assert "Python %s" % SUITES[suite] in out
    assert "ansible [core 2.17." in out, out[-3000:]
    assert "playbook: site.yml" in out
    assert "'vllm_servers'" in out
    assert "AIRGAP.VLLM.BUNDLE_STAGE" in out.upper()
    assert "the bundle has wheels for Python" in out and "rebuild the bundle" in out
