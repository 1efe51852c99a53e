"""Every argv the planner generates must be accepted by the real vLLM 0.27.1 parser.

Slow group: builds (once, cached) the CPU venv with tests/vllm_parser/setup-venv.sh.
"""
import json
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
from ansible_collections.airgap.vllm.plugins.module_utils import _planner as P  # noqa: E402

FIXTURE = os.path.join(ROOT, "tests", "fixtures", "models", "qwen3.x-27b-fp8")
# The script the vllm_service role runs in the new image before a restart (issue 30), run here in the venv.
PARSE_ARGV = os.path.join(ROOT, "roles", "vllm_service", "files", "parse_argv.py")
ADA_48 = 49140 * P.MIB
PRO_96 = 97887 * P.MIB


def parse(venv_python, tmp_path, cases):
    out = tmp_path / "parsed.json"
    subprocess.run([venv_python, PARSE_ARGV, str(out)],
                   input=json.dumps(cases), universal_newlines=True, check=True,
                   stdout=subprocess.DEVNULL, timeout=600)
    return {r["id"]: r for r in json.loads(out.read_text())}


def generated_plans():
    base = dict(model_dir=FIXTURE, model_path="/models/qwen3.x-27b-fp8", gpu_total_bytes=ADA_48,
                compute_capability="8.9", gpu_memory_utilization=0.93, concurrency=4,
                num_speculative_tokens=3, prefix_caching=True, reasoning_parser="qwen3",
                tool_call_parser="qwen3_coder", chat_template_kwargs={"reasoning_effort": "medium"})
    variants = {
        "ada48-fp8-200K-offload": dict(base, kv_cache_dtype="fp8_e4m3", context=204800,
                                       kv_offloading_gib=64, kernel="4.19.90-52.22.v2207.ky10",
                                       docker_version="20.10.7"),
        "ada48-bf16-max": dict(base, kv_cache_dtype="bfloat16", context="max", concurrency=1),
        "ada48-fp8-keys-pinned": dict(base, kv_cache_dtype="fp8_e4m3", context="128K",
                                      api_keys_config_path="/etc/vllm/keys.yaml",
                                      pin_kv_cache_memory=True, host="127.0.0.1", port=9090,
                                      measured_kv_cache_bytes=12 * P.GIB,
                                      prefix_caching=False, language_model_only=True),
        "pro96-50-max": dict(base, gpu_total_bytes=PRO_96, compute_capability="12.0",
                             gpu_memory_utilization=0.95, concurrency=50, context="max",
                             kv_cache_dtype="fp8_e4m3"),
        "h200-tp2-auto": dict(base, gpu_total_bytes=143771 * P.MIB, gpu_count=2,
                              compute_capability="9.0", kv_cache_dtype="auto", context="max",
                              num_speculative_tokens=0, max_num_batched_tokens=4096,
                              enforce_eager=True, tool_call_parser=None, reasoning_parser=None,
                              max_image_pixels=4194304),
        "b200-fp8-unset-prefix": dict(base, gpu_total_bytes=183359 * P.MIB,
                                      compute_capability="10.0", kv_cache_dtype="fp8_e4m3",
                                      context="128K", prefix_caching=None),
        "pro96-no-prefix-pinned": dict(base, gpu_total_bytes=PRO_96, compute_capability="12.0",
                                       kv_cache_dtype="fp8_e4m3", context="max", concurrency=50,
                                       prefix_caching=False, pin_kv_cache_memory=True,
                                       measured_kv_cache_bytes=50 * P.GIB),
    }
    # The operator's extras, merged after the plan (vllm_plan_extra_args): one new option with a value, one that
    # replaces the planned --max-num-seqs (vllm_plan_override_flags), on two selected GPUs (tensor parallel 2).
    variants["ada48x2-extras-override"] = dict(
        base, kv_cache_dtype="fp8_e4m3", context="max", gpus=["0", "1"],
        extra_args=["--seed", "7", "--max-log-len", "100", "--max-num-seqs", "8"],
        override_flags=["--max-num-seqs"], extra_docker_options=["--ulimit", "memlock=-1"])
    return {k: P.plan(v) for k, v in variants.items()}


def test_real_parser_accepts_generated_argv(venv_python, tmp_path):
    plans = generated_plans()
    keys = tmp_path / "keys.yaml"
    keys.write_text("api-key:\n  - sk-one\n  - sk-two\n")
    cases = []
    for name, result in plans.items():
        argv = [str(keys) if a == "/etc/vllm/keys.yaml" else a for a in result["argv"]]
        cases.append({"id": name, "argv": argv})
    # The parser must also be able to say no, or this test proves nothing.
    cases.append({"id": "control-swap-space", "argv": ["/m", "--swap-space", "4"]})
    cases.append({"id": "control-bad-parser", "argv": ["/m", "--reasoning-parser", "qwen9"]})
    got = parse(venv_python, tmp_path, cases)
    for name, result in plans.items():
        assert got[name]["ok"], "%s rejected: %s" % (name, got[name]["error"])
        args = got[name]["args"]
        assert args["max_model_len"] == result["ledger"]["max_model_len"]
        assert args["max_num_seqs"] == int(result["argv"][result["argv"].index("--max-num-seqs") + 1])
        assert args["kv_cache_dtype"] == result["ledger"]["kv_dtype"] or \
            result["argv"][result["argv"].index("--kv-cache-dtype") + 1] == "auto"
    assert got["ada48-fp8-keys-pinned"]["args"]["api_key"] == ["sk-one", "sk-two"]
    assert got["ada48-fp8-keys-pinned"]["args"]["kv_cache_memory_bytes"] == \
        plans["ada48-fp8-keys-pinned"]["ledger"]["kv_pool_bytes"]
    assert got["ada48-fp8-200K-offload"]["args"]["speculative_config"] == {
        "method": "mtp", "num_speculative_tokens": 3}
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
    assert not got["control-swap-space"]["ok"]
    assert "swap-space" in got["control-swap-space"]["error"]
    assert not got["control-bad-parser"]["ok"]
