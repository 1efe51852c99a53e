"""airgap.vllm.gpu_memory_verdict as preflight's checks call it, on airgap.vllm.nvml_info's result shape."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

GIB = 1024**3
OWN = "0123456789ab" + "c" * 52


def nvml(*gpus):
    return {"nvml_state": "ok", "gpus": list(gpus)}


def gpu(index, total_gib, free_gib, processes=()):
    return {
        "index": index,
        "name": "NVIDIA L20",
        "memory_total": int(total_gib * GIB),
        "memory_free": int(free_gib * GIB),
        "processes": list(processes),
    }


def verdict(render, result, utilization, own=()):
    return render(
        "{{ result | airgap.vllm.gpu_memory_verdict(utilization | float, own) }}",
        result=result,
        utilization=utilization,
        own=list(own),
    )


def test_room_on_every_gpu_is_ok(render):
    v = verdict(render, nvml(gpu(0, 48, 47.5), gpu(1, 48, 47.5)), "0.93")
    assert v["status"] == "ok" and v["short"] == []
    assert "GPU0 NVIDIA L20: free 47.5 GiB of 48.0 GiB" in v["detail"]


def test_a_foreign_process_holding_memory_fails_naming_it(render):
    held = {"pid": 4242, "name": "python3", "used_memory": 20 * GIB, "container_id": "f" * 64}
    v = verdict(render, nvml(gpu(0, 48, 47.5), gpu(1, 48, 27.5, [held])), 0.93)
    assert v["status"] == "fail" and v["short"] == [1]
    assert "pid 4242 python3 (20.0 GiB, container ffffffffffff)" in v["detail"]


def test_memory_of_our_own_service_counts_as_available_on_a_rerun(render):
    ours = {"pid": 811, "name": "vllm", "used_memory": 44 * GIB, "container_id": OWN}
    result = nvml(gpu(0, 48, 3.5, [ours]))
    assert verdict(render, result, 0.93)["status"] == "fail"
    v = verdict(render, result, 0.93, own=[OWN[:12]])
    assert v["status"] == "ok" and "held by our own service" in v["detail"]


@pytest.mark.parametrize(
    "result,status",
    [
        ({"nvml_state": "mismatch"}, "n/a"),
        ({}, "n/a"),
        ({"nvml_state": "ok", "gpus": []}, "fail"),
    ],
)
def test_without_nvml_or_gpus_the_verdict_says_so(render, result, status):
    assert verdict(render, result, 0.9)["status"] == status
