# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The load check's runner: the module airgap.vllm.vllm_load_check's work. Reads how the container serves, runs
each profile inside it (`vllm bench serve`, or the API client CLIENT with the image's own Python) while sampling
vLLM's /metrics, and writes the promises into the deployment report."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import random
import threading
import time

from ansible.module_utils.urls import open_url
from ansible_collections.airgap.vllm.plugins.module_utils.common._files import write_atomic
from ansible_collections.airgap.vllm.plugins.module_utils.service._loadcheck import (
    KILL_AFTER,
    LoadCheckError,
    TIMED_OUT,
    compact,
    render,
    serving_facts,
    settings_problems,
    summarize,
    timed,
    vocab_size_of,
)
from ansible_collections.airgap.vllm.plugins.module_utils.service._loadcheck_metrics import (
    bench_figures,
    counter_delta,
    parse_counters,
)
from ansible_collections.airgap.vllm.plugins.module_utils.service._loadcheck_profiles import (
    API_PROFILES,
    api_requests,
    api_result,
    engine_settings,
    needle_facts,
    needle_outcome,
    profile_argv,
    profile_settings,
    tool_outcome,
)
from ansible_collections.airgap.vllm.plugins.module_utils.service._loadcheck_promises import (
    planned_from_report,
    profile_line,
    promise_counts,
    promises,
    render_promises,
    threshold_problems,
)
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_confirm_report import render_markdown

RESULT_DIR = "/tmp"
RESULT_FILE = "airgap-vllm-loadcheck.json"
# The API profiles' client, run by the image's own Python inside the container: {"path", "bodies", "concurrency",
# "port"} on stdin, `concurrency` requests at a time; a streamed request is timed (first token, end, usage; "first"
# and "last": when its first and last token came), any other answered as JSON.
# Prints {"records": [...], "duration": s, "peak": requests in flight at once}.
CLIENT = r"""
import json, os, sys, threading, time, urllib.request
job = json.load(sys.stdin)
bodies, out, lock = job["bodies"], [None] * len(job["bodies"]), threading.Lock()
state = {"next": 0, "in_flight": 0, "peak": 0}
url = "http://127.0.0.1:%d%s" % (job["port"], job["path"])
OPENER = urllib.request.build_opener()
def one(body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    if os.environ.get("OPENAI_API_KEY"):
        req.add_header("Authorization", "Bearer " + os.environ["OPENAI_API_KEY"])
    start = time.time()
    resp = OPENER.open(req, timeout=3600)
    if not body.get("stream"):
        return json.loads(resp.read().decode())
    rec = {"ttft": None, "first": None, "last": None, "prompt_tokens": 0, "completion_tokens": 0}
    for raw in resp:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[5:])
        if any(c.get("text") for c in chunk.get("choices") or []):
            rec["last"] = time.time()
            if rec["ttft"] is None:
                rec["ttft"], rec["first"] = rec["last"] - start, rec["last"]
        if chunk.get("usage"):
            rec["prompt_tokens"] = chunk["usage"].get("prompt_tokens") or 0
            rec["completion_tokens"] = chunk["usage"].get("completion_tokens") or 0
    rec["e2e"] = time.time() - start
    return rec
def work():
    while True:
        with lock:
            i = state["next"]
            state["next"] += 1
            if i >= len(bodies):
                return
            state["in_flight"] += 1
            state["peak"] = max(state["peak"], state["in_flight"])
        try:
            ans = one(bodies[i])
        except Exception as e:
            ans = {"error": ("%s: %s" % (type(e).__name__, e))[:300]}
        with lock:
            out[i] = ans
            state["in_flight"] -= 1
began = time.time()
ts = [threading.Thread(target=work) for _ in range(max(1, int(job["concurrency"])))]
[t.start() for t in ts]
[t.join() for t in ts]
print(json.dumps({"records": out, "duration": time.time() - began, "peak": state["peak"]}))
"""


def read_key(path):
    """First key of an `api-key:` YAML list (the role writes `  - "<key>"` lines, JSON-quoted)."""
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("- "):
                value = line[2:].strip()
                return json.loads(value) if value.startswith('"') else value
    return None


def scrape(url):
    """vLLM's counters now (parse_counters), or None when /metrics does not answer."""
    if not url:
        return None
    try:
        return parse_counters(open_url(url, timeout=5, use_proxy=False).read().decode("utf-8", "replace"))
    except Exception:  # a missed scrape leaves the figure "not measured"
        return None


class MetricsSampler(threading.Thread):
    """Peaks of vllm:num_requests_running and vllm:kv_cache_usage_perc, read about four times a second, and how
    often the reads came (``samples``, ``max_gap_s``: the longest time without a read, from the start to the
    end of the profile): the concurrency promise takes the peak only from reads close enough to see it
    (_loadcheck_promises.WITNESS_GAP_S)."""

    def __init__(self, url):
        threading.Thread.__init__(self)
        self.daemon = True
        self.url, self.peak, self.peak_kv, self.stop = url, None, None, threading.Event()
        self.samples, self.max_gap, self.started, self.last = 0, None, None, None

    def start(self):
        self.started = self.last = time.time()
        threading.Thread.start(self)

    def run(self):
        while not self.stop.is_set():
            seen = scrape(self.url) or {}
            if seen.get("num_requests_running") is not None:
                self.peak = max(self.peak or 0.0, seen["num_requests_running"])
                now = time.time()
                self.max_gap, self.last = max(self.max_gap or 0.0, now - self.last), now
                self.samples += 1
            if seen.get("kv_cache_usage_perc") is not None:
                self.peak_kv = max(self.peak_kv or 0.0, seen["kv_cache_usage_perc"])
            self.stop.wait(0.25)

    def sampling(self, ended):
        """{samples, max_gap_s} of the profile that ended at ``ended`` (the last read to its end counted)."""
        gap = max(self.max_gap or 0.0, ended - self.last) if self.last is not None else None
        return {"samples": self.samples, "max_gap_s": None if gap is None else round(gap, 3)}


def load_report(report_dir):
    if not report_dir:
        return None
    try:
        with open(os.path.join(report_dir, "report.json")) as fh:
            return json.load(fh)
    except (IOError, OSError, ValueError):
        return None


class Check(object):
    def __init__(self, module, facts):
        self.module, self.p, self.facts = module, module.params, facts
        self.env, self.exec_argv = {}, [self.p["docker_bin"], "exec"]
        p = self.p
        if p["keys_file"] and os.path.exists(p["keys_file"]):
            key = read_key(p["keys_file"])
            if key:
                self.env["OPENAI_API_KEY"] = key
                module.no_log_values.add(key)
                self.exec_argv += ["-e", "OPENAI_API_KEY"]  # value from this process's environment, not argv
        self.exec_argv += ["-e", "HF_HUB_OFFLINE=1", "-e", "TRANSFORMERS_OFFLINE=1"]

    def fail(self, msg, **kw):
        self.module.fail_json(msg=msg, **kw)

    def run(self, argv, stdin_text=None):
        p = self.p
        full = (
            self.exec_argv + (["-i"] if stdin_text is not None else []) + [p["container"]] + timed(argv, p["timeout"])
        )
        try:
            # The container's `timeout` stops the run; this bound (a little later, the host's own coreutils timeout)
            # only covers a docker CLI that hangs: its rc is then one of TIMED_OUT.
            return self.module.run_command(
                timed(full, p["timeout"] + KILL_AFTER + 30), data=stdin_text, environ_update=self.env
            )
        except OSError as e:
            self.fail("cannot run %s: %s" % (p["docker_bin"], e), argv=argv)

    def cat(self, path):
        """(rc, text) of a file inside the container."""
        rc, out, _err = self.module.run_command([self.p["docker_bin"], "exec", self.p["container"], "cat", path])
        return rc, out

    def bench(self, name, argv):
        rc, out, err = self.run(argv)
        if rc != 0:
            why = (
                "did not finish within timeout (%ds): it was stopped; raise timeout or lower num_prompts (profile %s)"
                % (self.p["timeout"], name)
                if rc is None or rc in TIMED_OUT
                else "failed (rc %d) in profile %s" % (rc, name)
            )
            self.fail("vllm bench serve " + why, stdout=out[-4000:], stderr=err[-4000:], argv=argv)
        try:
            return json.loads(self.cat("%s/%s" % (RESULT_DIR, RESULT_FILE))[1])
        except ValueError as e:
            self.fail("the bench result is unreadable: %s (profile %s)" % (e, name), stdout=out[-4000:])

    def api(self, name, settings, vocab_size):
        """(records, duration, peak in flight) of an API profile, sent by CLIENT inside the container."""
        path, bodies = api_requests(name, self.facts["served_model_name"], settings, vocab_size)
        job = {"path": path, "bodies": bodies, "concurrency": settings["concurrency"], "port": self.facts["port"]}
        rc, out, err = self.run(["python3", "-c", CLIENT], json.dumps(job))
        if rc is None or rc in TIMED_OUT:
            self.fail(
                "%s: the requests did not finish within timeout (%ds): they were stopped" % (name, self.p["timeout"])
            )
        try:
            done = json.loads(out.strip().splitlines()[-1])
            return done["records"], done["duration"], done.get("peak")
        except (ValueError, IndexError, KeyError, TypeError):
            self.fail(
                "%s: the client in the container answered nothing readable (rc %s)" % (name, rc),
                stdout=out[-2000:],
                stderr=err[-2000:],
            )

    def vocab_size(self):
        rc, out = self.cat(self.facts["model_dir"].rstrip("/") + "/config.json")
        return vocab_size_of(out) if rc == 0 else None


def run(module):
    """The load check with `module`'s parameters: its result, or fail_json."""
    p = module.params
    wrong = settings_problems(
        p["num_prompts"],
        p["input_len"],
        p["output_len"],
        p["concurrency"],
        p["timeout"],
        p["ttft_p95_max_ms"],
        p["tpot_p95_max_ms"],
    ) + threshold_problems(p["promise_thresholds"])
    if not p["profiles"]:
        wrong.append("profiles must name at least one profile")
    if wrong:
        module.fail_json(msg="load check settings refused: " + "; ".join(wrong))
    if module.check_mode:
        module.exit_json(changed=False, skipped=True, msg="check mode: no requests sent")
    rc, out, err = module.run_command([p["docker_bin"], "inspect", "--format", "{{json .Args}}", p["container"]])
    if rc != 0:
        module.fail_json(msg="container %s is not there to load-check: %s" % (p["container"], (err or out).strip()))
    try:
        args = json.loads(out)
        facts, engine = serving_facts(args), engine_settings(args)
    except (ValueError, LoadCheckError) as e:
        module.fail_json(msg="cannot read how %s serves: %s" % (p["container"], e))
    report = load_report(p["report_dir"])
    plan = planned_from_report(report)
    concurrency = p["concurrency"] or facts["max_num_seqs"] or 1
    overrides = dict(p["profile_settings"] or {})
    overrides["random"] = dict(
        dict(num_prompts=p["num_prompts"], input_len=p["input_len"], output_len=p["output_len"]),
        **(overrides.get("random") or {}),
    )
    # A new fact each run (the seed is in the result: a run can be repeated with the same facts).
    overrides["needle"] = dict(
        dict(seed=random.SystemRandom().randint(1, 2**31 - 1)), **(overrides.get("needle") or {})
    )
    settings = {}
    try:
        for name in p["profiles"]:
            settings[name] = profile_settings(
                name,
                overrides.get(name),
                concurrency,
                engine["max_model_len"] or plan.get("max_model_len"),
                plan.get("block_size") or engine["block_size"],
            )
    except LoadCheckError as e:
        module.fail_json(msg="load check settings refused: %s" % e)
    check = Check(module, facts)
    records, problems, warnings, first_argv, random_summary, vocab = {}, [], [], None, None, None
    start_counters = scrape(p["metrics_url"])
    for name in p["profiles"]:
        s = settings[name]
        if name == "tools" and not engine["tools"]:
            continue  # the server parses no tool calls (no --enable-auto-tool-choice): the promise says so
        before = scrape(p["metrics_url"])
        sampler = MetricsSampler(p["metrics_url"]) if p["metrics_url"] else None
        if sampler:
            sampler.start()
        started = time.time()
        try:
            if name == "tools":
                records_, duration, _peak = check.api(name, s, None)
                answers = [a for a in records_ if isinstance(a, dict) and "error" not in a]
                errors = [a["error"] for a in records_ if isinstance(a, dict) and "error" in a]
                figures, raw = tool_outcome(answers, len(errors), duration), None
                if errors:
                    problems.append("tools: %d of %d requests failed: %s" % (len(errors), s["num_prompts"], errors[0]))
            elif name == "needle":
                records_, duration, _peak = check.api(name, s, None)
                figures, raw = needle_outcome(needle_facts(s["seed"], s["num_prompts"]), records_, duration), None
            elif name in API_PROFILES:
                if vocab is None:
                    vocab = check.vocab_size() or 1024
                records_, duration, peak = check.api(name, s, vocab)
                raw = api_result(records_, duration, peak)
                figures = bench_figures(raw)
            else:
                argv = profile_argv(name, facts, s, RESULT_DIR, RESULT_FILE)
                first_argv = first_argv or argv
                raw = check.bench(name, argv)
                figures = bench_figures(raw)
        finally:
            ended = time.time()
            if sampler:
                sampler.stop.set()
                sampler.join(2)
        record = {
            "settings": s,
            "figures": figures,
            "wall_s": round(time.time() - started, 1),
            "delta": counter_delta(before, scrape(p["metrics_url"])) if before else {},
            "peak_running": sampler.peak if sampler else None,
            "peak_kv_usage": sampler.peak_kv if sampler else None,
            "sampling": sampler.sampling(ended) if sampler else None,
        }
        if raw is not None:
            try:
                summary = summarize(
                    raw,
                    s["concurrency"],
                    s["num_prompts"],
                    p["ttft_p95_max_ms"] if name == "random" else None,
                    p["tpot_p95_max_ms"] if name == "random" else None,
                    record["peak_running"],
                )
            except LoadCheckError as e:
                module.fail_json(msg="the bench result is unreadable: %s (profile %s)" % (e, name))
            problems += ["%s: %s" % (name, x) for x in summary["problems"]]
            warnings += summary["warnings"]
            record["bench"] = compact(raw)
            if name == "random":
                random_summary = summary
        records[name] = record
        if problems or (p["fail_on_threshold"] and warnings):
            break  # the check fails: the remaining profiles would only delay saying so
    end_counters = scrape(p["metrics_url"])
    records["_all"] = {"delta": counter_delta(start_counters, end_counters) if start_counters else {}}
    rows = promises(
        plan,
        engine,
        records,
        p["promise_thresholds"],
        (report or {}).get("tradeoff"),
        ((report or {}).get("engine") or {}).get("version"),
    )
    missed = [r for r in rows if r["status"] == "MISSED"]
    lines = [render(random_summary)] if random_summary else []
    lines += ["load check profiles (seconds each):"] + [
        profile_line(n, records[n]) for n in p["profiles"] if n in records
    ]
    lines.append(render_promises(rows))
    text = "\n".join(lines)
    saved = {
        "profiles": dict((n, dict(r)) for n, r in records.items()),
        "promises": rows,
        "airgap_vllm": random_summary,
    }
    if p["result_path"]:
        write_atomic(p["result_path"], json.dumps(saved, indent=2, sort_keys=True, default=str), mode=0o600)
    if report is not None:
        report["promises"] = rows
        kept = ("settings", "wall_s", "peak_kv_usage", "peak_running", "sampling")
        report["loadcheck"] = dict((n, dict((k, r[k]) for k in kept)) for n, r in records.items() if n != "_all")
        try:
            write_atomic(
                os.path.join(p["report_dir"], "report.json"),
                json.dumps(report, indent=2, sort_keys=True) + "\n",
                mode=0o644,
            )
            write_atomic(os.path.join(p["report_dir"], "report.md"), render_markdown(report), mode=0o644)
        except (IOError, OSError, KeyError) as e:
            module.warn("the promises could not be written into the deployment report: %s" % e)
    for w in warnings + ["promise MISSED: %s: %s" % (r["key"], r["advice"]) for r in missed]:
        module.warn(w)
    figures = (random_summary or {}).get("figures") or (records[p["profiles"][0]]["figures"])
    if problems or (p["fail_on_threshold"] and warnings) or (p["fail_on_missed_promise"] and missed):
        module.fail_json(
            msg="load check failed: "
            + "; ".join(
                problems
                + (warnings if p["fail_on_threshold"] else [])
                + (["promise MISSED: " + r["key"] for r in missed] if p["fail_on_missed_promise"] else [])
            ),
            figures=figures,
            summary=text,
            argv=first_argv,
            promises=rows,
        )
    return dict(
        changed=False,
        figures=figures,
        warnings_list=warnings,
        summary=text,
        argv=first_argv,
        profiles=records,
        promises=rows,
        promise_counts=promise_counts(rows),
    )
