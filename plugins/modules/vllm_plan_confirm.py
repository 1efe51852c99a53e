#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_plan_confirm
short_description: Compare a vLLM launch plan with what the engine reports, re-plan once, write a deployment report
version_added: "0.1.0"
description:
  - Takes the result of M(airgap.vllm.vllm_launch_plan) and what vLLM 0.27.1 itself reported, the text of its
    C(/metrics) (the C(vllm:cache_config_info) labels C(num_gpu_blocks), C(block_size), C(kv_cache_size_tokens),
    C(kv_cache_memory_bytes)) and/or the journal of a start (its C(Available KV cache memory), C(Model loading took),
    C(GPU KV cache size) lines, or the refusal C(... the estimated maximum model length is N)).
  - Returns planned versus measured, one verdict (C(confirmed), C(not_measured), C(not_as_planned),
    C(replan_needed), C(refused)) with its words and what the engine did and did not measure, and, when the measured
    pool does not hold the planned requests, a re-plan from the measured budget whose argv pins it with
    C(--kv-cache-memory-bytes) and keeps the stated context x concurrency when it fits (else the largest context at
    which that concurrency fits, else the longest single request).
  - The verdict is decided once; C(report.json) and C(report.md) carry the same one. C(confirmed) only when the
    engine's KV pool is the planned one (within the estimate's band), its context the planned one, and the pool holds
    the planned requests.
  - Never loops. RV(restart) is true only when a feasible re-plan exists and O(is_replan) is false. Call it again after
    the one restart with O(is_replan=true); it then reports and never asks for another restart.
  - Writes C(report.json), C(report.md) and C(memory.svg) (weights | other | KV pool | free, planned next to
    measured) into O(report_dir) when given. Pure computation otherwise; never touches the network.
options:
  plan:
    description: The registered result of M(airgap.vllm.vllm_launch_plan) (its C(ledger) and C(argv) are used).
    type: dict
    required: true
  metrics_text:
    description: Text of the server's C(/metrics) (Prometheus exposition). Needed for a started engine.
    type: str
  journal_text:
    description:
      - Journal (or container log) of the start. Gives the weights line and, for an engine that refused to start,
        vLLM's own available KV memory and estimated maximum model length.
    type: str
  is_replan:
    description: This start already used a re-plan; never ask for another restart.
    type: bool
    default: false
  replanned:
    description:
      - With O(is_replan), the RV(replan) of the first call. The engine is then checked against the re-plan (its
        pinned pool and context), not against the first plan it could not hold.
    type: dict
  report_dir:
    description: Directory on the host to write C(report.json), C(report.md) and C(memory.svg) into (created, mode 0755).
    type: path
  tradeoff:
    description:
      - A trade-off table to put into the report. By default the table is recomputed at the measured budget from the
        plan's C(inputs) and its model directory, or the plan's own C(tradeoff) when that is not possible.
    type: dict
  engine_env:
    description:
      - >-
        The container environment the service adds (vllm_service_extra_env). Only C(VLLM_CPU_KVCACHE_SPACE) is read:
        a CPU engine's pool fixed by it is named in the report as the reason it differs from the plan, the verdict is
        then C(not_measured) (the planned pool was not measured), and the trade-off table is not recomputed at it.
    type: dict
attributes:
  check_mode:
    support: full
    description: Computes everything; writes no report file and reports what would change.
  diff_mode:
    support: none
    description: The report files are new content each time the numbers change.
  idempotent:
    support: full
    description: Same inputs give the same report; files are rewritten only when their content differs.
author:
  - airgap.vllm maintainers (@airgap-vllm)
"""

EXAMPLES = r"""
# After the service is healthy: read /metrics, confirm, restart once with the re-plan when needed.
- name: Read the engine's own numbers
  ansible.builtin.uri:
    url: "http://127.0.0.1:{{ vllm_plan_port }}/metrics"
    return_content: true
  register: __metrics

- name: Confirm the plan against the engine
  airgap.vllm.vllm_plan_confirm:
    plan: "{{ vllm_plan_result }}"
    metrics_text: "{{ __metrics.content }}"
    report_dir: /var/lib/airgap-vllm/report
  register: __confirm

- name: Restart once with the measured budget pinned (the module never asks twice)
  ansible.builtin.set_fact:
    vllm_service_argv: "{{ __confirm.replan.argv }}"
  when: __confirm.restart

# ... restart the service, wait for /health, read /metrics again, then:
- name: Confirm the re-plan (is_replan stops any second restart)
  airgap.vllm.vllm_plan_confirm:
    plan: "{{ vllm_plan_result }}"
    metrics_text: "{{ __metrics_after.content }}"
    is_replan: true
    report_dir: /var/lib/airgap-vllm/report
  register: __confirm_after
  when: __confirm.restart

