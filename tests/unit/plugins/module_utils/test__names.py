from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.common._names import is_service_name, service_name_problem


@pytest.mark.parametrize("name", ["vllm", "vllm-b", "qwen3_27b", "a", "v.1", "A" * 63])
def test_names_we_may_give(name):
    assert service_name_problem(name) is None and is_service_name(name)


@pytest.mark.parametrize(
    "name,why",
    [
        ("..", "not a service name"),
        (".", "not a service name"),
        ("vllm\n", "not a service name"),
        ("-x", "not a service name"),
        ("a/b", "not a service name"),
        ("", "not a service name"),
        ("A" * 64, "not a service name"),
        ("vllm b", "not a service name"),
        ("vllm\x00", "not a service name"),
        ("docker", "of the host itself"),
        ("sshd", "of the host itself"),
        ("containerd", "of the host itself"),
        ("Docker", "of the host itself"),
        ("systemd-journald", "of the host itself"),
        ("vllm.service", "systemd unit type"),
        ("vllm-front", "of the host itself"),
        ("front", "of the host itself"),
        ("nvidia-fabricmanager", "of the host itself"),
        ("nvidia-persistenced", "of the host itself"),
        (5, "wants a string"),
        (None, "wants a string"),
    ],
)
def test_names_refused_with_the_reason(name, why):
    assert why in service_name_problem(name)
