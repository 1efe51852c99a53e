# -*- coding: utf-8 -*-
"""The bundle's control-node.sh and setup-controller.sh's turn to it (issue 47), without Docker: the role's templates
rendered by Ansible's templar as bundle_build renders them, run by sh against a stand-in `docker` that records its
arguments and what `docker load` read. tests/offline_control/test_control_node_image.py runs them for real."""

import hashlib
import os
import subprocess

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TEMPLATES = os.path.join(ROOT, "roles", "bundle_build", "templates")
IMAGE_ID = "sha256:" + "ab" * 32
ARCHIVE = "artifacts/airgap-vllm-control-0.1.0.tar"

# A stand-in for docker: `image inspect` succeeds once `load` ran (a marker file), `load` keeps the sha256 of what it
# read, `run` writes its arguments one per line.
FAKE_DOCKER = """#!/bin/sh
log=$FAKE_DOCKER_DIR
case "$1 $2" in
  "image inspect") test -f "$log/loaded" ;;
  "load "*) sha256sum | cut -d' ' -f1 >"$log/loaded"; echo "Loaded image: x" ;;
  "run "*) printf '%s\\n' "$@" >"$log/run" ;;
  *) echo "fake docker: $*" >&2; exit 3 ;;
esac
"""


def render(name, **variables):
    base = dict(ansible_managed="Ansible managed")
    base.update(variables)
    with open(os.path.join(TEMPLATES, name)) as f:
        return Templar(loader=DataLoader(), variables=base).template(f.read())


@pytest.fixture
def bundle(tmp_path):
    """A bundle root with the image's tar in three parts, SHA256SUMS over them (and another file), control-node.sh and
    setup-controller.sh; a PATH with the stand-in docker. Returns a dict of the paths and the whole tar's sha256."""
    root = tmp_path / "bundle"
    (root / "artifacts").mkdir(parents=True)
    data = os.urandom(300000)
    sums = []
    for i in range(3):
        part = "%s.part%03d" % (ARCHIVE, i)
        chunk = data[i * 100000 : (i + 1) * 100000]
        (root / part).write_bytes(chunk)
        sums.append("%s  %s\n" % (hashlib.sha256(chunk).hexdigest(), part))
    (root / "artifacts" / "other.bin").write_bytes(b"other")
    sums.append("%s  artifacts/other.bin\n" % hashlib.sha256(b"other").hexdigest())
    (root / "SHA256SUMS").write_text("".join(sorted(sums, key=lambda ln: ln.split()[1])))
    variables = dict(
        __bundle_build_control=dict(image="airgap-vllm-control:0.1.0", enabled=True),
        __bundle_build_collection_version="0.1.0",
        __bundle_build_control_entry=dict(path=ARCHIVE),
        __bundle_build_control_id=IMAGE_ID,
        bundle_build_wheels_requirements=["ansible-core>=2.17,<2.18"],
    )
    (root / "control-node.sh").write_text(render("control-node.sh.j2", **variables))
    (root / "setup-controller.sh").write_text(render("setup-controller.sh.j2", **variables))
    (root / "wheels" / "py3.11").mkdir(parents=True)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "docker").write_text(FAKE_DOCKER)
    os.chmod(str(bindir / "docker"), 0o755)
    logdir = tmp_path / "docker-log"
    logdir.mkdir()
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    inv = tmp_path / "site" / "kylin-prod"
    inv.mkdir(parents=True)
    return dict(root=root, bin=bindir, log=logdir, home=home, inv=inv, sha=hashlib.sha256(data).hexdigest())


def sh(b, *args, **env):
    full = {
        "PATH": "%s:/usr/bin:/bin" % b["bin"],
        "HOME": str(b["home"]),
        "FAKE_DOCKER_DIR": str(b["log"]),
        "ANSIBLE_NOCOLOR": "1",
        "AIRGAP_SIM_ADDRESS": "10.0.0.1",
        "MY_SECRET_TOKEN": "s3cret",
    }
    full.update(env)
    return subprocess.run(
        ["sh"] + [str(a) for a in args],
        cwd=str(b["root"]),
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        universal_newlines=True,
        check=False,
    )


