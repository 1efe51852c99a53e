"""Which variables hold secrets, and their values redacted (issue 42: no secret reaches any output)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.common._secrets import (
    REDACTED,
    is_secret_name,
    redact,
    redact_vars,
    redacted,
    secret_values,
    secret_vars,
)

CLIENTS = [
    {"name": "alice", "key": "sk-front-alice-0123456789", "max_concurrent": 2},
    {"name": "bob", "key_sha256": "a" * 64},
]


@pytest.mark.parametrize(
    "name,secret",
    [
        ("vllm_service_api_keys", True),
        ("vllm_service_extra_env", True),
        ("vllm_front_clients", True),
        ("vllm_front_metrics_tokens", True),
        ("ansible_become_password", True),
        ("registry_token", True),
        ("HF_TOKEN", True),
        ("key", True),
        ("vllm_service_api_keys_container_path", False),
        ("vllm_front_tls_key", False),
        ("key_sha256", False),
        ("vllm_plan_num_speculative_tokens", False),
        ("vllm_service_smoke_max_tokens", False),
        ("vllm_service_name", False),
        ("ansible_ssh_pass", True),
        ("api_key", True),
        ("attn_bytes_per_token_per_layer", False),
        ("tokenizer", False),
        ("api_key_config", False),
        ("keyword", False),
    ],
)
def test_which_names_hold_secrets(name, secret):
    assert is_secret_name(name) is secret


def test_secret_values_are_every_key_and_environment_value_not_the_names_or_limits():
    assert secret_values("vllm_front_clients", CLIENTS) == [("vllm_front_clients[0].key", "sk-front-alice-0123456789")]
    assert secret_values(
        "vllm_service_extra_env", {"HF_TOKEN": "hf_x", "OTHER": "v", "VLLM_CPU_KVCACHE_SPACE": "1"}
    ) == [
        ("vllm_service_extra_env.HF_TOKEN", "hf_x"),
        ("vllm_service_extra_env.OTHER", "v"),
    ]
    assert secret_values("vllm_service_api_keys", ["k1", "k2"]) == [
        ("vllm_service_api_keys[0]", "k1"),
        ("vllm_service_api_keys[1]", "k2"),
    ]
    # Deeper: a service of airgap_vllm_services with its own keys; a password anywhere.
    services = [{"vllm_service_name": "a", "vllm_service_api_keys": ["k"], "vllm_plan_concurrency": 4}]
    assert secret_values("airgap_vllm_services", services) == [
        ("airgap_vllm_services[0].vllm_service_api_keys[0]", "k")
    ]
    assert secret_values("registry", {"user": "u", "password": "p"}) == [("registry.password", "p")]
    assert secret_values("vllm_service_name", "vllm") == []


def test_redact_keeps_the_shape_names_limits_and_empties():
    assert redact("vllm_front_clients", CLIENTS) == [
        {"name": "alice", "key": REDACTED, "max_concurrent": 2},
        {"name": "bob", "key_sha256": "a" * 64},
    ]
    assert redact("vllm_service_api_keys", []) == []
    assert redact("vllm_service_extra_env", {}) == {}
    assert redact("vllm_service_name", "vllm") == "vllm"
    assert redact_vars({"vllm_service_api_keys": ["k"], "vllm_service_port": 8000}) == {
        "vllm_service_api_keys": [REDACTED],
        "vllm_service_port": 8000,
    }


def test_redacted_walks_any_structure():
    resolved = {
        "services": [
            {"name": "a", "port": 8000, "settings": {"vllm_service_api_keys": ["k"], "vllm_front_clients": CLIENTS}}
        ],
        "variables": ["vllm_service_api_keys"],
    }
    out = redacted(resolved)
    assert out["services"][0]["settings"]["vllm_service_api_keys"] == [REDACTED]
    assert out["services"][0]["settings"]["vllm_front_clients"][0] == {
        "name": "alice",
        "key": REDACTED,
        "max_concurrent": 2,
    }
    assert out["variables"] == ["vllm_service_api_keys"] and out["services"][0]["port"] == 8000
    assert "sk-front-alice" not in repr(out)
    # A plan's figures are not secrets because a word of their name is "token".
    plan = {"ledger": {"attn_bytes_per_token_per_layer": 8192, "tokenizer": "/m"}, "api_key_config": None}
    assert redacted({"vllm_service_plan": plan}) == {"vllm_service_plan": plan}


def test_secret_vars_are_those_named_as_secrets_or_holding_one():
    got = secret_vars({"vllm_service_api_keys": [], "vllm_service_port": 8000, "some": {"token": "t"}})
    assert got == {"vllm_service_api_keys": [], "some": {"token": "t"}}
