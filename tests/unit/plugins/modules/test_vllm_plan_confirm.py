"""vllm_plan_confirm as Ansible runs it: arguments, check mode, report files, idempotence."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_common as CM
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _planner as P
from ansible_collections.airgap.vllm.plugins.modules import vllm_plan_confirm as M

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "models", "qwen3.x-27b-fp8")
METRICS = (
    'vllm:cache_config_info{block_size="1600",num_gpu_blocks="220",'
    'kv_cache_memory_bytes="None",engine="0",model_name="q"} 1.0\n'
)


@pytest.fixture(scope="module")
def plan_result():
    return P.plan(
        dict(
            model_dir=FIXTURE,
            gpu_total_bytes=49140 * CM.MIB,
            compute_capability="8.9",
            gpu_memory_utilization=0.93,
            num_speculative_tokens=3,
            concurrency=4,
            context=204800,
            prefix_caching=True,
            kv_cache_dtype="fp8_e4m3",
        )
    )


def test_check_mode_writes_nothing_then_real_run_is_idempotent(run_module, tmp_path, plan_result):
    out = tmp_path / "report"
    r = run_module(M, plan=plan_result, metrics_text=METRICS, report_dir=str(out), check_mode=True)
    assert r["changed"] and r["verdict"] == "replan_needed" and r["restart"]
    assert not out.exists()
    r = run_module(M, plan=plan_result, metrics_text=METRICS, report_dir=str(out))
    assert r["changed"] and sorted(os.listdir(str(out))) == ["memory.svg", "report.json", "report.md"]
    assert json.loads((out / "report.json").read_text())["verdict"] == "replan_needed"
    again = run_module(M, plan=plan_result, metrics_text=METRICS, report_dir=str(out))
    assert not again["changed"]
    second = run_module(M, plan=plan_result, metrics_text=METRICS, is_replan=True)
    assert second["restart"] is False


def test_nothing_measured_fails_clearly(run_module, plan_result):
    r = run_module(M, plan=plan_result, metrics_text="# empty\n")
    assert r["failed"] and "nothing measured" in r["msg"]
    r = run_module(M, plan={"argv": []}, journal_text="x")
    assert r["failed"] and "vllm_launch_plan" in r["msg"]


def test_the_load_checks_promises_survive_a_converged_rerun(run_module, tmp_path, plan_result):
    out = tmp_path / "report"
    run_module(M, plan=plan_result, metrics_text=METRICS, report_dir=str(out))
    report = json.loads((out / "report.json").read_text())
    report["promises"] = [
        {
            "key": "context",
            "promise": "p",
            "expected": "1",
            "measured": "1",
            "status": "MET",
            "advice": "",
            "source": "plan",
        }
    ]
    (out / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_confirm_report import render_markdown

    (out / "report.md").write_text(render_markdown(report))
    again = run_module(M, plan=plan_result, metrics_text=METRICS, report_dir=str(out))
    assert not again["changed"] and again["report"]["promises"] == report["promises"]
    assert "## Promises" in (out / "report.md").read_text()
