"""stage_state as Ansible runs it: read, write with diff, check mode, required arguments."""
import json

import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.airgap.vllm.plugins.modules import stage_state as M


def run(monkeypatch, capsys, **args):
    args.setdefault("_ansible_check_mode", False)
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args})))
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    with pytest.raises(SystemExit):
        M.main()
    return json.loads(capsys.readouterr().out)


def test_write_read_idempotent_and_check_mode(monkeypatch, capsys, tmp_path):
    d = str(tmp_path / "s")
    r = run(monkeypatch, capsys, dir=d, stage="image", state="present", data={"ref": "sha256:1"},
            _ansible_check_mode=True)
    assert r["changed"] and run(monkeypatch, capsys, dir=d)["stages"] == {}
    r = run(monkeypatch, capsys, dir=d, stage="image", state="present", data={"ref": "sha256:1"})
    assert r["changed"] and r["diff"]["before"] == "" and "sha256:1" in r["diff"]["after"]
    assert not run(monkeypatch, capsys, dir=d, stage="image", state="present", data={"ref": "sha256:1"})["changed"]
    assert run(monkeypatch, capsys, dir=d)["stages"] == {"image": {"ref": "sha256:1"}}
    assert run(monkeypatch, capsys, dir=d, stage="image", state="absent")["changed"]
    assert run(monkeypatch, capsys, dir=d)["stages"] == {}


def test_present_needs_stage_and_data_and_bad_names_fail(monkeypatch, capsys, tmp_path):
    r = run(monkeypatch, capsys, dir=str(tmp_path), state="present", stage="model")
    assert r["failed"] and "data" in r["msg"]
    r = run(monkeypatch, capsys, dir=str(tmp_path), state="present", stage="../x", data={})
    assert r["failed"] and "lowercase" in r["msg"]
