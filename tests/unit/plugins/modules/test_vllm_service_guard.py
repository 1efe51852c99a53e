"""vllm_service_guard as Ansible runs it: refusals, masked keys, the effective docker options."""
import json

import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.airgap.vllm.plugins.modules import vllm_service_guard as M

ARGV = ["/models/qwen3", "--served-model-name", "qwen3", "--port", "8000"]


def run(monkeypatch, capsys, **args):
    args.setdefault("_ansible_check_mode", False)
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args})))
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    with pytest.raises(SystemExit):
        M.main()
    return json.loads(capsys.readouterr().out)


def test_accepted_options_get_the_profile_and_no_new_privileges(monkeypatch, capsys):
    r = run(monkeypatch, capsys, argv=ARGV, docker_options=["--security-opt", "seccomp=unconfined", "--shm-size", "4g"],
            seccomp="profile", seccomp_profile="/etc/airgap-vllm/seccomp.json",
            docker_security_options=["name=seccomp,profile=builtin"])
    assert not r["changed"] and "failed" not in r
    assert r["docker_options"] == ["--shm-size", "4g", "--security-opt", "seccomp=/etc/airgap-vllm/seccomp.json",
                                   "--security-opt", "no-new-privileges"]


def test_an_api_key_on_the_command_line_is_refused_and_masked(monkeypatch, capsys):
    secret = "sk-very-secret-value-123"
    r = run(monkeypatch, capsys, argv=ARGV + ["--api-key", secret], seccomp="docker_default")
    assert r["failed"] and r["msg"].startswith("refused:") and "--api-key" in r["msg"]
    assert secret not in json.dumps(r)


def test_exposure_unconfined_and_missing_profile(monkeypatch, capsys):
    r = run(monkeypatch, capsys, argv=ARGV, publish_host="0.0.0.0", seccomp="docker_default")
    assert r["failed"] and "0.0.0.0" in r["msg"]
    r = run(monkeypatch, capsys, argv=ARGV, publish_host="0.0.0.0", expose_to_network=True, seccomp="unconfined")
    assert "--security-opt" in r["docker_options"] and "seccomp=unconfined" in r["docker_options"]
    assert any("unconfined" in w for w in r["warnings"]) and any("expose_to_network" in w for w in r["warnings"])
    r = run(monkeypatch, capsys, argv=ARGV, seccomp="profile")
    assert r["failed"] and "needs the profile path" in r["msg"]


def test_metrics_exposure_publishes_on_the_named_address(monkeypatch, capsys):
    r = run(monkeypatch, capsys, argv=ARGV, seccomp="docker_default", metrics_expose=True,
            metrics_address="10.20.0.15", metrics_port=9000, publish_port=8000, container_port=8000, has_api_keys=True)
    assert "failed" not in r and r["docker_options"][:2] == ["--publish", "10.20.0.15:9000:8000"]
    r = run(monkeypatch, capsys, argv=ARGV, seccomp="docker_default", metrics_expose=True,
            metrics_address="10.20.0.15")
    assert r["failed"] and "vllm_service_api_keys is empty" in r["msg"]
