"""Model directories of real architectures for `--load-format dummy` (tests/gpu, issue 43).

vLLM then builds the real shapes with random weights: no weights travel. Each directory holds the real
config.json, a weight index whose total_size is the real checkpoint's (the planner reads it, as on a site),
and a small byte-level BPE tokenizer padded to the config's vocab_size, so every token id the config names
(end of text, vision tokens) exists. Requests then carry token ids and `allowed_token_ids` below 256.

- qwen3-8b: Qwen/Qwen3-8B's config.json (bf16, 36 layers, GQA 32/8, head 128, untied embeddings); the index
  lists every tensor with its bf16 size (15.26 GiB, what vLLM 0.26.0 loaded: 15.27 GiB).
- qwen3.5-27b-fp8: the collection's field fixture (tests/fixtures/models/qwen3.x-27b-fp8: config.json with the
  FP8 block quantisation and its skip list in full module names, the index from generate_index.py), plus the
  image and video processor configs of the Qwen3-VL family, which vLLM reads for a multimodal architecture.
- qwen3-30b-a3b: Qwen/Qwen3-30B-A3B's config.json (bf16 MoE: 48 layers, 128 experts of 768, 8 a token, GQA 32/4,
  head 128); the index lists every tensor with its bf16 size (56.87 GiB). The MoE case (vLLM's V1 runner, the
  fused-MoE kernels of `_moe_C`: prepare.sh with GPU_WITH_MOE=1).

Usage: python3 make_models.py DEST [--fixtures tests/fixtures/models]
"""

import argparse
import json
import os
import shutil

QWEN3_8B = {
    "architectures": ["Qwen3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 12288,
    "max_position_embeddings": 40960,
    "max_window_layers": 36,
    "model_type": "qwen3",
    "num_attention_heads": 32,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}

QWEN3_30B_A3B = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "decoder_sparse_step": 1,
    "eos_token_id": 151645,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "initializer_range": 0.02,
    "intermediate_size": 6144,
    "max_position_embeddings": 40960,
    "max_window_layers": 48,
    "mlp_only_layers": [],
    "model_type": "qwen3_moe",
    "moe_intermediate_size": 768,
    "norm_topk_prob": True,
    "num_attention_heads": 32,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 48,
    "num_key_value_heads": 4,
    "output_router_logits": False,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000.0,
    "router_aux_loss_coef": 0.001,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}

# Named special tokens at the ids the real tokenizers give them (the configs name some of them).
SPECIAL = {
    "qwen3-8b": {151643: "<|endoftext|>", 151644: "<|im_start|>", 151645: "<|im_end|>"},
    "qwen3-30b-a3b": {151643: "<|endoftext|>", 151644: "<|im_start|>", 151645: "<|im_end|>"},
    "qwen3.5-27b-fp8": {
        248044: "<|endoftext|>",
        248045: "<|im_start|>",
        248046: "<|im_end|>",
        248053: "<|vision_start|>",
        248054: "<|vision_end|>",
        248056: "<|image_pad|>",
        248057: "<|video_pad|>",
    },
}
EOS = {"qwen3-8b": "<|im_end|>", "qwen3-30b-a3b": "<|im_end|>", "qwen3.5-27b-fp8": "<|im_end|>"}

PROCESSOR = {
    "preprocessor_config.json": {
        "size": {"longest_edge": 16777216, "shortest_edge": 65536},
        "patch_size": 16,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "processor_class": "Qwen3VLProcessor",
        "image_processor_type": "Qwen2VLImageProcessorFast",
    },
    "video_preprocessor_config.json": {
        "size": {"longest_edge": 25165824, "shortest_edge": 4096},
        "patch_size": 16,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "processor_class": "Qwen3VLProcessor",
        "video_processor_type": "Qwen3VLVideoProcessor",
    },
}