# A start that vLLM refused: its journal carries the numbers.
- name: Re-plan from a refused start
  airgap.vllm.vllm_plan_confirm:
    plan: "{{ vllm_plan_result }}"
    journal_text: "{{ __journal.stdout }}"
  register: __confirm

- name: Fetch the deployment report to the controller
  ansible.builtin.fetch:
    src: /var/lib/airgap-vllm/report/report.md
    dest: "reports/{{ inventory_hostname }}/"
    flat: true
"""

RETURN = r"""
verdict:
  description:
    - C(confirmed) (the engine's KV pool and context are the planned ones and hold the planned requests),
      C(not_measured) (the requests fit, but in a pool a test setting fixed, such as the CPU engine's
      C(VLLM_CPU_KVCACHE_SPACE), so the planned pool was not measured), C(not_as_planned) (the requests fit, but the
      pool or the context is not the planned one), C(replan_needed) (the pool does not hold the planned requests),
      or C(refused) (it did not start).
    - The same value as C(verdict) of RV(report), written into C(report.json); C(report.md) states RV(verdict_text).
  returned: always
  type: str
  sample: replan_needed
verdict_text:
  description: The verdict in one sentence for people (what was measured and what was not), as report.md and
    RV(summary) print it.
  returned: always
  type: str
  sample: "re-plan needed: the engine's KV pool of 11.41 GiB does not hold context 204,800 x 4 requests: room for
    0.93 full-length, 1.00 planned"
verdict_evidence:
  description: What the engine reported (C(measured)) and what it did not (C(not_measured)), one phrase each.
  returned: always
  type: dict
restart:
  description: Restart once with RV(replan.argv). Never true when O(is_replan) is true.
  returned: always
  type: bool
is_replan:
  description: Echo of O(is_replan).
  returned: always
  type: bool
planned:
  description: The plan's numbers (kv_cache_memory_bytes, num_gpu_blocks, block_size, kv_cache_size_tokens,
    max_model_len, concurrency, max_concurrency, weights_bytes, non_kv_bytes, budget_bytes, attention_backend,
    kv_dtype, kv_pool_measured).
  returned: always
  type: dict
measured:
  description: What the engine reported (num_gpu_blocks, block_size, kv_cache_size_tokens, kv_cache_memory_bytes,
    max_concurrency, cache_dtype, enable_prefix_caching, weights_bytes, max_model_len) and the KV budget it implies
    (budget_bytes, budget_how), with the sources read; C(computed) names the figures computed from the budget
    (C(num_gpu_blocks) when the engine reported only its KV memory), not reported.
  returned: always
  type: dict
delta:
  description: Planned, measured and error_percent for kv_cache_memory_bytes, num_gpu_blocks, kv_cache_size_tokens.
  returned: always
  type: dict
parts:
  description: Planned vs engine, part by part, from the engine's one-line memory summary in the journal - a list of
    C(part) (budget, weights, activation_peak, non_torch, cuda_graphs, kv_pool), C(planned_bytes), C(measured_bytes),
    C(error_percent) ((planned - engine) / engine). Empty without the summary (or without a journal).
  returned: always
  type: list
  elements: dict
measured_concurrency_at_len:
  description: Full-length requests the measured pool holds at the planned max_model_len.
  returned: when something was measured
  type: float
promised_concurrency_at_len:
  description: Full-length requests the plan promised (its concurrency, or the smaller number it warned about).
  returned: always
  type: float
