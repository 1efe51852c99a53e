"""Bench 6 - time per launch plan (plan() runs on every host of a fleet, through vllm_launch_plan).

Field case: tests/fixtures/models/qwen3.x-27b-fp8 on a 48 GB SM 8.9 card, fp8 KV, MTP 3, 4 x 200K,
prefix caching (docs/launch-planning.md). Measured: plan() with the model directory (reads config.json
and the safetensors index each time, as the module does) and with the config already parsed.
Yardstick in the same run: `python3 -c pass`, the interpreter start every module run pays anyway;
the plan should cost less than that.
"""

import json
import os
import sys

import benchlib as B

B.import_collection()
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_common as CM  # noqa: E402
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_model as MD  # noqa: E402
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _planner as P  # noqa: E402

NAME = "planner"
FIXTURE = os.path.join(B.ROOT, "tests", "fixtures", "models", "qwen3.x-27b-fp8")
FIELD = dict(
    model_dir=FIXTURE,
    gpu_total_bytes=49140 * CM.MIB,
    compute_capability="8.9",
    gpu_memory_utilization=0.93,
    num_speculative_tokens=3,
    concurrency=4,
    context=204800,
    prefix_caching=True,
    kv_cache_dtype="fp8_e4m3",
    reasoning_parser="qwen3",
    tool_call_parser="qwen3_coder",
)


def per_call(fn, n):
    """Median over 5 batches of n calls, seconds per call."""
    batches = []
    for _batch in range(5):
        secs = B.timed(lambda: [fn() for _call in range(n)])[0]
        batches.append(secs / n)
    return B.median(batches)


def main():
    n = 5 if B.small() else 100
    first = P.plan(dict(FIELD))
    led = first["ledger"]
    config, weight_bytes, source = MD.read_model_dir(FIXTURE)
    t_dir = per_call(lambda: P.plan(dict(FIELD)), n)
    t_cfg = per_call(
        lambda: P.plan(
            dict(FIELD), config=json.loads(json.dumps(config)), weight_bytes=weight_bytes, weight_source=source
        ),
        n,
    )
    t_py = B.median(
        B.timed(lambda: B.run_quiet([sys.executable, "-c", "pass"]))[0] for _rep in range(5 if B.small() else 15)
    )
    print(
        "  field case: max_model_len %s, %s blocks of %s; plan %.2f ms (model dir), %.2f ms (config given), "
        "%.0f plans/s; python3 start %.1f ms"
        % (
            led.get("max_model_len"),
            led.get("num_gpu_blocks"),
            led.get("block_size"),
            t_dir * 1000,
            t_cfg * 1000,
            1 / t_dir,
            t_py * 1000,
        )
    )
    B.result(
        NAME,
        "plan_ms",
        t_dir * 1000,
        "plan() of the field case, model dir read each time (median of %d x 5)" % n,
        unit="ms",
        target="<= 10",
        detail="%.0f plans/s; %.2f ms with the config given" % (1 / t_dir, t_cfg * 1000),
    )
    B.result(
        NAME,
        "plan_vs_python_start",
        B.ratio(t_dir, t_py),
        "plan() time / python3 interpreter start (the floor of any module run)",
        target="<= 1",
    )


if __name__ == "__main__":
    sys.exit(main())