def bytes_to_unicode():
    """GPT-2's byte-level alphabet: every byte as one printable character."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def tokenizer(vocab_size, special):
    alphabet = bytes_to_unicode()
    vocab = {alphabet[b]: b for b in range(256)}
    for i in range(256, vocab_size):
        vocab[special.get(i, "<|x%d|>" % i)] = i
    added = [
        dict(id=i, content=t, single_word=False, lstrip=False, rstrip=False, normalized=False, special=True)
        for i, t in sorted(special.items())
    ]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [],
        },
    }


def qwen3_8b_index(cfg):
    """Every tensor of the Qwen3-8B (or, with num_experts, Qwen3-30B-A3B) checkpoint with its bf16 size (one shard
    name: no shard travels)."""
    h, i, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    hd, nh, nkv, v = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["vocab_size"]
    sizes = {"model.embed_tokens.weight": v * h, "lm_head.weight": v * h, "model.norm.weight": h}
    for n in range(L):
        p = "model.layers.%d." % n
        sizes.update(
            {
                p + "self_attn.q_proj.weight": nh * hd * h,
                p + "self_attn.k_proj.weight": nkv * hd * h,
                p + "self_attn.v_proj.weight": nkv * hd * h,
                p + "self_attn.o_proj.weight": h * nh * hd,
                p + "self_attn.q_norm.weight": hd,
                p + "self_attn.k_norm.weight": hd,
                p + "input_layernorm.weight": h,
                p + "post_attention_layernorm.weight": h,
            }
        )
        if cfg.get("num_experts"):
            e, mi = cfg["num_experts"], cfg["moe_intermediate_size"]
            sizes[p + "mlp.gate.weight"] = e * h
            for x in range(e):
                q = p + "mlp.experts.%d." % x
                sizes.update(
                    {q + "gate_proj.weight": mi * h, q + "up_proj.weight": mi * h, q + "down_proj.weight": h * mi}
                )
        else:
            sizes.update(
                {p + "mlp.gate_proj.weight": i * h, p + "mlp.up_proj.weight": i * h, p + "mlp.down_proj.weight": h * i}
            )
    total = 2 * sum(sizes.values())
    return {"metadata": {"total_size": total}, "weight_map": {k: "model.safetensors" for k in sorted(sizes)}}


def write(path, obj, compact=False):
    with open(path, "w") as fh:
        if compact:
            json.dump(obj, fh, separators=(",", ":"), ensure_ascii=False)
        else:
            json.dump(obj, fh, indent=2, ensure_ascii=False)
            fh.write("\n")


def make(dest, fixtures):
    made = []
    d = os.path.join(dest, "qwen3-8b")
    os.makedirs(d, exist_ok=True)
    write(os.path.join(d, "config.json"), QWEN3_8B)
    write(os.path.join(d, "model.safetensors.index.json"), qwen3_8b_index(QWEN3_8B))
    made.append(("qwen3-8b", QWEN3_8B["vocab_size"]))

    d = os.path.join(dest, "qwen3-30b-a3b")
    os.makedirs(d, exist_ok=True)
    write(os.path.join(d, "config.json"), QWEN3_30B_A3B)
    write(os.path.join(d, "model.safetensors.index.json"), qwen3_8b_index(QWEN3_30B_A3B))
    made.append(("qwen3-30b-a3b", QWEN3_30B_A3B["vocab_size"]))

    d = os.path.join(dest, "qwen3.5-27b-fp8")
    os.makedirs(d, exist_ok=True)
    src = os.path.join(fixtures, "qwen3.x-27b-fp8")
    for name in ("config.json", "model.safetensors.index.json"):
        shutil.copyfile(os.path.join(src, name), os.path.join(d, name))
    for name, obj in PROCESSOR.items():
        write(os.path.join(d, name), obj)
    with open(os.path.join(src, "config.json")) as fh:
        made.append(("qwen3.5-27b-fp8", json.load(fh)["text_config"]["vocab_size"]))

    for name, vocab_size in made:
        d = os.path.join(dest, name)
        write(os.path.join(d, "tokenizer.json"), tokenizer(vocab_size, SPECIAL[name]), compact=True)
        write(
            os.path.join(d, "tokenizer_config.json"),
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "eos_token": EOS[name],
                "pad_token": "<|endoftext|>",
                "model_max_length": 1048576,
                "clean_up_tokenization_spaces": False,
            },
        )
        write(os.path.join(d, "generation_config.json"), {"do_sample": False})
    return [n for n, _made in made]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dest")
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--fixtures", default=os.path.join(here, "..", "fixtures", "models"))
    a = ap.parse_args(argv)
    for name in make(a.dest, a.fixtures):
        print(os.path.join(a.dest, name))


if __name__ == "__main__":
    main()
