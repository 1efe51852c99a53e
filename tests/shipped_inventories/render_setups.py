"""docs/setups.md: what each shipped inventory yields, computed by the real planner.

    python3 tests/shipped_inventories/render_setups.py           # rewrite docs/setups.md
    python3 tests/shipped_inventories/render_setups.py --check   # exit 1 when docs/setups.md is stale

For each shipped inventory it reads the host's variables as Ansible does (InventoryManager +
VariableManager: group_vars, inventory_dir), adds the vllm_plan role's defaults beneath them, templates
the module arguments of roles/vllm_plan/tasks/configure.yml (the role's own wiring, not a copy of it) with
the card the setup is for, and runs the airgap.vllm.vllm_launch_plan module on them (its main(), as a
subprocess) against the Qwen3.x-27B-FP8 config.json of tests/fixtures. The docker options are passed
through the service role's guard (vllm_service_seccomp). Nothing in the document is typed by hand.
Run from the repository root after `bash tests/link-collection.sh`.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import subprocess
import sys
import tempfile

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COLLECTIONS = os.path.join(ROOT, "build", "collections")
sys.path.insert(0, COLLECTIONS)

# pylint: disable=wrong-import-position
from ansible.inventory.manager import InventoryManager  # noqa: E402
from ansible.parsing.dataloader import DataLoader  # noqa: E402
from ansible.template import Templar  # noqa: E402
from ansible.vars.manager import VariableManager  # noqa: E402

from ansible_collections.airgap.vllm.plugins.module_utils.service import _service_guard  # noqa: E402
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_share import card_services  # noqa: E402
from ansible_collections.airgap.vllm.plugins.module_utils.service._services import instances  # noqa: E402
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_common import GIB, MIB  # noqa: E402

DOC = os.path.join(ROOT, "docs", "setups.md")
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "models", "qwen3.x-27b-fp8")
KYLIN_KERNEL = "4.19.90-52.22.v2207.ky10.x86_64"
# Docker decides --gpus (>= 19.03) against --runtime nvidia; the collection's examples use 20.10.7.
DOCKER = "20.10.7"

# The card and host each setup is for: what NVML and the facts report on it (nvml_info's fields).
SETUPS = [
    {
        "inventory": "kylin-prod",
        "title": "Kylin V10 SP3 + NVIDIA RTX 6000 Ada 48 GB (the field runbook)",
        "gpu": {"name": "NVIDIA RTX 6000 Ada Generation", "memory_mib": 49140, "compute_capability": "8.9"},
        "kernel": KYLIN_KERNEL,
        "docker": DOCKER,
        "host_ram_gib": 737,
    },
    {
        "inventory": "rtx-pro-6000",
        "title": "NVIDIA RTX PRO 6000 Blackwell 96 GB: 50 users, tool calls, MTP, longest context",
        "gpu": {
            "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
            "memory_mib": 97887,
            "compute_capability": "12.0",
        },
        "kernel": KYLIN_KERNEL,
        "docker": DOCKER,
        "host_ram_gib": 256,
    },
]
# Inventories whose services share one card (airgap_vllm_services on the same GPUs, docs/rag.md): each service
# planned at its share by the module (card_services), from the fixture standing for its model.
MODELS = os.path.join(ROOT, "tests", "fixtures", "models")
CARD_SETUPS = [
    {
        "inventory": "rag-example",
        "title": "The RAG set on one RTX 6000 Ada 48 GB: chat model, embedder and reranker sharing GPU 0",
        "gpu": {"name": "NVIDIA RTX 6000 Ada Generation", "memory_mib": 49140, "compute_capability": "8.9"},
        "kernel": KYLIN_KERNEL,
        "docker": DOCKER,
        "host_ram_gib": 256,
        "fixtures": {
            "chat": FIXTURE,
            "embed": os.path.join(MODELS, "bge-m3"),
            "rerank": os.path.join(MODELS, "bge-reranker-v2-m3"),
        },
    },
]
OMIT = "__omit_place_holder__render_setups"
COMMAND = "bash tests/link-collection.sh && python3 tests/shipped_inventories/render_setups.py"


def _yaml(path):
    with open(path) as f:
        return yaml.safe_load(f) or {}


def _plan_task():
    """The vllm_launch_plan task of roles/vllm_plan/tasks/configure.yml: (module args, task vars)."""
    for task in _yaml(os.path.join(ROOT, "roles", "vllm_plan", "tasks", "configure.yml")):
        if "airgap.vllm.vllm_launch_plan" in task:
            return task["airgap.vllm.vllm_launch_plan"], task.get("vars") or {}
    raise SystemExit("roles/vllm_plan/tasks/configure.yml has no airgap.vllm.vllm_launch_plan task")


def host_variables(inventory):
    """The first host's variables as the roles see them: role defaults beneath the inventory's."""
    loader = DataLoader()
    inv = InventoryManager(loader=loader, sources=[os.path.join(ROOT, "inventories", inventory)])
    host = inv.get_hosts()[0]
    variables = {}
    for role in ("vllm_model", "vllm_plan", "vllm_service"):
        variables.update(_yaml(os.path.join(ROOT, "roles", role, "defaults", "main.yml")))
    variables.update(VariableManager(loader=loader, inventory=inv).get_vars(host=host))
    return loader, host, variables


def module_args(setup, service=None):
    """The module's arguments for the setup's one service, or for ``service`` of its airgap_vllm_services (its
    settings over the host's, its card's services from the same GPUs: the role's instances and vllm_plan_card)."""
    loader, host, variables = host_variables(setup["inventory"])
    args, task_vars = _plan_task()
    gpu = dict(setup["gpu"], index=0, memory_total=setup["gpu"]["memory_mib"] * MIB)
    variables.update(task_vars)
    variables.update(
        {
            "omit": OMIT,
            "ansible_facts": {"kernel": setup["kernel"], "memtotal_mb": setup["host_ram_gib"] * 1024},
            # What the role's preflight tasks register on such a host.
            "__vllm_plan_gpu": {"nvml_state": "ok", "gpus": [gpu]},
            "__vllm_plan_docker": {"stdout": setup["docker"]},
            "vllm_plan_gpu_facts": [gpu],
            "vllm_plan_docker_version": setup["docker"],
            "__vllm_plan_model_config": {"stat": {"exists": True}},
            # site.yml wires the imported model's directory in (vllm_model's fact).
            "vllm_plan_model_dir": "%s/%s" % (variables["vllm_model_models_dir"], variables["vllm_model_name"]),
        }
    )
    templar = Templar(loader=loader, variables=variables)
    # The role's loop items (filter service_vars: _services.instances), from the plan variables as templated here.
    own = dict((k, templar.template(v)) for k, v in variables.items() if k.startswith("vllm_plan_"))
    own["vllm_service_name"] = templar.template(variables.get("vllm_service_name") or "vllm")
    items = instances(templar.template(variables.get("airgap_vllm_services") or []), own)
    name = service or items[0]["name"]
    item = [i for i in items if i["name"] == name][0]
    # The service's settings (the role's alias __vllm_plan_settings, built from the loop item in the role).
    variables["__vllm_plan_settings"] = dict((k, v) for k, v in item["vars"].items() if k.startswith("vllm_plan_"))
    variables["vllm_plan_service_name"] = name
    templar = Templar(loader=loader, variables=variables)
    out = {}
    for key, value in args.items():
        if key == "card_services":
            # The role's filter (airgap.vllm.vllm_plan_card), called as the role calls it.
            value = card_services(items, name)
        else:
            value = templar.template(value)
        if value != OMIT:
            out[key] = value
    # The module reads config.json from model_dir; vLLM is given the path on the host.
    fixtures = setup.get("fixtures") or {}
    out["model_path"] = out["model_dir"]
    out["model_dir"] = fixtures.get(name, FIXTURE)
    for mate in out.get("card_services") or []:
        mate["options"]["model_dir"] = fixtures[mate["name"]]
    return host.name, dict(variables, vllm_service_name=name), templar, out


def run_module(args):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"ANSIBLE_MODULE_ARGS": args}, f)
    try:
        env = dict(os.environ, PYTHONPATH=COLLECTIONS)
        proc = subprocess.run(
            [sys.executable, "-m", "ansible_collections.airgap.vllm.plugins.modules.vllm_launch_plan", f.name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=ROOT,
            universal_newlines=True,
            check=False,
        )
    finally:
        os.unlink(f.name)
    try:
        result = json.loads(proc.stdout)
    except ValueError:
        raise SystemExit("vllm_launch_plan gave no JSON (rc %d):\n%s%s" % (proc.returncode, proc.stdout, proc.stderr))
    if result.get("failed"):
        raise SystemExit("vllm_launch_plan failed: %s" % result.get("msg"))
    return result


def gib(n):
    return "%.2f GiB" % (n / float(GIB))


def quote(word):
    word = str(word)
    return word if word and all(c.isalnum() or c in "./:=+-_," for c in word) else "'%s'" % word


def render_setup(setup):
    hostname, variables, templar, args = module_args(setup)
    result = run_module(args)
    led = result["ledger"]
    seccomp = templar.template(variables["vllm_service_seccomp"])
    config_dir = templar.template(variables["vllm_service_config_dir"])
    name = templar.template(variables["vllm_service_name"])
    effective = _service_guard.effective_docker_options(
        result["docker_options"], seccomp, "%s/%s/seccomp.json" % (config_dir, name)
    )
    port = templar.template(variables["vllm_service_port"])
    bind = templar.template(variables["vllm_service_host"])
    inv = setup["inventory"]
    lines = [
        "## `%s`: %s" % (inv, setup["title"]),
        "",
        "`ansible-playbook site.yml -i %s` from the bundle root (settings and where each comes from: "
        "[inventories/%s/group_vars/vllm_servers.yml](../inventories/%s/group_vars/vllm_servers.yml)). "
        "Planned for %s (%d MiB, SM %s), kernel %s, Docker %s."
        % (
            inv,
            inv,
            inv,
            setup["gpu"]["name"],
            setup["gpu"]["memory_mib"],
            setup["gpu"]["compute_capability"],
            setup["kernel"],
            setup["docker"],
        ),
        "",
        "| what clients get | |",
        "|---|---|",
        "| endpoint | `http://%s:%s/v1` on the server (loopback), model `%s` |"
        % (bind, port, result["argv"][result["argv"].index("--served-model-name") + 1]),
        "| context (`--max-model-len`) | **%s** tokens (%s) |"
        % ("{:,}".format(led["max_model_len"]), led["max_model_len_how"]),
        "| concurrency (`--max-num-seqs`) | **%d** requests |" % led["concurrency"],
        "| requests of the full context that fit in the GPU KV pool at once | %.2f |" % led["max_concurrency_at_len"],
        "| GPU KV cache size | %s tokens |" % "{:,}".format(led["gpu_kv_cache_tokens"]),
        "| longest single request the pool holds | %s tokens |" % "{:,}".format(led["longest_single_request"]),
        "| KV offload to host RAM | %s |"
        % (
            "%s GiB (native backend)" % args["kv_offloading_gib"]
            if float(args.get("kv_offloading_gib") or 0)
            else "off"
        ),
        "| speculative decoding | %s |"
        % ("MTP, %d tokens" % led["num_speculative_tokens"] if led["num_speculative_tokens"] else "off"),
        "| prefix caching | %s |" % ("on" if led["prefix_caching"] else "off"),
        "| KV pool | %s (%s) |" % (gib(led["kv_pool_bytes"]), led["kv_pool_how"]),
        "",
        "### Memory ledger",
        "",
        "| item | bytes | how |",
        "|---|---:|---|",
        "| budget | %s | %s |" % (gib(led["budget_bytes"]), led["budget_how"]),
    ]
    for c in led["components"]:
        lines.append("| %s | %s | %s |" % (c["name"].replace("_", " "), gib(c["bytes"]), c["how"]))
    lines += [
        "| non-KV total | %s | |" % gib(led["non_kv_bytes"]),
        "| **KV pool** | **%s** | %s |" % (gib(led["kv_pool_bytes"]), led["kv_pool_how"]),
        "| KV offload (host RAM, not GPU) | %s | `--kv-offloading-size` |"
        % (gib(float(args.get("kv_offloading_gib") or 0) * GIB)),
        "",
        "KV layout: %s KV (%s backend, SM %s), %d B per token per layer x %d full-attention layers, "
        "%d Gated-DeltaNet layers of %s B state each; block size %d, page %s B, %d blocks; "
        "a full-length request takes %d blocks."
        % (
            led["kv_dtype"],
            led["attention_backend"],
            led["compute_capability"],
            led["attn_bytes_per_token_per_layer"],
            led["full_attention_layers"],
            led["linear_attention_layers"],
            "{:,}".format(led["gdn_state_bytes_per_layer"]),
            led["block_size"],
            "{:,}".format(led["page_bytes"]),
            led["num_gpu_blocks"],
            led["blocks_per_full_request"],
        ),
    ]
    band = led.get("estimate_band")
    if band:
        lines += [
            "",
            "Estimate band (the largest errors observed, docs/launch-planning.md): KV pool %s to %s, "
            "%d to %d blocks, longest single request at the low end %s tokens. The engine's own "
            "numbers confirm or re-plan it at the first start (`vllm_plan_confirm`)."
            % (
                gib(band["kv_pool_low_bytes"]),
                gib(band["kv_pool_high_bytes"]),
                band["num_gpu_blocks_low"],
                band["num_gpu_blocks_high"],
                "{:,}".format(band["longest_single_request_low"]),
            ),
        ]
    if result.get("warnings_list"):
        lines += ["", "Planner warnings:", ""] + ["- %s" % w for w in result["warnings_list"]]
    lines += [
        "",
        "### vLLM argv",
        "",
        "```sh",
        "vllm serve " + " \\\n    ".join(" ".join(quote(a) for a in f["args"]) for f in result["flags"]),
        "```",
        "",
        "| flag | why |",
        "|---|---|",
    ]
    for f in result["flags"][1:]:
        lines.append("| `%s` | %s |" % (f["args"][0], f["reason"]))
    lines += [
        "",
        "API keys are not in the argv: the service adds `--config %s` (the key file, mounted read-only)."
        % templar.template(variables["vllm_service_api_keys_container_path"]),
        "",
        "### Docker options",
        "",
        "Planned (`docker_options`): `%s`" % " ".join(result["docker_options"]),
        "",
    ]
    for opt, why in sorted(result["docker_option_reasons"].items()):
        lines.append("- `%s`: %s" % (opt, why))
    lines += [
        "",
        "After the service guard (`vllm_service_seccomp: %s`): `%s`; plus `--publish %s:%s:%s`, the "
        "environment file, the model mounted read-only and the key file."
        % (
            seccomp,
            " ".join(effective),
            bind,
            port,
            8000 if "--port" not in result["argv"] else result["argv"][result["argv"].index("--port") + 1],
        ),
        "",
        "Image: %s (the madvise patch %s)."
        % (
            templar.template(variables.get("vllm_image_name", "vllm/vllm-openai:v0.27.1")),
            "is applied: KV offload on a kernel older than 5.14"
            if result["needs_madvise_patch"]
            else "is not needed: no KV offload",
        ),
        "",
        "Container environment: %s." % ", ".join("`%s=%s`" % kv for kv in sorted(result["env"].items())),
    ]
    tail = result["ledger_text"].split("\n")
    start = next((i for i, line in enumerate(tail) if line.startswith("|") or line.startswith("**")), None)
    if start is not None:
        lines += ["", "### Trade-offs (the planner's, at this budget)", ""] + tail[start:]
    return "\n".join(lines), hostname


def render_card_setup(setup):
    """A setup whose services share one card: the split, then each service's plan at its share, in start order."""
    inv = setup["inventory"]
    results, variables = {}, {}
    for name in setup["fixtures"]:
        _host, variables[name], _templar, args = module_args(setup, name)
        results[name] = run_module(args)
    card = next(iter(results.values()))["card"]
    lines = [
        "## `%s`: %s" % (inv, setup["title"]),
        "",
        "`ansible-playbook site.yml -i %s` from the bundle root (settings: "
        "[inventories/%s/group_vars/vllm_servers.yml](../inventories/%s/group_vars/vllm_servers.yml); the split: "
        "[rag.md](rag.md)). Planned for %s (%d MiB, SM %s), kernel %s, Docker %s, with the fixtures' config.json of "
        "each model (%s)."
        % (
            inv,
            inv,
            inv,
            setup["gpu"]["name"],
            setup["gpu"]["memory_mib"],
            setup["gpu"]["compute_capability"],
            setup["kernel"],
            setup["docker"],
            ", ".join(
                "%s: `tests/fixtures/models/%s`" % (n, os.path.basename(path)) for n, path in setup["fixtures"].items()
            ),
        ),
        "",
        "The card's split (every service's plan computes the same one; they start in this order, each once the one "
        "before it answers /health):",
        "",
        "```text",
        card["split_text"],
        "```",
        "",
        "| service | model | endpoint (loopback) | `--gpu-memory-utilization` | context | concurrency | KV pool |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for name in card["order"]:
        r, v = results[name], variables[name]
        led, argv = r["ledger"], r["argv"]
        templar = Templar(loader=DataLoader(), variables=v)
        lines.append(
            "| %s | `%s` | `http://%s:%s/v1` | %s | %s | %d | %s |"
            % (
                name,
                argv[argv.index("--served-model-name") + 1],
                templar.template(v["vllm_service_host"]),
                [s for s in v["airgap_vllm_services"] if s["vllm_service_name"] == name][0]["vllm_service_port"],
                argv[argv.index("--gpu-memory-utilization") + 1],
                "{:,}".format(led["max_model_len"]),
                led["concurrency"],
                gib(led["kv_pool_bytes"]) if led["kv_pool_bytes"] else "none (encoder-only)",
            )
        )
    for name in card["order"]:
        r = results[name]
        ledger = r["ledger_text"].split("\n\n", 1)[1] if r["ledger_text"].startswith("card: ") else r["ledger_text"]
        ledger = ledger.split("\n| ")[0].split("\n**")[0].split("\n## ")[0].rstrip()
        lines += [
            "",
            "### `%s`" % name,
            "",
            "```text",
            ledger,
            "```",
        ]
        if r.get("warnings_list"):
            lines += ["", "Planner warnings:", ""] + ["- %s" % w for w in r["warnings_list"]]
    return "\n".join(lines)


def render():
    sys.path.insert(0, ROOT)
    parts = [
        "# What the shipped setups yield",
        "",
        "<!-- Generated by tests/shipped_inventories/render_setups.py from the shipped inventories and the real",
        "     planner; do not edit by hand. tests/shipped_inventories/test_setups_doc.py fails when it is stale. -->",
        "",
        "Three inventories ship with the collection and are copied to the root of every bundle. Each runs with",
        "nothing to edit but the host names in its `hosts.yml` (`rag-example` also wants its embedding model and",
        "reranker imported: [rag.md](rag.md)):",
        "",
        "```sh",
        "ansible-playbook site.yml -i kylin-prod      # or: -i rtx-pro-6000, -i rag-example",
        "```",
        "",
        "Below is what the planner (`airgap.vllm.vllm_launch_plan`, the vLLM 0.27.1 sizing rules of",
        "[launch-planning.md](launch-planning.md)) makes of each inventory's settings for the card it is meant",
        "for, with the Qwen3.x-27B-FP8 checkpoint's config.json and weight index",
        "(`tests/fixtures/models/qwen3.x-27b-fp8`: 64 layers = 16 full attention + 48 Gated-DeltaNet, one MTP",
        "layer, 30,869,687,520 B of weights). On a server the same plan is made from what NVML reports and then",
        "confirmed by the engine at its first start (the deployment report). Regenerate after changing an",
        "inventory or the planner:",
        "",
        "```sh",
        COMMAND,
        "```",
        "",
        "The vllm_plan role gives the same plan for one setup, through `playbooks/plan.yml` with the setup's",
        "inventory (change the card to see another one; nothing is contacted):",
        "",
        "```sh",
        "ansible-playbook playbooks/plan.yml -i inventories/kylin-prod -e plan_hosts=vllm_servers \\",
        "  -e ansible_connection=local -e plan_model_dir=$PWD/tests/fixtures/models/qwen3.x-27b-fp8 \\",
        "  -e plan_gpu_total_mib=49140 -e plan_compute_capability=8.9 \\",
        "  -e \"plan_gpu_name='NVIDIA RTX 6000 Ada Generation'\" -e plan_kernel=%s" % KYLIN_KERNEL,
        "```",
        "",
        "How clients use the endpoints: [clients.md](clients.md).",
    ]
    for setup in SETUPS:
        text, _host = render_setup(setup)
        parts += ["", text]
    for setup in CARD_SETUPS:
        parts += ["", render_card_setup(setup)]
    return "\n".join(parts) + "\n"


def main(argv):
    text = render()
    if "--check" in argv:
        with open(DOC) as f:
            current = f.read()
        if current != text:
            sys.stderr.write("docs/setups.md is stale: run %s\n" % COMMAND)
            return 1
        return 0
    with open(DOC, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
