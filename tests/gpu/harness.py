"""One GPU harness case on the device machine: read the card, plan, start vLLM with the plan, confirm, load.

Run by device.sh (tests/gpu/README.md), once per case:

  1. plan     ansible-playbook steps.yml -e gpu_step=plan: airgap.vllm.nvml_info, then airgap.vllm.vllm_launch_plan
              with the case's arguments and NVML's GPU list (as the vllm_plan role passes them);
  2. start    `vllm serve` + exactly the planned argv + `--load-format dummy` (random weights of the real shapes)
              [+ `--gdn-prefill-backend triton` for a hybrid model], the planned environment +
              VLLM_USE_FLASHINFER_SAMPLER=0 (both switches: ../shared/reference/gpu-device-facts.md); wait for /health;
  3. confirm  ansible-playbook steps.yml -e gpu_step=confirm: airgap.vllm.vllm_plan_confirm on the plan, /metrics and
              the engine's log (as the vllm_service role does, with the log for the memory summary);
  4. load     the promise itself: min(concurrency, the plan's full-length requests at once) requests at the same
              time, each of the full planned length (prompt + output = --max-model-len), token ids from the
              collection's own load check (_loadcheck.token_ids), counters from /metrics read by its
              _loadcheck.parse_counters: preemptions (vllm:num_preemptions), the peak of running requests and of
              the KV cache's use, sampled every second;
  5. bench    (a case with "bench") `vllm bench serve` on random data at the case's concurrency, no speculative
              decoding (issue 43 item 7: throughput, TTFT p50/p99); the same code through vllm.benchmarks.serve
              where the `vllm bench` CLI does not import;
  6. stop     SIGINT to the engine's process group, SIGKILL after 30 s; wait for the card's memory to come back.

A case with "argv" (issue 43 item 7: the field notes' hand configuration, vLLM's defaults) is not planned: the
engine gets `serve MODEL --served-model-name NAME --host --port` + that argv (+ `--load-format dummy` and the
FlashInfer switches), and the collection's parser (_plan_confirm_parse) reads what it did from its log and
/metrics. A case with "load": false skips the load at full length (a call has no room for it).

Everything lands in WORK/<case>/ (plan.json, confirm.json, engine.log, metrics.txt, load.json, result.json) and
a trimmed engine log (the lines the collection's parser reads, and what explains them) in OUT/<case>.log.
With --via python (no ansible-core there), the same module_utils functions are called directly.
"""

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
FLASHINFER_SWITCHES = {"VLLM_USE_FLASHINFER_SAMPLER": "0"}
HYBRID_ARGS = ["--gdn-prefill-backend", "triton"]
# Lines of an engine log worth keeping as a fixture: what _plan_confirm_parse reads and what explains it.
KEEP = re.compile(
    r"vLLM server version|Model loading took|Available KV cache memory|GPU KV cache size|Maximum concurrency"
    r"|Free memory on device|Application startup complete|Setting attention block size|attention block size"
    r"|Graph capturing finished|CUDA graph|memory profiling|torch.compile takes|Loading weights took"
    r"|preempt|Error|ERROR|Traceback|estimated maximum model length|non-default args|Using .* backend"
    r"|max_num_batched_tokens|chunked prefill|Hybrid|mamba|KV cache",
)


def now():
    return time.time()


class Case:
    def __init__(self, name, spec, a):
        self.name, self.spec, self.a = name, spec, a
        self.work = os.path.join(a.work, name)
        os.makedirs(self.work, exist_ok=True)
        self.times = {}
        self.result = dict(case=name, spec=spec, via=a.via, times=self.times, ok=False, stage=None, error=None)

    def path(self, name):
        return os.path.join(self.work, name)

    def timed(self, stage, fn, *args):
        self.result["stage"] = stage
        t0 = now()
        try:
            return fn(*args)
        finally:
            self.times[stage] = round(now() - t0, 1)
            log("%s: %s took %.1f s" % (self.name, stage, self.times[stage]))

    def write(self):
        with open(self.path("result.json"), "w") as fh:
            json.dump(self.result, fh, indent=1, sort_keys=True, default=str)


