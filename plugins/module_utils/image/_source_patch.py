# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# Apache-2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Pure logic of airgap.vllm.vllm_source_patch: a small catalogue of named source patches for vLLM.

How call sites are found
    With the ``tokenize`` module, not line numbers and not ``ast`` alone: this code runs on the target's
    Python (3.7 on Kylin V10) while the source belongs to the image's Python (3.12), whose syntax may be
    newer than the running parser knows. ``tokenize`` copes with nearly all of it, gives exact line
    extents (multi-line calls included) and keeps comments, so the edit touches only the lines it must.
    A call site is a statement of the form ``<name>(.<name>)*.madvise(<arg mentioning MADV_POPULATE_WRITE>,
    ...)`` standing alone on its logical line. A site counts as guarded when it sits (lexically, without
    crossing a ``def``/``class``) in the body of a ``try`` that has an ``except`` catching OSError (or
    a base of it, or bare) whose body does not end in ``raise`` (a handler that only logs and re-raises
    is no fallback).

Upstream's own fix (vLLM 0.28.0 and later)
    The call moved into a helper (``_madvise_populate_write``) and its caller (``_get_populate_write_fn``)
    probes it inside ``try/except OSError`` and falls back to touching one byte per page. A site whose
    enclosing function is only ever called from guarded places (at least one such call), and is otherwise
    only referenced (e.g. ``return _madvise_populate_write``) from a function that holds such a guarded
    call, counts as guarded by its caller. Wrapping it again would swallow the EINVAL upstream's probe
    needs to see, silently disabling the pre-faulting fallback.

How the result is validated before anything is written
    Always: the patched text is re-tokenized and re-analysed (same number of sites, all guarded).
    When the running Python can ``ast.parse`` the original, the patched text must parse too and an
    independent ``ast`` walk must find every ``madvise`` call inside a ``try`` that handles OSError
    (``validation: ast``). When it cannot (source newer than the running Python), only the token-level
    check runs (``validation: tokens``) and the caller must compile the result with the interpreter that
    will run it -- the airgap.vllm.vllm_image role always does so with the image's own python3.

Idempotency
    A patched file carries a marker comment. Marker present and every site guarded: ``already_patched``.
    No marker but every site guarded by the file itself (a vLLM release with its own fallback):
    ``upstream_fixed``, the file is left alone. No site at all: AnchorNotFound (unknown vLLM version).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import hashlib
import os

from ansible_collections.airgap.vllm.plugins.module_utils.common import _files, _version
from ansible_collections.airgap.vllm.plugins.module_utils.image._source_analysis import (
    SourcePatchError,
    _OSERROR_CATCHERS,
    analyse,
)

STATE_PATCHED = "patched"
STATE_ALREADY_PATCHED = "already_patched"
STATE_UPSTREAM_FIXED = "upstream_fixed"
STATE_ANCHOR_NOT_FOUND = "anchor_not_found"

MARKER = "# airgap.vllm source-patch"


class UnknownPatchError(SourcePatchError):
    """A patch name that is not in the catalogue."""


class AnchorNotFoundError(SourcePatchError):
    """The file has neither the expected calls nor a known fix (unknown vLLM version)."""

    state = STATE_ANCHOR_NOT_FOUND

    def __init__(self, path, expected):
        self.path = path
        self.expected = expected
        super(AnchorNotFoundError, self).__init__(
            "%s: anchor not found: expected %s; found none and no known fix "
            "(unknown vLLM version? check the patch catalogue against this release)" % (path, expected)
        )


class UnsupportedShapeError(SourcePatchError):
    """A matching call that is not a plain statement (e.g. `if x: m.madvise(...)`, `a = m.madvise(...)`)."""


class ValidationError(SourcePatchError):
    """The patched text failed its own checks; nothing was written."""


class PatchSpec(object):
    """One catalogue entry: which files, which method/constant, which errno to tolerate."""

    def __init__(self, name, revision, files, method, constant, errno_name, description):
        self.name = name
        self.revision = revision
        self.files = tuple(files)
        self.method = method
        self.constant = constant
        self.errno_name = errno_name
        self.description = description

    @property
    def ident(self):
        return "%s@r%d" % (self.name, self.revision)

    @property
    def marker(self):
        return "%s %s r%d" % (MARKER, self.name, self.revision)

    @property
    def expected(self):
        return "`<obj>.%s(%s, ...)` call statements, or a try/except OSError around them" % (
            self.method,
            self.constant,
        )

    def as_dict(self):
        return {
            "name": self.name,
            "revision": self.revision,
            "files": list(self.files),
            "description": self.description,
        }


