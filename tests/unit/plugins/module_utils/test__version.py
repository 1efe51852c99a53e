"""Version numbers, one home (issue 32): _version.py reads the kernel, Docker, NVIDIA driver, HAProxy and vLLM
versions the way they always were. The tables pin what each parser answered before they moved there (test
written and passing against the old helpers first), odd inputs included (a Kylin kernel release, a Debian
Docker, a pre-release, a local version, blanks, None, a number)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.front import _front_haproxy as F_haproxy
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_common as C
from ansible_collections.airgap.vllm.plugins.module_utils.host import _preflight as PF
from ansible_collections.airgap.vllm.plugins.module_utils.image import _source_patch as SP
from ansible_collections.airgap.vllm.plugins.module_utils.common import _version as VER

KYLIN = "4.19.90-52.22.v2207.ky10.aarch64"

# input: (numbers: Docker/kernel for the seccomp rule (was _container_options.version_tuple), dotted: driver
#         (was _preflight.version_tuple; validate's cross-role rule reads it too now, through at_least),
#         kernel (major, minor) for the madvise rule (_source_patch.kernel_version, on _version.release))
TABLE = [
    (KYLIN, (4, 19, 90), (4, 19, 90, 52, 22, 0, 0, 0), (4, 19)),
    ("20.10.24+dfsg1", (20, 10, 24), (20, 10, 0), (20, 10)),
    ("570.86.15", (570, 86, 15), (570, 86, 15), (570, 86)),
    ("0.27.1", (0, 27, 1), (0, 27, 1), (0, 27)),
    ("0.30.0rc1", (0, 30, 0), (0, 30, 0), (0, 30)),
    ("0.11.0+cpu", (0, 11, 0), (0, 11, 0), (0, 11)),
    ("580.65.06", (580, 65, 6), (580, 65, 6), (580, 65)),
    ("5.14.0-70.el9.x86_64", (5, 14, 0), (5, 14, 0, 70, 0, 0), (5, 14)),
    ("Docker version 20.10.7, build f0df350", (20, 10, 7), (0, 10, 0), None),
    ("19.03", (19, 3), (19, 3), (19, 3)),
    ("5", (5,), (5,), None),
    ("v2207", (2207,), (0,), None),
    (" 580.65.06 ", (580, 65, 6), (580, 65, 6), (580, 65)),
    ("580..1", (580, 1), (580, 1), None),
    ("580.", (580,), (580,), None),
    ("-580", (580,), (580,), None),
    ("", None, (), None),
    (None, None, (), None),
    ("abc", None, (0,), None),
    ("Linux 5.14", (5, 14), (0, 14), None),
    ("5.3.0-1+x", (5, 3, 0), (5, 3, 0, 0), (5, 3)),
    ("26.1.4-ce", (26, 1, 4), (26, 1, 4, 0), (26, 1)),
    (580, (580,), (580,), None),
    (5.14, (5, 14), (5, 14), (5, 14)),
]


@pytest.mark.parametrize("text, numbers, driver, kernel", TABLE)
def test_each_parser_answers_as_before(text, numbers, driver, kernel):
    assert VER.numbers(text) == numbers
    assert VER.dotted(text) == driver
    assert SP.kernel_version(text) == kernel
    assert (VER.release(text) or (None, None))[:2] == (kernel or (None, None))


@pytest.mark.parametrize(
    "version, minimum, ok",
    [
        ("580.65.06", "580.65.06", True),
        ("580.65", "580.65.0", True),
        ("580.100.1", "580.65.06", True),
        ("580.9.99", "580.65.06", False),
        ("", "", False),
        (None, "1", False),
        (" 580.65.06 ", "580.65.06", True),
        ("570.86.15", "570", True),
        (KYLIN, "4.19.90", True),
        ("590", "580.65.06", True),
        ("580", "580.65.06", False),
    ],
)
def test_driver_at_least(version, minimum, ok):
    assert PF.version_at_least(version, minimum) is ok
    assert VER.at_least(version, minimum) is ok


@pytest.mark.parametrize(
    "text, version",
    [
        ("HAProxy version 2.6.12-1+deb12u4 2026/10/17 - https://haproxy.org/", (2, 6, 12)),
        ("HA-Proxy version 1.8.27 2020/12/01", (1, 8, 27)),
        ("haproxy version 2.2", (2, 2, 0)),
        ("HAPROXY VERSION 3.0.5", (3, 0, 5)),
        (b"HAProxy version 2.4.22 2023", (2, 4, 22)),
        ("version 2.4", None),
        ("", None),
        (None, None),
        ("HAProxy version 2 beta", None),
    ],
)
def test_haproxy(text, version):
    assert F_haproxy.haproxy_version(text) == version


@pytest.mark.parametrize(
    "text, parsed",
    [
        ("0.27.1", ("0.27.1", (0, 27, 1), None, False, None, (0, 27, 1, (2, "", 0), -1, 1))),
        ("0.30.0rc1", ("0.30.0rc1", (0, 30, 0), "rc1", False, None, (0, 30, 0, (1, "rc", 1), -1, 1))),
        ("0.11.0+cpu", ("0.11.0+cpu", (0, 11, 0), None, False, "cpu", (0, 11, 0, (2, "", 0), -1, 1))),
        ("20.10.24+dfsg1", ("20.10.24+dfsg1", (20, 10, 24), None, False, "dfsg1", (20, 10, 24, (2, "", 0), -1, 1))),
        (
            "0.33.0.dev12+g1234abc",
            ("0.33.0.dev12+g1234abc", (0, 33, 0), None, True, "g1234abc", (0, 33, 0, (0, "", 0), -1, 1)),
        ),
        ("0.30.0.post1+cu129", ("0.30.0.post1+cu129", (0, 30, 0), None, False, "cu129", (0, 30, 0, (2, "", 0), 1, 1))),
        ("0.31.0-RC.2", ("0.31.0rc2", (0, 31, 0), "rc2", False, None, (0, 31, 0, (1, "rc", 2), -1, 1))),
        ("1.0.0a1.dev2", ("1.0.0a1.dev2", (1, 0, 0), "a1", True, None, (1, 0, 0, (1, "a", 1), -1, 0))),
        ("0.28", ("0.28.0", (0, 28, 0), None, False, None, (0, 28, 0, (2, "", 0), -1, 1))),
        (5.14, ("5.14.0", (5, 14, 0), None, False, None, (5, 14, 0, (2, "", 0), -1, 1))),
    ],
)
def test_vllm(text, parsed):
    for parse in (C.parse_vllm_version, VER.parse_vllm):
        v = parse(text)
        assert (v["version"], v["release"], v["pre"], v["dev"], v["local"], v["key"]) == parsed


@pytest.mark.parametrize("text", [KYLIN, "570.86.15-1", "0.27.1_cpu", "Linux 5.14", "", None, "v2207"])
def test_vllm_refuses(text):
    for parse in (C.parse_vllm_version, VER.parse_vllm):
        with pytest.raises(ValueError):
            parse(text)


def test_release_after_words():
    assert VER.release("HAProxy version 2.6.12-1", after=r"(?:HA-?Proxy|haproxy) version ") == (2, 6, 12)
    assert VER.release("uname: 5.14.0-70.el9") is None
    assert VER.release(" 5.14.0-70.el9") == (5, 14, 0)
    assert VER.numbers("20.10.24+dfsg1", count=2) == (20, 10)
