"""airgap.vllm.vllm_refusal_record / vllm_refused_plan / vllm_plan_fingerprint as vllm_service's start.yml and
roles/vllm_service/tasks/instance.yml call them (issue 24: a rollback that sticks)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


PLAN = {
    "argv": ["/models/m", "--max-model-len", "524288"],
    "docker_options": ["--gpus", "device=0"],
    "env": {"VLLM_NO_USAGE_STATS": "1"},
    "ledger": {"max_model_len": 524288, "concurrency": 1},
}
GOOD = {
    "argv": ["/models/m", "--max-model-len", "32768"],
    "docker_options": ["--gpus", "device=0"],
    "env": {"VLLM_NO_USAGE_STATS": "1"},
    "ledger": {"max_model_len": 32768, "concurrency": 1},
}
JOURNAL = (
    "Dec 01 10:00:00 gpu1 systemd[1]: Started vllm.service - vLLM OpenAI-compatible server m (airgap.vllm).\n"
    "Dec 01 10:01:00 gpu1 vllm[811]: ValueError: To serve at least one request with the model's max seq len "
    "(524288), (64.0 GiB KV cache is needed, which is larger than the available KV cache memory (40.2 GiB). "
    "Based on the available memory, the estimated maximum model length is 329216. Try increasing "
    "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.\n"
)
# start.yml: "Note in the last good record that vLLM refused this plan"
RECORD = (
    "{{ vllm_service_plan | airgap.vllm.vllm_refusal_record(journal | default(''), "
    "((state.instances.service | default({}))[name]) | default({})) }}"
)
# vllm_service instance.yml: "Fail fast on a plan vLLM already refused here"
CHECK = (
    "{{ vllm_plan_result | airgap.vllm.vllm_refused_plan("
    "(((state | default({})).instances | default({})).service | default({}))[name] | default({}), "
    "name, retry | default(false)) }}"
)  # the playbook adds '| bool' (Ansible's filter)


def test_the_rollback_notes_the_refusal_and_the_next_run_fails_fast(render):
    last = {
        "name": "vllm",
        "config_fingerprint": "c1",
        "plan_fingerprint": render("{{ p | airgap.vllm.vllm_plan_fingerprint }}", p=GOOD),
    }
    state = {"instances": {"service": {"vllm": last}}}
    record = render(RECORD, vllm_service_plan=PLAN, journal=JOURNAL, state=state, name="vllm")
    assert record["refused_plan"]["max_model_len"] == 524288 and record["config_fingerprint"] == "c1"
    after = {"instances": {"service": {"vllm": record}}}
    check = render(CHECK, vllm_plan_result=PLAN, state=after, name="vllm")
    assert check["refused"] and "329216" in check["msg"] and "--tags plan,service" in check["msg"]
    assert not render(CHECK, vllm_plan_result=GOOD, state=after, name="vllm")["refused"]
    assert not render(CHECK, vllm_plan_result=PLAN, state=after, name="vllm", retry=True)["refused"]
    assert not render(CHECK, vllm_plan_result=PLAN, state={}, name="other")["refused"]


def test_a_broken_image_notes_nothing(render):
    state = {"instances": {"service": {"vllm": {"name": "vllm"}}}}
    assert render(RECORD, vllm_service_plan=GOOD, journal="broken release\n", state=state, name="vllm") is None
    assert render(RECORD, vllm_service_plan=PLAN, journal=JOURNAL, state={"instances": {}}, name="vllm") is None
