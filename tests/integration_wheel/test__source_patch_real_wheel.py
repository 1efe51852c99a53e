"""vllm_source_patch logic on the real vllm==0.27.1 files (the wheel is cached between runs)."""
import difflib
import glob
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils import _source_patch as sp

pytestmark = pytest.mark.slow

VERSION = "0.27.1"
CACHE = os.path.join(os.environ.get("AIRGAP_CACHE") or os.path.expanduser("~/.cache/airgap-vllm"), "wheels")
SPEC = sp.get_patch("madvise_populate_write")
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# Where each 0.27.1 call starts (first line of the statement), read from the wheel.
EXPECTED_SITES = {SPEC.files[0]: [100, 111], SPEC.files[1]: [97]}


def _wheel():
    pattern = os.path.join(CACHE, "vllm-%s-*.whl" % VERSION)
    found = glob.glob(pattern)
    if not found:
        os.makedirs(CACHE, exist_ok=True)
        subprocess.check_call([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                               "vllm==%s" % VERSION, "-d", CACHE])
        found = glob.glob(pattern)
    assert found, "vllm %s wheel not in %s after pip download" % (VERSION, CACHE)
    return found[0]


@pytest.fixture(scope="module")
def wheel():
    return _wheel()


def _extract(wheel, dest):
    with zipfile.ZipFile(wheel) as zf:
        for rel in SPEC.files:
            zf.extract("vllm/" + rel, str(dest))
    return os.path.join(str(dest), "vllm")


def _interpreters():
    """Other Pythons to check with: 3.7 (Kylin's module runtime) and 3.12 (the image's)."""
    found = {}
    for ver in ("3.7", "3.12"):
        cands = [shutil.which("python" + ver)] + sorted(glob.glob(os.path.expanduser(
            "~/.pyenv/versions/%s.*/bin/python%s" % (ver, ver))))
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
        analysis = sp.analyse(after, SPEC, path)
        assert len(analysis.sites) == len(EXPECTED_SITES[rel]) and all(s.guarded for s in analysis.sites)
        # Only wrapping, re-indenting and the helper: every original line's code is still there, in order.
        diff = list(difflib.ndiff([x.strip() for x in originals[rel].splitlines()],
                                  [x.strip() for x in after.splitlines()]))
        assert not [d for d in diff if d.startswith("- ") and d[2:].strip()], "original code lines changed"
        print("\n".join(difflib.unified_diff(originals[rel].splitlines(), after.splitlines(), rel, rel,
                                             n=1, lineterm="")))

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
        "from ansible_collections.airgap.vllm.plugins.module_utils import _source_patch as sp\n"
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
