"""Unit tests for plugins/module_utils/image/_source_patch.py on fixture files written for this project."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import logging
import os
import stat
import sys

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.image import _source_patch as sp
from ansible_collections.airgap.vllm.plugins.module_utils.image import _source_analysis

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "source_patch")
SPEC = sp.get_patch("madvise_populate_write")


def fixture(name):
    with open(os.path.join(FIXTURES, name + ".py.txt")) as handle:
        return handle.read()


class FakeMmap(object):
    """Stands in for mmap.mmap: records calls, raises the errno it is told to."""

    def __init__(self, fail_errno=None):
        self.calls = []
        self.fail_errno = fail_errno

    def madvise(self, advice, offset, length):
        self.calls.append((advice, offset, length))
        if self.fail_errno is not None:
            raise OSError(self.fail_errno, os.strerror(self.fail_errno))


def load(text, name="vllm.fake_region"):
    namespace = {"__name__": name}
    namespace.setdefault("MADV_POPULATE_WRITE", 23)
    exec(compile(text, name, "exec"), namespace)  # noqa: S102 - executing our own patched fixture
    return namespace


@pytest.mark.parametrize(
    "name, sites",
    [
        ("single_line", [13]),
        ("multi_line_nested", [20, 29]),
        ("tabs", [7]),
        ("reraise_only", [7]),
        ("outer_try_def", [6]),
    ],
)
def test_patches_every_unguarded_site(name, sites):
    state, after, info = sp.plan_text(fixture(name), SPEC, name)
    assert state == sp.STATE_PATCHED
    assert info["sites"] == sites
    assert info["patched_sites"] == sites
    assert info["validation"] == "ast"
    again = _source_analysis.analyse(after, SPEC)
    assert again.marker_found
    assert len(again.sites) == len(sites) and all(s.guarded for s in again.sites)


def test_single_line_exact_rewrite_keeps_indent_and_trailing_comment():
    after = sp.plan_text(fixture("single_line"), SPEC)[1]
    expected = (
        "    def populate(self):\n"
        "        try:\n"
        "            self.mm.madvise(MADV_POPULATE_WRITE, 0, self.size)  # populate up front\n"
        "        except OSError as _airgap_exc:\n"
        "            if _airgap_exc.errno != _airgap_errno.EINVAL:\n"
        "                raise\n"
        "            _airgap_madvise_unsupported()\n"
        '        return "populated"\n'
    )
    assert expected in after
    # The helper goes before the first import, after the header comment.
    assert after.startswith("# Fixture for airgap.vllm tests")
    assert after.index(SPEC.marker) < after.index("import mmap")


def test_multi_line_call_is_wrapped_whole_and_helper_follows_future_import():
    after = sp.plan_text(fixture("multi_line_nested"), SPEC)[1]
    expected = (
        "                try:\n"
        "                    self.mmap_obj.madvise(\n"
        "                        # the per-rank slot only\n"
        "                        _MADV_POPULATE_WRITE,\n"
        "                        offset,\n"
        "                        4096,\n"
        "                    )\n"
        "                except OSError as _airgap_exc:\n"
    )
    assert expected in after
    assert after.index("from __future__ import annotations") < after.index(SPEC.marker)
    assert "                done.append(offset)\n" in after  # the statement after the call is untouched


def test_tabs_stay_tabs():
    after = sp.plan_text(fixture("tabs"), SPEC)[1]
    assert "\t\ttry:\n\t\t\tmm.madvise(mmap.MADV_POPULATE_WRITE, 0, size)\n\t\texcept OSError" in after


def test_crlf_line_endings_are_kept():
    text = fixture("single_line").replace("\n", "\r\n")
    after = sp.plan_text(text, SPEC)[1]
    assert "\n" not in after.replace("\r\n", "")


@pytest.mark.parametrize("rank", [None, 1])
def test_patched_code_swallows_einval_and_logs_once(rank, caplog):
    after = sp.plan_text(fixture("multi_line_nested"), SPEC)[1]
    ns = load(after)
    mm = FakeMmap(fail_errno=errno.EINVAL)
    with caplog.at_level(logging.WARNING, logger="vllm.fake_region"):
        done = ns["Region"](mm, 8192, 3).populate(rank=rank)
        ns["Region"](mm, 8192, 3).populate(rank=rank)
    assert len(mm.calls) == (6 if rank is not None else 2)  # every call still made: behaviour kept
    assert len(done) == (3 if rank is not None else 1)
    warnings = [r for r in caplog.records if "MADV_POPULATE_WRITE" in r.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].name == "vllm.fake_region"


@pytest.mark.parametrize("code", [errno.EPERM, errno.ENOMEM])
def test_patched_code_still_raises_other_errors(code):
    after = sp.plan_text(fixture("single_line"), SPEC)[1]
    region = load(after)["Region"](FakeMmap(fail_errno=code), 4096)
    with pytest.raises(OSError) as info:
        region.populate()
    assert info.value.errno == code


def test_unpatched_fixture_dies_with_einval():
    # The fixture reproduces the crash the patch exists for; the patched one must not.
    region = load(fixture("single_line"))["Region"](FakeMmap(fail_errno=errno.EINVAL), 4096)
    with pytest.raises(OSError):
        region.populate()


def test_patched_code_passes_through_on_new_kernels():
    after = sp.plan_text(fixture("single_line"), SPEC)[1]
    mm = FakeMmap()
    assert load(after)["Region"](mm, 4096).populate() == "populated"
    assert mm.calls == [(23, 0, 4096)]


def test_second_run_is_already_patched_and_unchanged():
    once = sp.plan_text(fixture("multi_line_nested"), SPEC)[1]
    state, twice, info = sp.plan_text(once, SPEC)
    assert state == sp.STATE_ALREADY_PATCHED
    assert twice == once
    assert info["patched_sites"] == []


def test_partially_patched_file_gets_the_rest_without_a_second_helper():
    once = sp.plan_text(fixture("single_line"), SPEC)[1]
    extra = once + "\n\ndef more(mm):\n    mm.madvise(MADV_POPULATE_WRITE, 0, 1)\n"
    state, twice, info = sp.plan_text(extra, SPEC)
    assert state == sp.STATE_PATCHED
    assert len(info["patched_sites"]) == 1
    assert twice.count(SPEC.marker) == 1
    assert twice.count("def _airgap_madvise_unsupported") == 1


def test_upstream_fallback_is_left_alone():
    text = fixture("upstream_fallback")
    state, after, info = sp.plan_text(text, SPEC)
    assert state == sp.STATE_UPSTREAM_FIXED
    assert after == text
    assert info["sites"] == [13, 19]


@pytest.mark.parametrize(
    "states, fixed",
    [
        (["upstream_fixed", "upstream_fixed"], True),
        (["upstream_fixed", "patched"], False),
        (["upstream_fixed", "already_patched"], False),
        ([], False),
    ],
)
def test_a_release_needs_no_derived_image_only_when_every_file_is_fixed_upstream(states, fixed):
    planned = [
        {"relpath": "f%d.py" % i, "state": st, "patch": "madvise_populate_write@r1"} for i, st in enumerate(states)
    ]
    assert sp.upstream_fixed(planned) is fixed


def test_reraise_only_handler_is_not_a_fallback():
    analysis = _source_analysis.analyse(fixture("reraise_only"), SPEC)
    assert [s.guarded for s in analysis.sites] == [False]


def test_try_around_def_does_not_count_as_guard():
    analysis = _source_analysis.analyse(fixture("outer_try_def"), SPEC)
    assert [s.guarded for s in analysis.sites] == [False]


def test_missing_anchor_fails_naming_file_and_expectation():
    with pytest.raises(sp.AnchorNotFoundError) as info:
        sp.plan_text(fixture("no_anchor"), SPEC, "/x/vllm/v1/kv_offload/cpu/shared_offload_region.py")
    msg = str(info.value)
    assert "/x/vllm/v1/kv_offload/cpu/shared_offload_region.py" in msg
    assert "madvise(MADV_POPULATE_WRITE, ...)" in msg
    assert info.value.state == "anchor_not_found"


def test_unsupported_shape_fails_clearly():
    with pytest.raises(sp.UnsupportedShapeError) as info:
        sp.plan_text(fixture("unsupported_shape"), SPEC, "f.py")
    assert "f.py: line(s) 6" in str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        "x = mm.madvise(mmap.MADV_POPULATE_WRITE, 0, 1)\n",
        "mm.madvise(mmap.MADV_POPULATE_WRITE, 0, 1); y = 2\n",
        "get()[0].madvise(mmap.MADV_POPULATE_WRITE, 0, 1)\n",
    ],
)
def test_calls_inside_other_statements_are_not_rewritten(text):
    with pytest.raises(sp.UnsupportedShapeError):
        sp.plan_text(text, SPEC)


def test_other_advice_is_not_a_site():
    assert (
        _source_analysis.analyse(
            "mm.madvise(mmap.MADV_HUGEPAGE, 0, 1)\nmm.madvise(0, MADV_POPULATE_WRITE)\n", SPEC
        ).sites
        == []
    )


def test_newer_syntax_than_running_python_is_validated_by_tokens():
    state, after, info = sp.plan_text(fixture("py312_syntax"), SPEC)
    assert state == sp.STATE_PATCHED
    assert info["validation"] == ("ast" if sys.version_info >= (3, 12) else "tokens")
    assert "type Offset = int\n" in after


def test_validation_rejects_a_broken_rewrite(monkeypatch):
    monkeypatch.setattr(sp, "_wrap_site", lambda lines, site, analysis, spec: ["try:\n"])
    with pytest.raises(sp.ValidationError):
        sp.plan_text(fixture("single_line"), SPEC)


def test_untokenizable_source_fails_clearly():
    with pytest.raises(_source_analysis.SourcePatchError) as info:
        sp.plan_text('mm.madvise(MADV_POPULATE_WRITE, """\n', SPEC, "bad.py")
    assert "bad.py: cannot tokenize" in str(info.value)


