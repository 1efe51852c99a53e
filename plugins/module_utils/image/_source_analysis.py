# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The source patch's reading of vLLM's code (airgap.vllm.vllm_source_patch): Python's own tokenizer, no regular
expressions over source text. Finds each call site of a patch's anchor (its logical line, its first argument), tells
whether a site is already guarded (inside a try whose handler catches OSError and falls back, or in a function every
caller of which guards it), and where a row may be inserted. The patches themselves (catalogue, plan, validate,
apply) are _source_patch.py's."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import tokenize


# Names an except clause may use that catch OSError (mmap.error is an alias of OSError).
_OSERROR_CATCHERS = frozenset(["OSError", "EnvironmentError", "IOError", "Exception", "BaseException"])


class SourcePatchError(Exception):
    """Base class: the patch cannot be applied safely."""


# --------------------------------------------------------------------------- token analysis


class _Logical(object):
    """A logical line: significant tokens, its first physical row and the row of its NEWLINE."""

    __slots__ = ("toks", "start_row", "end_row", "indent")

    def __init__(self, toks, end_row):
        self.toks = toks
        self.start_row = toks[0].start[0]
        self.end_row = end_row
        self.indent = toks[0].start[1]

    @property
    def first(self):
        return self.toks[0].string


class Site(object):
    """One matching call found in the source."""

    __slots__ = ("start_row", "end_row", "guarded", "supported", "logical", "guarded_by")

    def __init__(self, logical, supported, guarded):
        self.logical = logical
        self.guarded_by = None  # name of the function whose callers guard this site (upstream's fix)
        self.start_row = logical.start_row
        self.end_row = logical.end_row
        self.supported = supported
        self.guarded = guarded


class Analysis(object):
    __slots__ = ("sites", "marker_found", "string_rows", "insert_row", "newline")

    def __init__(self, sites, marker_found, string_rows, insert_row, newline):
        self.sites = sites
        self.marker_found = marker_found
        self.string_rows = string_rows
        self.insert_row = insert_row
        self.newline = newline


def _tokenize(text, path):
    try:
        return list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError) as exc:
        raise SourcePatchError("%s: cannot tokenize: %s" % (path, exc))


