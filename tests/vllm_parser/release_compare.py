"""What the planner must agree on with a vLLM release, asked of that release's own code: KV sizing and backend
choices (kv_reference.py) and the argv of every generated plan (the role's parse_argv.py). The cases and the
checks have one home here for both callers: tests/vllm_parser/test_planner_vs_vllm.py (the cached
vLLM 0.27.1 venv) and tests/system/test_image_release.py (kv_reference.py run inside each real engine image
of the test world, 0.27.1 and the later release: the planner's "0.27.1 rules" proven for that release too).

Each case plans a model with a measured KV budget (so no estimate is involved) and asks vLLM's
get_kv_cache_configs / get_kv_cache_capacity the same question: block size, num_gpu_blocks, blocks per
max-length request, "GPU KV cache size" tokens, and, where vLLM refuses, its "estimated maximum model
length". The expected numbers hard-coded in tests/unit/plugins/module_utils/test__plan_model.py and
test__plan_memory.py were taken from kv_reference.py's output.
"""

import json
import os
import subprocess

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_common as CM
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_memory as MEM
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_model as MD
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _planner as P

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
KV_REFERENCE = os.path.join(HERE, "kv_reference.py")
# The script the vllm_service role runs in the new image before a restart (issue 30).
PARSE_ARGV = os.path.join(ROOT, "roles", "vllm_service", "files", "parse_argv.py")
ADA_48 = 49140 * CM.MIB
PRO_96 = 97887 * CM.MIB
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "models", "qwen3.x-27b-fp8")
GDN = {"k_heads": 16, "v_heads": 48, "k_dim": 128, "v_dim": 128, "conv_kernel": 4}

GEMMA3 = {
    "architectures": ["Gemma3ForCausalLM"],
    "model_type": "gemma3_text",
    "hidden_size": 5376,
    "intermediate_size": 21504,
    "num_attention_heads": 32,
    "num_key_value_heads": 16,
    "head_dim": 128,
    "num_hidden_layers": 62,
    "sliding_window": 1024,
    "vocab_size": 262208,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
}
DENSE = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "num_hidden_layers": 36,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "torch_dtype": "bfloat16",
}


def fixture_config(bf16=False):
    with open(os.path.join(FIXTURE, "config.json")) as fh:
        cfg = json.load(fh)
    if bf16:
        cfg.pop("quantization_config")
    return cfg