def test_unknown_patch_name():
    with pytest.raises(sp.UnknownPatchError):
        sp.get_patch("nope")


def _tree(tmp_path, shared, ec):
    root = tmp_path / "vllm"
    for rel, text in zip(SPEC.files, (shared, ec)):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_tree_plan_apply_idempotent_and_atomic(tmp_path):
    root = _tree(tmp_path, fixture("multi_line_nested"), fixture("single_line"))
    target = root / SPEC.files[0]
    os.chmod(str(target), 0o640)
    planned = sp.plan_tree(str(root), ["madvise_populate_write"])
    assert [p["state"] for p in planned] == ["patched", "patched"]
    assert target.read_text() == fixture("multi_line_nested")  # planning writes nothing
    assert sorted(sp.apply_tree(planned)) == sorted(str(root / rel) for rel in SPEC.files)
    assert stat.S_IMODE(os.stat(str(target)).st_mode) == 0o640
    assert not [n for n in os.listdir(str(target.parent)) if n.startswith(".airgap-patch-")]
    again = sp.plan_tree(str(root), ["madvise_populate_write"])
    assert [p["state"] for p in again] == ["already_patched", "already_patched"]
    assert sp.apply_tree(again) == []
    assert sp.fingerprint(again) == sp.fingerprint(planned)