CATALOGUE = {
    "madvise_populate_write": PatchSpec(
        name="madvise_populate_write",
        revision=1,
        # Paths inside the vllm package (vLLM 0.27.1: shared_offload_region.py:100,111 and
        # ec_shared_region.py:97).
        files=(
            "v1/kv_offload/cpu/shared_offload_region.py",
            "distributed/ec_transfer/ec_connector/cpu/ec_shared_region.py",
        ),
        method="madvise",
        constant="MADV_POPULATE_WRITE",
        errno_name="EINVAL",
        description=(
            "MADV_POPULATE_WRITE needs Linux >= 5.14; on older kernels (Kylin V10 4.19) madvise() raises "
            "OSError EINVAL and the engine dies. Guard each call: swallow only EINVAL, log once, and let "
            "the pages be allocated lazily on first touch."
        ),
    ),
}


def get_patch(name):
    try:
        return CATALOGUE[name]
    except KeyError:
        raise UnknownPatchError("unknown patch %r; known: %s" % (name, ", ".join(sorted(CATALOGUE))))


# --------------------------------------------------------------------------- when the image needs it

# MADV_POPULATE_WRITE exists from Linux 5.14 (mm/madvise.c); older kernels answer EINVAL.
MADVISE_POPULATE_WRITE_SINCE = (5, 14)


def kernel_version(release):
    """(major, minor) of a kernel release such as ``uname -r`` prints, or None when it has none."""
    version = _version.release(release)
    return version[:2] if version else None


def madvise_patch_decision(kv_offloading, kernel_release):
    """Whether the image needs ``madvise_populate_write``, and why: the one home of this rule.

    Needed when the service offloads KV to host memory (native offload or the EC CPU connector, the
    code paths that call madvise(MADV_POPULATE_WRITE)) on a kernel older than 5.14. A kernel release
    that cannot be read (missing, empty, not ``<major>.<minor>...``) counts as old: the patched calls
    only swallow EINVAL, so the patch is harmless on a new kernel, while a missing patch on an old one
    kills the engine at its first offload. Called by the launch planner (``needs_madvise_patch``) and,
    through airgap.vllm.vllm_source_patch, by the vllm_image role.
    """
    if not kv_offloading:
        return False, "no KV offload: nothing calls madvise(MADV_POPULATE_WRITE)"
    version = kernel_version(kernel_release)
    if version is None:
        return True, (
            "KV offload on a kernel whose version cannot be read (%r): patched, as the patch is "
            "harmless on >= 5.14 and a missing one is fatal below" % (kernel_release,)
        )
    if version < MADVISE_POPULATE_WRITE_SINCE:
        return True, ("KV offload on kernel %d.%d < 5.14: madvise(MADV_POPULATE_WRITE) answers EINVAL" % version)
    return False, "kernel %d.%d >= 5.14 has MADV_POPULATE_WRITE" % version


def needs_madvise_patch(kv_offloading, kernel_release):
    """madvise_patch_decision() without the reason."""
    return madvise_patch_decision(kv_offloading, kernel_release)[0]


# --------------------------------------------------------------------------- rewriting


def _indent_unit(indent):
    return "\t" if "\t" in indent else "    "


def _helper_block(spec, nl):
    lines = [
        spec.marker,
        "# MADV_POPULATE_WRITE exists from Linux 5.14; older kernels answer EINVAL, and the pages",
        "# are then allocated lazily on first touch instead of up front.",
        "import errno as _airgap_errno",
        "import logging as _airgap_logging",
        "",
        "_airgap_madvise_warned = []",
        "",
        "",
        "def _airgap_madvise_unsupported():",
        "    if not _airgap_madvise_warned:",
        "        _airgap_madvise_warned.append(True)",
        "        _airgap_logging.getLogger(__name__).warning(",
        '            "madvise(MADV_POPULATE_WRITE) is not supported by this kernel (EINVAL); "',
        '            "shared memory pages will be allocated lazily on first touch "',
        '            "(airgap.vllm source patch %s)"' % spec.ident,
        "        )",
        "",
        "",
        "%s end" % MARKER,
    ]
    return "".join(line + nl for line in lines)


