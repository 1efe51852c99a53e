"""Make a tiny Qwen3 checkpoint that does the load check's needle task (issue 42, item 2): given the needle profile's
own prompt - a plain-text haystack with one fact "The magic number of NAME is NNNNNN." at some depth and the question
at its end - it answers with the number. The real vLLM 0.27.1 CPU engine serves it, so that tests/needle proves the
profile's recall end to end (3 of 3 with the unquantised KV cache and with fp8).

Made the way make_tiny_qwen3.py makes the served model, with its parts (Qwen's special tokens and chat template, the
byte-level BPE trained on local text, the Qwen3 architecture; that script itself is left untouched: it feeds the
served snapshot), seeded, on one CPU thread, offline. The prompts are the collection's own
(plugins/module_utils/service/_loadcheck_profiles.py needle_prompt, imported), the facts random: names from the profile's list
and made-up ones, six-digit numbers, depths anywhere in (0, 1), haystacks of 10 to 1,900 tokens (a curriculum: short
first). What makes it learn in minutes: numbers tokenized in groups of three (needle_tokenizer: the answer's two
tokens are each the only one of its kind in the prompt, found by what they are - single digits would need an induction
circuit, which did not form in 1,000 steps here), the number tokens' kinds given a direction at init (kind_init), and
the loss and output layer on the answer only. Checked at the end as saved (bf16) on the profile's prompts at 7 depths
each of about 430, 1,370 and 2,700 tokens (seeds never trained on); the build refuses a model that misses one.

Usage: python make_tiny_needle.py OUTDIR [REPO]   (REPO: the collection's work tree, default three folders up)
       python make_tiny_needle.py --fingerprint REPO   (what of the collection it is trained on, for the cache key)
Env:   TINY_NEEDLE_STEPS (training steps, default 1000), TINY_NEEDLE_THREADS (torch threads, default 1)
Sizes: vocabulary 3072, hidden 128, 2 layers x 4 heads (4 KV heads) of head_dim 64 (as the served model; the CPU
attention refuses 16), bf16: 2048 bytes of KV cache a token (1024 with fp8); 32768 positions; 1.7 MB of weights.
"""

import atexit
import glob
import json
import os
import random
import shutil
import sys
import tempfile
import time

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_tiny_qwen3 as base  # noqa: E402

SEED = 20261211
POSITIONS = 32768
VOCAB = 3072
# Haystack sizes trained on, in the profile's context_len (3 characters a token: about 0.7 of the model's tokens).
TRAIN_CONTEXT = (16, 2800)
SHORT = 40
TOKENS_A_STEP = 2048
LR = 3e-3
# Checked after training: the profile's prompts at depths and lengths never trained on.
CHECK_CONTEXT = (600, 2000, 4000)
CHECK_DEPTHS = 7


def profiles_module(repo):
    """The collection's _loadcheck_profiles, imported from the work tree (as ansible_collections.airgap.vllm)."""
    root = tempfile.mkdtemp(prefix="needle-collection-")
    atexit.register(shutil.rmtree, root, True)
    os.makedirs(os.path.join(root, "ansible_collections", "airgap"))
    os.symlink(os.path.abspath(repo), os.path.join(root, "ansible_collections", "airgap", "vllm"))
    sys.path.insert(0, root)
    from ansible_collections.airgap.vllm.plugins.module_utils.service import _loadcheck_profiles

    return _loadcheck_profiles


