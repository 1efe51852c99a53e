"""stage_state as Ansible runs it: read, write with diff, check mode, required arguments."""
from ansible_collections.airgap.vllm.plugins.modules import stage_state as M


def test_write_read_idempotent_and_check_mode(run_module, tmp_path):
    d = str(tmp_path / "s")
    r = run_module(M, check_mode=True, dir=d, stage="image", state="present", data={"ref": "sha256:1"})
    assert r["changed"] and run_module(M, dir=d)["stages"] == {}
    r = run_module(M, dir=d, stage="image", state="present", data={"ref": "sha256:1"})
    assert r["changed"] and r["diff"]["before"] == "" and "sha256:1" in r["diff"]["after"]
    assert not run_module(M, dir=d, stage="image", state="present", data={"ref": "sha256:1"})["changed"]
    assert run_module(M, dir=d)["stages"] == {"image": {"ref": "sha256:1"}}
    assert run_module(M, dir=d, stage="image", state="absent")["changed"]
    assert run_module(M, dir=d)["stages"] == {}


def test_present_needs_stage_and_data_and_bad_names_fail(run_module, tmp_path):
    r = run_module(M, dir=str(tmp_path), state="present", stage="model")
    assert r["failed"] and "data" in r["msg"]
    r = run_module(M, dir=str(tmp_path), state="present", stage="../x", data={})
    assert r["failed"] and "lowercase" in r["msg"]