# (id, config, planner params, vLLM case)
CASES = [
    (
        "gemma3-96",
        GEMMA3,
        dict(
            gpu_total_bytes=97887 * CM.MIB, context=131072, kv_cache_dtype="auto", measured_kv_cache_bytes=40 * CM.GIB
        ),
        dict(full=10, sliding=52, window=1024, kv_heads=16, head_dim=128, kv_dtype="bfloat16", in_flight=16384),
    ),
    (
        "gemma3-48",
        GEMMA3,
        dict(
            gpu_total_bytes=49140 * CM.MIB, context=131072, kv_cache_dtype="auto", measured_kv_cache_bytes=12 * CM.GIB
        ),
        dict(full=10, sliding=52, window=1024, kv_heads=16, head_dim=128, kv_dtype="bfloat16", in_flight=4096),
    ),
    (
        "gemma3-fp8-tp2",
        GEMMA3,
        dict(
            gpu_total_bytes=97887 * CM.MIB,
            gpu_count=2,
            context=65536,
            kv_cache_dtype="fp8_e4m3",
            measured_kv_cache_bytes=9 * CM.GIB,
            max_num_batched_tokens=4096,
        ),
        dict(full=10, sliding=52, window=1024, kv_heads=16, head_dim=128, kv_dtype="fp8", tp=2, in_flight=8192),
    ),
    (
        "dense-bf16",
        DENSE,
        dict(gpu_total_bytes=49140 * CM.MIB, context=40960, kv_cache_dtype="auto", measured_kv_cache_bytes=7 * CM.GIB),
        dict(full=36, kv_heads=8, head_dim=128, kv_dtype="bfloat16"),
    ),
    (
        "qwen35-fp8-mtp3-prefix",
        fixture_config(),
        dict(
            gpu_total_bytes=49140 * CM.MIB,
            context=204800,
            kv_cache_dtype="fp8_e4m3",
            num_speculative_tokens=3,
            prefix_caching=True,
            measured_kv_cache_bytes=int(11.1 * CM.GIB),
        ),
        dict(
            full=17, linear=48, kv_heads=4, head_dim=256, kv_dtype="fp8", gdn=GDN, num_spec=3, mamba_cache_mode="align"
        ),
    ),
    (
        "qwen35-bf16-refused",
        fixture_config(),
        dict(
            gpu_total_bytes=49140 * CM.MIB,
            context=204800,
            kv_cache_dtype="bfloat16",
            num_speculative_tokens=3,
            prefix_caching=False,
            measured_kv_cache_bytes=int(11.1 * CM.GIB),
        ),
        dict(full=17, linear=48, kv_heads=4, head_dim=256, kv_dtype="bfloat16", gdn=GDN, num_spec=3),
    ),
    (
        "qwen35-tp2-nomtp",
        fixture_config(),
        dict(
            gpu_total_bytes=97887 * CM.MIB,
            gpu_count=2,
            context=262144,
            kv_cache_dtype="fp8_e4m3",
            measured_kv_cache_bytes=30 * CM.GIB,
        ),
        dict(full=16, linear=48, kv_heads=4, head_dim=256, kv_dtype="fp8", gdn=GDN, tp=2),
    ),
    (
        "hopper-e5m2",
        fixture_config(bf16=True),
        dict(
            gpu_total_bytes=143771 * CM.MIB,
            compute_capability="9.0",
            context=131072,
            kv_cache_dtype="fp8_e5m2",
            num_speculative_tokens=3,
            measured_kv_cache_bytes=20 * CM.GIB,
        ),
        dict(full=17, linear=48, kv_heads=4, head_dim=256, kv_dtype="fp8_e5m2", gdn=GDN, num_spec=3),
    ),
]


def _planner(config, params, release=None):
    base = dict(model_dir="/m", compute_capability="12.0", vllm_version=release)
    base.update(params)
    try:
        return P.plan(base, config=config, weight_bytes=20 * CM.GIB, weight_source="test")["ledger"]
    except CM.InfeasibleError as exc:
        return {"refused": str(exc)}


def kv_cases():
    """The cases kv_reference.py sizes with vLLM's own code (kind "kv")."""
    cases = []
    for cid, _cfg, params, vc in CASES:
        case = dict(vc, id=cid, kind="kv", max_model_len=params["context"], available=params["measured_kv_cache_bytes"])
        cases.append(case)
    return cases


def check_kv(results, release=None):
    """Assert the planner, planning for ``release`` (None: the release its rules were proven on), gives vLLM's
    numbers for every case (results: kv_reference.py's output list, from that release's own code)."""
    got = {r["id"]: r for r in results}
    for cid, cfg, params, _vc in CASES:
        v, L = got[cid], _planner(cfg, params, release)
        if not v["ok"]:
            assert "estimated maximum model length is" in v["error"], v
            est = int(v["error"].split("estimated maximum model length is ")[1].split(".")[0])
            assert "refused" in L, (cid, L)
            assert "Longest length that starts: %d." % est in L["refused"], (cid, L, v["error"])
            continue
        assert "refused" not in L, (cid, L)
        assert L["block_size"] == v["block_size"], cid
        assert L["num_gpu_blocks"] == v["num_blocks"], cid
        assert L["blocks_per_full_request"] == v["blocks_per_request"], cid
        assert L["kv_cache_groups"] == v["num_groups"], cid
        assert L["gpu_kv_cache_tokens"] == v["kv_tokens"], cid


