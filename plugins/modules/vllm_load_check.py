#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: vllm_load_check
short_description: Prove a serving vLLM keeps its plan's promises with vLLM's own benchmark and counters
version_added: 0.2.0
description:
  - Runs C(vllm bench serve) inside the running service container (the very image that serves), offline with
    random prompts, the model directory as tokenizer, C(--max-concurrency) = the planned concurrency
    (the container's C(--max-num-seqs) unless O(concurrency) is given).
  - Runs the load-check O(profiles) in turn (C(random), C(long-context), C(shared-prefix), C(tools),
    C(single-stream), C(needle); docs/load-check.md), each bounded by O(timeout). C(tools) sends chat requests with a
    tool through the OpenAI API from inside the container, the others are C(vllm bench serve) runs.
  - C(needle) (only when asked for) places a random fact (a name and a six-digit number, a new seed each run) at
    several depths of a plain-text haystack as long as the planned context, asks for it back with greedy completions,
    and counts the answers that hold it; the promise is MET only when every request was answered and counted by the
    engine (its C(usage.prompt_tokens)), else not witnessed.
  - Reads vLLM's own counters from C(/metrics) before and after each profile (prefix cache hits and queries,
    speculative drafts and accepted tokens, preemptions) and samples C(vllm:num_requests_running) and
    C(vllm:kv_cache_usage_perc) for their peaks while it runs, about four times a second, keeping how many reads
    came and the longest time between two.
  - Compares what it measured with the deployment report's plan (O(report_dir)/report.json) in the promises
    table (MET, MISSED, not witnessed, not measured, with advice), written back into report.json and report.md
    there; the report's verdict (M(airgap.vllm.vllm_plan_confirm)'s) is kept as it is.
  - The concurrency promise is MET only by the engine's own C(vllm:num_requests_running) reaching the planned
    concurrency in a profile; the requests' overlapping streams are shown beside it, never as the proof. When the
    reads were sparser than every 0.5 s, or the streams overlapped for less time than between two reads, and the
    gauge stayed below, it is C(not witnessed).
  - Fails when any request failed; warns when the TTFT or TPOT 95th percentile is over a threshold the
    operator set (or fails, with O(fail_on_threshold)). With no thresholds it only reports.
  - The API key is read from O(keys_file) on the host and handed to the bench through the environment of
    C(docker exec), never on a command line.
options:
  container:
    description: Name of the running vLLM container.
    type: str
    required: true
  docker_bin:
    description: Docker CLI.
    type: str
    default: docker
  keys_file:
    description: The service's API key file (C(api-key:) list, as the vllm_service role writes it); its first key is used.
    type: path
  metrics_url:
    description: URL of the server's C(/metrics) on the host (loopback).
    type: str
  concurrency:
    description: C(--max-concurrency); default the container's C(--max-num-seqs).
    type: int
  num_prompts:
    description: Requests in all (at least 1).
    type: int
    default: 32
  input_len:
    description: Prompt length in tokens (random dataset).
    type: int
    default: 256
  output_len:
    description: Output length in tokens (C(--ignore-eos)).
    type: int
    default: 64
  ttft_p95_max_ms:
    description: Warn when the 95th percentile time to first token is over this (a finite number above 0; NaN is refused).
    type: float
  tpot_p95_max_ms:
    description: Warn when the 95th percentile time per output token is over this (a finite number above 0; NaN is refused).
    type: float
  fail_on_threshold:
    description: Fail instead of warning when a threshold is exceeded.
    type: bool
    default: false
  timeout:
    description:
      - Seconds the bench may take (at least 1). It runs under C(timeout) inside the container, so it is stopped
        there when the time is up, and the check fails saying so.
    type: int
    default: 900
  result_path:
    description: Where to save the result (JSON, figures without per-request lists) on the host.
    type: path
  profiles:
    description: Load-check profiles to run, in this order.
    type: list
    elements: str
    default: [random]
    choices: [random, long-context, shared-prefix, tools, single-stream, needle]
  profile_settings:
    description:
      - Per profile, settings over its defaults (num_prompts, input_len, output_len, concurrency, prefix_len,
        suffix_len, as the profile takes them; C(needle) takes num_prompts (its depths), context_len, output_len,
        chars_per_token and seed). O(num_prompts), O(input_len) and O(output_len) set C(random)'s.
    type: dict
    default: {}
  promise_thresholds:
    description: Thresholds of the promises over the field-note defaults (docs/load-check.md).
    type: dict
    default: {}
  report_dir:
    description: The deployment report's directory on the host; its report.json gives the plan and gains the promises.
    type: path
  fail_on_missed_promise:
    description: Fail when a promise is MISSED (default only reports it).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Sends no request in check mode and reports that nothing ran.
  diff_mode:
    support: none
    description: Nothing to show as a diff.
  idempotent:
    support: full
    description: Changes nothing on the host but the result file.
author:
  - airgap.vllm maintainers (@airgap-vllm)
'''

EXAMPLES = r'''
- name: Load-check the service at its planned concurrency
  airgap.vllm.vllm_load_check:
    container: vllm
    keys_file: /etc/airgap-vllm/vllm/keys.yaml
    metrics_url: http://127.0.0.1:8000/metrics
    num_prompts: 64
    ttft_p95_max_ms: 2000
    result_path: /etc/airgap-vllm/vllm/report/loadcheck.json
'''

RETURN = r'''
figures:
  description: requests, completed, failed, concurrency, TTFT/TPOT/ITL/E2EL p50 and p95 (ms), output tokens/s, peak concurrency.
  returned: success
  type: dict
warnings_list:
  description: Thresholds exceeded.
  returned: success
  type: list
  elements: str
summary:
  description: Three lines for people.
  returned: success
  type: str
profiles:
  description: Per profile its settings, figures, counter deltas, peaks, the /metrics sampling (C(samples),
    C(max_gap_s)) and seconds taken.
  returned: success
  type: dict
promises:
  description: The promises table (key, promise, expected, measured, status, advice, source); status is C(MET),
    C(MISSED), C(not witnessed) or C(not measured).
  returned: success
  type: list
  elements: dict
promise_counts:
  description: How many promises have each status.
  returned: success
  type: dict
argv:
  description: The C(vllm bench serve) command of the first bench profile run in the container.
  returned: success
  type: list
  elements: str
'''

from ansible_collections.airgap.vllm.plugins.module_utils.service._loadcheck_profiles import PROFILES
from ansible_collections.airgap.vllm.plugins.module_utils.service._loadcheck_runner import run
from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module


@ansible_module(
    dict(
        container=dict(type="str", required=True),
        docker_bin=dict(type="str", default="docker"),
        keys_file=dict(type="path"),
        metrics_url=dict(type="str"),
        concurrency=dict(type="int"),
        num_prompts=dict(type="int", default=32),
        input_len=dict(type="int", default=256),
        output_len=dict(type="int", default=64),
        ttft_p95_max_ms=dict(type="float"),
        tpot_p95_max_ms=dict(type="float"),
        fail_on_threshold=dict(type="bool", default=False),
        timeout=dict(type="int", default=900),
        result_path=dict(type="path"),
        profiles=dict(type="list", elements="str", default=["random"], choices=list(PROFILES)),
        profile_settings=dict(type="dict", default={}),
        promise_thresholds=dict(type="dict", default={}),
        report_dir=dict(type="path"),
        fail_on_missed_promise=dict(type="bool", default=False),
    ),
)
def main(module):
    return run(module)


if __name__ == "__main__":
    main()
