"""Pooling models (embedders, rerankers) in the launch planner: vLLM 0.27.1's runner/convert from the model's own
files, and their memory (encoder-only: no KV pool)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_common as CM
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_pooling as PP
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_ledger import render_ledger
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_model import FAMILIES
from ansible_collections.airgap.vllm.plugins.module_utils.planner._planner import plan

MODELS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "models")
ADA_48 = 49140 * CM.MIB


def _dir(name):
    return os.path.abspath(os.path.join(MODELS, name))


def _config(name):
    with open(os.path.join(_dir(name), "config.json")) as handle:
        return json.load(handle)


def _decide(name, asked=None):
    return PP.pooling_decision(_config(name), PP.read_sentence_transformers(_dir(name)), asked, FAMILIES)


def _plan(name, **params):
    base = dict(model_dir=_dir(name), gpu_total_bytes=ADA_48, compute_capability="8.9", concurrency=16)
    base.update(params)
    return plan(base)


@pytest.mark.parametrize(
    "name, asked, task, convert, encoder_only, pooling_type, chunked",
    [
        ("bge-m3", None, "embed", "none", True, "CLS", False),
        ("bge-reranker-v2-m3", None, "classify", "none", True, "CLS", False),
        ("qwen3-embedding-0.6b", None, "embed", "embed", False, "LAST", True),
        ("qwen3-reranker-0.6b", "classify", "classify", "classify", False, "LAST", True),
    ],
)
def test_decision_from_the_models_own_files(name, asked, task, convert, encoder_only, pooling_type, chunked):
    d = _decide(name, asked)
    assert (d["runner"], d["task"], d["convert"], d["encoder_only"]) == ("pooling", task, convert, encoder_only)
    assert (d["pooling_type"], d["chunked_prefill"]) == (pooling_type, chunked)


def test_sentence_transformers_files_are_read():
    st = PP.read_sentence_transformers(_dir("qwen3-embedding-0.6b"))
    assert st["modules"][1] == PP.ST_POOLING_MODULE
    assert PP.st_pooling_type(st) == "LAST"
    assert PP.read_sentence_transformers(_dir("qwen3-reranker-0.6b")) is None


def test_a_causal_lm_without_sentence_transformers_files_is_generative():
    # Qwen3-Reranker-0.6B's files say Qwen3ForCausalLM and nothing else: only the operator can say it reranks.
    assert _decide("qwen3-reranker-0.6b") is None
    assert PP.pooling_decision(_config("qwen3-reranker-0.6b"), None, "embed", FAMILIES)["convert"] == "embed"


def test_the_original_qwen3_reranker_gets_vllms_overrides():
    d = _decide("qwen3-reranker-0.6b", "classify")
    assert d["hf_overrides"] == {
        "architectures": ["Qwen3ForSequenceClassification"],
        "classifier_from_token": ["no", "yes"],
        "is_original_qwen3_reranker": True,
    }


def test_a_sequence_classification_decoder_is_sized_as_its_base():
    config = dict(_config("qwen3-reranker-0.6b"), architectures=["Qwen3ForSequenceClassification"])
    d = PP.pooling_decision(config, None, None, FAMILIES)
    assert (d["task"], d["convert"], d["size_as"], d["hf_overrides"]) == (
        "classify",
        "classify",
        "Qwen3ForCausalLM",
        None,
    )
    r = plan(dict(model_dir="/m", gpu_total_bytes=ADA_48, context=8192), config=config)
    assert r["argv"][1:5] == ["--runner", "pooling", "--convert", "classify"]


@pytest.mark.parametrize(
    "name, asked, error",
    [
        ("bge-m3", "classify", "would refuse --convert classify"),
        ("bge-reranker-v2-m3", "embed", "serves classify only"),
        ("qwen3-embedding-0.6b", "bogus", "give one of embed, classify"),
    ],
)
def test_a_task_the_files_contradict_is_refused(name, asked, error):
    with pytest.raises(CM.TargetsError, match=error):
        _decide(name, asked)


def test_classify_on_a_decoder_without_a_token_form_is_refused():
    config = dict(_config("qwen3-reranker-0.6b"), architectures=["LlamaForCausalLM"])
    with pytest.raises(CM.TargetsError, match="no classification head"):
        PP.pooling_decision(config, None, "classify", FAMILIES)


def test_an_unsized_architecture_is_refused_as_a_pooling_model():
    with pytest.raises(CM.ModelConfigError, match="GteModel as a pooling model"):
        PP.pooling_decision({"architectures": ["GteModel"]}, {"modules": [], "pooling": None}, None, FAMILIES)


def test_encoder_weights_are_xlm_roberta_large_in_float16():
    shape = PP.describe_encoder(_config("bge-m3"))
    # 567,754,752 parameters (XLM-RoBERTa large: embeddings 264,395,776 + 24 x 12,596,224 + pooler 1,049,600),
    # loaded as float16 from the float32 checkpoint.
    assert (shape["checkpoint_dtype"], shape["model_dtype"]) == ("float32", "float16")
    assert PP.encoder_weight_bytes(shape) == 567754752 * 2
    head = PP.describe_encoder(_config("bge-reranker-v2-m3"))
    assert head["classifier"] and head["num_labels"] == 1
    # The classifier (dense 1024x1024 + out_proj 1024x1) instead of the pooler.
    assert PP.encoder_weight_bytes(head) == (567754752 - 1049600 + 1024 * 1024 + 1024 + 1024 + 1) * 2


def test_an_encoder_plan_has_no_kv_pool_and_runs_as_pooling():
    r = _plan("bge-m3")
    L = r["ledger"]
    assert r["argv"][1:5] == ["--runner", "pooling", "--convert", "none"]
    assert "--kv-cache-dtype" not in r["argv"]
    assert (L["kv_pool_bytes"], L["num_gpu_blocks"], L["gpu_kv_cache_tokens"]) == (0, 0, 0)
    assert L["max_model_len"] == 8192  # 8194 positions less RoBERTa's offset (pad_token_id 1 + 1)
    # No chunked prefill: one batch holds a whole request (vLLM's default: max(context, the card's 2048)).
    assert L["max_num_batched_tokens"] == 8192
    assert r["argv"][r["argv"].index("--max-num-batched-tokens") + 1] == "8192"
    names = [c["name"] for c in L["components"]]
    assert names == ["weights", "non_torch", "activation_peak", "cuda_graphs"]
    assert L["footprint_bytes"] == L["non_kv_bytes"] == sum(c["bytes"] for c in L["components"])
    text = render_ledger(dict(r, warnings=[]))
    assert "no KV cache" in text and "--runner pooling" in text


@pytest.mark.parametrize("asked", [True, False])
def test_an_encoder_gets_no_prefix_caching_flag_whatever_the_host_asks(asked):
    # vLLM switches it off for non-causal attention itself; a chat model's host-wide setting must not reach it.
    r = _plan("bge-reranker-v2-m3", prefix_caching=asked)
    assert not [a for a in r["argv"] if "prefix-caching" in a] and r["ledger"]["prefix_caching"] is False
    # A decoder embedder keeps the operator's choice (it has a KV cache to cache prefixes in).
    r = _plan("qwen3-embedding-0.6b", prefix_caching=asked, context=8192)
    assert ("--enable-prefix-caching" if asked else "--no-enable-prefix-caching") in r["argv"]


def test_the_activation_follows_the_batch_of_tokens():
    small = _plan("bge-m3", context=2048)["ledger"]
    large = _plan("bge-m3")["ledger"]

    def peak(L):
        return [c["bytes"] for c in L["components"] if c["name"] == "activation_peak"][0]

    assert small["max_num_batched_tokens"] == 2048
    assert peak(large) == 4 * peak(small)


def test_a_batch_below_the_context_is_refused_without_chunked_prefill():
    with pytest.raises(CM.TargetsError, match="raise it to 8192"):
        _plan("bge-m3", max_num_batched_tokens=4096)
    assert _plan("bge-m3", max_num_batched_tokens=4096, context=4096)["ledger"]["max_model_len"] == 4096
    with pytest.raises(CM.TargetsError, match="exceeds the 8192 positions"):
        _plan("bge-m3", context=8193)


def test_a_float32_checkpoints_bytes_are_halved():
    r = plan(
        dict(model_dir="/m", gpu_total_bytes=ADA_48),
        config=_config("bge-m3"),
        weight_bytes=2271064456,
        weight_source="index",
    )
    w = r["ledger"]["components"][0]
    assert w["bytes"] == 2271064456 // 2 and "float32 checkpoint loaded as float16" in w["how"]


def test_generation_settings_are_refused_for_a_pooling_model():
    with pytest.raises(CM.TargetsError, match="reasoning_parser is for generation"):
        _plan("bge-m3", reasoning_parser="qwen3")
    with pytest.raises(CM.TargetsError, match="kv_offloading_gib is for generation"):
        _plan("qwen3-embedding-0.6b", kv_offloading_gib=8)


def test_a_decoder_embedder_keeps_its_kv_pool_and_no_sampler():
    r = _plan("qwen3-embedding-0.6b", context=8192, gpu_memory_utilization=0.2)
    L = r["ledger"]
    assert L["pooling"]["convert"] == "embed" and L["kv_pool_bytes"] > 0
    assert L["max_num_batched_tokens"] == 2048  # last-token pooling chunks its prefill: the card's default
    peak = [c for c in L["components"] if c["name"] == "activation_peak"][0]
    assert "sampler 0 rows" in peak["how"]


@pytest.mark.parametrize(
    "name,task",
    [
        ("bge-m3", "embed"),  # XLMRobertaModel: an encoder vLLM registers for embeddings
        ("bge-reranker-v2-m3", "classify"),  # a cross-encoder
        ("qwen3-embedding-0.6b", "embed"),  # a decoder that sentence-transformers' modules.json makes an embedder
        ("qwen3-reranker-0.6b", None),  # a plain Qwen3ForCausalLM: pooling only when the operator asks
        ("qwen3-8b", None),
    ],
)
def test_files_pooling_task_is_what_the_files_alone_say(name, task):
    assert PP.files_pooling_task(_config(name), PP.read_sentence_transformers(_dir(name))) == task


def test_files_pooling_task_never_raises_on_odd_configs():
    assert PP.files_pooling_task({}) is None
    assert PP.files_pooling_task("not a mapping") is None
    assert PP.files_pooling_task({"architectures": "BertModel"}) == "embed"
    # A classification checkpoint the planner cannot size is still a cross-encoder by its files (the planner says
    # why it cannot plan it; the import only needs to know no chat is ever sent to it).
    assert PP.files_pooling_task({"architectures": ["GemmaForSequenceClassification"]}) == "classify"
