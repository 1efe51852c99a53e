"""airgap.vllm.vllm_observe_outputs as tasks/preflight.yml calls it: services, keyword options, refusals as filter
errors."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from ansible.errors import AnsibleFilterError

SERVICES = [{"name": "vllm", "port": 8000, "settings": {}}]
INSTANCES = {"plan": {"vllm": {"facts": {"vllm_plan_result": {"argv": ["--max-num-seqs", "16"]}}}}}


def test_the_role_call(render):
    out = render(
        "{{ s | airgap.vllm.vllm_observe_outputs('gpu1', '10.0.0.5', 9100, instances=i, loadchecks=l,"
        " front={'vllm_front_metrics_port': 9443}, overrides=[], thresholds={'ttft_factor': 3},"
        " dcgm_port=0) }}",
        s=SERVICES,
        i=INSTANCES,
        l={"vllm": {"figures": {"p95_ttft_ms": 100}}},
    )
    assert out["services"][0]["max_num_seqs"] == 16 and out["targets"]["vllm"][0]["targets"] == ["10.0.0.5:9443"]
    exprs = [r["expr"] for r in out["plan_rules"]["groups"][0]["rules"]]
    assert 'airgap_vllm:time_to_first_token_seconds:p95_5m{host="gpu1",service="vllm"} > 0.3' in exprs


@pytest.mark.parametrize(
    "expr",
    [
        "{{ s | airgap.vllm.vllm_observe_outputs('gpu1', '', 9100) }}",
        "{{ s | airgap.vllm.vllm_observe_outputs('gpu1', '10.0.0.5', 9100, thresholds={'nope': 1}) }}",
        "{{ s | airgap.vllm.vllm_observe_outputs('gpu1', '10.0.0.5', 9100, front={'vllm_front_metrics_port': 'x'}) }}",
    ],
)
def test_refusals_are_filter_errors(render, expr):
    with pytest.raises(AnsibleFilterError, match="vllm_observe"):
        render(expr, s=SERVICES)
