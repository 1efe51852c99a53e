"""Driver clean-up by rule: every packaged-driver RPM goes, the container toolkit's stay."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.airgap.vllm.plugins.module_utils.driver._nvidia_rpms import (
    version_release,
    RPM_QUERY_FORMAT,
    driver_packages,
    is_driver_package,
    kept_packages,
    parse_rpm_qa,
)

# NVIDIA's RHEL 8 repo naming (shared/reference/nvidia-offline-facts.md, "RPM-packaged drivers to remove").
NVIDIA_RHEL8 = [
    "nvidia-driver",
    "nvidia-driver-libs",
    "nvidia-driver-cuda",
    "nvidia-driver-cuda-libs",
    "nvidia-driver-NVML",
    "nvidia-driver-NvFBCOpenGL",
    "nvidia-driver-devel",
    "kmod-nvidia-latest-dkms",
    "kmod-nvidia-open-dkms",
    "nvidia-kmod-common",
    "nvidia-modprobe",
    "nvidia-persistenced",
    "nvidia-settings",
    "nvidia-xconfig",
    "nvidia-libXNVCtrl",
    "dnf-plugin-nvidia",
]
# Names the fixed list missed: precompiled kmods, devel split-offs, RPM Fusion/ELRepo, fabric manager, cuda-drivers.
OTHER_DRIVER = [
    "kmod-nvidia-560.35.03-4.18.0-553.el8_10",
    "nvidia-libXNVCtrl-devel",
    "akmod-nvidia",
    "xorg-x11-drv-nvidia",
    "xorg-x11-drv-nvidia-cuda-libs",
    "nvidia-fabric-manager",
    "libnvidia-ml",
    "cuda-drivers",
    "cuda-drivers-560",
    "nvidia-kmod-open-dkms",
    "NVIDIA-driver-legacy",
]
# The container toolkit (installed and kept by the nvidia_toolkit role) and its older names.
TOOLKIT = [
    "libnvidia-container1",
    "libnvidia-container-tools",
    "nvidia-container-toolkit-base",
    "nvidia-container-toolkit",
    "nvidia-container-runtime",
    "nvidia-docker2",
    "nvidia-container-selinux",
]
UNRELATED = [
    "kernel-devel",
    "cuda-toolkit-12-4",
    "cuda-cudart-12-4",
    "docker-ce",
    "dkms",
    "gcc",
    "nvidiafoo",
    "envidia",
    "python3-libs",
]


def test_every_reference_name_and_the_ones_a_list_misses_go():
    for name in NVIDIA_RHEL8 + OTHER_DRIVER:
        assert is_driver_package(name), name


def test_the_toolkit_and_unrelated_packages_stay():
    for name in TOOLKIT + UNRELATED:
        assert not is_driver_package(name), name


def test_operator_keep_globs_and_extra_names():
    installed = dict((n, ["0:1-1.x86_64"]) for n in NVIDIA_RHEL8 + TOOLKIT + ["vendor-gpu-tool"])
    assert "nvidia-settings" not in driver_packages(installed, keep=["nvidia-sett*"])
    chosen = driver_packages(installed, extra=["vendor-gpu-tool", "not-installed", "nvidia-container-toolkit"])
    assert chosen == sorted(NVIDIA_RHEL8 + ["vendor-gpu-tool"])
    assert kept_packages(installed) == sorted(TOOLKIT)
    assert kept_packages(installed, keep=["nvidia-sett*"]) == sorted(TOOLKIT + ["nvidia-settings"])


def test_rpm_qa_output_is_parsed_with_every_installed_version():
    text = (
        "nvidia-driver\t3:560.35.03-1.el8.x86_64\nkmod-nvidia-latest-dkms\t3:560.35.03-1.el8.x86_64\n"
        "kernel\t0:4.19.90-52.22.v2207.ky10.x86_64\nkernel\t0:4.19.90-89.11.v2401.ky10.x86_64\n"
        "libnvidia-container1\t0:1.17.8-1.x86_64\n\n"
    )
    installed = parse_rpm_qa(text)
    assert installed["kernel"] == ["0:4.19.90-52.22.v2207.ky10.x86_64", "0:4.19.90-89.11.v2401.ky10.x86_64"]
    assert driver_packages(installed) == ["kmod-nvidia-latest-dkms", "nvidia-driver"]
    assert kept_packages(installed) == ["libnvidia-container1"]
    assert "%{NAME}" in RPM_QUERY_FORMAT


def test_dependents_of_the_removal_are_reported_and_kept_ones_block_it():
    from ansible_collections.airgap.vllm.plugins.module_utils.driver._nvidia_rpms import (
        parse_erase_test,
        removal_blockers,
    )

    text = (
        "error: Failed dependencies:\n"
        "\tnvidia-driver-libs is needed by (installed) nvidia-driver-3:560.35.03-1.el8.x86_64\n"
        "\tlibnvidia-ml.so.1()(64bit) is needed by (installed) python3-pynvml-11.5.0-1.el8.noarch\n"
        "\tnvidia-driver-cuda is needed by (installed) nvidia-container-toolkit-1.17.8-1.x86_64\n"
    )
    dependents = parse_erase_test(text)
    assert dependents == {
        "nvidia-driver": ["nvidia-driver-libs"],
        "python3-pynvml": ["libnvidia-ml.so.1()(64bit)"],
        "nvidia-container-toolkit": ["nvidia-driver-cuda"],
    }
    blocked, also = removal_blockers(["nvidia-driver", "nvidia-driver-libs", "nvidia-driver-cuda"], dependents)
    assert blocked == {"nvidia-container-toolkit": ["nvidia-driver-cuda"]} and also == ["python3-pynvml"]
    blocked, also = removal_blockers(["nvidia-driver-libs"], {"vendor-tool": ["x"]}, keep=["vendor-*"])
    assert list(blocked) == ["vendor-tool"] and also == []
    assert parse_erase_test("") == {}


def test_version_release_drops_epoch_and_arch():
    assert version_release("0:1.17.8-1.x86_64") == "1.17.8-1"
    assert version_release("3:560.35.03-1.el8.x86_64") == "560.35.03-1.el8"
    assert version_release("1.17.8-1") == "1.17.8-1"
    assert version_release("2:5.0-1.ky10.noarch") == "5.0-1.ky10"
