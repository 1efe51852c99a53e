"""tests/secrets_scan.py: every configured secret looked for in logs, hits named by variable, never by value."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import importlib.util
import io
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "tests", "secrets_scan.py")

_spec = importlib.util.spec_from_file_location("secrets_scan", SCRIPT)
S = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(S)

ENGINE_KEY = "sk-engine-0123456789"
HF = "hf_token_0123456789abcdef"
FRONT = "sk-front-alice-0123456789abcdef"
METRICS = "sk-metrics-0123456789abcdef"
SERVICE_KEY = "sk-service-b-0123456789"
PASSWORD = "become-password-0123"


@pytest.fixture
def inventory(tmp_path):
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "vllm_servers.yml").write_text(
        "\n".join(
            [
                "vllm_service_api_keys: [%s, short]" % ENGINE_KEY,
                "vllm_service_extra_env: {HF_TOKEN: %s, VLLM_CPU_KVCACHE_SPACE: '1'}" % HF,
                "vllm_front_clients:",
                "  - {name: alice-the-long-named, key: %s, max_concurrent: 12345678}" % FRONT,
                "vllm_front_metrics_tokens: [{name: prometheus-server, key: %s}]" % METRICS,
                "vllm_service_api_keys_container_path: /etc/vllm/keys.yaml",
                "vllm_plan_num_speculative_tokens: 3",
                "templated_token: \"{{ lookup('env', 'TOKEN_FROM_ENV') }}\"",
                "vault_password: !vault |",
                "  $ANSIBLE_VAULT;1.1;AES256",
                "  6162636465",
                "airgap_vllm_services:",
                "  - {vllm_service_name: b, vllm_service_api_keys: [%s]}" % SERVICE_KEY,
            ]
        )
        + "\n"
    )
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "gpu1").mkdir()
    (tmp_path / "host_vars" / "gpu1" / "login.yml").write_text("ansible_become_password: %s\n" % PASSWORD)
    (tmp_path / "hosts.yml").write_text(
        "all:\n  children:\n    vllm_servers:\n      hosts:\n        gpu1: {registry_token: registry-0123456789}\n"
    )
    return str(tmp_path)


def run(inventory, log_text, *extra):
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--inventory", inventory] + list(extra) + ["-"],
        input=log_text,
        capture_output=True,
        text=True,
        check=False,
    )
    return proc


def test_every_configured_secret_is_collected_by_its_variable_name(inventory):
    found = S.inventory_secrets(inventory)
    assert found == {
        ENGINE_KEY: "vllm_service_api_keys[0]",
        HF: "vllm_service_extra_env.HF_TOKEN",
        FRONT: "vllm_front_clients[0].key",
        METRICS: "vllm_front_metrics_tokens[0].key",
        SERVICE_KEY: "airgap_vllm_services[0].vllm_service_api_keys[0]",
        PASSWORD: "ansible_become_password",
        "registry-0123456789": "registry_token",
    }


def test_values_shorter_than_8_characters_are_not_looked_for(inventory):
    # "short" (an API key) and "1" (an environment value) would match everywhere: documented, left out.
    found = S.inventory_secrets(inventory)
    assert "short" not in found and "1" not in found
    assert run(inventory, "short 1 keys\n").returncode == 0


def test_names_paths_counts_templates_and_vault_are_not_secrets(inventory):
    found = S.inventory_secrets(inventory)
    for value in ("alice-the-long-named", "prometheus-server", "/etc/vllm/keys.yaml", "12345678"):
        assert value not in found
    assert not any("{{" in v for v in found) and not any("ANSIBLE_VAULT" in v for v in found)


def test_a_hit_names_the_variable_and_never_prints_the_value(inventory):
    log = 'ok: [gpu1] => {"ansible_facts": {"vllm_service_api_keys": ["%s"]}}\n' % ENGINE_KEY
    proc = run(inventory, "clean line\n" + log)
    assert proc.returncode == 1
    assert "<stdin>:2: vllm_service_api_keys[0] (as written)" in proc.stdout
    assert ENGINE_KEY not in proc.stdout + proc.stderr


@pytest.mark.parametrize(
    "spelled,form",
    [
        (base64.b64encode(("Bearer " + FRONT).encode()).decode(), "base64"),
        (base64.b64encode(FRONT.encode()).decode(), "base64"),
        (base64.b64encode(("x" + FRONT + "y").encode()).decode(), "base64"),
        (json.dumps(json.dumps({"HF_TOKEN": HF})), "as written"),
    ],
)
def test_encoded_forms_are_found(inventory, spelled, form):
    proc = run(inventory, "noise %s noise\n" % spelled)
    assert proc.returncode == 1 and "(%s)" % form in proc.stdout


def test_a_json_escaped_value_is_found(tmp_path, inventory):
    odd = tmp_path / "extra.txt"
    odd.write_text('pa"ss\\word-0123\n')
    escaped = json.dumps('pa"ss\\word-0123')[1:-1]
    proc = run(inventory, "value: %s\n" % escaped, "--secret-file", str(odd))
    assert proc.returncode == 1 and "extra.txt:1 (JSON-escaped)" in proc.stdout


def test_a_clean_log_passes(inventory, tmp_path):
    log = tmp_path / "run.log"
    log.write_text('ok: [gpu1] => {"vllm_service_api_keys": ["(hidden)"], "key_sha256": "%s"}\n' % ("a" * 64))
    proc = subprocess.run(
        [sys.executable, SCRIPT, "-i", inventory, str(log)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout
    assert "none found" in proc.stderr


def test_extra_values_from_a_secret_file(inventory, tmp_path):
    extra = tmp_path / "registry.txt"
    extra.write_text("tiny\nregistry-password-0123\n")
    proc = run(inventory, "login with registry-password-0123\n", "--secret-file", str(extra))
    assert proc.returncode == 1 and "registry.txt:2 (as written)" in proc.stdout


def test_bad_usage_exits_2(inventory, tmp_path):
    assert run(str(tmp_path / "nowhere"), "").returncode == 2
    assert run(inventory, "", "--secret-file", str(tmp_path / "missing")).returncode == 2
    assert run(inventory, "", "--no-such-option").returncode == 2
    proc = subprocess.run(
        [sys.executable, SCRIPT, "-i", inventory, str(tmp_path / "missing.log")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2


def test_the_simulated_inventory_has_every_kind_of_secret():
    found = S.inventory_secrets(os.path.join(ROOT, "inventories", "simulated"))
    names = set(v.split("[")[0].split(".")[0] for v in found.values())
    assert {
        "vllm_service_api_keys",
        "vllm_service_extra_env",
        "vllm_front_clients",
        "vllm_front_metrics_tokens",
    } <= names


def test_scan_reads_several_logs_in_order():
    secrets = {ENGINE_KEY: "vllm_service_api_keys[0]"}
    logs = [("a.log", io.StringIO("x\n")), ("b.log", io.StringIO("y\n%s\n" % ENGINE_KEY))]
    assert S.scan(secrets, logs) == [("b.log", 2, "vllm_service_api_keys[0]", "as written")]
