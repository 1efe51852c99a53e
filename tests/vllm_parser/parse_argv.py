"""Run inside the vLLM 0.27.1 venv: parse each argv the way `vllm serve` does.

stdin: JSON list of {"id", "argv"}; writes to the file named by argv[1] a JSON list of {"id", "ok", "error", "args"}.
"""
import contextlib
import io
import json
import sys

from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
from vllm.utils.argparse_utils import FlexibleArgumentParser


def registered(kind):
    # The same registries `vllm serve` resolves names against at start-up.
    if kind == "reasoning":
        from vllm.reasoning import ReasoningParserManager as mgr
    else:
        from vllm.tool_parsers import ToolParserManager as mgr
    names = set()
    for attr in ("reasoning_parsers", "tool_parsers", "lazy_parsers", "_lazy_parsers"):
        names |= set(getattr(mgr, attr, {}) or {})
    return names


def main():
    cases = json.load(sys.stdin)
    reasoning, tools = registered("reasoning"), registered("tool")
    out = []
    for case in cases:
        parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                ns = parser.parse_args(case["argv"])
            validate_parsed_serve_args(ns)
            if ns.reasoning_parser and ns.reasoning_parser not in reasoning:
                raise ValueError("reasoning parser %r not registered" % ns.reasoning_parser)
            if ns.tool_call_parser and ns.tool_call_parser not in tools:
                raise ValueError("tool parser %r not registered" % ns.tool_call_parser)
            keep = ("model_tag", "max_model_len", "max_num_seqs", "gpu_memory_utilization",
                    "kv_cache_dtype", "enable_prefix_caching", "speculative_config",
                    "kv_offloading_size", "kv_offloading_backend", "reasoning_parser",
                    "tool_call_parser", "enable_auto_tool_choice", "api_key",
                    "default_chat_template_kwargs", "attention_config", "tensor_parallel_size",
                    "language_model_only", "kv_cache_memory_bytes", "served_model_name",
                    "enforce_eager", "mm_processor_kwargs", "max_num_batched_tokens", "seed", "max_log_len")
            args = {k: getattr(ns, k, None) for k in keep}
            out.append({"id": case["id"], "ok": True, "error": None,
                        "args": json.loads(json.dumps(args, default=str))})
        except (SystemExit, Exception) as exc:  # argparse exits on a bad flag
            out.append({"id": case["id"], "ok": False, "args": None,
                        "error": (err.getvalue().strip() or repr(exc))[-600:]})
    with open(sys.argv[1], "w") as fh:  # stdout carries vLLM's own log lines
        json.dump(out, fh)


if __name__ == "__main__":
    main()
