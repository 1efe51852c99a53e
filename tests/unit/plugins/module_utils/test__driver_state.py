"""The driver state rules: dkms and nvidia-installer parsing, the dnf module reset, and what keeps a driver unconverged."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.airgap.vllm.plugins.module_utils.driver import _driver_state as D

V = "580.65.06"


def converged(**over):
    state = dict(
        nvml={"nvml_state": "ok", "driver_version": V, "library_version": V},
        rpms=[],
        rpm_error=None,
        installed_version=V,
        dkms_versions=[V],
        blacklist_text="B\n",
        dnf_module_reset=True,
        smi_rc=0,
        smi_output="NVIDIA-SMI " + V,
    )
    state.update(over)
    return state


def test_dkms_versions_both_formats_other_modules_ignored():
    text = (
        "nvidia, 560.35.03, 4.19.90-52.22.v2207.ky10.x86_64, x86_64: installed\n"
        "nvidia, 550.54.14: added\n"
        "nvidia-fs/2.17.5, 4.19.90-52.22.v2207.ky10.x86_64, x86_64: installed\n"
        "nvidia/580.65.06, 4.19.90-52.22.v2207.ky10.x86_64, x86_64: installed (original_module exists)\n"
        "nvidia/560.35.03: added\n"
    )
    assert D.dkms_versions(text) == ["560.35.03", "550.54.14", "580.65.06"]
    assert D.dkms_versions("") == [] and D.dkms_versions(None) == []


def test_installer_version():
    assert D.installer_version("\nnvidia-installer:  version 580.65.06\n  The NVIDIA...") == V
    assert D.installer_version("") == "" and D.installer_version("command not found") == ""


def test_dnf_module_reset():
    assert D.dnf_module_reset(None) is True
    assert D.dnf_module_reset("[nvidia-driver]\nname=nvidia-driver\nstream=\nprofiles=\nstate=\n") is True
    assert D.dnf_module_reset("[nvidia-driver]\nstream=latest-dkms\nprofiles=\nstate=\n") is False
    assert D.dnf_module_reset("[nvidia-driver]\nstream=\nprofiles=\nstate=enabled\n") is False


def test_smi_mismatch():
    assert D.smi_mismatch(0, "NVIDIA-SMI 580.65.06", "") is False
    assert D.smi_mismatch(None, "", "") is True
    assert D.smi_mismatch(18, "", "Failed to initialize NVML: Driver/library version mismatch") is True
    assert D.smi_mismatch(0, "Driver/library version Mismatch", "") is True


def test_converged_and_each_rule_that_breaks_it():
    assert D.pending(converged(), V, "B\n") == []
    assert D.pending(converged(blacklist_text=None), V, None) == []
    cases = [
        (dict(rpms=["nvidia-driver"]), "packaged driver RPMs installed: nvidia-driver"),
        (dict(rpm_error="rpm not found"), "installed RPMs unreadable"),
        (dict(installed_version="560.35.03"), ".run driver installed: 560.35.03, wanted 580.65.06"),
        (dict(installed_version=""), ".run driver installed: none"),
        (dict(dkms_versions=["560.35.03", V]), "other nvidia versions in dkms: 560.35.03"),
        (dict(blacklist_text=None), "nouveau blacklist"),
        (dict(blacklist_text="other\n"), "nouveau blacklist"),
        (dict(dnf_module_reset=False), "dnf nvidia-driver module stream not reset"),
        (
            dict(nvml={"nvml_state": "version_mismatch", "driver_version": None, "library_version": V}),
            "NVML version_mismatch",
        ),
        (
            dict(nvml={"nvml_state": "ok", "driver_version": "560.35.03", "library_version": "560.35.03"}),
            "NVML ok (driver 560.35.03",
        ),
        (dict(nvml={}), "NVML None"),
        (dict(smi_rc=9), "nvidia-smi fails"),
        (dict(smi_rc=None), "nvidia-smi fails"),
    ]
    for over, words in cases:
        reasons = D.pending(converged(**over), V, "B\n")
        assert len(reasons) == 1 and reasons[0].startswith(words), (over, reasons)