def test_fingerprint_follows_content(tmp_path):
    one = sp.plan_tree(str(_tree(tmp_path / "a", fixture("single_line"), fixture("tabs"))), ["madvise_populate_write"])
    two = sp.plan_tree(str(_tree(tmp_path / "b", fixture("tabs"), fixture("single_line"))), ["madvise_populate_write"])
    assert sp.fingerprint(one) != sp.fingerprint(two)


def test_tree_missing_file_or_anchor_writes_nothing(tmp_path):
    root = _tree(tmp_path, fixture("single_line"), fixture("no_anchor"))
    with pytest.raises(sp.AnchorNotFoundError) as info:
        sp.plan_tree(str(root), ["madvise_populate_write"])
    assert SPEC.files[1] in str(info.value)
    os.unlink(str(root / SPEC.files[1]))
    with pytest.raises(sp.AnchorNotFoundError) as info:
        sp.plan_tree(str(root), ["madvise_populate_write"])
    assert "the file itself" in str(info.value)
    assert (root / SPEC.files[0]).read_text() == fixture("single_line")


def test_tree_mixed_upstream_and_old(tmp_path):
    root = _tree(tmp_path, fixture("upstream_fallback"), fixture("single_line"))
    planned = sp.plan_tree(str(root), ["madvise_populate_write"])
    assert [p["state"] for p in planned] == ["upstream_fixed", "patched"]


def test_handler_for_other_errors_is_not_a_fallback():
    text = (
        "def f(mm):\n"
        "    try:\n"
        "        mm.madvise(MADV_POPULATE_WRITE, 0, 1)\n"
        "    except (KeyError, ValueError):\n"
        "        pass\n"
    )
    state, after, info = sp.plan_text(text, SPEC)
    assert after != text
    assert state == sp.STATE_PATCHED and info["patched_sites"] == [3]


@pytest.mark.parametrize("handler", ["except mmap.error:", "except:", "except Exception as exc:"])
def test_handlers_that_catch_oserror_count_as_fallback(handler):
    text = "def f(mm):\n    try:\n        mm.madvise(MADV_POPULATE_WRITE, 0, 1)\n    %s\n        pass\n" % handler
    assert sp.plan_text(text, SPEC)[0] == sp.STATE_UPSTREAM_FIXED


def test_multi_line_string_inside_a_call_keeps_its_text():
    text = 'def f(mm):\n    mm.madvise(MADV_POPULATE_WRITE, 0, len("""a\nb\n"""))\n    return 1\n'
    after = sp.plan_text(text, SPEC)[1]
    assert '"""a\nb\n"""' in after
    mm = FakeMmap()
    load(after, "vllm.x")["f"](mm)
    assert mm.calls == [(23, 0, 4)]


# --------------------------------------------------------------------------- when the image needs the patch


@pytest.mark.parametrize(
    "offload,kernel,needed",
    [
        (True, "4.19.90-52.22.v2207.ky10.x86_64", True),  # Kylin V10 SP3
        (True, "5.13.19", True),
        (True, "5.14.0-70.el9.x86_64", False),
        (True, "6.8.0", False),
        (True, None, True),  # unknown kernel: the patch is harmless on >= 5.14, its absence fatal below
        (True, "", True),
        (True, "unknown", True),
        (True, "5", True),
        (False, "4.19.90", False),  # no offload: nothing calls madvise(MADV_POPULATE_WRITE)
        (0, None, False),
    ],
)
def test_madvise_patch_rule(offload, kernel, needed):
    got, why = sp.madvise_patch_decision(offload, kernel)
    assert got is needed and why
    assert sp.needs_madvise_patch(offload, kernel) is needed


def test_planner_and_image_role_share_the_madvise_rule():
    from ansible_collections.airgap.vllm.plugins.module_utils.planner import _planner

    # The name plan() looks up (its module's global, imported from _source_patch) is the image role's rule.
    assert _planner.needs_madvise_patch is sp.needs_madvise_patch
