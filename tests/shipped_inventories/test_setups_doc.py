"""docs/setups.md is what the real planner makes of the shipped inventories today (no docker needed)."""

import json
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RENDER = os.path.join(os.path.dirname(__file__), "render_setups.py")


def test_setups_doc_is_current():
    r = subprocess.run(
        [sys.executable, RENDER, "--check"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        universal_newlines=True,
        check=False,
    )
    assert r.returncode == 0, r.stdout


def test_setups_doc_states_what_the_field_runbook_measured():
    with open(os.path.join(ROOT, "docs", "setups.md")) as f:
        text = f.read()
    kylin, rtx = text.split("## `kylin-prod`")[1].split("## `rtx-pro-6000`")
    # Runbook: 200K context, 4 seats, a 315K-token fp8 pool, offload 64 GiB in a 72g /dev/shm, port 9090.
    for want in (
        "**204,800** tokens",
        "**4** requests",
        "315,076 tokens",
        "--kv-offloading-size 64",
        "--shm-size 72g",
        "127.0.0.1:9090:8000",
        "--tool-call-parser qwen3_coder",
        "--reasoning-parser qwen3",
        '{"reasoning_effort":"medium"}',
        "madvise patch is applied",
    ):
        assert want in kylin, want
    # 50 users with MTP and tool calls; the context is the planner's own choice ("max").
    for want in (
        "**50** requests",
        "keeping 50 full-length requests",
        "--enable-auto-tool-choice",
        '"num_speculative_tokens":3',
        "--gpu-memory-utilization 0.95",
        "--shm-size 4g",
    ):
        assert want in rtx, want


def test_the_role_plans_each_setup_as_the_doc_says():
    """playbooks/plan.yml (the vllm_plan role itself, with the inventory) gives the doc's context and pool."""
    sys.path.insert(0, os.path.dirname(__file__))
    import render_setups  # pylint: disable=import-error,import-outside-toplevel

    with open(os.path.join(ROOT, "docs", "setups.md")) as f:
        doc = f.read()
    for setup in render_setups.SETUPS:
        section = doc.split("## `%s`" % setup["inventory"])[1].split("\n## ")[0]
        context = re.search(r"--max-model-len (\d+)", section).group(1)
        tokens = re.search(r"GPU KV cache size \| ([\d,]+) tokens", section).group(1)
        gpu = setup["gpu"]
        r = subprocess.run(
            [
                "ansible-playbook",
                "playbooks/plan.yml",
                "-i",
                "inventories/" + setup["inventory"],
                "-e",
                "plan_hosts=vllm_servers",
                "-e",
                "ansible_connection=local",
                "-e",
                "plan_model_dir=" + render_setups.FIXTURE,
                "-e",
                "plan_gpu_total_mib=%d" % gpu["memory_mib"],
                "-e",
                "plan_compute_capability=" + gpu["compute_capability"],
                "-e",
                json.dumps({"plan_gpu_name": gpu["name"], "plan_kernel": setup["kernel"]}),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            universal_newlines=True,
            check=False,
            timeout=300,
        )
        assert r.returncode == 0, r.stdout[-3000:]
        out = re.sub(r"\s+", " ", r.stdout)
        assert "--max-model-len %s " % context in out, (setup["inventory"], context, out[-3000:])
        assert re.search(r"GPU KV cache size\s+%s\s+tokens" % tokens, out), (setup["inventory"], tokens)


def test_clients_doc_quotes_the_setups_limits():
    with open(os.path.join(ROOT, "docs", "setups.md")) as f:
        setups = f.read()
    with open(os.path.join(ROOT, "docs", "clients.md")) as f:
        clients = f.read()
    sys.path.insert(0, os.path.dirname(__file__))
    import render_setups  # pylint: disable=import-error,import-outside-toplevel

    single = [setup["inventory"] for setup in render_setups.SETUPS]
    for section in setups.split("\n## `")[1:]:
        if section.split("`")[0] not in single:
            continue  # a shared card's services (rag-example): each row of its own in clients.md, asserted below
        context = re.search(r"context \(`--max-model-len`\) \| \*\*([\d,]+)\*\*", section).group(1)
        seqs = re.search(r"concurrency \(`--max-num-seqs`\) \| \*\*(\d+)\*\*", section).group(1)
        port = re.search(r"`http://127\.0\.0\.1:(\d+)/v1`", section).group(1)
        row = [ln for ln in clients.splitlines() if ln.startswith("| `%s`" % section.split("`")[0])]
        assert len(row) == 2, row  # the base URL row and the limits row
        assert "127.0.0.1:%s/v1" % port in row[0], row[0]
        assert context in row[1] and "| %s |" % seqs in row[1], row[1]
    for setup in render_setups.CARD_SETUPS:
        section = setups.split("\n## `%s`" % setup["inventory"])[1].split("\n## ")[0]
        row = [ln for ln in clients.splitlines() if ln.startswith("| `%s`" % setup["inventory"])]
        assert len(row) == 1, row
        pairs = re.findall(r"\| `([^`]+)` \| `http://127\.0\.0\.1:(\d+)/v1`", section)
        assert len(pairs) == len(setup["fixtures"]), pairs
        for model, port in pairs:
            assert "`%s`" % model in row[0] and ":%s" % port in row[0], (model, port, row[0])


def test_nothing_a_run_generates_lands_in_an_inventory_directory(tmp_path):
    """A generated key or a fetched report inside an inventory directory becomes inventory (a key turned into
    a host name) and one on the bundle medium leaves the site with the USB disk: both go to the control node's
    state directory (airgap_vllm_controller_dir, default ~/.airgap-vllm)."""
    import shutil
    import subprocess

    for inventory in ("kylin-prod", "rtx-pro-6000", "rag-example"):
        text = open(os.path.join(ROOT, "inventories", inventory, "group_vars", "vllm_servers.yml")).read()
        assert "inventory_dir ~ '/credentials" not in text
        assert "(inventory_dir | dirname) ~ '/credentials/'" not in text
        assert "(airgap_vllm_controller_dir | default(lookup('ansible.builtin.env', 'HOME') ~ '/.airgap-vllm'))" in text
        assert "~ '/credentials/' ~ (inventory_dir | basename) ~ '/vllm-api-key'" in text
    defaults = open(os.path.join(ROOT, "roles", "vllm_service", "defaults", "main.yml")).read()
    assert (
        'vllm_service_report_fetch_dir: "{{ airgap_vllm_controller_dir | default('
        "lookup('ansible.builtin.env', 'HOME') ~ '/.airgap-vllm') }}/reports\""
    ) in defaults
    # What happens when a key does sit in one: Ansible reads it as a host.
    inv = tmp_path / "inv"
    shutil.copytree(os.path.join(ROOT, "inventories", "kylin-prod"), str(inv))
    (inv / "credentials").mkdir()
    (inv / "credentials" / "vllm-api-key").write_text("Zz9" * 16 + "\n")
    out = subprocess.run(
        ["ansible-inventory", "-i", str(inv), "--list"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        universal_newlines=True,
        check=False,
    ).stdout
    assert "Zz9Zz9" in out
