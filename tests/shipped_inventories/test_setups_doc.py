"""docs/setups.md is what the real planner makes of the shipped inventories today (no docker needed)."""
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RENDER = os.path.join(os.path.dirname(__file__), "render_setups.py")


def test_setups_doc_is_current():
    r = subprocess.run([sys.executable, RENDER, "--check"], cwd=ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert r.returncode == 0, r.stdout


def test_setups_doc_states_what_the_field_runbook_measured():
    with open(os.path.join(ROOT, "docs", "setups.md")) as f:
        text = f.read()
    kylin, rtx = text.split("## `kylin-prod`")[1].split("## `rtx-pro-6000`")
    # Runbook: 200K context, 4 seats, a 315K-token fp8 pool, offload 64 GiB in a 72g /dev/shm, port 9090.
    for want in ("**204,800** tokens", "**4** requests", "315,076 tokens", "--kv-offloading-size 64",
                 "--shm-size 72g", "127.0.0.1:9090:8000", "--tool-call-parser qwen3_coder",
                 "--reasoning-parser qwen3", '{"reasoning_effort":"medium"}', "madvise patch is applied"):
        assert want in kylin, want
    # 50 users with MTP and tool calls; the context is the planner's own choice ("max").
    for want in ("**50** requests", "keeping 50 full-length requests", "--enable-auto-tool-choice",
                 '"num_speculative_tokens":3', "--gpu-memory-utilization 0.95", "--shm-size 4g"):
        assert want in rtx, want
