"""The vLLM release the image says it is (issue 30): one parser, the known releases in one place, the nearest
known rules for an unknown release and a loud warning in the plan; the sizing rules that changed between releases
(_plan_common.SIZING_RULES) as the planner applies them. Their numbers are what each release's own sizing code
answered for the same pool (tests/vllm_parser/kv_reference.py run in the test world's engine images by
tests/system/test_image_release.py): 0.27.1 names 126464 as the longest Gemma 3 request that starts in 12 GiB,
0.30.0 names 126448 (it keeps the null block out of the check)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_common as C
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_warnings as W
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _planner as P

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "models", "qwen3.x-27b-fp8")
ADA_48 = 49140 * C.MIB
sys.path.insert(0, os.path.join(ROOT, "tests", "vllm_parser"))
import release_compare as R  # noqa: E402


@pytest.mark.parametrize(
    "text, version, release, pre, local",
    [
        ("0.27.1+cpu", "0.27.1+cpu", (0, 27, 1), None, "cpu"),
        ("0.30.0", "0.30.0", (0, 30, 0), None, None),
        ("0.31.0rc1", "0.31.0rc1", (0, 31, 0), "rc1", None),
        ("0.31.0-RC.2", "0.31.0rc2", (0, 31, 0), "rc2", None),
        ("0.28", "0.28.0", (0, 28, 0), None, None),
        ("vllm-0.27.1+cpu.dist-info", "0.27.1+cpu", (0, 27, 1), None, "cpu"),
        ("/usr/lib/python3/site-packages/vllm-0.30.0.dist-info/", "0.30.0", (0, 30, 0), None, None),
        (
            "INFO 12-01 importing\nWARNING something 1.2\n0.33.0.dev12+g1234abc\n",
            "0.33.0.dev12+g1234abc",
            (0, 33, 0),
            None,
            "g1234abc",
        ),
        ("0.30.0.post1+cu129", "0.30.0.post1+cu129", (0, 30, 0), None, "cu129"),
    ],
)
def test_parse(text, version, release, pre, local):
    v = C.parse_vllm_version(text)
    assert (v["version"], v["release"], v["pre"], v["local"]) == (version, release, pre, local)


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "vllm",
        "no module named vllm",
        "Error: 7",
        "vllm 0.30.0 is here",
        'File "/usr/lib/python3.12/importlib/metadata/__init__.py", line 397\n'
        "importlib.metadata.PackageNotFoundError: No package metadata was found for vllm",
    ],
)
def test_parse_refuses(text):
    with pytest.raises(ValueError):
        C.parse_vllm_version(text)


def test_order_is_pep440():
    order = [
        "0.30.0.dev1",
        "0.30.0a1",
        "0.30.0b2",
        "0.30.0rc1",
        "0.30.0rc2",
        "0.30.0",
        "0.30.0+cpu",
        "0.30.0.post1",
        "0.30.1",
        "0.31.0",
        "1.0.0",
    ]
    keys = [C.parse_vllm_version(t)["key"] for t in order]
    assert keys == sorted(keys)
    assert C.parse_vllm_version("0.30.0")["key"] == C.parse_vllm_version("0.30.0+cpu")["key"]


def test_known_releases_are_one_ordered_list():
    names = [e["release"] for e in C.KNOWN_RELEASES]
    assert C.VLLM_VERSION in names
    keys = [C.parse_vllm_version(n)["key"] for n in names]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    for e in C.KNOWN_RELEASES:
        assert e["madvise_upstream"] in ("none", "partial", "complete")
        assert e["planner"] in names and e["differs"]
    assert C.release_rules("0.27.1")["rules"]["madvise_upstream"] == "none"
    assert C.release_rules("0.30.0")["rules"]["madvise_upstream"] == "complete"


@pytest.mark.parametrize(
    "text, rules, known, relation",
    [
        ("0.27.1+cpu", "0.27.1", True, "known"),
        ("0.30.0", "0.30.0", True, "known"),
        ("0.30.0.post1", "0.30.0", True, "known"),
        ("0.29.0", "0.28.0", False, "between"),
        ("0.33.0", "0.30.0", False, "newer"),
        ("1.2.0", "0.30.0", False, "newer"),
        ("0.31.0rc1", "0.30.0", False, "prerelease"),
        ("0.30.0rc2", "0.28.0", False, "prerelease"),
        ("0.26.0", "0.26.0", True, "known"),
        ("0.26.0+cu130", "0.26.0", True, "known"),
        ("0.25.0", "0.26.0", False, "older"),
        ("0.27.0", "0.26.0", False, "between"),
    ],
)
def test_release_rules(text, rules, known, relation):
    r = C.release_rules(text)
    assert (r["rules"]["release"], r["known"], r["relation"]) == (rules, known, relation)


def test_release_rules_takes_a_parsed_version():
    assert C.release_rules(C.parse_vllm_version("0.31.0"))["relation"] == "newer"


def test_warnings():
    assert W.release_warnings(None) == [] and W.release_warnings("") == []
    assert W.release_warnings("0.27.1+cpu") == []
    quiet = W.release_warnings("0.30.0")
    assert [w["id"] for w in quiet] == ["release_planner_rules"] and "0.27.1" in quiet[0]["message"]
    loud = W.release_warnings("0.33.0")
    assert [w["id"] for w in loud] == ["release_unknown"]
    assert loud[0]["message"].startswith("UNKNOWN vLLM RELEASE 0.33.0")
    assert "rules of vLLM 0.30.0" in loud[0]["message"]
    assert "newer than any release" in loud[0]["message"]
    assert "prerelease" not in W.release_warnings("0.31.0rc1")[0]["message"]
    assert "a pre-release" in W.release_warnings("0.31.0rc1")[0]["message"]
    bad = W.release_warnings("garbage")
    assert [w["id"] for w in bad] == ["release_unreadable"] and "UNKNOWN" in bad[0]["message"]
    for w in loud + quiet + bad:
        assert set(w) == {"id", "message", "reason", "source"}


def test_the_planner_says_so_first():
    params = dict(
        model_dir=FIXTURE,
        gpu_total_bytes=ADA_48,
        compute_capability="8.9",
        gpu_memory_utilization=0.93,
        num_speculative_tokens=0,
        concurrency=1,
        context=8192,
        kv_cache_dtype="fp8_e4m3",
    )
    assert P.plan(params)["plan_warnings"] == []
    assert P.plan(dict(params, vllm_version="0.27.1+cpu"))["plan_warnings"] == []
    r = P.plan(dict(params, vllm_version="0.33.0"))
    assert r["plan_warnings"][0]["id"] == "release_unknown"
    assert r["warnings"][0].startswith("UNKNOWN vLLM RELEASE 0.33.0")
    assert r["argv"] == P.plan(params)["argv"]


# ------------------------------------------------------------------ the plan and the report know the engine release
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_confirm as PC  # noqa: E402
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_confirm_report as PR  # noqa: E402

TINY = dict(
    config={
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "head_dim": 64,
        "vocab_size": 1024,
        "torch_dtype": "bfloat16",
        "max_position_embeddings": 524288,
        "tie_word_embeddings": True,
    },
    weight_bytes=2 * 1024 * 1024,
)
METRICS = (
    'vllm:cache_config_info{block_size="128",cache_dtype="auto",enable_prefix_caching="True",engine="0",'
    'gpu_memory_utilization="0.92",kv_cache_max_concurrency="16.0",kv_cache_memory_bytes="1073741824",'
    'kv_cache_size_tokens="262144",num_gpu_blocks="2048",num_cpu_blocks="None"} 1.0\n'
)


def planned(version=None):
    params = dict(
        gpu_total_bytes=ADA_48,
        compute_capability="8.9",
        gpu_memory_utilization=0.93,
        concurrency=4,
        context=16384,
        kv_cache_dtype="auto",
        enforce_eager=True,
    )
    if version is not None:
        params["vllm_version"] = version
    r = P.plan(params, **TINY)
    r["inputs"] = params  # as vllm_launch_plan keeps them
    return r


@pytest.mark.parametrize(
    "version, text, known",
    [
        ("0.27.1+cpu", "vLLM 0.27.1+cpu", True),
        ("0.30.0", "vLLM 0.30.0 (known; sizing rules of vLLM 0.27.1)", True),
        ("0.26.0", "vLLM 0.26.0", True),
        ("0.33.0", "vLLM 0.33.0 (UNKNOWN release, newer: planned with the rules of vLLM 0.30.0)", False),
        ("nonsense", "vLLM 'nonsense' (UNKNOWN: not a version)", False),
    ],
)
def test_engine_release(version, text, known):
    e = PR.engine_release(planned(version))
    assert e["text"] == text and e["known"] is known


def test_a_plan_without_a_release_names_none():
    assert PR.engine_release(planned()) is None and PR.engine_release({}) is None and PR.engine_release(None) is None
    c = PC.confirm(planned(), METRICS)
    assert c["report"]["engine"] is None and "Engine:" not in c["report_markdown"]
    assert not c["summary"].startswith("vLLM release")


def test_the_report_and_the_summary_name_the_engine_release():
    c = PC.confirm(planned("0.27.1+cpu"), METRICS)
    assert c["report"]["engine"]["version"] == "0.27.1+cpu"
    assert "Engine: vLLM 0.27.1+cpu." in c["report_markdown"]
    assert c["summary"].splitlines()[0] == "vLLM release: 0.27.1+cpu"
    assert c["summary"].splitlines()[1].startswith("vLLM plan ")


def test_an_unknown_release_is_loud_in_the_report():
    c = PC.confirm(planned("0.33.0"), METRICS)
    md = c["report_markdown"]
    assert "Engine: vLLM 0.33.0 (UNKNOWN release" in md
    assert "**release_unknown**: UNKNOWN vLLM RELEASE 0.33.0" in md
    assert "UNKNOWN release" in c["summary"].splitlines()[0]


def test_the_module_takes_the_release_and_keeps_it_in_its_inputs(run_module):
    from ansible_collections.airgap.vllm.plugins.modules import vllm_launch_plan as M

    nvml = [
        {
            "index": 0,
            "uuid": "GPU-00000000-1111-2222-3333-444444444444",
            "name": "NVIDIA RTX 6000 Ada Generation",
            "memory_total": 51527024640,
            "compute_capability": "8.9",
        }
    ]
    r = run_module(
        M,
        model_dir=FIXTURE,
        nvml_gpus=nvml,
        concurrency=1,
        context="8192",
        kv_cache_dtype="fp8_e4m3",
        num_speculative_tokens=0,
        docker_version="24.0.7",
        kernel="5.15.0",
        vllm_version="0.33.0",
    )
    assert not r.get("failed") and r["inputs"]["vllm_version"] == "0.33.0"
    assert r["warnings_list"][0].startswith("UNKNOWN vLLM RELEASE 0.33.0")
    assert r["plan_warnings"][0]["id"] == "release_unknown"
    # The re-plan (vllm_plan_confirm's trade-off) plans from the inputs: the release comes along.
    assert P.plan(r["inputs"])["plan_warnings"][0]["id"] == "release_unknown"


def test_the_docs_list_the_known_releases():
    """docs/launch-planning.md "Known releases" has one row per KNOWN_RELEASES entry, in order, and
    docs/operations.md "vLLM releases" names each of them."""
    with open(os.path.join(ROOT, "docs", "launch-planning.md")) as fh:
        planning = fh.read()
    section = planning.split("## Known releases", 1)[1].split("\n## ", 1)[0]
    rows = [
        line.split("|")[1].strip()
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith("| release")
    ]
    assert rows == [e["release"] for e in C.KNOWN_RELEASES]
    with open(os.path.join(ROOT, "docs", "operations.md")) as fh:
        ops = fh.read().split("## vLLM releases", 1)[1].split("\n## ", 1)[0]
    for e in C.KNOWN_RELEASES:
        assert "**%s**" % e["release"] in ops
    assert "vllm_argv_check" in ops and "vllm_service_argv_check" in ops


@pytest.mark.parametrize(
    "version,holds",
    [
        (None, False),
        ("0.27.1", False),
        ("0.28.0", False),
        ("0.29.0", True),
        ("0.30.0+cpu", True),
        ("0.29.0rc1", True),
        ("0.33.0", True),
        ("not a version", False),
        (C.parse_vllm_version("0.31.0"), True),
    ],
)
def test_the_null_block_rule_holds_from_0_29(version, holds):
    assert C.rule_holds("start_check_keeps_null_block", version) is holds


def case(cid):
    return next((cfg, params) for c, cfg, params, _vc in R.CASES if c == cid)


@pytest.mark.parametrize("release,longest", [(None, 126464), ("0.27.1", 126464), ("0.30.0+cpu", 126448)])
def test_the_longest_length_that_starts_is_the_releases(release, longest):
    cfg, params = case("gemma3-48")
    refused = R._planner(cfg, params, release)["refused"]
    assert refused.endswith("Longest length that starts: %d." % longest), refused
    assert ("null block" in refused) is (release == "0.30.0+cpu")
    assert refused.startswith("vLLM %s would refuse" % (release or C.VLLM_VERSION))


def test_a_request_that_fills_every_block_starts_on_0_27_but_not_on_0_30():
    cfg, params = case("dense-bf16")
    cfg = dict(cfg, max_position_embeddings=1 << 20)  # the pool, not the model, is the limit here
    full = R._planner(cfg, params)
    blocks, block = full["num_gpu_blocks"], full["block_size"]
    edge = dict(params, context=blocks * block)  # one request of exactly every block
    assert "refused" not in R._planner(cfg, edge, "0.27.1")
    later = R._planner(cfg, edge, "0.30.0")
    assert "refused" in later and later["refused"].endswith("starts: %d." % ((blocks - 1) * block)), later


def test_max_context_passes_the_start_check_of_the_release():
    cfg, params = case("dense-bf16")
    for release in ("0.27.1", "0.30.0"):
        ledger = R._planner(cfg, dict(params, context="max"), release)
        need = -(-ledger["max_model_len"] // ledger["block_size"])
        limit = ledger["num_gpu_blocks"] - (1 if release == "0.30.0" else 0)
        assert need <= limit, (release, ledger["max_model_len"], ledger["num_gpu_blocks"])
    assert C.VLLM_VERSION == "0.27.1"


# ------------------------------------------------------------------ 0.26.0, known from its wheel and a real H100 (issue 43)


def test_a_plan_for_0_26_says_nothing_is_unknown():
    assert W.release_warnings("0.26.0") == [] and W.release_warnings("0.26.0+cu130") == []
    params = dict(
        model_dir=FIXTURE,
        gpu_total_bytes=ADA_48,
        compute_capability="8.9",
        gpu_memory_utilization=0.93,
        concurrency=1,
        context=8192,
        kv_cache_dtype="fp8_e4m3",
        vllm_version="0.26.0",
    )
    r = P.plan(params)
    assert r["plan_warnings"] == [] and not any("UNKNOWN" in w or "known release" in w for w in r["warnings"])
    c = PC.confirm(dict(r, inputs=params), METRICS)
    assert "Engine: vLLM 0.26.0." in c["report_markdown"] and "UNKNOWN" not in c["summary"]


@pytest.mark.parametrize("key", ["reasoning_parser", "tool_call_parser"])
def test_0_26_has_no_kimi_k3_parser(key):
    """0.26.0's reasoning/__init__.py and tool_parsers/__init__.py register every name 0.27.1's do but kimi_k3."""
    base = dict(gpu_total_bytes=ADA_48, compute_capability="8.9", concurrency=1, context=8192)
    base[key] = "kimi_k3"
    with pytest.raises(C.TargetsError, match="not registered in vLLM 0.26.0"):
        P.plan(dict(base, vllm_version="0.26.0"), **TINY)
    assert P.plan(dict(base, vllm_version="0.27.1"), **TINY)["argv"]
    assert P.plan(
        dict(base, **{key: "qwen3" if key == "reasoning_parser" else "qwen3_coder"}, vllm_version="0.26.0"), **TINY
    )


def test_parsers_absent_name_registered_parsers_only():
    from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_flags as F

    for e in C.KNOWN_RELEASES:
        for name in e.get("parsers_absent", []):
            assert name in F.REASONING_PARSERS or name in F.TOOL_CALL_PARSERS
