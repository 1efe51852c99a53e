"""Hostile/broken input for vllm_source_patch: upstream's own fix, fake fixes, partial writes (issue 12, #12)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.image import _source_patch as sp
from ansible_collections.airgap.vllm.plugins.module_utils.image import _source_analysis

SPEC = sp.get_patch("madvise_populate_write")

# The shape vLLM 0.28.0+ ships (v1/kv_offload/cpu/shared_offload_region.py), trimmed.
UPSTREAM = '''import errno
import mmap

_MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)


def _madvise_populate_write(mmap_obj, offset, length):
    mmap_obj.madvise(_MADV_POPULATE_WRITE, offset, length)


def _fallback_populate_write(mmap_obj, offset, length):
    pass


def _get_populate_write_fn(mmap_obj):
    """Select the pre-faulting method once for this mmap."""
    try:
        _madvise_populate_write(mmap_obj, 0, mmap.PAGESIZE)
    except OSError as e:
        if e.errno != errno.EINVAL:
            raise
        logger.warning("MADV_POPULATE_WRITE is not supported")
        return _fallback_populate_write
    return _madvise_populate_write


class Region:
    def __init__(self, m, size):
        fn = _get_populate_write_fn(m)
        fn(m, 0, size)
'''

OLD = '''import mmap


class Region:
    def __init__(self, m, size):
        m.madvise(mmap.MADV_POPULATE_WRITE, 0, size)
'''


def test_upstream_helper_probed_by_caller_is_upstream_fixed():
    state, after, info = sp.plan_text(UPSTREAM, SPEC, "upstream.py")
    assert state == sp.STATE_UPSTREAM_FIXED
    assert after == UPSTREAM
    assert info["patched_sites"] == []


def test_upstream_fixed_file_stays_byte_identical(tmp_path):
    root = tmp_path / "vllm"
    for rel in SPEC.files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(UPSTREAM.encode() if "offload" in rel else OLD.encode())
    before = {rel: (root / rel).read_bytes() for rel in SPEC.files}
    planned = sp.plan_tree(str(root), [SPEC.name])
    assert [p["state"] for p in planned] == ["upstream_fixed", "patched"]
    written = sp.apply_tree(planned)
    assert written == [str(root / SPEC.files[1])]
    assert (root / SPEC.files[0]).read_bytes() == before[SPEC.files[0]]


@pytest.mark.parametrize(
    "handler",
    [
        "        except OSError:\n            logger.warning('madvise failed')\n            raise\n",
        "        except OSError as e:\n            logger.exception('madvise failed')\n            raise RuntimeError('no') from e\n",
    ],
)
def test_handler_that_only_logs_and_reraises_is_not_a_fix(handler):
    text = OLD.replace(
        "        m.madvise(mmap.MADV_POPULATE_WRITE, 0, size)\n",
        "        try:\n            m.madvise(mmap.MADV_POPULATE_WRITE, 0, size)\n" + handler,
    )
    assert sp.plan_text(text, SPEC, "x.py")[0] == sp.STATE_PATCHED


def test_logging_and_reraising_upstream_probe_is_not_a_fix():
    text = UPSTREAM.replace("        return _fallback_populate_write\n", "        raise\n")
    assert text != UPSTREAM
    assert sp.plan_text(text, SPEC, "x.py")[0] == sp.STATE_PATCHED


def test_one_line_log_and_reraise_handler_is_not_a_fix():
    text = OLD.replace(
        "        m.madvise(mmap.MADV_POPULATE_WRITE, 0, size)\n",
        "        try:\n            m.madvise(mmap.MADV_POPULATE_WRITE, 0, size)\n"
        "        except OSError: log(); raise\n",
    )
    assert sp.plan_text(text, SPEC, "x.py")[0] == sp.STATE_PATCHED


def test_helper_also_called_unguarded_is_not_upstream_fixed():
    text = UPSTREAM + "\n\ndef other(m):\n    _madvise_populate_write(m, 0, 1)\n"
    assert sp.plan_text(text, SPEC, "x.py")[0] == sp.STATE_PATCHED


def test_partial_write_reports_what_was_written(tmp_path, monkeypatch):
    root = tmp_path / "vllm"
    for rel in SPEC.files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(OLD)
    planned = sp.plan_tree(str(root), [SPEC.name])
    real = sp._files.write_atomic
    calls = []

    def flaky(path, text, **kw):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(path, text, **kw)

    monkeypatch.setattr(sp._files, "write_atomic", flaky)
    with pytest.raises(sp.PartialWriteError) as err:
        sp.apply_tree(planned)
    assert err.value.written == [str(root / SPEC.files[0])]
    assert "No space left" in str(err.value)


def test_a_non_utf8_file_is_named_in_the_error(tmp_path):
    root = tmp_path / "vllm"
    for rel in SPEC.files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(OLD)
    bad = root / SPEC.files[-1]
    bad.write_bytes(OLD.encode("utf-8") + b"\n# caf\xe9\n")
    with pytest.raises(_source_analysis.SourcePatchError) as err:
        sp.plan_tree(str(root), [SPEC.name])
    assert str(bad) in str(err.value) and "not UTF-8" in str(err.value)
    assert "0xe9" in str(err.value)


def test_an_unreadable_file_is_named_in_the_error(tmp_path, monkeypatch):
    path = tmp_path / "x.py"
    path.write_text(OLD)

    def denied(*args, **kwargs):
        raise OSError(13, "Permission denied")

    monkeypatch.setattr(sp._files, "read_text", denied)
    with pytest.raises(_source_analysis.SourcePatchError) as err:
        sp.read_text(str(path))
    assert str(path) in str(err.value) and "Permission denied" in str(err.value)


@pytest.mark.parametrize("text", [OLD.replace("import mmap", "import mmap\x00"), "\x00", "\ufeff" + OLD, "(" * 200])
def test_odd_text_is_a_source_patch_error_not_a_traceback(text):
    try:
        sp.plan_text(text, SPEC, "odd.py")
    except _source_analysis.SourcePatchError:
        pass