def _wrap_site(src_lines, site, analysis, spec):
    first = src_lines[site.start_row - 1]
    indent = first[: len(first) - len(first.lstrip(" \t"))]
    unit = _indent_unit(indent)
    nl = analysis.newline
    out = [indent + "try:" + nl]
    for row in range(site.start_row, site.end_row + 1):
        text = src_lines[row - 1]
        if row in analysis.string_rows or not text.strip():
            out.append(text)  # inside a multi-line string: the text is data, leave it
        else:
            out.append(unit + text)
    if not out[-1].endswith(("\n", "\r")):
        out[-1] += nl
    out.extend(
        [
            indent + "except OSError as _airgap_exc:" + nl,
            indent + unit + "if _airgap_exc.errno != _airgap_errno.%s:" % spec.errno_name + nl,
            indent + unit + unit + "raise" + nl,
            indent + unit + "_airgap_madvise_unsupported()" + nl,
        ]
    )
    return out


def _can_parse(text):
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


class _AstGuardCheck(ast.NodeVisitor):
    """Independent check on the patched tree: every matching call sits in a try handling OSError."""

    def __init__(self, spec):
        self.spec = spec
        self.guard_depth = 0
        self.unguarded = []

    def _handles(self, node):
        for handler in node.handlers:
            if handler.type is None:
                return True
            for sub in ast.walk(handler.type):
                if isinstance(sub, ast.Name) and sub.id in _OSERROR_CATCHERS:
                    return True
        return False

    def visit_Try(self, node):
        guarded = self._handles(node)
        self.guard_depth += 1 if guarded else 0
        for stmt in node.body:
            self.visit(stmt)
        self.guard_depth -= 1 if guarded else 0
        for stmt in node.handlers + node.orelse + node.finalbody:
            self.visit(stmt)

    def _scope(self, node):
        saved, self.guard_depth = self.guard_depth, 0
        self.generic_visit(node)
        self.guard_depth = saved

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scope

    def visit_Call(self, node):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == self.spec.method and node.args:
            names = [n.id for n in ast.walk(node.args[0]) if isinstance(n, ast.Name)]
            names += [n.attr for n in ast.walk(node.args[0]) if isinstance(n, ast.Attribute)]
            if any(self.spec.constant in n for n in names) and not self.guard_depth:
                self.unguarded.append(node.lineno)
        self.generic_visit(node)


def plan_text(text, spec, path="<source>"):
    """Decide what to do with one file's text. Returns (state, new_text, info); raises SourcePatchError."""
    analysis = analyse(text, spec, path)
    sites = analysis.sites
    if not sites:
        raise AnchorNotFoundError(path, spec.expected)
    todo = [s for s in sites if not s.guarded]
    info = {"sites": [s.start_row for s in sites], "patched_sites": [s.start_row for s in todo]}
    if not todo:
        state = STATE_ALREADY_PATCHED if analysis.marker_found else STATE_UPSTREAM_FIXED
        info["validation"] = "none"
        return state, text, info
    bad = [s for s in todo if not s.supported]
    if bad:
        raise UnsupportedShapeError(
            "%s: line(s) %s call %s.%s(%s, ...) in a shape this patch does not rewrite (expected a "
            "plain call statement on its own line)"
            % (path, ", ".join(str(s.start_row) for s in bad), "<obj>", spec.method, spec.constant)
        )
    src_lines = text.splitlines(True)
    for site in sorted(todo, key=lambda s: s.start_row, reverse=True):
        src_lines[site.start_row - 1 : site.end_row] = _wrap_site(src_lines, site, analysis, spec)
    if not analysis.marker_found:
        row = analysis.insert_row if analysis.insert_row is not None else len(src_lines) + 1
        src_lines.insert(row - 1, _helper_block(spec, analysis.newline) + analysis.newline)
    new_text = "".join(src_lines)
    info["validation"] = validate(text, new_text, spec, path, len(sites))
    return STATE_PATCHED, new_text, info