def test_load_checks_the_parts_and_loads_them_in_order(bundle):
    p = sh(bundle, "control-node.sh", "--load")
    assert p.returncode == 0, p.stdout
    assert "checking 3 file(s) of %s against SHA256SUMS" % ARCHIVE in p.stdout
    assert "image airgap-vllm-control:0.1.0 loaded (%s)" % IMAGE_ID in p.stdout
    # docker load read the parts in order: the whole tar.
    assert (bundle["log"] / "loaded").read_text().strip() == bundle["sha"]
    # Loaded: a second --load reads nothing.
    os.unlink(str(bundle["root"] / (ARCHIVE + ".part001")))
    p = sh(bundle, "control-node.sh", "--load")
    assert p.returncode == 0 and "is loaded (%s)" % IMAGE_ID in p.stdout, p.stdout


def test_a_changed_or_missing_part_is_refused_before_docker_load(bundle):
    part = bundle["root"] / (ARCHIVE + ".part001")
    data = bytearray(part.read_bytes())
    data[5] ^= 1
    part.write_bytes(bytes(data))
    p = sh(bundle, "control-node.sh", "--load")
    assert p.returncode == 1, p.stdout
    assert "%s.part001: FAILED" % ARCHIVE in p.stdout
    assert "%s does not match SHA256SUMS: copy the bundle again" % ARCHIVE in p.stdout
    assert not (bundle["log"] / "loaded").exists()
    part.unlink()
    p = sh(bundle, "control-node.sh", "--load")
    assert p.returncode == 1 and "does not match SHA256SUMS" in p.stdout, p.stdout
    (bundle["root"] / "SHA256SUMS").write_text("")
    p = sh(bundle, "control-node.sh", "--load")
    assert p.returncode == 1 and "SHA256SUMS lists no %s" % ARCHIVE in p.stdout, p.stdout


def test_no_docker_is_said(bundle):
    path = only_python37(bundle)
    os.unlink(str(bundle["bin"] / "docker"))
    p = sh(bundle, "control-node.sh", "--load", PATH=path)
    assert p.returncode == 1 and "no docker on this machine" in p.stdout, p.stdout


def run_args(bundle):
    return (bundle["log"] / "run").read_text().splitlines()


def pairs(args, flag):
    return [args[i + 1] for i, a in enumerate(args[:-1]) if a == flag]


def test_site_yml_runs_from_the_image_with_the_sites_files_mounted(bundle):
    p = sh(bundle, "control-node.sh", bundle["inv"], "--check", "-e", "x=1")
    assert p.returncode == 0, p.stdout
    args = run_args(bundle)
    root, inv, home = str(bundle["root"]), str(bundle["inv"]), str(bundle["home"])
    i = args.index(IMAGE_ID)
    assert args[i + 1 :] == ["ansible-playbook", "site.yml", "-i", inv, "--check", "-e", "x=1"]
    opts = args[:i]
    assert opts[:3] == ["run", "--rm", "-i"] and pairs(opts, "--network") == ["host"]
    assert pairs(opts, "-w") == [root]
    vols = pairs(opts, "-v")
    assert "%s:%s:ro" % (root, root) in vols and "%s:%s:ro" % (inv, inv) in vols
    assert "%s/.airgap-vllm:%s/.airgap-vllm" % (home, home) in vols
    assert "%s/.ssh:%s/.ssh" % (home, home) in vols
    envs = pairs(opts, "-e")
    assert "ANSIBLE_NOCOLOR" in envs and "AIRGAP_SIM_ADDRESS" in envs and "HOME=" + home in envs
    assert not [e for e in envs if "SECRET" in e or "s3cret" in e], envs
    assert "s3cret" not in "\n".join(args)
    assert pairs(opts, "--user") == ["%d:%d" % (os.getuid(), os.getgid())]
    assert (bundle["home"] / ".airgap-vllm").is_dir()
    assert oct(os.stat(str(bundle["home"] / ".airgap-vllm")).st_mode & 0o777) == "0o700"


