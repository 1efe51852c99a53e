"""The `vllm serve` argv (plugins/module_utils/planner/_plan_flags.py): every ledger input reaches it, each flag with
its reason, no key in it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from .test__plan_model import fixture_config, plan
from .test__planner import field


def test_enforce_eager_and_image_pixels_reach_argv():
    r = plan(fixture_config(), context=32768, enforce_eager=True, max_image_pixels=4194304)
    argv = r["argv"]
    assert "--enforce-eager" in argv
    assert json.loads(argv[argv.index("--mm-processor-kwargs") + 1]) == {"max_pixels": 4194304}
    assert not [c for c in r["ledger"]["components"] if c["name"] == "cuda_graphs"]
    lmo = plan(fixture_config(), context=32768, language_model_only=True, max_image_pixels=1)
    assert "--mm-processor-kwargs" not in lmo["argv"]  # no encoder, nothing to bound


def test_prefix_caching_flag_only_when_asked():
    unset = plan(fixture_config(), context=32768)["argv"]
    assert "--no-enable-prefix-caching" not in unset and "--enable-prefix-caching" not in unset
    assert "--no-enable-prefix-caching" in plan(fixture_config(), context=32768, prefix_caching=False)["argv"]
    assert "--enable-prefix-caching" in plan(fixture_config(), context=32768, prefix_caching=True)["argv"]


def test_argv_shape():
    r = field("fp8_e4m3", api_keys_config_path="/etc/vllm/keys.yaml")
    argv = r["argv"]
    assert argv[argv.index("--speculative-config") + 1] == '{"method":"mtp","num_speculative_tokens":3}'
    assert "--enable-prefix-caching" in argv and "--config" in argv
    assert not any("sk-" in a for a in argv)
    assert all(f["reason"] for f in r["flags"])