def needle_tokenizer(corpus):
    """make_tiny_qwen3's tokenizer (a byte-level BPE with Qwen's special tokens and its chat template), with digits
    grouped in threes and a vocabulary that holds every group: a six-digit number is always two tokens, " ABC" then
    "DEF", each of a kind the haystack has no other of - so the answer is found by what the tokens are, where a
    number of single digits would have to be copied by position (an induction circuit, far slower to learn)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r" ?\d{1,3}"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=base.SPECIAL,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None, unk_token=None
    )
    fast.add_special_tokens({"additional_special_tokens": base.SPECIAL[1:]})
    fast.chat_template = base.CHAT_TEMPLATE
    fast.model_max_length = POSITIONS
    return fast


def made_up_name(rng):
    consonants, vowels = "bcdfghjklmnprstvz", "aeiou"
    n = "".join(rng.choice(consonants) + rng.choice(vowels) for _i in range(rng.randint(1, 3)))
    return n.capitalize()


def example(P, tok, rng, context_len):
    """(prompt ids, answer ids) of one needle question: the profile's prompt, the number and the end of turn."""
    name = rng.choice(P.NEEDLE_NAMES) if rng.random() < 0.5 else made_up_name(rng)
    fact = {"name": name, "number": str(rng.randint(100000, 999999)), "depth": rng.random()}
    prompt = P.needle_prompt(fact, context_len, 3)
    p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    a_ids = tok(" %s." % fact["number"], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    return p_ids, a_ids, fact


def padded(pairs, pad):
    """(ids, mask, where, targets) of (prompt, answer) pairs: the batch, right-padded, and the positions whose next
    token is an answer token, with those tokens (the loss is on the answers only)."""
    width = max(len(p) + len(a) for p, a in pairs)
    ids = torch.full((len(pairs), width), pad, dtype=torch.long)
    mask = torch.zeros((len(pairs), width), dtype=torch.long)
    rows, cols, targets = [], [], []
    for i, (p, a) in enumerate(pairs):
        seq = p + a
        ids[i, : len(seq)] = torch.tensor(seq)
        mask[i, : len(seq)] = 1
        rows += [i] * len(a)
        cols += list(range(len(p) - 1, len(seq) - 1))
        targets += a
    return ids, mask, (torch.tensor(rows), torch.tensor(cols)), torch.tensor(targets)


def answer_loss(model, batch):
    """Cross-entropy of the answer tokens, the output layer applied at their positions only (the haystack's logits
    are never needed: most of a step's time otherwise, with a vocabulary of 3072)."""
    ids, mask, where, targets = batch
    hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
    return torch.nn.functional.cross_entropy(model.lm_head(hidden[where]).float(), targets)


def kind_init(model, tok, seed):
    """Give the two kinds of number token ("ABC" with its space, "DEF" without) a shared direction each in the
    embedding, at the size of a token's own: the model starts knowing which tokens are parts of a number (each one is
    seen a few times in training; the kind is what the answer is found by). Trained from there like every weight."""
    g = torch.Generator().manual_seed(seed)
    emb = model.model.embed_tokens.weight
    first, rest = torch.randn(emb.shape[1], generator=g), torch.randn(emb.shape[1], generator=g)
    with torch.no_grad():
        scale = emb.norm(dim=1).mean() / emb.shape[1] ** 0.5
        for text, i in tok.get_vocab().items():
            if len(text) == 4 and text[0] == "\u0120" and text[1:].isdigit():
                emb[i] += scale * first
            elif len(text) == 3 and text.isdigit():
                emb[i] += scale * rest


def recall(model, P, tok, context_len, depths, seed):
    """How many of the profile's own facts (needle_facts, at `depths` depths) the model recalls greedily."""
    got = []
    for fact in P.needle_facts(seed, depths):
        ids = tok(P.needle_prompt(fact, context_len, 3), add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            out = model.generate(
                torch.tensor([ids]),
                max_new_tokens=10,
                do_sample=False,
                eos_token_id=tok.eos_token_id,
                pad_token_id=tok.pad_token_id,
            )
        text = tok.decode(out[0][len(ids) :], skip_special_tokens=True)
        got.append((fact["depth"], fact["number"] in text, len(ids)))
    return got


def fingerprint(P):
    """What of the collection the model is trained on: the profile's prompt (haystack, fact, question) and names."""
    fact = {"name": "Ada", "number": "123456", "depth": 0.5}
    return json.dumps({"prompt": P.needle_prompt(fact, 200, 3), "names": list(P.NEEDLE_NAMES)}, sort_keys=True)


def main():
    if sys.argv[1] == "--fingerprint":  # tests/world/build.sh keys the model by it
        print(fingerprint(profiles_module(sys.argv[2])))
        return
    out = sys.argv[1]
    repo = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "..", "..", "..")
    P = profiles_module(repo)
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(int(os.environ.get("TINY_NEEDLE_THREADS", "1")))

    corpus = []
    for path in sorted(glob.glob("/usr/share/common-licenses/*")):
        if os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as fh:
                corpus.append(fh.read())
    # The haystack and the question often enough that their words become tokens of their own (about 4 characters a
    # token: the profile's 3 keeps its prompt well inside the context).
    question = P.needle_prompt({"name": "Ada", "number": "123456", "depth": 0.5}, 1, 3)
    # And numbers, so that every group of three digits becomes a token (needle_tokenizer).
    numbers = ["".join(" is %d." % rng.randint(100000, 999999) for _i in range(1000)) for _j in range(200)]
    tok = needle_tokenizer(corpus + ["".join(P._HAYSTACK) + question] * 400 + numbers)
    probe = P.needle_prompt({"name": "Ada", "number": "123456", "depth": 0.5}, 2000, 3)
    print("tokenizer: %d tokens, %.2f characters a token" % (len(tok), len(probe) / len(tok(probe)["input_ids"])))

    config = Qwen3Config(
        vocab_size=len(tok),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=64,
        max_position_embeddings=POSITIONS,
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        torch_dtype="bfloat16",
        bos_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
        eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
    )
    model = Qwen3ForCausalLM(config)
    model.config._attn_implementation = "sdpa"
    kind_init(model, tok, SEED)
    pad = config.pad_token_id
    steps = int(os.environ.get("TINY_NEEDLE_STEPS", "1000"))
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=LR, total_steps=steps, pct_start=0.05)
    model.train()
    began = time.time()
    for step in range(steps):
        # A curriculum: haystacks of a sentence or two for the first third (the answer is learnt there, fast: attention
        # over a short context is sharp), then growing to TRAIN_CONTEXT[1]; each step about TOKENS_A_STEP tokens.
        grown = min(1.0, max(0.0, (step / float(steps) - 0.3) / 0.5))
        top = TRAIN_CONTEXT[1] ** grown * SHORT ** (1.0 - grown)
        context_len = rng.randint(TRAIN_CONTEXT[0], int(top))
        size = max(2, TOKENS_A_STEP // (context_len * 2 // 3 + 30))  # the question is about 30 tokens
        loss = answer_loss(model, padded([example(P, tok, rng, context_len)[:2] for _i in range(size)], pad))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 50 == 0 or step == steps - 1:
            print(
                "step %d context %d loss %.4f (%.0f s)" % (step, context_len, loss.item(), time.time() - began),
                flush=True,
            )

    model.eval()
    model.to(torch.bfloat16)
    # Saved first, checked as saved (bf16, as the engine serves it): a model that misses is left for a look, in a
    # folder tests/world/build.sh never takes for a built one.
    os.makedirs(out)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    missed = []
    for context_len in CHECK_CONTEXT:
        got = recall(model, P, tok, context_len, CHECK_DEPTHS, seed=context_len)
        print("context_len %d (%d tokens): recalled %s" % (context_len, got[0][2], [int(g[1]) for g in got]))
        missed += [(context_len, g[0]) for g in got if not g[1]]
    print("trained and checked in %.0f s" % (time.time() - began))
    if missed:
        sys.exit("the tiny needle model did not recall at %s (context_len, depth)" % missed)


if __name__ == "__main__":
    main()
