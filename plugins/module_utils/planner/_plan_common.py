# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared constants, errors and small helpers of the launch planner (vLLM 0.27.1).

Pure, stdlib only, Python 3.7-clean.
"""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.airgap.vllm.plugins.module_utils.common._version import parse_vllm as parse_vllm_version

__metaclass__ = type

GIB = 1 << 30
MIB = 1 << 20

VLLM_VERSION = "0.27.1"

# The vLLM releases the collection knows, oldest first: the one place that lists them (docs/launch-planning.md
# "Known releases"). ``planner`` says whose sizing rules, defaults and parser names the planner holds for it:
# 0.27.1's are proven against a real engine (the test world), 0.26.0's on a real H100 (issue 43); a later known
# release is planned with 0.27.1's and the engine confirmation re-plans once from the engine's own numbers.
# ``madvise_upstream``: how much of the madvise(MADV_POPULATE_WRITE) fix (_source_patch.CATALOGUE) the release
# carries itself: none, partial (ec_shared_region.py guarded, the KV offload region not), complete.
# ``parsers_absent`` (optional): reasoning / tool-call parser names of _plan_flags' registry (0.27.1's) that this
# release does not register (vLLM exits at start on an unknown name). ``differs``: what changed from the release
# before it, as far as the collection knows.
KNOWN_RELEASES = (
    {
        # Read from the 0.26.0 wheel (vllm-0.26.0-cp38-abi3-manylinux_2_28_x86_64.whl) and started on an H100 with
        # the planner's argv (../shared/reference/gpu-device-facts.md): every flag the planner emits is in its
        # parser (engine/arg_utils.py, config/*.py); the same backend order (platforms/cuda.py
        # _get_backend_priorities), batched-token defaults (engine/arg_utils.py:2460), KV layout
        # (v1/kv_cache_interface.py, mamba_utils.py:213 GDN state with num_spec) and start check as 0.27.1 (no
        # null block); on the H100 the planner's KV layout matched the engine's exactly in five starts.
        "release": "0.26.0",
        "planner": "0.26.0",
        "madvise_upstream": "none",
        "reasoning_field": "reasoning",
        "swap_space": False,
        "parsers_absent": ["kimi_k3"],
        "differs": [
            "the V2 model runner (dense models) sizes the KV pool before its CUDA graphs "
            "(SIZING_RULES v2_runner_counts_cuda_graphs, until 0.29.0; so do 0.27.1 and 0.28.0)",
            "its memory summary names weights and non-torch memory apart ('... GiB for weight, ... GiB for "
            "non-torch memory'; 0.27.1: '... GiB for consumed memory (weights + non-torch)')",
            "no kimi_k3 reasoning or tool-call parser (0.27.1 registers both)",
        ],
    },
    {
        "release": "0.27.1",
        "planner": "0.27.1",
        "madvise_upstream": "none",
        "reasoning_field": "reasoning",
        "swap_space": False,
        "differs": [
            "--swap-space removed (refused by the parser)",
            "chat completions carry the thinking as `reasoning` (earlier: `reasoning_content`)",
        ],
    },
    {
        "release": "0.28.0",
        "planner": "0.27.1",
        "madvise_upstream": "partial",
        "reasoning_field": "reasoning",
        "swap_space": False,
        "differs": [
            "madvise fix upstream in ec_shared_region.py (_madvise_populate_write probed under "
            "try/except OSError); the KV offload region still needs the patch"
        ],
    },
    {
        "release": "0.30.0",
        "planner": "0.27.1",
        "madvise_upstream": "complete",
        "reasoning_field": "reasoning",
        "swap_space": False,
        "differs": [
            "madvise fix upstream everywhere: the source patch finds upstream_fixed and changes nothing",
            "the start-up check keeps the null block out of the pool (since 0.29.0: SIZING_RULES)",
            "the `vllm serve` parser moved to vllm/entrypoints/launchers/cli_args.py (since 0.29.0)",
        ],
    },
)


# Sizing rules that changed between releases, each with the first release it holds for: the one home the planner
# asks (rule_holds). Found by asking each release's own sizing code the same questions (tests/vllm_parser/
# release_compare.py, run in the test world's 0.27.1 and 0.30.0 engine images by tests/system/
# test_image_release.py) and confirmed in each release's source.
SIZING_RULES = {
    # kv_cache_utils.check_enough_kv_cache_memory, "Reserve the null block BlockPool permanently holds back": from
    # 0.29.0 a full-length request must fit in the pool less one block (BlockPool's null block) or vLLM refuses to
    # start, and the longest length it names is one block's worth shorter (0.30.0: 126448 where 0.27.1 says
    # 126464 for Gemma 3 at 12 GiB; 160000 where 0.27.1 says 160800 for Qwen3.x bf16 at 11.1 GiB). 0.27.1 and
    # 0.28.0 check every block.
    "start_check_keeps_null_block": "0.29.0",
    # The newer ("V2") model runner estimates its CUDA graphs before the KV pool only from 0.29.0: in 0.26.0, 0.27.1
    # and 0.28.0 its profile_cudagraph_memory returns 0 (v1/worker/gpu/model_runner.py: 0.26.0 :705, 0.27.1 :749,
    # 0.28.0 :843 "It is TBD whether we keep this API or not"; 0.29.0 :896 and 0.30.0 :983 _profile_cudagraph_memory),
    # so gpu_worker.py determine_available_memory sizes the pool first and the graphs are captured after it, from
    # the card beyond gpu_memory_utilization. Measured on an H100 with 0.26.0 (issue 43): budget 72.84 - weights
    # 15.27 - activation 1.29 - non-torch 0.22 = 56.06 GiB ~ the pool's 56.07, the graphs' 0.15 GiB not taken off.
    # Which models run on it before 0.29.0: _plan_memory.model_runner.
    "v2_runner_counts_cuda_graphs": "0.29.0",
}


def rule_holds(rule, version=None):
    """Whether the release ``version`` (text or parse_vllm_version's dict; None: VLLM_VERSION, the release the
    planner's rules were proven on) follows SIZING_RULES[rule]. A pre- or dev release of X.Y.Z counts as X.Y.Z."""
    if isinstance(version, dict):
        v = version
    else:
        try:
            v = parse_vllm_version(version if version else VLLM_VERSION)
        except ValueError:  # not a version: the proven release's rules (release_warnings says so loudly)
            v = parse_vllm_version(VLLM_VERSION)
    return v["release"] >= parse_vllm_version(SIZING_RULES[rule])["release"]


def release_rules(version, known=KNOWN_RELEASES):
    """Which known release's rules plan for ``version`` (text or parse_vllm_version's dict).

    Returns {"version", "release" ("X.Y.Z" or "X.Y.ZrcN"), "rules" (the known entry used), "known" (an exact
    final release the collection lists; +local ignored), "relation" ("known", "newer", "between", "older",
    "prerelease")}. A release the collection does not list plans with the nearest known one at or below it
    (the oldest for an older one); the caller says so loudly (_plan_warnings.release_warnings)."""
    v = version if isinstance(version, dict) else parse_vllm_version(version)
    entries = sorted(known, key=lambda e: parse_vllm_version(e["release"])["key"])
    keys = [parse_vllm_version(e["release"])["key"] for e in entries]
    below = [e for e, k in zip(entries, keys) if k <= v["key"]]
    exact = [e for e in entries if parse_vllm_version(e["release"])["release"] == v["release"]]
    name = v["version"].split("+")[0]
    if exact and not v["pre"] and not v["dev"]:
        return {"version": v["version"], "release": name, "rules": exact[0], "known": True, "relation": "known"}
    rules = below[-1] if below else entries[0]
    if v["pre"] or v["dev"]:
        relation = "prerelease"
    elif not below:
        relation = "older"
    elif v["key"] > keys[-1]:
        relation = "newer"
    else:
        relation = "between"
    return {"version": v["version"], "release": name, "rules": rules, "known": False, "relation": relation}


# Bytes per element. fp8*/int8 kinds are 1 byte (v1/kv_cache_interface.py get_dtype_size).
DTYPE_BYTES = {
    "float32": 4,
    "float": 4,
    "fp32": 4,
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "half": 2,
    "fp16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "float8_e4m3fn": 1,
    "int8": 1,
    "uint8": 1,
}
# --kv-cache-dtype choices this planner sizes (config/cache.py CacheDType). The quantized
# per-token-head / nvfp4 / turboquant layouts carry extra scale bytes we do not model.
KV_CACHE_DTYPES = ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2")


class PlanError(Exception):
    """Base class: the planner cannot produce a plan."""


class ModelConfigError(PlanError):
    """config.json / weight index missing, unreadable or of an unsupported shape."""


class TargetsError(PlanError):
    """A target is invalid (unknown parser, bad dtype, ...)."""


class InfeasibleError(PlanError):
    """The targets do not fit; ``alternatives`` lists plans that do."""

    def __init__(self, message, alternatives=None):
        super(InfeasibleError, self).__init__(message)
        self.alternatives = list(alternatives or [])


def cdiv(a, b):
    return -(-a // b)


def dtype_bytes(name):
    key = str(name).replace("torch.", "").lower()
    if key not in DTYPE_BYTES:
        raise TargetsError("unknown dtype %r" % (name,))
    return DTYPE_BYTES[key]


def parse_size(value, what="context"):
    """vLLM-style integer with suffix: lower case decimal (200k), upper case binary (200K)."""
    if isinstance(value, bool):
        raise TargetsError("%s: %r is not a token count" % (what, value))
    if isinstance(value, int):
        return value
    text = str(value).strip()
    m = re.match(r"^(\d+(?:\.\d+)?)([kmgKMG]?)$", text)
    if not m:
        raise TargetsError(
            "%s: cannot read %r as a token count (give a number such as 131072, "
            "128K = 131072, 128k = 128000, or 'max')" % (what, value)
        )
    num, suffix = float(m.group(1)), m.group(2)
    mult = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[suffix]
    return int(num * mult)


def parse_compute_capability(value):
    """'8.9' / '12.0' / 8.9 / (12, 0) -> (major, minor); a clear TargetsError otherwise."""
    if isinstance(value, (tuple, list)) and len(value) == 2:
        parts = [str(v) for v in value]
    else:
        parts = str(value if value is not None else "").strip().split(".")
    if len(parts) == 1 and parts[0].isdigit() and len(parts[0]) in (2, 3):
        parts = [parts[0][:-1], parts[0][-1]]  # 89 -> 8.9, 120 -> 12.0 (vLLM's to_int form)
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise TargetsError(
            "compute_capability %r is not a CUDA compute capability: give MAJOR.MINOR such as "
            "'8.9' (Ada), '9.0' (Hopper), '10.0' or '12.0' (Blackwell); "
            "airgap.vllm.nvml_info reports it per GPU" % (value,)
        )
    return int(parts[0]), int(parts[1])


def fmt_gib(n):
    return "%.2f GiB" % (n / GIB)


def fmt_tokens(n):
    return "%dK" % (n // 1024) if n % 1024 == 0 else "{:,}".format(n)
