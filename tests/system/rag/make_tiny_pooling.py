"""Make a tiny embedding model and a tiny reranker that the real vLLM 0.27.1 CPU engine serves (issue 44).

Both are BERT (vLLM 0.27.1 registers BertModel as an embedding model and BertForSequenceClassification as a
cross-encoder: model_executor/models/registry.py), randomly initialised and seeded, with a real WordPiece tokenizer
over a hand-written vocabulary (transformers' BertTokenizerFast, saved as tokenizer.json): what they answer means
nothing, its shape is what the test reads. The embedder carries sentence-transformers' modules.json and
1_Pooling/config.json (CLS pooling), as bge-m3 does; the reranker has one label (a relevance score), as
bge-reranker-v2-m3. Runs in the engine venv (torch, transformers); offline.

Usage: python make_tiny_pooling.py OUTDIR   ->  OUTDIR/tiny-embed, OUTDIR/tiny-rerank
Sizes: hidden 128, 2 layers, 2 heads (head_dim 64: the CPU attention kernels take no smaller), 128 positions, bf16.
"""

import json
import os
import sys

import torch
from transformers import BertConfig, BertForSequenceClassification, BertModel, BertTokenizerFast

SEED = 20261207
HIDDEN = 128
POSITIONS = 128
WORDS = (
    "the a an is are was in on of to and or where what which who city forbidden beijing centre center weather "
    "tomatoes need warm ripen document query answer model embedding rerank score search find river mountain "
    "north south east west old new big small red green blue"
).split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list(".,?!'") + [chr(c) for c in range(ord("a"), ord("z") + 1)]
VOCAB += ["##" + chr(c) for c in range(ord("a"), ord("z") + 1)] + WORDS


def tokenizer(out):
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "vocab.txt")
    with open(path, "w") as f:
        f.write("\n".join(VOCAB) + "\n")
    tok = BertTokenizerFast(vocab_file=path, do_lower_case=True, model_max_length=POSITIONS)
    tok.save_pretrained(out)
    return tok


def config(**kw):
    return BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=HIDDEN,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=4 * HIDDEN,
        max_position_embeddings=POSITIONS,
        torch_dtype="bfloat16",
        **kw,
    )


def embedder(out):
    torch.manual_seed(SEED)
    tokenizer(out)
    model = BertModel(config(architectures=["BertModel"]), add_pooling_layer=False)
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    with open(os.path.join(out, "modules.json"), "w") as f:
        json.dump(modules, f, indent=2)
    os.makedirs(os.path.join(out, "1_Pooling"), exist_ok=True)
    with open(os.path.join(out, "1_Pooling", "config.json"), "w") as f:
        json.dump(
            {"word_embedding_dimension": HIDDEN, "pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}, f
        )
    with open(os.path.join(out, "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": POSITIONS, "do_lower_case": False}, f)


def reranker(out):
    torch.manual_seed(SEED + 1)
    tokenizer(out)
    model = BertForSequenceClassification(config(architectures=["BertForSequenceClassification"], num_labels=1))
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)


def main(outdir):
    embedder(os.path.join(outdir, "tiny-embed"))
    reranker(os.path.join(outdir, "tiny-rerank"))


if __name__ == "__main__":
    main(sys.argv[1])