CCS = [(8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (10, 3), (12, 0), (12, 1)]


def backend_cases():
    """Backend order, KV-scheme and layer-type cases for kv_reference.py."""
    ccs = CCS
    cases = [{"id": "%d.%d" % cc, "kind": "backend", "cc": list(cc)} for cc in ccs]
    cases.append(
        {
            "id": "ct",
            "kind": "scheme",
            "quantization_config": {
                "quant_method": "compressed-tensors",
                "format": "float-quantized",
                "config_groups": {
                    "group_0": {
                        "targets": ["Linear"],
                        "weights": {
                            "num_bits": 8,
                            "type": "float",
                            "strategy": "channel",
                            "symmetric": True,
                            "dynamic": False,
                        },
                    }
                },
                "kv_cache_scheme": {
                    "num_bits": 8,
                    "type": "float",
                    "strategy": "tensor",
                    "symmetric": True,
                    "dynamic": False,
                },
            },
        }
    )
    cases.append(
        {
            "id": "mo",
            "kind": "scheme",
            "quantization_config": {
                "quant_method": "modelopt",
                "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"},
            },
        }
    )
    cases.append(
        {
            "id": "g3",
            "kind": "layer_types",
            "config_class": "Gemma3TextConfig",
            "config": {"num_hidden_layers": 62, "sliding_window": 1024},
        }
    )
    cases.append(
        {
            "id": "g2",
            "kind": "layer_types",
            "config_class": "Gemma2Config",
            "config": {"num_hidden_layers": 46, "sliding_window": 4096},
        }
    )
    return cases


def check_backends(results):
    """Assert the planner's backend order, KV-scheme reading and layer types are vLLM's."""
    ccs, cases = CCS, backend_cases()
    got = {r["id"]: r for r in results}
    for cc in ccs:
        prio = got["%d.%d" % cc]["priorities"]
        first = prio[0]
        # bf16 KV: the first priority is valid on every listed capability.
        assert MEM.attention_backend("%d.%d" % cc, "bfloat16", 256) == first, (cc, prio)
    assert (
        MD.describe_model(dict(DENSE, quantization_config=cases[len(ccs)]["quantization_config"]))[
            "kv_cache_scheme_dtype"
        ]
        == got["ct"]["auto_becomes"]
    )
    assert (
        MD.describe_model(dict(DENSE, quantization_config=cases[len(ccs) + 1]["quantization_config"]))[
            "kv_cache_scheme_dtype"
        ]
        == got["mo"]["auto_becomes"]
    )
    g3 = MD.describe_model(GEMMA3)
    assert g3["num_full_layers"] == got["g3"]["layer_types"].count("full_attention")
    g2 = MD.describe_model(
        dict(
            GEMMA3, architectures=["Gemma2ForCausalLM"], model_type="gemma2", num_hidden_layers=46, sliding_window=4096
        )
    )
    assert g2["num_full_layers"] == got["g2"]["layer_types"].count("full_attention")
    with pytest.raises(CM.ModelConfigError):
        MD.describe_model(dict(DENSE, architectures=["Unknown"]))


