"""vllm_source_patch logic on the real files of every vLLM release 0.27.1..0.33.0.

Only the two patched files (and RECORD, to check their sha256) are read from each PyPI wheel, by HTTP
range requests (tests/real_wheel/wheel_files.py); they are cached outside the repository.
"""

import difflib
import glob
import os
import shutil
import subprocess

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.image import _source_patch as sp
from ansible_collections.airgap.vllm.plugins.module_utils.image import _source_analysis

import wheel_files

pytestmark = pytest.mark.slow

VERSION = "0.27.1"
SPEC = sp.get_patch("madvise_populate_write")
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# Where each 0.27.1 call starts (first line of the statement), read from the wheel.
EXPECTED_SITES = {SPEC.files[0]: [100, 111], SPEC.files[1]: [97]}
OFFLOAD, EC = SPEC.files
# Every vLLM release from 0.27.1 to 0.33.0 (PyPI has no patch releases in between), and what the
# module must do with its two files. 0.28.0 fixed the offload region upstream (helper
# `_madvise_populate_write` probed by `_get_populate_write_fn` inside try/except OSError); 0.30.0 the
# EC region too.
RELEASES = {
    "0.27.1": {OFFLOAD: "patched", EC: "patched"},
    "0.28.0": {OFFLOAD: "upstream_fixed", EC: "patched"},
    "0.29.0": {OFFLOAD: "upstream_fixed", EC: "patched"},
    "0.30.0": {OFFLOAD: "upstream_fixed", EC: "upstream_fixed"},
    "0.31.0": {OFFLOAD: "upstream_fixed", EC: "upstream_fixed"},
    "0.32.0": {OFFLOAD: "upstream_fixed", EC: "upstream_fixed"},
    "0.33.0": {OFFLOAD: "upstream_fixed", EC: "upstream_fixed"},
}


def _release_files(version):
    """{package-relative path: cached file} of the patch's files, read by HTTP range from the PyPI wheel."""
    try:
        found = wheel_files.wheel_files(version, ["/" + rel for rel in SPEC.files])
    except wheel_files.Unreachable as exc:
        pytest.skip("PyPI UNREACHABLE, the real-wheel test of vLLM %s did NOT run: %s" % (version, exc))
    out = dict((name[len("vllm/") :], path) for name, path in found.items())
    assert sorted(out) == sorted(SPEC.files), "vLLM %s moved the files: %s" % (version, sorted(found))
    return out


def _tree(version, dest):
    """A vllm package tree under dest holding just the release's two files."""
    root = os.path.join(str(dest), "vllm")
    for rel, cached in _release_files(version).items():
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        shutil.copyfile(cached, os.path.join(root, rel))
    return root


@pytest.mark.parametrize("version", sorted(RELEASES, key=lambda v: tuple(int(x) for x in v.split("."))))
def test_every_release_patches_exactly_the_unfixed_files(version, tmp_path):
    root = _tree(version, tmp_path)
    before = {rel: open(os.path.join(root, rel), "rb").read() for rel in SPEC.files}
    planned = sp.plan_tree(root, [SPEC.name])
    assert {p["relpath"]: p["state"] for p in planned} == RELEASES[version]
    # The image stage's question (roles/vllm_image/tasks/patch.yml): does this release need a derived image at all?
    assert sp.upstream_fixed(planned) == all(st == "upstream_fixed" for st in RELEASES[version].values())
    written = sp.apply_tree(planned)
    assert sorted(written) == sorted(
        os.path.join(root, rel) for rel, st in RELEASES[version].items() if st == "patched"
    )
    for rel, state in RELEASES[version].items():
        after = open(os.path.join(root, rel), "rb").read()
        if state == "upstream_fixed":
            assert after == before[rel], "%s %s: an upstream-fixed file must stay byte-identical" % (version, rel)
        else:
            text = after.decode("utf-8")
            compile(text, rel, "exec")
            assert all(s.guarded for s in _source_analysis.analyse(text, SPEC, rel).sites)
    again = sp.plan_tree(root, [SPEC.name])
    assert sp.apply_tree(again) == []
    assert {p["relpath"]: p["state"] for p in again} == {
        rel: ("already_patched" if st == "patched" else st) for rel, st in RELEASES[version].items()
    }


