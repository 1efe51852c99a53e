"""Preflight's GPU-memory decision: our own serving container is not a foreign workload."""
from ansible_collections.airgap.vllm.plugins.module_utils._preflight import GIB, gpu_memory_verdict

OWN = "a" * 64
FOREIGN = "b" * 64


def nvml(used_by):
    total = 48 * GIB
    procs = [{"pid": 100 + i, "name": "python3", "used_memory": size, "container_id": cid}
             for i, (cid, size) in enumerate(used_by)]
    used = sum(pair[1] for pair in used_by)
    return {"nvml_state": "ok", "gpus": [{"index": 0, "name": "RTX 6000 Ada", "memory_total": total,
                                          "memory_free": total - used, "processes": procs}]}


def test_a_serving_host_is_not_busy_with_itself():
    state = nvml([(OWN, int(48 * GIB * 0.93))])
    assert gpu_memory_verdict(state, 0.93)["status"] == "fail"  # what production saw on a re-run
    verdict = gpu_memory_verdict(state, 0.93, [OWN[:12]])
    assert verdict["status"] == "ok", verdict
    assert "held by our own service" in verdict["detail"]


def test_a_foreign_container_still_fails_and_is_named():
    state = nvml([(OWN, 20 * GIB), (FOREIGN, 10 * GIB)])
    verdict = gpu_memory_verdict(state, 0.93, [OWN])
    assert verdict["status"] == "fail" and verdict["short"] == [0]
    assert "container bbbbbbbbbbbb" in verdict["detail"]
    assert "container aaaaaaaaaaaa" not in verdict["detail"]


def test_short_ids_never_match_by_accident():
    state = nvml([(FOREIGN, 40 * GIB)])
    assert gpu_memory_verdict(state, 0.5, ["b"])["status"] == "fail"


def test_unknown_sizes_and_no_container():
    state = nvml([])
    state["gpus"][0]["processes"] = [{"pid": 7, "name": None, "used_memory": None, "container_id": None}]
    verdict = gpu_memory_verdict(state, 0.5)
    assert verdict["status"] == "ok" and "size unknown" in verdict["detail"]


def test_without_nvml_or_gpus():
    assert gpu_memory_verdict({"nvml_state": "mismatch"}, 0.9)["status"] == "n/a"
    assert gpu_memory_verdict({"nvml_state": "ok", "gpus": []}, 0.9)["status"] == "fail"


def test_only_selected_gpus_count():
    state = nvml([(FOREIGN, 40 * GIB)])
    state["gpus"].append(dict(state["gpus"][0], index=1, memory_free=48 * GIB, processes=[]))
    assert gpu_memory_verdict(state, 0.9, gpu_indexes=[1])["status"] == "ok"
    assert gpu_memory_verdict(state, 0.9)["short"] == [0]