def generated_plans():
    base = dict(
        model_dir=FIXTURE,
        model_path="/models/qwen3.x-27b-fp8",
        gpu_total_bytes=ADA_48,
        compute_capability="8.9",
        gpu_memory_utilization=0.93,
        concurrency=4,
        num_speculative_tokens=3,
        prefix_caching=True,
        reasoning_parser="qwen3",
        tool_call_parser="qwen3_coder",
        chat_template_kwargs={"reasoning_effort": "medium"},
    )
    variants = {
        "ada48-fp8-200K-offload": dict(
            base,
            kv_cache_dtype="fp8_e4m3",
            context=204800,
            kv_offloading_gib=64,
            kernel="4.19.90-52.22.v2207.ky10",
            docker_version="20.10.7",
        ),
        "ada48-bf16-max": dict(base, kv_cache_dtype="bfloat16", context="max", concurrency=1),
        "ada48-fp8-keys-pinned": dict(
            base,
            kv_cache_dtype="fp8_e4m3",
            context="128K",
            api_keys_config_path="/etc/vllm/keys.yaml",
            pin_kv_cache_memory=True,
            host="127.0.0.1",
            port=9090,
            measured_kv_cache_bytes=12 * CM.GIB,
            prefix_caching=False,
            language_model_only=True,
        ),
        "pro96-50-max": dict(
            base,
            gpu_total_bytes=PRO_96,
            compute_capability="12.0",
            gpu_memory_utilization=0.95,
            concurrency=50,
            context="max",
            kv_cache_dtype="fp8_e4m3",
        ),
        "h200-tp2-auto": dict(
            base,
            gpu_total_bytes=143771 * CM.MIB,
            gpu_count=2,
            compute_capability="9.0",
            kv_cache_dtype="auto",
            context="max",
            num_speculative_tokens=0,
            max_num_batched_tokens=4096,
            enforce_eager=True,
            tool_call_parser=None,
            reasoning_parser=None,
            max_image_pixels=4194304,
        ),
        "b200-fp8-unset-prefix": dict(
            base,
            gpu_total_bytes=183359 * CM.MIB,
            compute_capability="10.0",
            kv_cache_dtype="fp8_e4m3",
            context="128K",
            prefix_caching=None,
        ),
        "pro96-no-prefix-pinned": dict(
            base,
            gpu_total_bytes=PRO_96,
            compute_capability="12.0",
            kv_cache_dtype="fp8_e4m3",
            context="max",
            concurrency=50,
            prefix_caching=False,
            pin_kv_cache_memory=True,
            measured_kv_cache_bytes=50 * CM.GIB,
        ),
    }
    # The operator's extras, merged after the plan (vllm_plan_extra_args): one new option with a value, one that
    # replaces the planned --max-num-seqs (vllm_plan_override_flags), on two selected GPUs (tensor parallel 2).
    variants["ada48x2-extras-override"] = dict(
        base,
        kv_cache_dtype="fp8_e4m3",
        context="max",
        gpus=["0", "1"],
        extra_args=["--seed", "7", "--max-log-len", "100", "--max-num-seqs", "8"],
        override_flags=["--max-num-seqs"],
        extra_docker_options=["--ulimit", "memlock=-1"],
    )
    plans = {k: P.plan(v) for k, v in variants.items()}
    plans.update(pooling_plans())
    return plans


MODELS = os.path.join(ROOT, "tests", "fixtures", "models")


def pooling_plans():
    """Pooling models (issue 44) planned from their own files: an encoder embedder and cross-encoder (--convert
    none), a decoder adapted to embeddings (--convert embed) and the original Qwen3 reranker (--convert classify
    with --hf-overrides), each on a share of a 48 GB card."""
    base = dict(gpu_total_bytes=ADA_48, compute_capability="8.9", concurrency=16, gpu_memory_utilization=0.08)
    variants = {
        "pool-bge-m3": dict(base, model_dir=os.path.join(MODELS, "bge-m3"), model_path="/models/bge-m3"),
        "pool-bge-reranker": dict(base, model_dir=os.path.join(MODELS, "bge-reranker-v2-m3"), context=4096),
        "pool-qwen3-embedding": dict(base, model_dir=os.path.join(MODELS, "qwen3-embedding-0.6b"), context=8192),
        "pool-qwen3-reranker": dict(
            base, model_dir=os.path.join(MODELS, "qwen3-reranker-0.6b"), context=8192, pooling_task="classify"
        ),
    }
    return {k: P.plan(v) for k, v in variants.items()}


def argv_cases(plans, keys_path):
    """parse_argv.py's cases: each generated plan's argv (the keys file at keys_path, which must hold
    KEYS_YAML), and two the parser must refuse, or the check proves nothing."""
    cases = []
    for name, result in plans.items():
        argv = [keys_path if a == "/etc/vllm/keys.yaml" else a for a in result["argv"]]
        cases.append({"id": name, "argv": argv})
    cases.append({"id": "control-swap-space", "argv": ["/m", "--swap-space", "4"]})
    cases.append({"id": "control-bad-parser", "argv": ["/m", "--reasoning-parser", "qwen9"]})
    # --convert takes vLLM's ConvertOption only (config/model.py:86): "score" is not one, so the pooling checks bite.
    cases.append({"id": "control-bad-convert", "argv": ["/m", "--runner", "pooling", "--convert", "score"]})
    return cases


