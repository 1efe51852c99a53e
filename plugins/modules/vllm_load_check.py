#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: vllm_load_check
short_description: Prove a serving vLLM holds its planned concurrency with vLLM's own benchmark
version_added: 0.2.0
description:
  - Runs C(vllm bench serve) inside the running service container (the very image that serves), offline with
    random prompts, the model directory as tokenizer, C(--max-concurrency) = the planned concurrency
    (the container's C(--max-num-seqs) unless O(concurrency) is given).
  - While it runs, samples the server's C(/metrics) for the peak of C(vllm:num_requests_running).
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
    description: Requests in all.
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
    description: Warn when the 95th percentile time to first token is over this.
    type: float
  tpot_p95_max_ms:
    description: Warn when the 95th percentile time per output token is over this.
    type: float
  fail_on_threshold:
    description: Fail instead of warning when a threshold is exceeded.
    type: bool
    default: false
  timeout:
    description: Seconds the bench may take.
    type: int
    default: 900
  result_path:
    description: Where to save the result (JSON, figures without per-request lists) on the host.
    type: path
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
argv:
  description: The C(vllm bench serve) command run in the container.
  returned: success
  type: list
  elements: str
'''

import json
import os
import threading
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url
from ansible_collections.airgap.vllm.plugins.module_utils._files import write_atomic
from ansible_collections.airgap.vllm.plugins.module_utils._loadcheck import (
    LoadCheckError, bench_argv, compact, peak_running, render, serving_facts, summarize)

RESULT_DIR = "/tmp"
RESULT_FILE = "airgap-vllm-loadcheck.json"


def read_key(path):
    """First key of an `api-key:` YAML list (the role writes `  - "<key>"` lines, JSON-quoted)."""
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("- "):
                value = line[2:].strip()
                return json.loads(value) if value.startswith('"') else value
    return None


class MetricsSampler(threading.Thread):
    def __init__(self, url):
        threading.Thread.__init__(self)
        self.daemon = True
        self.url, self.peak, self.stop = url, None, threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                text = open_url(self.url, timeout=5, use_proxy=False).read().decode("utf-8", "replace")
                seen = peak_running(text)
                if seen is not None:
                    self.peak = seen if self.peak is None else max(self.peak, seen)
            except Exception:  # the bench decides; a missed sample only lowers the peak seen
                pass
            self.stop.wait(0.5)


def main():
    module = AnsibleModule(
        argument_spec=dict(
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
        ),
        supports_check_mode=True,
    )
    p = module.params
    if module.check_mode:
        module.exit_json(changed=False, skipped=True, msg="check mode: no requests sent")
    rc, out, err = module.run_command([p["docker_bin"], "inspect", "--format", "{{json .Args}}", p["container"]])
    if rc != 0:
        module.fail_json(msg="container %s is not there to load-check: %s" % (p["container"], (err or out).strip()))
    try:
        facts = serving_facts(json.loads(out))
    except (ValueError, LoadCheckError) as e:
        module.fail_json(msg="cannot read how %s serves: %s" % (p["container"], e))
    concurrency = p["concurrency"] or facts["max_num_seqs"] or 1
    argv = bench_argv(facts, concurrency, p["num_prompts"], p["input_len"], p["output_len"],
                      RESULT_DIR, RESULT_FILE)
    env = {}
    exec_argv = [p["docker_bin"], "exec"]
    if p["keys_file"] and os.path.exists(p["keys_file"]):
        key = read_key(p["keys_file"])
        if key:
            env["OPENAI_API_KEY"] = key
            module.no_log_values.add(key)
            exec_argv += ["-e", "OPENAI_API_KEY"]  # value from this process's environment, not argv
    exec_argv += ["-e", "HF_HUB_OFFLINE=1", "-e", "TRANSFORMERS_OFFLINE=1", p["container"]] + argv
    sampler = MetricsSampler(p["metrics_url"]) if p["metrics_url"] else None
    if sampler:
        sampler.start()
    start = time.time()
    try:
        rc, out, err = module.run_command(exec_argv, environ_update=env)
    finally:
        if sampler:
            sampler.stop.set()
            sampler.join(2)
    if rc != 0:
        module.fail_json(msg="vllm bench serve failed (rc %d) after %ds" % (rc, time.time() - start),
                         stdout=out[-4000:], stderr=err[-4000:], argv=argv)
    rc, raw, err = module.run_command([p["docker_bin"], "exec", p["container"], "cat",
                                       "%s/%s" % (RESULT_DIR, RESULT_FILE)])
    try:
        result = json.loads(raw)
        summary = summarize(result, concurrency, p["num_prompts"], p["ttft_p95_max_ms"],
                            p["tpot_p95_max_ms"], sampler.peak if sampler else None)
    except (ValueError, LoadCheckError) as e:
        module.fail_json(msg="the bench result is unreadable: %s" % e, stdout=out[-4000:])
    if p["result_path"]:
        saved = dict(compact(result), airgap_vllm=summary)
        write_atomic(p["result_path"], json.dumps(saved, indent=2, sort_keys=True), mode=0o600)
    text = render(summary)
    for w in summary["warnings"]:
        module.warn(w)
    if summary["problems"] or (p["fail_on_threshold"] and summary["warnings"]):
        module.fail_json(msg="load check failed: " + "; ".join(summary["problems"] + summary["warnings"]),
                         figures=summary["figures"], summary=text, argv=argv)
    module.exit_json(changed=False, figures=summary["figures"], warnings_list=summary["warnings"],
                     summary=text, argv=argv)


if __name__ == "__main__":
    main()
