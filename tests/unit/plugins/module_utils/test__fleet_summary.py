"""The rollout's driver summary (issue 29, item 3): one line per host, canary changed, a failed host, the rest not reached."""
from ansible_collections.airgap.vllm.plugins.module_utils._fleet_summary import fleet_driver_summary

HOSTS = ["fleet-1", "fleet-2", "fleet-3"]


def read(version, state="ok"):
    return {"changed": False, "nvml_state": state, "driver_version": version}


INSTALLED = {"changed": True, "rc": 0}
SKIPPED = {"changed": False, "skipped": True}


def test_canary_changed_second_failed_third_not_reached():
    hostvars = {
        "fleet-1": {"__airgap_vllm_driver_now": read("580.65.06"), "__airgap_vllm_rollout_done": True,
                    "__nvidia_driver_installer": INSTALLED},
        "fleet-2": {"__airgap_vllm_driver_now": read("560.35.03"),
                    "__airgap_vllm_rollout_failure": {"task": "airgap.vllm.preflight : Fail with every failing check",
                                                      "msg": "[port] 8000 is taken"}},
        "fleet-3": {},
    }
    first = fleet_driver_summary(HOSTS, ["fleet-2"], hostvars)
    assert first["ends_here"] and first["unreached"] == ["fleet-3"]
    reads = [dict(read("560.35.03"), item="fleet-3")]
    s = fleet_driver_summary(HOSTS, ["fleet-2"], hostvars, reads)
    assert s["hosts"] == {
        "fleet-1": {"driver_version": "580.65.06", "outcome": "changed", "changed": True},
        "fleet-2": {"driver_version": "560.35.03", "outcome": "failed", "changed": False},
        "fleet-3": {"driver_version": "560.35.03", "outcome": "not reached", "changed": False},
    }
    assert s["lines"] == [
        "fleet-1: driver 580.65.06, changed in this run",
        "fleet-2: driver 560.35.03, failed in this run (airgap.vllm.preflight : Fail with every failing check),"
        " driver unchanged",
        "fleet-3: driver 560.35.03, not reached (the rollout stopped before its batch)",
    ]


def test_an_earlier_batch_that_passed_does_not_end_the_rollout():
    hostvars = {"fleet-1": {"__airgap_vllm_driver_now": read("580.65.06"), "__airgap_vllm_rollout_done": True}}
    s = fleet_driver_summary(HOSTS, ["fleet-1"], hostvars)
    assert not s["ends_here"] and s["unreached"] == ["fleet-2", "fleet-3"]


def test_the_last_batch_ends_it_and_a_converged_host_is_unchanged():
    done = {"__airgap_vllm_driver_now": read("580.65.06"), "__airgap_vllm_rollout_done": True,
            "__nvidia_driver_installer": SKIPPED}
    s = fleet_driver_summary(HOSTS, ["fleet-2", "fleet-3"], {h: dict(done) for h in HOSTS})
    assert s["ends_here"] and s["unreached"] == []
    assert [h["outcome"] for h in s["hosts"].values()] == ["unchanged"] * 3
    assert s["lines"][0] == "fleet-1: driver 580.65.06, unchanged"


def test_one_host_run_ends_with_its_only_batch():
    facts = {"__airgap_vllm_driver_now": read(None, "absent"), "__airgap_vllm_rollout_done": True}
    s = fleet_driver_summary(["gpu-1"], ["gpu-1"], {"gpu-1": facts})
    assert s["ends_here"]
    assert s["lines"] == ["gpu-1: no driver loaded (NVML absent), unchanged"]


def test_a_rolled_back_upgrade_is_failed_and_unchanged():
    hv = {"__airgap_vllm_driver_now": read("570.86.16"), "__nvidia_driver_installer": INSTALLED,
          "__nvidia_driver_previous_version": "570.86.16"}
    s = fleet_driver_summary(["gpu-1"], ["gpu-1"], {"gpu-1": hv})
    assert s["hosts"]["gpu-1"] == {"driver_version": "570.86.16", "outcome": "failed", "changed": False}


def test_an_upgrade_from_a_known_run_names_the_old_driver():
    hv = {"__airgap_vllm_driver_now": read("580.65.06"), "__nvidia_driver_installer": INSTALLED,
          "__nvidia_driver_previous_version": "570.86.16", "__airgap_vllm_rollout_done": True}
    s = fleet_driver_summary(["gpu-1"], ["gpu-1"], {"gpu-1": hv})
    assert s["lines"] == ["gpu-1: driver 580.65.06, changed in this run (was 570.86.16)"]


def test_mismatch_unreachable_and_unread_hosts_are_named():
    hostvars = {"a": {"__airgap_vllm_driver_now": read("580.65.06", "version_mismatch")}}
    reads = [{"item": "b", "unreachable": True, "msg": "ssh: no route"}]
    s = fleet_driver_summary(["a", "b", "c"], ["a"], hostvars, reads)
    assert s["lines"] == [
        "a: driver 580.65.06 (NVML version_mismatch), failed in this run, driver unchanged",
        "b: driver unknown (unreachable), not reached (the rollout stopped before its batch)",
        "c: driver unknown (not read), not reached (the rollout stopped before its batch)",
    ]


class RaisingVars(dict):
    def get(self, key, default=None):
        raise ValueError("undefined")


def test_untemplatable_host_vars_count_as_absent():
    s = fleet_driver_summary(["a"], ["a"], {"a": RaisingVars()})
    assert s["hosts"]["a"]["outcome"] == "failed"
    assert s["lines"] == ["a: driver unknown (not read), failed in this run, driver unchanged"]


def test_a_rescued_failure_fails_the_host_even_with_the_done_marker_absent_or_present():
    hv = {"__airgap_vllm_driver_now": read("580.65.06"), "__airgap_vllm_rollout_done": True,
          "__airgap_vllm_rollout_failure": {"task": "x", "msg": "y: z"}}
    s = fleet_driver_summary(["a", "b"], ["a"], {"a": hv})
    assert s["ends_here"] and s["unreached"] == ["b"]
    assert s["hosts"]["a"]["outcome"] == "failed"
    assert s["lines"][0] == "a: driver 580.65.06, failed in this run (x), driver unchanged"


def test_a_failed_host_left_out_of_the_batch_still_ends_the_rollout():
    hostvars = {"fleet-1": {"__airgap_vllm_driver_now": read("580.65.06"), "__airgap_vllm_rollout_done": True},
                "fleet-2": {"__airgap_vllm_driver_now": read("560.35.03")}}
    s = fleet_driver_summary(HOSTS, [], hostvars)
    assert s["ends_here"] and s["unreached"] == ["fleet-3"]
    assert s["hosts"]["fleet-2"]["outcome"] == "failed"
