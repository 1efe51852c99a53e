"""airgap.vllm.fabric_manager_rpm as the nvidia_driver role's vars call it: nvidia_driver_fabric_manager_rpm, else
the staged RPM of the driver's version (the rule validate checks the manifest with), else NVIDIA's file name under the
staging directory."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

RPM = (
    "{{ setting | airgap.vllm.fabric_manager_rpm(staged | default({}), version, "
    "(root | default('/var/lib/airgap-vllm')) ~ '/bundle/artifacts') }}"
)
FM = "nvidia-fabric-manager-580.65.06-1.x86_64.rpm"


def test_the_default_is_derived_from_the_version(render):
    got = render(RPM, setting="", version="580.65.06")
    assert got == {
        "path": "/var/lib/airgap-vllm/bundle/artifacts/" + FM,
        "file_name": FM,
        "source": "default",
        "package": "nvidia-fabric-manager",
        "unit": "nvidia-fabricmanager.service",
    }
    assert render(RPM, setting="", version="580.65.06", root="/srv")["path"] == "/srv/bundle/artifacts/" + FM


def test_the_staged_rpm_of_the_version_even_renamed_and_the_operators_path_first(render):
    staged = {
        "fabricmanager": [
            {"path": "/s/artifacts/nvidia-fabric-manager-570.172.08-1.x86_64.rpm", "version": "570.172.08"},
            {"path": "/s/artifacts/fm-580.rpm", "version": "580.65.06"},
        ]
    }
    assert render(RPM, setting="", staged=staged, version="580.65.06")["path"] == "/s/artifacts/fm-580.rpm"
    assert render(RPM, setting="", staged=staged, version="570.172.08")["source"] == "staged"
    assert render(RPM, setting="/opt/fm.rpm", staged=staged, version="580.65.06")["path"] == "/opt/fm.rpm"
