"""Release day's filters as the vllm_release role calls them (decisions in module_utils/service/_release.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from ansible.errors import AnsibleFilterError

LC = {
    "profiles": {
        "single-stream": {"figures": {"decode_tok_s": 20.0, "prefill_tok_s": 1500.0}},
        "tools": {"figures": {"parse_rate": 1.0}},
    },
    "promises": [{"key": "context", "status": "MET"}, {"key": "concurrency", "status": "MET"}],
}
GATE = "{{ report | airgap.vllm.vllm_release_gate(lc, prev, {'min_tok_s_ratio': ratio, 'min_tool_call_rate': 1.0}) }}"


def test_the_gate_passes_and_stops_by_the_role_variable(render):
    slow = {
        "profiles": {
            "single-stream": {"figures": {"decode_tok_s": 20.0, "prefill_tok_s": 50.0}},
            "tools": {"figures": {"parse_rate": 1.0}},
        },
        "promises": LC["promises"],
    }
    got = render(GATE, report={"verdict": "not_measured"}, lc=LC, prev=LC, ratio=0.9)
    assert got["ok"] is True
    got = render(GATE, report={"verdict": "not_measured"}, lc=slow, prev=LC, ratio=0.9)
    assert got["ok"] is False and got["reason"].startswith("prefill 50 tok/s is 0.03")
    assert render(GATE, report={"verdict": "not_measured"}, lc=slow, prev=LC, ratio=0.01)["ok"] is True


def test_a_bad_threshold_is_a_filter_error(render):
    with pytest.raises(AnsibleFilterError, match="the release gate cannot read its inputs: gate threshold"):
        render(GATE, report={}, lc=LC, prev=LC, ratio=-1)


def test_the_staged_record_keeps_the_model(render):
    got = render(
        "{{ prev | airgap.vllm.vllm_release_staged(delta) }}",
        prev={"image": [{"name": "vllm-openai", "version": "v0.27.1"}], "model": [{"name": "m"}]},
        delta={"image": [{"name": "vllm-openai", "version": "v0.30.0"}]},
    )
    assert got == {"image": [{"name": "vllm-openai", "version": "v0.30.0"}], "model": [{"name": "m"}]}


def test_the_dry_run_lines(render):
    got = render(
        "{{ 'vllm' | airgap.vllm.vllm_release_plan_change('0.27.1', '0.30.0', old, new) }}",
        old={"argv": ["--a"], "ledger": {"max_model_len": 8}},
        new={"argv": ["--a"], "ledger": {"max_model_len": 16}},
    )
    assert got == ["vllm: vLLM 0.27.1 -> 0.30.0", "  argv: --a", "  argv unchanged", "  context: 16 (was 8)"]
