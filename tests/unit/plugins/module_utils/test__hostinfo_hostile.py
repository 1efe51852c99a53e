"""Hostile host files for host_info (issue 12, #9): a non-UTF-8 os-release or .productinfo is read without a
traceback and named. Each test name states what is defended."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.common import _files
from ansible_collections.airgap.vllm.plugins.module_utils.host import _hostinfo


@pytest.mark.parametrize("name", ["os-release", ".productinfo", "version"])
def test_non_utf8_host_file_is_read_without_traceback_and_named(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(
        b'NAME="Kylin Linux Advanced Server"\nID=kylin\nVERSION="V10 (Lance\xb7)"\nVERSION_ID="V10"\n'
        b"release V10 (SP3) /(Lance)-x86_64-Build20/20210518 \xd6\xd0\xce\xc4\n"
    )
    text, problem = _files.read_text_report(str(path))
    assert "Kylin" in text and "\ufffd" in text
    assert str(path) in problem and "UTF-8" in problem
    assert _files.read_text(str(path)) == text


def test_non_utf8_os_release_and_productinfo_still_give_host_facts(tmp_path):
    osr = tmp_path / "os-release"
    osr.write_bytes(
        b'NAME="Kylin Linux Advanced Server"\nID=kylin\nVERSION="V10 (Lance)"\nVERSION_ID="V10"\n'
        b'PRETTY_NAME="\xc9\xcf"\n'
    )
    info = tmp_path / ".productinfo"
    info.write_bytes(b"\xd6\xd0\xce\xc4 release V10 (SP3) /(Lance)-x86_64\n")
    facts = _hostinfo.host_facts(_files.read_text(str(osr)), _files.read_text(str(info)), "4.19.90", "3.7.9")
    assert facts["kylin"] and facts["kylin_sp"] == "SP3" and facts["distribution_version"] == "V10"
