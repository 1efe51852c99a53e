"""Make a tiny Qwen3 checkpoint that the real vLLM 0.27.1 CPU engine serves and that behaves:
asked for the weather with a tool on offer, it thinks inside <think>...</think> and answers with a
tool call in the Qwen3 XML format that vLLM's `qwen3_coder` tool parser and `qwen3` reasoning parser
read (vllm/parser/qwen3.py). Offline: the tokenizer is trained on local text, the weights on a
handful of chats, seeded, on the CPU (runs in the engine venv: torch, transformers, tokenizers).

Usage: python make_tiny_qwen3.py OUTDIR
Sizes (documented in tests/world/README.md): 4 layers x 4 KV heads x head_dim 64, bf16 =
4096 bytes of KV cache per token; max_position_embeddings 524288, so a 1 GiB CPU KV space
(VLLM_CPU_KVCACHE_SPACE=1) holds 262144 tokens and a context of 524288 is refused by vLLM itself.
"""

import glob
import json
import os
import random
import sys

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

SEED = 20261130
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>"]

# Qwen3-style chat template (the Qwen3-Coder tool format): tools listed in the system turn,
# assistant tool calls rendered back as <tool_call><function=...>, tool results as <tool_response>.
CHAT_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- (tool.function if tool.function is defined else tool) | tojson }}"
    "{%- endfor %}"
    "{{- '\\n</tools>\\nCall a tool as <tool_call>\\n<function=NAME>\\n<parameter=ARG>\\nVALUE\\n"
    "</parameter>\\n</function>\\n</tool_call><|im_end|>\\n' }}"
    "{%- elif messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'system' %}"
    "{%- elif message.role == 'tool' %}"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + (message.content or '') + '\\n</tool_response><|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' + (message.content or '') }}"
    "{%- for tc in message.tool_calls | default([]) %}"
    "{%- set fn = tc.function if tc.function is defined else tc %}"
    "{{- '<tool_call>\\n<function=' + fn.name + '>\\n' }}"
    "{%- set args = fn.arguments if fn.arguments is mapping else {} %}"
    "{%- for k, v in args.items() %}{{- '<parameter=' + k + '>\\n' + (v | string) + '\\n</parameter>\\n' }}"
    "{%- endfor %}{{- '</function>\\n</tool_call>' }}{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + (message.content or '') + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}"
)

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
# One city: copying a name from the prompt takes a tiny model far more steps than CI can spend.
CITIES = ["Beijing"]
THOUGHT = "The user asks for the weather in {city}. I will call get_weather."
QUESTIONS = [
    "What is the weather in {city}? Use the tool.",
    "What is the weather in {city}?",
    "How is the weather in {city} today?",
    "Weather in {city}, please.",
    "Is it raining in {city}?",
    "Tell me the weather in {city}.",
]
PLAIN = [
    ("Hello", "Hello! How can I help?"),
    ("Who are you?", "I am a tiny test model."),
    ("Say OK", "OK"),
    ("What is 2 + 2?", "4"),
]


def tool_answer(city):
    return (
        "<think>\n" + THOUGHT.format(city=city) + "\n</think>\n\n"
        "<tool_call>\n<function=get_weather>\n<parameter=city>\n" + city + "\n</parameter>\n</function>\n</tool_call>"
    )


def chats():
    out = []
    for city in CITIES:
        for q in QUESTIONS:
            out.append(([{"role": "user", "content": q.format(city=city)}], [WEATHER_TOOL], tool_answer(city)))
    for q, a in PLAIN:
        out.append(([{"role": "user", "content": q}], None, "<think>\nA short answer.\n</think>\n\n" + a))
        out.append(([{"role": "user", "content": q}], [WEATHER_TOOL], "<think>\nNo tool is needed.\n</think>\n\n" + a))
    return out


def train_tokenizer(corpus):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1024,
        special_tokens=SPECIAL,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None, unk_token=None
    )
    fast.add_special_tokens({"additional_special_tokens": SPECIAL[1:]})
    fast.chat_template = CHAT_TEMPLATE
    fast.model_max_length = 524288
    return fast


def main():
    out = sys.argv[1]
    random.seed(SEED)
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(2)

    examples = chats()
    corpus = []
    for path in sorted(glob.glob("/usr/share/common-licenses/*")):
        if os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as fh:
                corpus.append(fh.read())
    tok = train_tokenizer(corpus + [example[2] for example in examples] * 20 + [json.dumps(WEATHER_TOOL)] * 20)

    seqs = []
    for messages, tools, answer in examples:
        prompt = tok.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
        p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        a_ids = tok(answer + "<|im_end|>", add_special_tokens=False)["input_ids"]
        seqs.append((p_ids, a_ids))

    config = Qwen3Config(
        vocab_size=len(tok),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=64,
        max_position_embeddings=524288,
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        torch_dtype="bfloat16",
        bos_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
        eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
    )
    model = Qwen3ForCausalLM(config)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    model.train()
    pad = config.pad_token_id
    steps = int(os.environ.get("TINY_QWEN3_STEPS", "250"))
    for step in range(steps):
        batch = random.sample(seqs, min(8, len(seqs)))
        width = max(len(p) + len(a) for p, a in batch)
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        labels = torch.full((len(batch), width), -100, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, (p, a) in enumerate(batch):
            seq = p + a
            ids[i, : len(seq)] = torch.tensor(seq)
            labels[i, len(p) : len(seq)] = torch.tensor(a)
            mask[i, : len(seq)] = 1
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0 or step == steps - 1:
            print("step %d loss %.4f" % (step, loss.item()), flush=True)

    # The smoke test's exact question must come out as a parseable tool call, greedily.
    model.eval()
    p, a = seqs[0]
    with torch.no_grad():
        gen = model.generate(
            torch.tensor([p]),
            max_new_tokens=len(a) + 8,
            do_sample=False,
            eos_token_id=config.eos_token_id,
            pad_token_id=pad,
        )
    text = tok.decode(gen[0][len(p) :], skip_special_tokens=False)
    print("greedy answer: %r" % text)
    if "<function=get_weather>" not in text or "Beijing" not in text:
        sys.exit("the tiny model did not learn the tool call (raise TINY_QWEN3_STEPS)")

    os.makedirs(out)
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    # Qwen3's sampling defaults; vLLM applies them to requests that set none (--generation-config auto).
    with open(os.path.join(out, "generation_config.json"), "w") as fh:
        json.dump(
            {
                "bos_token_id": config.bos_token_id,
                "eos_token_id": [config.eos_token_id],
                "pad_token_id": pad,
                "do_sample": True,
                "temperature": 0.6,
                "top_k": 20,
                "top_p": 0.95,
            },
            fh,
            indent=2,
            sort_keys=True,
        )


if __name__ == "__main__":
    main()