def test_another_state_and_ssh_directory_and_a_non_root_user(bundle, tmp_path):
    """AIRGAP_VLLM_HOME and AIRGAP_VLLM_SSH_DIR; as a user other than root a passwd entry with this home is mounted
    (ssh wants one for its uid)."""
    state, keys = tmp_path / "state", tmp_path / "keys"
    keys.mkdir()
    fake_id = bundle["bin"] / "id"
    fake_id.write_text('#!/bin/sh\ncase "$1" in -u) echo 1000 ;; -g) echo 1000 ;; -un) echo ops ;; esac\n')
    os.chmod(str(fake_id), 0o755)
    p = sh(
        bundle,
        "control-node.sh",
        "--exec",
        bundle["inv"],
        "ansible-inventory",
        "--list",
        AIRGAP_VLLM_HOME=str(state),
        AIRGAP_VLLM_SSH_DIR=str(keys),
    )
    assert p.returncode == 0, p.stdout
    args = run_args(bundle)
    assert args[args.index(IMAGE_ID) + 1 :] == ["ansible-inventory", "--list"]
    home = str(bundle["home"])
    vols = pairs(args, "-v")
    assert "%s:%s/.airgap-vllm" % (state, home) in vols and "%s:%s" % (keys, keys) in vols
    assert "%s/control-node/passwd:/etc/passwd:ro" % state in vols
    assert "ops:x:1000:1000::%s:/bin/sh" % home in (state / "control-node" / "passwd").read_text()
    assert pairs(args, "--user") == ["1000:1000"]


def test_without_an_inventory_or_ssh_directory_it_says_what_is_missing(bundle, tmp_path):
    p = sh(bundle, "control-node.sh")
    assert p.returncode == 2 and "sh control-node.sh INVENTORY" in p.stdout, p.stdout
    p = sh(bundle, "control-node.sh", tmp_path / "nope")
    assert p.returncode == 1 and "no inventory" in p.stdout, p.stdout
    p = sh(bundle, "control-node.sh", bundle["inv"], AIRGAP_VLLM_SSH_DIR=str(tmp_path / "nokeys"))
    assert p.returncode == 1 and "(the SSH key to the servers): set AIRGAP_VLLM_SSH_DIR" in p.stdout, p.stdout


PY37 = '#!/bin/sh\ncase "$*" in *version_info*) echo 3.7 ;; *) exit 1 ;; esac\n'


def only_python37(bundle):
    """A PATH whose only python is a stand-in for Kylin V10's 3.7 (and the system tools setup-controller.sh uses)."""
    py = bundle["bin"] / "python3"
    py.write_text(PY37)
    os.chmod(str(py), 0o755)
    for tool in ("sh", "sed", "sort", "tr", "ls", "cat", "grep", "awk", "cut", "wc", "xargs", "sha256sum", "dirname"):
        path = subprocess.check_output(["sh", "-c", "command -v " + tool], universal_newlines=True).strip()
        if not (bundle["bin"] / tool).exists():
            os.symlink(path, str(bundle["bin"] / tool))
    return str(bundle["bin"])


def test_setup_controller_turns_to_the_image_without_a_supported_python_and_says_so(bundle):
    path = only_python37(bundle)
    p = sh(bundle, "setup-controller.sh", PATH=path)
    assert p.returncode == 0, p.stdout
    assert "python3 is Python 3.7; the bundle has wheels for Python 3.11" in p.stdout
    assert "using the bundle's control-node image instead (Docker; control-node.sh)" in p.stdout
    assert (bundle["log"] / "loaded").read_text().strip() == bundle["sha"]
    assert "sh control-node.sh ~/airgap-site/kylin-prod" in p.stdout
    # A bundle without the image: the old answer, nothing loaded.
    os.unlink(str(bundle["root"] / "control-node.sh"))
    os.unlink(str(bundle["log"] / "loaded"))
    p = sh(bundle, "setup-controller.sh", PATH=path)
    assert p.returncode == 1 and "rebuild the bundle with" in p.stdout and "control-node" not in p.stdout, p.stdout
    assert not (bundle["log"] / "loaded").exists()


def test_setup_controller_with_no_python_at_all_turns_to_the_image(bundle):
    path = only_python37(bundle)
    os.unlink(str(bundle["bin"] / "python3"))
    p = sh(bundle, "setup-controller.sh", PATH=path)
    assert p.returncode == 0, p.stdout
    assert "no python3 found; the bundle has wheels for Python 3.11" in p.stdout
    assert "image airgap-vllm-control:0.1.0 loaded" in p.stdout, p.stdout