def validate(old_text, new_text, spec, path, expected_sites):
    """Check the patched text; returns 'ast' or 'tokens' (how far it could be checked here)."""
    after = analyse(new_text, spec, path)
    if len(after.sites) != expected_sites or not all(s.guarded for s in after.sites) or not after.marker_found:
        raise ValidationError("%s: patched text failed the token check (sites or marker wrong)" % path)
    if _can_parse(old_text) is None:
        return "tokens"
    tree = _can_parse(new_text)
    if tree is None:
        raise ValidationError("%s: patched text does not parse; nothing written" % path)
    check = _AstGuardCheck(spec)
    check.visit(tree)
    if check.unguarded:
        raise ValidationError("%s: ast check found unguarded calls at line(s) %s" % (path, check.unguarded))
    return "ast"


# --------------------------------------------------------------------------- files


def read_text(path):
    """A file about to be patched is read exactly; one that cannot be read or is not UTF-8 raises
    SourcePatchError naming the file (module_utils/common/_files.py reads it)."""
    try:
        return _files.read_text(path, missing_ok=False)
    except UnicodeDecodeError as exc:
        data = bytearray(exc.object)
        bad = data[exc.start] if 0 <= exc.start < len(data) else 0
        raise SourcePatchError(
            "%s: not UTF-8 text (byte 0x%02x at offset %d): not a vLLM source file this patch "
            "knows; nothing written" % (path, bad, exc.start)
        )
    except (IOError, OSError) as exc:
        raise SourcePatchError(
            "%s: cannot be read (%s); nothing written" % (path, getattr(exc, "strerror", None) or exc)
        )


def plan_tree(root, patch_names):
    """Plan every file of every named patch under root (the vllm package directory).

    Returns a list of dicts (relpath, path, patch, state, before, after, sites, patched_sites,
    validation). Raises SourcePatchError on the first file that cannot be patched safely, so that
    nothing is written unless every file is fine.
    """
    results = []
    for name in patch_names:
        spec = get_patch(name)
        for rel in spec.files:
            path = os.path.join(root, rel)
            if not os.path.isfile(path):
                raise AnchorNotFoundError(path, "the file itself (from patch %s)" % spec.name)
            before = read_text(path)
            state, after, info = plan_text(before, spec, path)
            item = {"relpath": rel, "path": path, "patch": spec.ident, "state": state, "before": before, "after": after}
            item.update(info)
            results.append(item)
    return results


def fingerprint(results):
    """Stable hash of what the patched files look like: names the derived image."""
    digest = hashlib.sha256()
    for item in sorted(results, key=lambda r: (r["patch"], r["relpath"])):
        digest.update(("%s\0%s\0" % (item["patch"], item["relpath"])).encode("utf-8"))
        digest.update(hashlib.sha256(item["after"].encode("utf-8")).hexdigest().encode("ascii"))
    return digest.hexdigest()


def upstream_fixed(results):
    """True when every planned file carries upstream's own fix (no site to wrap, none wrapped by us): the release
    needs no derived image, whatever the kernel (vLLM 0.30.0 and later for madvise_populate_write)."""
    return bool(results) and all(item["state"] == STATE_UPSTREAM_FIXED for item in results)


class PartialWriteError(SourcePatchError):
    """Writing stopped part-way: `written` files were changed before the failure (changed=true)."""

    def __init__(self, msg, written):
        super(PartialWriteError, self).__init__(msg)
        self.written = written


def apply_tree(results):
    """Write the files planned as patched. Returns the paths written.

    Raises PartialWriteError (carrying the paths already written) when a write fails after others
    succeeded, so the caller can report changed=true: those files are patched on disk.
    """
    written = []
    for item in results:
        if item["state"] == STATE_PATCHED:
            try:
                # Readers see the old or the new file, never half; mode and owner kept.
                _files.write_atomic(item["path"], item["after"], prefix=".airgap-patch-")
            except (IOError, OSError) as exc:
                raise PartialWriteError(
                    "%s: not written (%s); already patched this run: %s"
                    % (item["path"], exc, ", ".join(written) or "none"),
                    written,
                )
            written.append(item["path"])
    return written
