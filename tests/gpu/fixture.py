"""Turn one GPU harness case into a replay fixture: tests/fixtures/logs/<name>.log and <name>.json.

The .log keeps the lines of the engine's log that the collection's parser reads (_plan_confirm_parse: the start
banner, the weights line, the pool, the KV tokens, the maximum concurrency, the one-line memory summary, the
startup) and the lines that explain them (the attention block size a hybrid model gets), as the engine printed
them. The .json holds what CI needs to replay the device's confirm without a GPU: the plan (ledger, argv,
inputs with the model directory under tests/fixtures/models), the /metrics line the confirm read
(vllm:cache_config_info), what the parser and the confirm said on the card, the load's result and where it
all came from. tests/unit/plugins/module_utils/test__plan_confirm_replay.py replays every such pair.

Usage: python3 fixture.py WORK/CASE NAME [--model-fixture DIR_NAME] [--dest tests/fixtures/logs]
"""

import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
PARSED = re.compile(
    r"vLLM server version \S+, serving model|Model loading took|Available KV cache memory|GPU KV cache size"
    r"|Maximum concurrency for|Free memory on device|Application startup complete|Setting attention block size"
    r"|To serve at least one request|No available memory for the cache blocks|non-default args"
    r"|exceeds available Mamba cache blocks"  # 0.26.0 compilation.py:1491: vLLM's defaults on the 27B (2026-12-07)
    r"|\u2588(?:\x1b\[[0-9;]*m)?\s+version\s"  # the start banner's version line (_plan_confirm_parse.RE_START)
)


def trim(text):
    return "".join(line for line in text.splitlines(True) if PARSED.search(line))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case_dir")
    ap.add_argument("name")
    ap.add_argument("--model-fixture", required=True, help="the model's directory under tests/fixtures/models")
    ap.add_argument("--dest", default=os.path.join(ROOT, "tests", "fixtures", "logs"))
    ap.add_argument("--source", default="", help="where and when it was measured (card, tool, collection commit)")
    ap.add_argument("--planner-inputs", default="", help="unplanned case: vllm_launch_plan arguments, JSON")
    a = ap.parse_args(argv)

    def load(name):
        with open(os.path.join(a.case_dir, name)) as fh:
            return json.load(fh)

    result = load("result.json")
    if "argv" in (result.get("spec") or {}):  # an unplanned case (issue 43 item 7): the log, what it read, the bench
        return unplanned(a, result)
    plan, confirm = load("plan.json"), load("confirm.json")
    with open(os.path.join(a.case_dir, "engine.log"), errors="replace") as fh:
        log = trim(fh.read())
    with open(os.path.join(a.case_dir, "metrics.txt")) as fh:
        metrics = "".join(line for line in fh.read().splitlines(True) if line.startswith("vllm:cache_config_info"))
    inputs = dict(plan.get("inputs") or {})
    inputs["model_dir"] = "tests/fixtures/models/" + a.model_fixture  # relative to the repository's root
    inputs.pop("model_path", None)
    sidecar = dict(
        source=a.source,
        case=result.get("case"),
        card=((result.get("nvml") or {}).get("gpus") or [{}])[0],
        engine_argv=result.get("engine_argv"),
        plan=dict(ledger=plan["ledger"], argv=plan["argv"], inputs=inputs),
        metrics_text=metrics,
        on_the_card=dict(
            verdict=confirm.get("verdict"),
            measured=confirm.get("measured"),
            measured_concurrency_at_len=confirm.get("measured_concurrency_at_len"),
            promised_concurrency_at_len=confirm.get("promised_concurrency_at_len"),
            parts=confirm.get("parts"),
        ),
        load=dict((k, v) for k, v in (result.get("load") or {}).items() if k != "samples"),
        times=result.get("times"),
    )
    if result.get("bench"):  # issue 43 item 7: the planner's row of the comparison
        sidecar["bench"] = dict((k, v) for k, v in result["bench"].items() if k != "args")
    return write(a, log, sidecar)


def unplanned(a, result):
    """An unplanned start (the field notes' hand configuration, vLLM's defaults): the trimmed log, the /metrics line,
    what the parser read on the card, the bench; `planner_inputs` (--planner-inputs JSON, model_dir relative to the
    repository) are the vllm_launch_plan arguments that give the same pool-sizing flags, for the replay to hold the
    calibrated planner against this engine too."""
    with open(os.path.join(a.case_dir, "engine.log"), errors="replace") as fh:
        log = trim(fh.read())
    with open(os.path.join(a.case_dir, "metrics.txt")) as fh:
        metrics = "".join(line for line in fh.read().splitlines(True) if line.startswith("vllm:cache_config_info"))
    inputs = json.loads(a.planner_inputs) if a.planner_inputs else None
    if inputs:
        inputs["model_dir"] = "tests/fixtures/models/" + a.model_fixture
        inputs["nvml_gpus"] = [dict(((result.get("nvml") or {}).get("gpus") or [{}])[0])]
    sidecar = dict(
        source=a.source,
        case=result.get("case"),
        unplanned=True,
        card=((result.get("nvml") or {}).get("gpus") or [{}])[0],
        engine_argv=result.get("engine_argv"),
        planner_inputs=inputs,
        metrics_text=metrics,
        on_the_card=(result.get("engine") or {}).get("journal"),
        bench=dict((k, v) for k, v in (result.get("bench") or {}).items() if k != "args"),
        times=result.get("times"),
    )
    return write(a, log, sidecar)


def write(a, log, sidecar):
    os.makedirs(a.dest, exist_ok=True)
    with open(os.path.join(a.dest, a.name + ".log"), "w") as fh:
        fh.write(log)
    with open(os.path.join(a.dest, a.name + ".json"), "w") as fh:
        json.dump(sidecar, fh, indent=1, sort_keys=True)
        fh.write("\n")
    print(os.path.join(a.dest, a.name + ".log"), "%d lines" % log.count("\n"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
