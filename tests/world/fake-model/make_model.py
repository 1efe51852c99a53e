"""Writes the tiny Qwen3.x-27B-FP8-shaped model directory (see make-model.sh)."""

import json
import os
import struct
import sys

# Facts file "Qwen3.5 / Qwen3.6 / Qwen3.8-27B-style config.json": used when the planner's fixture
# (tests/fixtures/models/qwen3.x-27b-fp8/config.json) is not there.
_LAYERS = 64
FALLBACK_CONFIG = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "model_type": "qwen3_5",
    "image_token_id": 248056,
    "video_token_id": 248057,
    "vision_start_token_id": 248053,
    "vision_end_token_id": 248054,
    "tie_word_embeddings": False,
    "transformers_version": "4.57.0.dev0",
    "quantization_config": {
        "quant_method": "fp8",
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "weight_block_size": [128, 128],
    },
    "text_config": {
        "model_type": "qwen3_5_text",
        "hidden_size": 5120,
        "intermediate_size": 17408,
        "num_hidden_layers": _LAYERS,
        "num_attention_heads": 24,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "full_attention_interval": 4,
        "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(_LAYERS)],
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 48,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4,
        "mtp_num_hidden_layers": 1,
        "mamba_ssm_dtype": "float32",
        "vocab_size": 248320,
        "max_position_embeddings": 262144,
        "rms_norm_eps": 1e-06,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 10000000,
            "partial_rotary_factor": 0.25,
            "mrope_section": [11, 11, 10],
            "mrope_interleaved": True,
        },
        "dtype": "bfloat16",
    },
    "vision_config": {
        "model_type": "qwen3_5",
        "depth": 27,
        "hidden_size": 1152,
        "num_heads": 16,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "out_hidden_size": 5120,
        "in_channels": 3,
    },
}

CHAT_TEMPLATE = (
    "{%- if tools %}{{- '<|im_start|>system\\n# Tools\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools><|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message.role + '\\n' + (message.content or '') + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}{%- else %}{{- '<think>\\n' }}{%- endif %}{%- endif %}"
)

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>"]


def tokenizer_json():
    vocab = {chr(c): i for i, c in enumerate(range(33, 127))}
    added = [
        {
            "id": len(vocab) + i,
            "content": t,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for i, t in enumerate(SPECIAL)
    ]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [],
        },
    }


def safetensors(path, tensors):
    """tensors: [(name, dtype, shape, bytes)] → a valid file; returns the data size."""
    header, data, off = {"__metadata__": {"format": "pt"}}, b"", 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        data += raw
        off += len(raw)
    hj = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    hj += b" " * (-len(hj) % 8)  # the format pads the header to 8 bytes with spaces
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(hj)) + hj + data)
    return len(data)


def pattern(n, seed):
    return bytes((i * 31 + seed) % 251 for i in range(n))


def main():
    out, fixture = sys.argv[1], sys.argv[2]
    os.makedirs(out)
    if os.path.isfile(fixture):
        with open(fixture) as fh:
            config = json.load(fh)
    else:
        config = FALLBACK_CONFIG

    def dump(name, obj):
        with open(os.path.join(out, name), "w") as fh:
            json.dump(obj, fh, indent=2, sort_keys=True)
            fh.write("\n")

    dump("config.json", config)
    dump("tokenizer.json", tokenizer_json())
    dump(
        "tokenizer_config.json",
        {
            "tokenizer_class": "Qwen2Tokenizer",
            "model_max_length": 262144,
            "bos_token": None,
            "eos_token": "<|im_end|>",
            "pad_token": "<|endoftext|>",
            "unk_token": None,
            "add_prefix_space": False,
            "errors": "replace",
            "clean_up_tokenization_spaces": False,
            "split_special_tokens": False,
            "chat_template": CHAT_TEMPLATE,
        },
    )
    dump(
        "generation_config.json",
        {
            "bos_token_id": 248044,
            "eos_token_id": [248046, 248044],
            "pad_token_id": 248044,
            "do_sample": True,
            "temperature": 0.6,
            "top_p": 0.95,
            "top_k": 20,
            "transformers_version": "4.57.0.dev0",
        },
    )
    dump(
        "preprocessor_config.json",
        {
            "image_processor_type": "Qwen2VLImageProcessorFast",
            "processor_class": "Qwen3VLProcessor",
            "do_resize": True,
            "do_rescale": True,
            "do_normalize": True,
            "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5],
            "patch_size": 16,
            "temporal_patch_size": 2,
            "merge_size": 2,
            "size": {"shortest_edge": 65536, "longest_edge": 16777216},
        },
    )

    # Real tensor names of the layout, tiny shapes: FP8 weights (1 byte) + bf16 norms/scales.
    shard_tensors = [
        [
            ("model.language_model.embed_tokens.weight", "BF16", [16, 8], pattern(256, 1)),
            ("model.language_model.layers.0.linear_attn.in_proj_qkvz.weight", "F8_E4M3", [32, 8], pattern(256, 2)),
            (
                "model.language_model.layers.0.linear_attn.in_proj_qkvz.weight_scale_inv",
                "F32",
                [1, 1],
                struct.pack("<f", 1.0),
            ),
        ],
        [
            ("model.language_model.layers.3.self_attn.q_proj.weight", "F8_E4M3", [16, 8], pattern(128, 3)),
            ("model.language_model.layers.3.self_attn.q_proj.weight_scale_inv", "F32", [1, 1], struct.pack("<f", 1.0)),
            ("mtp.layers.0.self_attn.q_proj.weight", "F8_E4M3", [16, 8], pattern(128, 4)),
            ("lm_head.weight", "BF16", [16, 8], pattern(256, 5)),
        ],
    ]
    weight_map, total = {}, 0
    for i, tensors in enumerate(shard_tensors, 1):
        fname = "model-%05d-of-%05d.safetensors" % (i, len(shard_tensors))
        total += safetensors(os.path.join(out, fname), tensors)
        for t in tensors:
            weight_map[t[0]] = fname
    dump("model.safetensors.index.json", {"metadata": {"total_size": total}, "weight_map": weight_map})


if __name__ == "__main__":
    main()
