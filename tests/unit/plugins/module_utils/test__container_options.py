"""Unit tests for _container_options: GPUs, seccomp, log rotation, /dev/shm, environment."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.service import _container_options as C


def test_all_gpus_without_a_selection():
    opts, reasons, env = C.gpu_options("24.0.7")
    assert opts == ["--gpus", "all"] and env == {} and "--gpus all" in reasons


def test_a_selection_is_one_quoted_word():
    # Docker reads --gpus as CSV: without the double quotes, device=0,1 would split at the comma.
    opts, reasons, env = C.gpu_options("20.10.7", ["0", "1"])
    assert opts == ["--gpus", '"device=0,1"'] and env == {}
    uuid = "GPU-5f3e3c1e-8a2b-4c59-9e57-1b0c6a7d2e41"
    assert C.gpu_options("20.10.7", [uuid])[0] == ["--gpus", '"device=%s"' % uuid]


def test_old_docker_selects_through_the_runtime_env():
    opts, _reasons, env = C.gpu_options("18.09.1", ["1"])
    assert opts == ["--runtime", "nvidia"] and env == {"NVIDIA_VISIBLE_DEVICES": "1"}
    assert C.gpu_options("18.09.1")[2] == {}
    env, reasons = C.plan_env("FLASH_ATTN", {"NVIDIA_VISIBLE_DEVICES": "1"})
    assert env["NVIDIA_VISIBLE_DEVICES"] == "1" and "NVIDIA_VISIBLE_DEVICES" in reasons
    assert env["HF_HUB_OFFLINE"] == "1"


@pytest.mark.parametrize("driver", [None, "", "json-file", "local"])
def test_log_rotation_for_drivers_that_take_it(driver):
    opts, reasons = C.log_options("100m", 5, driver)
    assert opts == ["--log-opt", "max-size=100m", "--log-opt", "max-file=5"]
    assert "--log-opt max-size=100m" in reasons


@pytest.mark.parametrize("driver", ["journald", "syslog"])
def test_no_log_opts_for_drivers_that_refuse_them(driver):
    opts, reasons = C.log_options("100m", 5, driver)
    assert opts == [] and driver in list(reasons.values())[0]


@pytest.mark.parametrize(
    "size,files", [("100", 0), ("lots", 5), ("10 m", 5), ("1m\n", 5), ("0m", 5), ("100m", "many"), ("100m", -1)]
)
def test_bad_log_settings_are_refused(size, files):
    with pytest.raises(C.ContainerOptionsError, match="log_max_"):
        C.log_options(size, files)


def test_log_size_units():
    assert C.log_options("1G", "3")[0] == ["--log-opt", "max-size=1g", "--log-opt", "max-file=3"]


@pytest.mark.parametrize("offload,tp,want", [(0, 1, 4), (64, 1, 72), (2.5, 1, 11), (0, 2, 5), (0, 8, 11), (64, 4, 75)])
def test_shm_size(offload, tp, want):
    assert C.shm_size_gib(offload, tp) == want
    opts, reasons, _env = C.container_options("5.15.0", "24.0.7", offload, tp)
    assert opts[-2:] == ["--shm-size", "%dg" % want]
    why = reasons["--shm-size %dg" % want]
    assert ("--ipc=host" in why) is (tp > 1)
    assert "--ipc=host" not in opts and "--ipc" not in opts


def test_seccomp_only_where_clone3_is_answered_with_eperm():
    old = C.container_options("4.19.90-52.22.v2207.ky10.x86_64", "20.10.7", 0)[0]
    assert old[old.index("--security-opt") + 1] == "seccomp=unconfined"
    assert "--security-opt" not in C.container_options("4.19.90", "20.10.10", 0)[0]
    assert "--security-opt" not in C.container_options("5.15.0", "20.10.7", 0)[0]


def test_gpus_first_and_shm_sized_for_the_offload():
    # The madvise rule these options once came with is _source_patch.madvise_patch_decision's (test__source_patch).
    opts = C.container_options("4.19.90", "20.10.7", 64)[0]
    assert opts[:2] == ["--gpus", "all"] and opts[-2:] == ["--shm-size", "72g"]