@pytest.mark.parametrize("version", ["0.28.0", "0.33.0"])
def test_upstream_fallback_made_log_and_reraise_is_patched_again(version, tmp_path):
    """Turn upstream's fallback into a handler that only logs and re-raises: that is no fix."""
    root = _tree(version, tmp_path)
    path = os.path.join(root, OFFLOAD)
    text = sp.read_text(path)
    fallback = "        return _fallback_populate_write\n"
    assert fallback in text
    broken = text.replace(fallback, "        raise\n", 1)
    open(path, "w").write(broken)
    planned = dict((p["relpath"], p["state"]) for p in sp.plan_tree(root, [SPEC.name]))
    assert planned[OFFLOAD] == "patched"


@pytest.fixture(scope="module")
def wheel():
    return _release_files(VERSION)


def _extract(wheel, dest):
    root = os.path.join(str(dest), "vllm")
    for rel, cached in wheel.items():
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        shutil.copyfile(cached, os.path.join(root, rel))
    return root


def _interpreters():
    """Other Pythons to check with: 3.7 (Kylin's module runtime) and 3.12 (the image's)."""
    found = {}
    for ver in ("3.7", "3.12"):
        cands = [shutil.which("python" + ver)] + sorted(
            glob.glob(os.path.expanduser("~/.pyenv/versions/%s.*/bin/python%s" % (ver, ver)))
        )
        for cand in cands:
            if cand and subprocess.call([cand, "-c", "pass"], stderr=subprocess.DEVNULL) == 0:
                found[ver] = cand
                break
    return found


def test_real_files_patched_guarded_compiled_and_idempotent(wheel, tmp_path):
    root = _extract(wheel, tmp_path)
    originals = {rel: sp.read_text(os.path.join(root, rel)) for rel in SPEC.files}
    planned = sp.plan_tree(root, [SPEC.name])
    assert {p["relpath"]: p["state"] for p in planned} == {rel: "patched" for rel in SPEC.files}
    assert {p["relpath"]: p["sites"] for p in planned} == EXPECTED_SITES
    assert {p["validation"] for p in planned} == {"ast"}
    sp.apply_tree(planned)

    for rel in SPEC.files:
        path = os.path.join(root, rel)
        after = sp.read_text(path)
        compile(after, path, "exec")
        analysis = _source_analysis.analyse(after, SPEC, path)
        assert len(analysis.sites) == len(EXPECTED_SITES[rel]) and all(s.guarded for s in analysis.sites)
        # Only wrapping, re-indenting and the helper: every original line's code is still there, in order.
        diff = list(
            difflib.ndiff([x.strip() for x in originals[rel].splitlines()], [x.strip() for x in after.splitlines()])
        )
        assert not [d for d in diff if d.startswith("- ") and d[2:].strip()], "original code lines changed"
        print(
            "\n".join(difflib.unified_diff(originals[rel].splitlines(), after.splitlines(), rel, rel, n=1, lineterm=""))
        )

    patched_bytes = {rel: open(os.path.join(root, rel), "rb").read() for rel in SPEC.files}
    again = sp.plan_tree(root, [SPEC.name])
    assert [p["state"] for p in again] == ["already_patched"] * len(SPEC.files)
    assert sp.apply_tree(again) == []
    assert {rel: open(os.path.join(root, rel), "rb").read() for rel in SPEC.files} == patched_bytes
    assert sp.fingerprint(again) == sp.fingerprint(planned)


@pytest.mark.parametrize("ver", ["3.7", "3.12"])
def test_other_interpreters(wheel, tmp_path, ver):
    """3.7: the patcher itself runs there (module runtime). 3.12: the patched files compile there (image)."""
    python = _interpreters().get(ver)
    if python is None:
        pytest.skip("no python%s on this machine" % ver)
    root = _extract(wheel, tmp_path)
    script = (
        "import sys; sys.path.insert(0, %r)\n"
        "from ansible_collections.airgap.vllm.plugins.module_utils.image import _source_patch as sp\n"
        "p = sp.plan_tree(%r, ['madvise_populate_write']); sp.apply_tree(p)\n"
        "print(' '.join(x['state'] + ':' + x['validation'] for x in p))\n"
        "q = sp.plan_tree(%r, ['madvise_populate_write'])\n"
        "print(' '.join(x['state'] for x in q))\n"
        "import py_compile\n"
        "for x in p: py_compile.compile(x['path'], cfile=x['path'] + 'c', doraise=True)\n"
    ) % (os.path.join(ROOT, "build", "collections"), root, root)
    out = subprocess.check_output([python, "-c", script], universal_newlines=True).split("\n")
    assert out[0] == "patched:ast patched:ast"
    assert out[1] == "already_patched already_patched"
