"""owned_services as Ansible runs it: our services found by our marks, a foreign container only named (issue 24)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat

from ansible_collections.airgap.vllm.plugins.modules import owned_services as M


def _docker(tmp_path, out, rc=0):
    path = tmp_path / "docker"
    path.write_text("#!/bin/sh\ncat <<'X'\n%sX\nexit %d\n" % (out, rc))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_foreign_container_with_our_name_is_named_not_listed(run_module, tmp_path):
    """Failed on 9dce105: uninstall ran `docker rm -f <name>` on whatever container had the name."""
    units = tmp_path / "units"
    units.mkdir()
    (units / "vllm.service").write_text("# org.airgap.vllm.service=vllm config_dir=/etc/airgap-vllm/vllm\n")
    (units / "vllm-b.service").write_text("# org.airgap.vllm.service=vllm-b config_dir=/etc/airgap-vllm/vllm-b\n")
    (units / "docker.service").write_text("[Unit]\nDescription=Docker\n")
    docker = _docker(tmp_path, "c1\tvllm\t\nc2\tvllm-b\tvllm-b\n")
    r = run_module(M, names=["vllm"], unit_dirs=[str(units)], docker_bin=docker)
    assert r["discovered"] == ["vllm", "vllm-b"] and not r["changed"]
    assert r["services"]["vllm"]["containers"] == [] and r["services"]["vllm"]["foreign_containers"] == ["c1"]
    assert r["services"]["vllm-b"]["containers"] == ["c2"] and r["services"]["vllm-b"]["unit_ours"]
    assert any("not our label" in w for w in r["notes"])


def test_no_docker_lists_no_container_and_says_so(run_module, tmp_path):
    r = run_module(M, names=["vllm", ".."], unit_dirs=[str(tmp_path / "none")], docker_bin=str(tmp_path / "no-docker"))
    assert r["services"]["vllm"]["containers"] == [] and "not found" in r["notes"][0]
    assert r["problems"] and list(r["services"]) == ["vllm"]
    r = run_module(M, names=["vllm"], unit_dirs=[str(tmp_path)], docker_bin=_docker(tmp_path, "", rc=1))
    assert "docker ps failed" in r["notes"][0] and os.path.isdir(str(tmp_path))