def _logical_lines(tokens):
    skip = (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    lines, cur = [], []
    for tok in tokens:
        if tok.type == tokenize.NEWLINE:
            if cur:
                lines.append(_Logical(cur, tok.start[0]))
            cur = []
        elif tok.type not in skip:
            cur.append(tok)
    if cur:  # a last line without a trailing newline
        lines.append(_Logical(cur, cur[-1].end[0]))
    return lines


def _matching_paren(toks, open_idx):
    depth = 0
    for idx in range(open_idx, len(toks)):
        s = toks[idx].string
        if toks[idx].type == tokenize.OP and s in "([{":
            depth += 1
        elif toks[idx].type == tokenize.OP and s in ")]}":
            depth -= 1
            if depth == 0:
                return idx
    return None


def _first_arg(toks, open_idx, close_idx):
    depth, out = 0, []
    for tok in toks[open_idx + 1 : close_idx]:
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        elif depth == 0 and tok.type == tokenize.OP and tok.string == ",":
            break
        out.append(tok)
    return out


def _is_dotted_prefix(toks):
    """toks == NAME ('.' NAME)* -- the object the method is called on."""
    if not toks or len(toks) % 2 == 0:
        return False
    for idx, tok in enumerate(toks):
        if idx % 2 == 0 and tok.type != tokenize.NAME:
            return False
        if idx % 2 == 1 and tok.string != ".":
            return False
    return True


def _handler_catches_oserror(toks):
    """toks: an `except ...:` logical line."""
    names = []
    for tok in toks[1:]:
        if tok.string in ("as", ":"):
            break
        if tok.type == tokenize.NAME:
            names.append(tok.string)
    if not names:  # bare except
        return True
    if any(n in _OSERROR_CATCHERS for n in names):
        return True
    return "mmap" in names and "error" in names


def _openers(lines, idx):
    """Indices of the logical lines opening the blocks around line idx, innermost first (to column 0)."""
    cur = lines[idx].indent
    for m in range(idx - 1, -1, -1):
        if lines[m].indent < cur:
            cur = lines[m].indent
            yield m


def _is_guarded(lines, idx):
    for m in _openers(lines, idx):
        head = lines[m]
        if head.first in ("def", "class", "async"):
            return False  # an outer try does not guard code that runs later
        if head.first == "try" and _try_has_fallback(lines, m):
            return True
        if head.indent == 0:
            return False
    return False


def _try_has_fallback(lines, try_idx):
    level = lines[try_idx].indent
    n = try_idx + 1
    while n < len(lines):
        line = lines[n]
        if line.indent < level:
            return False
        if line.indent == level:
            if line.first == "except":
                if _handler_catches_oserror(line.toks) and not _handler_reraises(lines, n):
                    return True
            elif line.first not in ("else", "finally"):
                return False
        n += 1
    return False


def _handler_reraises(lines, head_idx):
    """True when the handler's last statement is a `raise`: it logs (maybe) and re-raises, no fallback."""
    head = lines[head_idx]
    if head.toks[-1].string != ":":  # `except OSError: pass` (or `...: log(); raise`) on one line
        strings = [t.string for t in head.toks]
        start = strings.index(":") + 1
        for k in range(len(strings) - 1, start - 1, -1):
            if strings[k] == ";":
                start = k + 1
                break
        return start < len(strings) and strings[start] == "raise"
    body, body_indent = [], None
    for line in lines[head_idx + 1 :]:
        if line.indent <= head.indent:
            break
        if body_indent is None:
            body_indent = line.indent
        if line.indent == body_indent:
            body.append(line.first)
    return not body or body[-1] == "raise"


def _enclosing_def(lines, idx):
    """(index, name) of the innermost def around logical line idx, or (None, None)."""
    for m in _openers(lines, idx):
        head = lines[m]
        toks = head.toks
        if head.first == "def" and len(toks) > 1:
            return m, toks[1].string
        if head.first == "async" and len(toks) > 2 and toks[1].string == "def":
            return m, toks[2].string
        if head.first == "class" or head.indent == 0:
            return None, None
    return None, None


def _guarded_by_callers(lines, idx):
    """The name of the function holding line idx when every use of it is upstream's probe-and-fallback shape."""
    def_idx, name = _enclosing_def(lines, idx)
    if name is None:
        return None
    guarded_calls, unguarded_calls, refs = [], [], []
    for n, line in enumerate(lines):
        toks = line.toks
        for i, tok in enumerate(toks):
            if tok.type != tokenize.NAME or tok.string != name:
                continue
            prev = toks[i - 1].string if i else None
            if prev in ("def", "."):
                continue  # its definition, or an attribute of some other object
            if i + 1 < len(toks) and toks[i + 1].string == "(":
                (guarded_calls if _is_guarded(lines, n) else unguarded_calls).append(n)
            else:
                refs.append(n)
    if not guarded_calls or unguarded_calls:
        return None
    probing = set(_enclosing_def(lines, n)[0] for n in guarded_calls)
    if any(_enclosing_def(lines, n)[0] not in probing or _enclosing_def(lines, n)[0] is None for n in refs):
        return None
    return name


def _insert_row(lines):
    """Row before which module-level helper code may go: after the docstring and __future__ imports."""
    for idx, line in enumerate(lines):
        if line.indent != 0:
            continue
        if idx == 0 and all(t.type == tokenize.STRING for t in line.toks):
            continue
        if line.first == "from" and len(line.toks) > 1 and line.toks[1].string == "__future__":
            continue
        return line.start_row
    return None


def analyse(text, spec, path="<source>"):
    """Find every `<obj>.<method>(<constant>, ...)` call in text and say whether each is guarded."""
    tokens = _tokenize(text, path)
    lines = _logical_lines(tokens)
    marker_found = any(t.type == tokenize.COMMENT and t.string.startswith(spec.marker) for t in tokens)
    string_rows = set()
    for tok in tokens:
        if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
            string_rows.update(range(tok.start[0] + 1, tok.end[0] + 1))
    sites = []
    for idx, line in enumerate(lines):
        toks = line.toks
        for i in range(1, len(toks) - 1):
            if not (toks[i].type == tokenize.NAME and toks[i].string == spec.method):
                continue
            if toks[i - 1].string != "." or toks[i + 1].string != "(":
                continue
            close = _matching_paren(toks, i + 1)
            if close is None:
                continue
            arg = _first_arg(toks, i + 1, close)
            if not any(t.type == tokenize.NAME and spec.constant in t.string for t in arg):
                continue
            supported = close == len(toks) - 1 and _is_dotted_prefix(toks[: i - 1])
            site = Site(line, supported, _is_guarded(lines, idx))
            if not site.guarded:
                site.guarded_by = _guarded_by_callers(lines, idx)
                site.guarded = site.guarded_by is not None
            sites.append(site)
    newline = "\r\n" if "\r\n" in text else "\n"
    return Analysis(sites, marker_found, string_rows, _insert_row(lines), newline)