KEYS_YAML = "api-key:\n  - sk-one\n  - sk-two\n"


def check_parsed(got, plans):
    """Assert the release's parser accepted every generated argv and read it as planned (got: id -> result)."""
    for name, result in plans.items():
        assert got[name]["ok"], "%s rejected: %s" % (name, got[name]["error"])
        args = got[name]["args"]
        assert args["max_model_len"] == result["ledger"]["max_model_len"]
        assert args["max_num_seqs"] == int(result["argv"][result["argv"].index("--max-num-seqs") + 1])
        pooling = result["ledger"].get("pooling")
        if pooling:
            assert (args["runner"], args["convert"]) == ("pooling", pooling["convert"]), name
            assert args["max_num_batched_tokens"] == result["ledger"]["max_num_batched_tokens"], name
            assert args["gpu_memory_utilization"] == result["ledger"]["gpu_memory_utilization"], name
            continue
        assert (
            args["kv_cache_dtype"] == result["ledger"]["kv_dtype"]
            or result["argv"][result["argv"].index("--kv-cache-dtype") + 1] == "auto"
        )
    assert got["ada48-fp8-keys-pinned"]["args"]["api_key"] == ["sk-one", "sk-two"]
    assert (
        got["ada48-fp8-keys-pinned"]["args"]["kv_cache_memory_bytes"]
        == plans["ada48-fp8-keys-pinned"]["ledger"]["kv_pool_bytes"]
    )
    assert got["ada48-fp8-200K-offload"]["args"]["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 3}
    assert got["ada48-fp8-200K-offload"]["args"]["kv_offloading_size"] == 64
    h200 = got["h200-tp2-auto"]["args"]
    assert h200["enforce_eager"] is True
    mmk = h200["mm_processor_kwargs"]
    assert (json.loads(mmk) if isinstance(mmk, str) else mmk) == {"max_pixels": 4194304}
    assert got["b200-fp8-unset-prefix"]["args"]["enable_prefix_caching"] is None
    assert got["pro96-no-prefix-pinned"]["args"]["enable_prefix_caching"] is False
    assert got["b200-fp8-unset-prefix"]["args"]["attention_config"] is not None
    extras = got["ada48x2-extras-override"]["args"]
    assert (extras["seed"], extras["max_log_len"], extras["max_num_seqs"]) == (7, 100, 8)
    assert extras["tensor_parallel_size"] == 2
    overrides = got["pool-qwen3-reranker"]["args"]["hf_overrides"]
    assert (json.loads(overrides) if isinstance(overrides, str) else overrides) == plans["pool-qwen3-reranker"][
        "ledger"
    ]["pooling"]["hf_overrides"]
    assert got["pool-bge-m3"]["args"]["max_model_len"] == 8192
    assert not got["control-bad-convert"]["ok"] and "convert" in got["control-bad-convert"]["error"]
    assert not got["control-swap-space"]["ok"]
    assert "swap-space" in got["control-swap-space"]["error"]
    assert not got["control-bad-parser"]["ok"]


def run_script(python_argv, script, cases, out_dir):
    """The results of one of these scripts (kv_reference.py, parse_argv.py: cases on stdin, a JSON list written
    to the file named by their argument) as id -> result; python_argv runs it (a venv's python, or `docker run
    ... python3` with this repository mounted at the same path) and it writes out_dir/out.json."""
    out = os.path.join(str(out_dir), "out.json")
    proc = subprocess.run(
        list(python_argv) + [script, out],
        input=json.dumps(cases),
        universal_newlines=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=900,
        check=False,
    )
    name = os.path.basename(script)
    assert proc.returncode == 0, "%s failed (rc %d): %s" % (name, proc.returncode, proc.stderr[-3000:])
    with open(out) as fh:
        return json.load(fh)


def run_reference(python_argv, cases, out_dir):
    """kv_reference.py's results for cases: python_argv runs it (a venv's python, or `docker run ... python3`
    with this directory at the same path) and writes out_dir/kv.json."""
    return run_script(python_argv, KV_REFERENCE, cases, out_dir)
