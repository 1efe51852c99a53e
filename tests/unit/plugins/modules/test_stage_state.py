"""stage_state as Ansible runs it: read, write with diff, check mode, required arguments."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

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


def test_every_service_record_of_a_stage_goes_with_instance_star(run_module, tmp_path):
    d = str(tmp_path / "s")
    run_module(M, dir=d, stage="plan", state="present", data={"a": 1})
    run_module(M, dir=d, stage="plan", instance="vllm-b", state="present", data={"b": 2})
    r = run_module(M, check_mode=True, dir=d, stage="plan", instance="*", state="absent")
    assert r["changed"] and r["paths"] == [d + "/plan.json", d + "/plan@vllm-b.json"] and r["path"] == d + "/plan.json"
    assert len(run_module(M, dir=d)["stages"]) == 2
    r = run_module(M, dir=d, stage="plan", instance="*", state="absent")
    assert r["changed"] and '"b": 2' in r["diff"]["before"] and run_module(M, dir=d)["stages"] == {}
    r = run_module(M, dir=d, stage="plan", instance="*", state="absent")
    assert not r["changed"] and r["paths"] == []
    r = run_module(M, dir=d, stage="plan", instance="*", state="present", data={})
    assert r["failed"] and "state=absent only" in r["msg"]


def test_a_damaged_record_fails_the_read_by_default_and_is_reported_on_request(run_module, tmp_path):
    d = str(tmp_path / "s")
    run_module(M, dir=d, stage="service", state="present", data={"name": "vllm"})
    run_module(M, dir=d, stage="service", instance="vllm-b", state="present", data={"name": "vllm-b"})
    (tmp_path / "s" / "service@vllm-c.json").write_text("{")
    r = run_module(M, dir=d)
    assert r["failed"] and "service@vllm-c.json" in r["msg"] and r["damaged"][0]["instance"] == "vllm-c"
    r = run_module(M, dir=d, on_damaged="report")
    assert not r.get("failed") and sorted(r["instances"]["service"]) == ["vllm", "vllm-b"]
    assert [x["instance"] for x in r["damaged"]] == ["vllm-c"]
    r = run_module(M, check_mode=True, dir=d, stage="service", instance="*", state="absent")
    assert list(r["set_aside"]) == [d + "/service@vllm-c.json"] and (tmp_path / "s" / "service@vllm-c.json").exists()
    r = run_module(M, dir=d, stage="service", instance="*", state="absent")
    assert r["changed"] and ".damaged-" in r["set_aside"][d + "/service@vllm-c.json"]
    r = run_module(M, dir=d, on_damaged="report")
    assert r["stages"] == {} and r["damaged"][0]["set_aside"]
