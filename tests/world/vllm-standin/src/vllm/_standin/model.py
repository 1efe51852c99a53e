"""Offline checks on the model argument, as vLLM 0.27.1 + transformers meet them at start-up."""
import json
import os
import struct
import time

from vllm.logger import init_logger

logger = init_logger("vllm.transformers_utils.config")


class LocalEntryNotFoundError(OSError):
    pass


class SafetensorError(Exception):
    pass


# Tracebacks name the classes the way the real libraries do.
LocalEntryNotFoundError.__module__ = "huggingface_hub.errors"
SafetensorError.__module__ = "safetensors_rust"


def _hub_unreachable(model):
    # A repo id or a missing relative path goes to the Hub; here nothing is reachable (the image
    # never opens a socket), so it fails the way huggingface_hub does after its retries.
    if os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0", "false", "False"):
        raise LocalEntryNotFoundError(
            "Cannot find an appropriate cached "
            "snapshot folder for the specified revision on the local disk and outgoing traffic "
            "has been disabled. To enable repo look-ups and downloads online, pass "
            "'local_files_only=False' as input.\n" + _invalid_repo(model))
    delay = float(os.environ.get("VLLM_STANDIN_HUB_RETRY_SECONDS", "5"))
    for attempt in range(1, 4):
        logger.warning("'(MaxRetryError(\"HTTPSConnectionPool(host='huggingface.co', port=443): "
                       "Max retries exceeded with url: /api/models/%s/revision/main\"))' "
                       "thrown while requesting HEAD https://huggingface.co/%s/resolve/main/"
                       "config.json (attempt %d)", model, model, attempt)
        time.sleep(delay / 3)
    raise OSError(
        "We couldn't connect to 'https://huggingface.co' to load the files, and couldn't "
        "find them in the cached files.\n" + _invalid_repo(model))


def _invalid_repo(model):
    return ("Invalid repository ID or local directory specified: '%s'.\n"
            "Please verify the following requirements:\n"
            "1. Provide a valid Hugging Face repository ID.\n"
            "2. Specify a local directory that contains a recognized configuration file.\n"
            "   - For Hugging Face models: ensure the presence of a 'config.json'.\n"
            "   - For Mistral models: ensure the presence of a 'params.json'.\n" % model)


def read_safetensors_header(path):
    with open(path, "rb") as fh:
        raw = fh.read(8)
        if len(raw) != 8:
            raise SafetensorError("Error while deserializing header: HeaderTooSmall (%s)" % path)
        (n,) = struct.unpack("<Q", raw)
        header = json.loads(fh.read(n))
        data_len = os.fstat(fh.fileno()).st_size - 8 - n
    end = max([v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"] or [0])
    if end != data_len:
        raise SafetensorError("Error while deserializing header: MetadataIncompleteBuffer (%s)"
                              % path)
    return header, data_len


def check(args):
    """Return (config dict, weight bytes, generation config or None), or raise what vLLM raises."""
    model = args.model
    if not os.path.isdir(model):
        _hub_unreachable(model)
    if not os.path.isfile(os.path.join(model, "config.json")):
        raise ValueError(_invalid_repo(model))
    with open(os.path.join(model, "config.json")) as fh:
        config = json.load(fh)

    tok_dir = args.tokenizer or model
    if not os.path.isdir(tok_dir):
        _hub_unreachable(tok_dir)
    if not any(os.path.isfile(os.path.join(tok_dir, f))
               for f in ("tokenizer.json", "tokenizer.model", "vocab.json")):
        raise OSError(
            "Can't load tokenizer for '%s'. If you were trying to load it from "
            "'https://huggingface.co/models', make sure you don't have a local directory with the "
            "same name. Otherwise, make sure '%s' is the correct path to a directory containing "
            "all relevant files for a Qwen2TokenizerFast tokenizer." % (tok_dir, tok_dir))

    multimodal = "vision_config" in config
    mm_off = args.language_model_only or _all_zero(args.limit_mm_per_prompt)
    if multimodal and not mm_off and not os.path.isfile(
            os.path.join(model, "preprocessor_config.json")):
        raise OSError(
            "Can't load image processor for '%s'. If you were trying to load it from "
            "'https://huggingface.co/models', make sure you don't have a local directory with the "
            "same name. Otherwise, make sure '%s' is the correct path to a directory containing "
            "a preprocessor_config.json file" % (model, model))

    shards = sorted(f for f in os.listdir(model) if f.endswith(".safetensors"))
    if not shards:
        raise RuntimeError("Cannot find any model weights with `%s`" % model)
    index_path = os.path.join(model, "model.safetensors.index.json")
    if os.path.isfile(index_path):
        with open(index_path) as fh:
            index = json.load(fh)
        missing = sorted(set(index["weight_map"].values()) - set(shards))
        if missing:
            raise FileNotFoundError(2, "No such file or directory", os.path.join(model, missing[0]))
    weight_bytes = sum(read_safetensors_header(os.path.join(model, s))[1] for s in shards)

    gen = None
    gen_path = os.path.join(model, "generation_config.json")
    if os.path.isfile(gen_path):
        with open(gen_path) as fh:
            gen = json.load(fh)
    return config, weight_bytes, gen


def _all_zero(limit):
    return isinstance(limit, dict) and limit and all(
        (v if isinstance(v, int) else (v or {}).get("count", 1)) == 0 for v in limit.values()) \
        and {"image", "video"} <= set(limit)


def chat_template(args):
    """The chat template vLLM would use, or None (then every chat request fails)."""
    if args.chat_template:
        if os.path.isfile(args.chat_template):
            with open(args.chat_template) as fh:
                return fh.read()
        return args.chat_template
    tok_dir = args.tokenizer or args.model
    jinja = os.path.join(tok_dir, "chat_template.jinja")
    if os.path.isfile(jinja):
        with open(jinja) as fh:
            return fh.read()
    try:
        with open(os.path.join(tok_dir, "tokenizer_config.json")) as fh:
            return json.load(fh).get("chat_template")
    except (OSError, ValueError):
        return None