def log(msg):
    sys.stdout.write("[harness %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stdout.flush()


# ---------------------------------------------------------------- the collection, through Ansible or directly
def case_vars(c):
    spec = c.spec
    case = dict(
        (k, spec[k])
        for k in (
            "concurrency",
            "context",
            "kv_cache_dtype",
            "gpu_memory_utilization",
            "num_speculative_tokens",
            "prefix_caching",
            "vllm_version",
            "language_model_only",
            "max_num_batched_tokens",
            "nvml_gpus",
        )
        if k in spec
    )
    case["context"] = str(case["context"])
    case["model_dir"] = os.path.join(c.a.models, spec["model"])
    case["port"] = c.a.port
    return case


def playbook(c, step):
    env = dict(
        os.environ,
        ANSIBLE_COLLECTIONS_PATH=c.a.collections,
        ANSIBLE_LOCAL_TEMP=os.path.join(c.a.work, ".ansible-tmp"),
        ANSIBLE_REMOTE_TEMP=os.path.join(c.a.work, ".ansible-tmp"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_RETRY_FILES_ENABLED="0",
        ANSIBLE_DEPRECATION_WARNINGS="0",
        LC_ALL="C.UTF-8",
        LANG="C.UTF-8",
    )
    extra = dict(gpu_step=step, gpu_work=c.work, gpu_case=case_vars(c), ansible_python_interpreter=sys.executable)
    with open(c.path("vars-%s.json" % step), "w") as fh:
        json.dump(extra, fh)
    cmd = [sys.executable, "-m", "ansible.cli.playbook", "-i", "localhost,", os.path.join(HERE, "steps.yml")]
    cmd += ["-e", "@" + c.path("vars-%s.json" % step)]
    with open(c.path("ansible-%s.log" % step), "w") as fh:
        rc = subprocess.call(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=c.work)
    if rc:
        with open(c.path("ansible-%s.log" % step)) as fh:
            tail = fh.read()[-3000:]
        raise RuntimeError("ansible-playbook %s failed (rc %d):\n%s" % (step, rc, tail))


def utils():
    sys.path.insert(0, c_collections_parent())
    from ansible_collections.airgap.vllm.plugins.module_utils.host import _nvml
    from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_confirm, _planner
    from ansible_collections.airgap.vllm.plugins.module_utils.service import _loadcheck

    return _loadcheck, _nvml, _plan_confirm, _planner


_ARGS = {}


def c_collections_parent():
    return _ARGS["collections"]


def plan_step(c):
    if c.a.via == "ansible":
        playbook(c, "plan")
        with open(c.path("plan.json")) as fh:
            plan = json.load(fh)
        with open(c.path("nvml.json")) as fh:
            nvml = json.load(fh)
    else:
        _lc, N, _C, P = utils()
        nvml = N.collect()
        params = case_vars(c)
        params.setdefault("nvml_gpus", nvml.get("gpus"))
        params.update(host="127.0.0.1", gpu_count=1)
        try:
            plan = P.plan(params)
            plan["inputs"] = dict((k, v) for k, v in params.items() if v is not None and k != "nvml_gpus")
            plan["warnings_list"] = plan.pop("warnings", [])
        except Exception as exc:  # the module's fail_json
            plan = dict(failed=True, msg=str(exc))
        for name, obj in (("plan.json", plan), ("nvml.json", nvml)):
            with open(c.path(name), "w") as fh:
                json.dump(obj, fh, indent=1)
    c.result["nvml"] = dict(
        (k, nvml.get(k)) for k in ("nvml_state", "driver_version", "cuda_driver_version", "library_version")
    )
    c.result["nvml"]["gpus"] = [
        dict((k, g.get(k)) for k in ("index", "name", "memory_total", "memory_reserved", "compute_capability"))
        for g in nvml.get("gpus") or []
    ]
    if plan.get("failed"):
        raise RuntimeError("the plan failed: %s" % plan.get("msg"))
    return plan


def confirm_step(c, plan):
    if c.a.via == "ansible":
        playbook(c, "confirm")
        with open(c.path("confirm.json")) as fh:
            conf = json.load(fh)
    else:
        _lc, _N, C, _P = utils()
        metrics = open(c.path("metrics.txt")).read()
        journal = open(c.path("engine.log")).read()
        try:
            conf = C.confirm(plan, metrics or None, journal)
        except Exception as exc:
            conf = dict(failed=True, msg=str(exc))
        with open(c.path("confirm.json"), "w") as fh:
            json.dump(conf, fh, indent=1, default=str)
    if conf.get("failed"):
        raise RuntimeError("the confirm failed: %s" % conf.get("msg"))
    return conf


# ---------------------------------------------------------------- the engine
def http(url, body=None, timeout=10):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read().decode("utf-8", "replace")


def engine_argv(c, plan):
    argv = list(c.a.engine) + ["serve"] + list(plan["argv"]) + ["--load-format", "dummy"]
    if c.spec.get("hybrid"):
        argv += HYBRID_ARGS
    return argv


def start_engine(c, plan):
    env = dict(os.environ)
    env.update(plan.get("env") or {})
    env.update(FLASHINFER_SWITCHES)
    argv = engine_argv(c, plan)
    c.result["engine_argv"] = argv
    c.result["engine_env"] = dict((k, env[k]) for k in sorted(set(plan.get("env") or {}) | set(FLASHINFER_SWITCHES)))
    log("%s: %s" % (c.name, " ".join(argv)))
    fh = open(c.path("engine.log"), "w")
    proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    return proc, fh


def wait_health(c, proc):
    url = "http://127.0.0.1:%d/health" % c.a.port
    deadline = now() + min(float(c.spec.get("health_timeout", 300)), c.a.deadline - now())
    while now() < deadline:
        if proc.poll() is not None:
            return "exited (rc %s)" % proc.returncode
        try:
            if http(url, timeout=2)[0] == 200:
                return "healthy"
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(2)
    return "timed out"


def stop_engine(c, proc, fh):
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGINT)
        except OSError:
            pass
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    fh.close()
    # The card's memory back before the next case plans ("Free memory on device" would say otherwise).
    for _attempt in range(30):
        used = gpu_used_mib()
        if used is None or used < 2048:
            break
        time.sleep(1)
    c.result["gpu_used_mib_after_stop"] = gpu_used_mib()


def gpu_used_mib():
    try:
        out = subprocess.check_output(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"], text=True, timeout=20
        )
        return int(out.split()[0])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


# ---------------------------------------------------------------- the load: the promise at full length
def load_step(c, plan):
    lc, _N, _C, _P = utils()
    L = plan["ledger"]
    max_len = int(L["max_model_len"])
    promise = min(float(L.get("concurrency") or 1), float(L["max_concurrency_at_len"]))
    n = max(1, int(promise + 1e-9))
    # All n requests must be in the engine at once, at full length, for the check to test the promise. vLLM
    # prefills one prompt at a time in chunks of --max-num-batched-tokens while the others decode one token a
    # step: a request whose output is shorter than the steps the other prompts' prefill takes finishes before
    # the last one starts (measured 2026-12-06: 32 output tokens gave 12 of 16, 17 of 49 and 9 of 24 at once).
    # So the output covers twice those steps.
    batched = int(L.get("max_num_batched_tokens") or 8192)
    steps = -(-n * max_len // batched)
    out_len = max(int(c.spec.get("output_len", 32)), 2 * steps + 16)
    prompt_len = max_len - out_len
    with open(os.path.join(c.a.models, c.spec["model"], "config.json")) as fh:
        vocab = lc.vocab_size_of(fh.read())
    base = "http://127.0.0.1:%d" % c.a.port
    model = plan["argv"][plan["argv"].index("--served-model-name") + 1]
    samples, stop = [], threading.Event()

    def scrape():
        try:
            return http(base + "/metrics", timeout=10)[1]
        except (urllib.error.URLError, OSError, ValueError):
            return ""

    def sampler():
        t0 = now()
        while not stop.is_set():
            s = lc.parse_counters(scrape())
            samples.append(
                dict(
                    t=round(now() - t0, 1),
                    running=s.get("num_requests_running"),
                    waiting=s.get("num_requests_waiting"),
                    kv=s.get("kv_cache_usage_perc"),
                    preemptions=s.get("num_preemptions"),
                )
            )
            stop.wait(0.5)

    records = [None] * n

    def one(i):
        body = dict(
            model=model,
            prompt=lc.token_ids(prompt_len, 1000 + i, vocab),
            max_tokens=out_len,
            min_tokens=out_len,
            ignore_eos=True,
            temperature=0.0,
        )
        t0 = now()
        try:
            code, text = http(base + "/v1/completions", body, timeout=float(c.spec.get("load_timeout", 300)))
            r = json.loads(text)
            u = r.get("usage") or {}
            records[i] = dict(
                ok=code == 200,
                s=round(now() - t0, 1),
                prompt_tokens=u.get("prompt_tokens"),
                completion_tokens=u.get("completion_tokens"),
            )
        except Exception as exc:  # each failure is recorded, the load goes on
            body = getattr(exc, "read", lambda: b"")()
            records[i] = dict(ok=False, s=round(now() - t0, 1), error="%s %s" % (exc, body[:300]))

    before = lc.parse_counters(scrape())
    th = threading.Thread(target=sampler, daemon=True)
    th.start()
    t0 = now()
    workers = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(n)]
    for w in workers:
        w.start()
    limit = now() + min(float(c.spec.get("load_timeout", 300)), max(10.0, c.a.deadline - now() - 45))
    for w in workers:
        w.join(max(0.1, limit - now()))
    duration = now() - t0
    stop.set()
    th.join(5)
    after = lc.parse_counters(scrape())
    delta = lc.counter_delta(before, after)
    done = [r for r in records if r]

    def peak(key):
        seen = [s[key] for s in samples if s.get(key) is not None]
        return max(seen) if seen else None

    load = dict(
        requests=n,
        promised_concurrency_at_len=round(promise, 2),
        max_model_len=max_len,
        prompt_len=prompt_len,
        output_len=out_len,
        completed=sum(1 for r in done if r["ok"]),
        failed=sum(1 for r in done if not r["ok"]),
        unfinished=n - len(done),
        full_length=all(r["ok"] and r.get("prompt_tokens", 0) + r.get("completion_tokens", 0) == max_len for r in done)
        and len(done) == n,
        seconds=round(duration, 1),
        prefill_steps=steps,
        preemptions=delta.get("num_preemptions"),
        prompt_tokens=delta.get("prompt_tokens"),
        generation_tokens=delta.get("generation_tokens"),
        peak_running=peak("running"),
        all_at_once=(peak("running") or 0) >= n,
        peak_waiting=peak("waiting"),
        peak_kv_cache_usage=peak("kv"),
        errors=[r["error"] for r in done if not r["ok"]][:3],
        samples=samples[:: max(1, len(samples) // 120)],
    )
    with open(c.path("load.json"), "w") as fh:
        json.dump(dict(load, records=records), fh, indent=1)
    return load


# ---------------------------------------------------------------- the bench: vllm bench serve (issue 43 item 7)
BENCH = dict(input_len=1024, output_len=256, num_prompts=100, num_warmups=0)
BENCH_RUNNER = (
    "import sys\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "p = FlexibleArgumentParser(description='vllm bench serve')\n"
    "add_cli_args(p)\n"
    "main(p.parse_args(sys.argv[1:]))\n"
)


def bench_step(c, served, model_dir):
    b = dict(BENCH)
    if isinstance(c.spec.get("bench"), dict):
        b.update(c.spec["bench"])
    conc = int(b.get("max_concurrency") or c.spec.get("concurrency") or 50)
    args = [
        "--backend", "openai", "--host", "127.0.0.1", "--port", str(c.a.port), "--endpoint", "/v1/completions",
        "--model", served, "--tokenizer", model_dir, "--dataset-name", "random",
        "--random-input-len", str(b["input_len"]), "--random-output-len", str(b["output_len"]),
        "--num-prompts", str(b["num_prompts"]), "--max-concurrency", str(conc), "--ignore-eos",
        "--num-warmups", str(b["num_warmups"]), "--percentile-metrics", "ttft,tpot,itl,e2el",
        "--metric-percentiles", "50,99", "--seed", "43", "--save-result", "--result-dir", c.work,
        "--result-filename", "bench.json", "--disable-tqdm",
    ]  # fmt: skip
    limit = max(20.0, min(float(b.get("timeout", 240)), c.a.deadline - now() - 40))
    res = dict(args=args, concurrency=conc)
    for how, cmd in (
        ("vllm bench serve", list(c.a.engine) + ["bench", "serve"] + args),
        ("vllm.benchmarks.serve", [sys.executable, "-c", BENCH_RUNNER] + args),
    ):
        if os.path.exists(c.path("bench.json")):
            os.remove(c.path("bench.json"))
        t0 = now()
        with open(c.path("bench-%s.log" % how.split()[-1].split(".")[-1]), "w") as fh:
            try:
                rc = subprocess.call(cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=limit - (now() - t0))
            except subprocess.TimeoutExpired:
                rc = "timed out"
        res.update(via=how, rc=rc, seconds=round(now() - t0, 1))
        if os.path.exists(c.path("bench.json")):
            with open(c.path("bench.json")) as fh:
                r = json.load(fh)
            keep = ("completed", "failed", "duration", "request_throughput", "output_throughput",
                    "total_token_throughput", "total_input_tokens", "total_output", "num_prompts", "max_concurrency")  # fmt: skip
            res.update(dict((k, v) for k, v in r.items() if k.startswith(keep) or k.endswith("_ms")))
            return res
        if rc == "timed out":
            break
    res["error"] = "no bench result (rc %s)" % res.get("rc")
    return res


def bench_done(c):
    """A bench that gave no figures fails its case, so a warm machine's next call runs it again (2026-12-07 19:39
    UTC: the hand configuration's bench was cut off at 36 s by the call's deadline and its case said ok)."""
    if (c.result.get("bench") or {}).get("error"):
        raise RuntimeError("the bench gave no figures: %s" % c.result["bench"]["error"])


def raw_engine_argv(c):
    model_dir = os.path.join(c.a.models, c.spec["model"])
    argv = list(c.a.engine) + ["serve", model_dir, "--served-model-name", c.spec["model"]]
    argv += ["--host", "127.0.0.1", "--port", str(c.a.port)] + list(c.spec["argv"]) + ["--load-format", "dummy"]
    if c.spec.get("hybrid"):
        argv += HYBRID_ARGS
    return argv


def run_raw_case(c):
    """Not planned: the case's own argv (the field notes' hand configuration, vLLM's defaults); the collection's
    parser reads what the engine did."""
    t_case = now()
    proc = fh = None
    try:
        _lc, N, _C, _P = utils()
        nvml = N.collect()
        c.result["nvml"] = dict(
            (k, nvml.get(k)) for k in ("nvml_state", "driver_version", "cuda_driver_version", "library_version")
        )
        c.result["nvml"]["gpus"] = [
            dict((k, g.get(k)) for k in ("index", "name", "memory_total", "memory_reserved", "compute_capability"))
            for g in nvml.get("gpus") or []
        ]
        argv = raw_engine_argv(c)
        env = dict(os.environ)
        env.update(FLASHINFER_SWITCHES)
        c.result["engine_argv"] = argv
        c.result["engine_env"] = dict(FLASHINFER_SWITCHES)
        log("%s: %s" % (c.name, " ".join(argv)))
        c.result["stage"] = "start"
        fh = open(c.path("engine.log"), "w")
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        health = c.timed("health", wait_health, c, proc)
        c.result["health"] = health
        metrics = ""
        if health == "healthy":
            try:
                metrics = http("http://127.0.0.1:%d/metrics" % c.a.port)[1]
            except (urllib.error.URLError, OSError) as exc:
                c.result["error"] = "no /metrics: %s" % exc
        fh.flush()
        with open(c.path("metrics.txt"), "w") as mf:
            mf.write(metrics)
        sys.path.insert(0, c_collections_parent())
        from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_confirm_parse as parse

        with open(c.path("engine.log"), errors="replace") as lf:
            facts = parse.parse_journal(lf.read())
        c.result["engine"] = dict(journal=facts, metrics=parse.parse_metrics(metrics) if metrics else None)
        if health != "healthy":
            raise RuntimeError("the engine is not healthy: %s" % health)
        if c.spec.get("bench"):
            c.result["bench"] = c.timed(
                "bench", bench_step, c, c.spec["model"], os.path.join(c.a.models, c.spec["model"])
            )
            bench_done(c)
        c.result["ok"] = True
        c.result["stage"] = "done"
    except Exception as exc:
        c.result["error"] = "%s: %s" % (type(exc).__name__, exc)
        log("%s: FAILED at %s: %s" % (c.name, c.result["stage"], exc))
    finally:
        stage = c.result["stage"]
        if proc is not None:
            c.timed("stop", stop_engine, c, proc, fh)
        c.result["stage"] = stage
        if os.path.exists(c.path("engine.log")):
            trim_log(c.path("engine.log"), os.path.join(c.a.out, c.name + ".log"))
        c.times["case"] = round(now() - t_case, 1)
        c.write()
    return c.result


# ---------------------------------------------------------------- one case
def trim_log(src, dst):
    keep = []
    with open(src, errors="replace") as fh:
        for line in fh:
            if KEEP.search(line) and len(line) < 4000:
                keep.append(line)
    with open(dst, "w") as fh:
        fh.writelines(keep[:400])


def part_table(conf):
    rows = {}
    for p in conf.get("parts") or []:
        rows[p["part"]] = p
    return rows


def run_case(c):
    t_case = now()
    proc = fh = None
    try:
        plan = c.timed("plan", plan_step, c)
        L = plan["ledger"]
        c.result["planned"] = dict(
            argv=plan["argv"],
            warnings=plan.get("warnings_list"),
            max_model_len=L["max_model_len"],
            concurrency=L.get("concurrency"),
            max_concurrency_at_len=L["max_concurrency_at_len"],
            block_size=L["block_size"],
            num_gpu_blocks=L["num_gpu_blocks"],
            gpu_kv_cache_tokens=L["gpu_kv_cache_tokens"],
            kv_pool_bytes=L["kv_pool_bytes"],
            budget_bytes=L["budget_bytes"],
            components=dict((x["name"], x["bytes"]) for x in L["components"]),
            outside_pool=dict((x["name"], x["bytes"]) for x in L.get("outside_pool") or []),
            estimate_band=L.get("estimate_band"),
        )
        proc, fh = c.timed("start", start_engine, c, plan)
        health = c.timed("health", wait_health, c, proc)
        c.result["health"] = health
        metrics = ""
        if health == "healthy":
            try:
                metrics = http("http://127.0.0.1:%d/metrics" % c.a.port)[1]
            except (urllib.error.URLError, OSError) as exc:
                c.result["error"] = "no /metrics: %s" % exc
        fh.flush()
        with open(c.path("metrics.txt"), "w") as mf:
            mf.write(metrics)
        conf = c.timed("confirm", confirm_step, c, plan)
        c.result["confirm"] = dict(
            verdict=conf.get("verdict"),
            measured=conf.get("measured"),
            measured_concurrency_at_len=conf.get("measured_concurrency_at_len"),
            promised_concurrency_at_len=conf.get("promised_concurrency_at_len"),
            parts=part_table(conf),
            delta=conf.get("delta"),
            notes=conf.get("notes"),
            summary=conf.get("summary"),
        )
        if health != "healthy":
            raise RuntimeError("the engine is not healthy: %s" % health)
        if c.spec.get("load", True):
            c.result["load"] = c.timed("load", load_step, c, plan)
        if c.spec.get("bench"):
            served = plan["argv"][plan["argv"].index("--served-model-name") + 1]
            c.result["bench"] = c.timed("bench", bench_step, c, served, os.path.join(c.a.models, c.spec["model"]))
            bench_done(c)
        c.result["ok"] = True
        c.result["stage"] = "done"
    except Exception as exc:
        c.result["error"] = "%s: %s" % (type(exc).__name__, exc)
        log("%s: FAILED at %s: %s" % (c.name, c.result["stage"], exc))
    finally:
        stage = c.result["stage"]
        if proc is not None:
            c.timed("stop", stop_engine, c, proc, fh)
        c.result["stage"] = stage
        if os.path.exists(c.path("engine.log")):
            trim_log(c.path("engine.log"), os.path.join(c.a.out, c.name + ".log"))
        c.times["case"] = round(now() - t_case, 1)
        c.write()
    return c.result


def gib(b):
    return "-" if b is None else "%.2f" % (b / float(1 << 30))


def summarize(work, out):
    """The table device.sh prints last: per case, planned vs engine part by part, the load, the seconds."""
    rows, lines = [], []
    for name in sorted(os.listdir(work)):
        path = os.path.join(work, name, "result.json")
        if not os.path.isfile(path):
            continue
        with open(path) as fh:
            r = json.load(fh)
        rows.append(r)
        p, conf, load = r.get("planned") or {}, r.get("confirm") or {}, r.get("load") or {}
        m = conf.get("measured") or {}
        lines.append(
            "== %s: %s (stage %s) %s" % (name, "ok" if r.get("ok") else "FAILED", r.get("stage"), r.get("error") or "")
        )
        lines.append("   times: %s" % " ".join("%s %.0fs" % kv for kv in sorted((r.get("times") or {}).items())))
        if p:
            lines.append("   plan: %s" % " ".join(p.get("argv", [])[1:]))
        for part, q in sorted((conf.get("parts") or {}).items()):
            lines.append(
                "   %-16s planned %8s GiB  engine %8s GiB  %s %%"
                % (part, gib(q.get("planned_bytes")), gib(q.get("measured_bytes")), q.get("error_percent"))
            )
        if conf:
            lines.append(
                "   KV tokens planned %s engine %s; blocks %s/%s (block %s/%s); full-length requests planned %s engine %s;"
                " verdict %s"
                % (
                    p.get("gpu_kv_cache_tokens"),
                    m.get("kv_cache_size_tokens"),
                    p.get("num_gpu_blocks"),
                    m.get("num_gpu_blocks"),
                    p.get("block_size"),
                    m.get("block_size"),
                    p.get("max_concurrency_at_len"),
                    conf.get("measured_concurrency_at_len"),
                    conf.get("verdict"),
                )
            )
        if load:
            lines.append(
                "   load: %s requests x %s tokens (full length %s): %s done, %s failed, %s unfinished in %ss;"
                " preemptions %s; peak running %s (all at once: %s), KV use %s"
                % (
                    load.get("requests"),
                    load.get("max_model_len"),
                    load.get("full_length"),
                    load.get("completed"),
                    load.get("failed"),
                    load.get("unfinished"),
                    load.get("seconds"),
                    load.get("preemptions"),
                    load.get("peak_running"),
                    load.get("all_at_once"),
                    load.get("peak_kv_cache_usage"),
                )
            )
        eng = (r.get("engine") or {}).get("journal") or {}
        if eng:
            lines.append("   engine (parsed): %s" % json.dumps(eng, sort_keys=True, default=str)[:1500])
        bench = r.get("bench") or {}
        if bench:
            lines.append(
                "   bench (%s, rc %s, %ss): %s/%s done; %s req/s, %s out tok/s; TTFT p50 %s p99 %s ms; TPOT p50 %s p99 %s ms %s"
                % tuple(
                    bench.get(k)
                    for k in (
                        "via",
                        "rc",
                        "seconds",
                        "completed",
                        "num_prompts",
                        "request_throughput",
                        "output_throughput",
                        "median_ttft_ms",
                        "p99_ttft_ms",
                        "median_tpot_ms",
                        "p99_tpot_ms",
                        "error",
                    )
                )  # fmt: skip
            )
    with open(os.path.join(out, "summary.json"), "w") as fh:
        json.dump(rows, fh, indent=1, sort_keys=True, default=str)
    print("\n".join(lines))


def main(argv=None):
    ap = argparse.ArgumentParser(description="one GPU harness case")
    ap.add_argument("cases", nargs="*")
    ap.add_argument("--cases-file", default=os.path.join(HERE, "cases.json"))
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--collections", required=True, help="the folder holding ansible_collections/airgap/vllm")
    ap.add_argument("--via", choices=("ansible", "python"), default="ansible")
    ap.add_argument(
        "--engine", default="", help="the engine's command before `serve` (default: this python -m vllm...)"
    )
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--deadline", type=float, default=now() + 560, help="epoch seconds: no case starts past it")
    ap.add_argument("--min-seconds", type=float, default=0, help="skip a case with less time than this left")
    ap.add_argument("--summary", action="store_true", help="print the table of every case under --work, run none")
    a = ap.parse_args(argv)
    if a.summary:
        summarize(a.work, a.out)
        return 0
    _ARGS["collections"] = a.collections
    a.engine = shlex.split(a.engine) if a.engine else [sys.executable, "-m", "vllm.entrypoints.cli.main"]
    with open(a.cases_file) as fh:
        specs = json.load(fh)
    os.makedirs(a.out, exist_ok=True)
    results = []
    for name in a.cases:
        done = os.path.join(a.work, name, "result.json")
        if os.path.exists(done):  # a warm machine's earlier call ran it: not again (its result stays in WORK)
            with open(done) as fh:
                if json.load(fh).get("ok"):
                    log("%s: done by an earlier call on this machine, not run again" % name)
                    continue
        left = a.deadline - now()
        need = float(specs[name].get("expected_seconds", 0)) * 1.15 or float(specs[name].get("health_timeout", 300))
        if left < max(need, a.min_seconds):
            log("%s: skipped, %.0f s left of the call (needs about %.0f)" % (name, left, need))
            results.append(dict(case=name, ok=False, stage="skipped", error="not enough time left"))
            continue
        case = Case(name, specs[name], a)
        results.append(run_raw_case(case) if "argv" in specs[name] else run_case(case))
    return 0 if all(r.get("ok") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