replan:
  description: The re-plan from the measured budget (feasible, kv_cache_memory_bytes, num_gpu_blocks, block_size,
    max_model_len, max_model_len_how, blocks_per_full_request, max_concurrency_at_len, gpu_kv_cache_tokens,
    concurrency, argv), or C(feasible=false) with a reason. Null when the measured pool holds the planned requests
    (RV(verdict) C(confirmed), C(not_measured) or C(not_as_planned)).
  returned: always
  type: dict
  contains:
    feasible:
      description: Whether a re-plan fits the measured budget.
      returned: when not null
      type: bool
    kv_cache_memory_bytes:
      description: The pinned KV pool (C(--kv-cache-memory-bytes)), a whole number of blocks.
      returned: when not null
      type: int
    num_gpu_blocks:
      description: KV blocks vLLM will report with the pinned pool.
      returned: when not null
      type: int
    reason:
      description: Why no re-plan fits.
      returned: when RV(replan.feasible) is false
      type: str
    block_size:
      description: KV block size in tokens.
      returned: when RV(replan.feasible) is true
      type: int
    max_model_len:
      description: The re-planned C(--max-model-len).
      returned: when RV(replan.feasible) is true
      type: int
    max_model_len_how:
      description: How RV(replan.max_model_len) was chosen.
      returned: when RV(replan.feasible) is true
      type: str
    blocks_per_full_request:
      description: Blocks one request of RV(replan.max_model_len) tokens needs.
      returned: when RV(replan.feasible) is true
      type: int
    max_concurrency_at_len:
      description: Full-length requests the pinned pool holds.
      returned: when RV(replan.feasible) is true
      type: float
    gpu_kv_cache_tokens:
      description: Tokens the pinned pool holds at RV(replan.max_model_len).
      returned: when RV(replan.feasible) is true
      type: int
    concurrency:
      description: The stated concurrency of the plan.
      returned: when RV(replan.feasible) is true
      type: int
    argv:
      description: The vLLM argv to restart with (the plan's, with the pool pinned and the new C(--max-model-len)).
      returned: when RV(replan.feasible) is true
      type: list
      elements: str
notes:
  description: Remarks (no second restart, vLLM's own longest-length estimate, a card not free enough).
  returned: always
  type: list
  elements: str
report:
  description: The deployment report as data (verdict, verdict_text, verdict_evidence, planned, measured, delta,
    replan, final, memory bars, tradeoff; the tradeoff's C(basis) says it is planned, and from what).
  returned: always
  type: dict
summary:
  description: One screen of text (RV(verdict_text), pool and blocks planned vs measured, the re-plan, notes) for the end
    of a play.
  returned: always
  type: str
report_markdown:
  description: The report for people (Markdown).
  returned: always
  type: str
report_svg:
  description: Memory bar per GPU, planned next to measured (weights | other | KV pool | free).
  returned: always
  type: str
report_files:
  description: Paths of report.json, report.md and memory.svg (written, or that would be written in check mode).
  returned: when report_dir is set
  type: list
  elements: str
report_sha1:
  description: SHA-1 of each report file's content by file name (a copy elsewhere, such as the controller's, is current
    when its SHA-1 matches).
  returned: when report_dir is set
  type: dict
  sample: {report.json: 0a4d55a8d778e5022fab701977c5d840bbc486d0, report.md: "...", memory.svg: "..."}
"""

import hashlib
import json
import os

from ansible_collections.airgap.vllm.plugins.module_utils.common._files import write_atomic
from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_common import PlanError
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_confirm import confirm
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_confirm_report import (
    carry_promises,
    render_markdown,
)


def argument_spec():
    return dict(
        plan=dict(type="dict", required=True),
        metrics_text=dict(type="str"),
        journal_text=dict(type="str"),
        is_replan=dict(type="bool", default=False),
        replanned=dict(type="dict"),
        report_dir=dict(type="path"),
        tradeoff=dict(type="dict"),
        engine_env=dict(type="dict"),
    )


def _write(path, content, check_mode):
    """Write when different; return True when it changed (or would)."""
    try:
        with open(path) as fh:
            if fh.read() == content:
                return False
    except (IOError, OSError):
        pass
    if not check_mode:
        write_atomic(path, content, mode=0o644)
    return True


@ansible_module(argument_spec(), errors=(PlanError,), required_one_of=[("metrics_text", "journal_text")])
def main(module):
    p = module.params
    result = confirm(
        p["plan"], p["metrics_text"], p["journal_text"], p["is_replan"], p["tradeoff"], p["replanned"], p["engine_env"]
    )
    changed = False
    if p["report_dir"]:
        try:
            with open(os.path.join(p["report_dir"], "report.json")) as fh:
                old = json.load(fh)
        except (IOError, OSError, ValueError):
            old = None
        # The load check's promises of this same deployment stay in the report (vllm_load_check writes them).
        result["report"], carried = carry_promises(old, result["report"])
        if carried:
            result["report_markdown"] = render_markdown(result["report"])
        files = [os.path.join(p["report_dir"], n) for n in ("report.json", "report.md", "memory.svg")]
        contents = [
            json.dumps(result["report"], indent=2, sort_keys=True) + "\n",
            result["report_markdown"],
            result["report_svg"] + "\n",
        ]
        try:
            if not os.path.isdir(p["report_dir"]) and not module.check_mode:
                os.makedirs(p["report_dir"], 0o755)
            for path, content in zip(files, contents):
                changed = _write(path, content, module.check_mode) or changed
        except (IOError, OSError) as exc:
            module.fail_json(
                msg="cannot write the report into %s: %s (report_dir must be a "
                "writable directory on the host)" % (p["report_dir"], exc)
            )
        result["report_files"] = files
        result["report_sha1"] = dict(
            (os.path.basename(path), hashlib.sha1(content.encode("utf-8")).hexdigest())
            for path, content in zip(files, contents)
        )
    return dict(changed=changed, **result)


if __name__ == "__main__":
    main()
