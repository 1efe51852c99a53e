"""Parse argv the way `vllm serve` does, with the vLLM this Python imports: no engine start, no GPU, no network.

Run by the vllm_service role in a throwaway `--network none` container of the new image before a restart
(issue 30), and by tests/vllm_parser in the 0.27.1 venv.

  parse_argv.py OUT            stdin: JSON list of {"id", "argv"}; writes to OUT a JSON list of
                               {"id", "ok", "error", "args", "vllm"}
  parse_argv.py - ARGV...      one case, id "plan"; prints that list as one line "AIRGAP_VLLM_PARSE <json>"
                               (stdout also carries vLLM's own log lines; the role reads the marked one). An image
                               whose vLLM parser cannot be imported answers ok null, "unchecked": true (the module
                               warns instead of guessing). The role runs it as `python3 -c <this file> - ARGV...`.
"""

import contextlib
import io
import json
import sys

MARKER = "AIRGAP_VLLM_PARSE"


# Where `vllm serve` takes its parser from (vllm/entrypoints/cli/serve.py imports make_arg_parser from there): the
# module moved twice - openai/ up to 0.28, launchers/ from 0.29 to 0.32, common/ from 0.33 (each release's RECORD).
CLI_ARGS_MODULES = (
    "vllm.entrypoints.common.cli_args",
    "vllm.entrypoints.launchers.cli_args",
    "vllm.entrypoints.openai.cli_args",
)


def _cli_args():
    import importlib

    missing = []
    for name in CLI_ARGS_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            missing.append("%s (%s)" % (name, exc))
            continue
        if hasattr(module, "make_arg_parser"):
            return module
        missing.append("%s (no make_arg_parser)" % name)
    raise ImportError("no vllm serve parser in this vLLM: " + "; ".join(missing))


def _imports():
    cli_args = _cli_args()
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # releases before the move (0.10 .. 0.11)
        from vllm.utils import FlexibleArgumentParser
    validate = getattr(cli_args, "validate_parsed_serve_args", None) or (lambda ns: None)
    return cli_args.make_arg_parser, validate, FlexibleArgumentParser


def registered(kind):
    # The same registries `vllm serve` resolves names against at start-up; a release that moved them: unchecked.
    try:
        if kind == "reasoning":
            from vllm.reasoning import ReasoningParserManager as mgr
        else:
            try:
                from vllm.tool_parsers import ToolParserManager as mgr
            except ImportError:
                from vllm.entrypoints.openai.tool_parsers import ToolParserManager as mgr
    except ImportError:
        return None
    names = set()
    for attr in ("reasoning_parsers", "tool_parsers", "lazy_parsers", "_lazy_parsers"):
        names |= set(getattr(mgr, attr, {}) or {})
    return names


def parse(cases):
    make_arg_parser, validate_parsed_serve_args, FlexibleArgumentParser = _imports()
    reasoning, tools = registered("reasoning"), registered("tool")
    out = []
    for case in cases:
        parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                ns = parser.parse_args(case["argv"])
            validate_parsed_serve_args(ns)
            name = getattr(ns, "reasoning_parser", None)
            if name and reasoning is not None and name not in reasoning:
                raise ValueError("argument --reasoning-parser: reasoning parser %r not registered" % name)
            name = getattr(ns, "tool_call_parser", None)
            if name and tools is not None and name not in tools:
                raise ValueError("argument --tool-call-parser: tool parser %r not registered" % name)
            keep = (
                "model_tag",
                "max_model_len",
                "max_num_seqs",
                "gpu_memory_utilization",
                "kv_cache_dtype",
                "enable_prefix_caching",
                "speculative_config",
                "kv_offloading_size",
                "kv_offloading_backend",
                "reasoning_parser",
                "tool_call_parser",
                "enable_auto_tool_choice",
                "api_key",
                "default_chat_template_kwargs",
                "attention_config",
                "tensor_parallel_size",
                "language_model_only",
                "kv_cache_memory_bytes",
                "served_model_name",
                "enforce_eager",
                "mm_processor_kwargs",
                "max_num_batched_tokens",
                "seed",
                "max_log_len",
                "runner",
                "convert",
                "hf_overrides",
            )
            args = {k: getattr(ns, k, None) for k in keep}
            out.append({"id": case["id"], "ok": True, "error": None, "args": json.loads(json.dumps(args, default=str))})
        except (SystemExit, Exception) as exc:  # argparse exits on a bad flag
            out.append(
                {"id": case["id"], "ok": False, "args": None, "error": (err.getvalue().strip() or repr(exc))[-600:]}
            )
    return out


def release():
    # What the image's package metadata says (importlib.metadata: Python 3.8+); None when it cannot say.
    try:
        from importlib.metadata import version

        return version("vllm")
    except Exception:  # no metadata (a stand-in), Python 3.7
        return None


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "-":
        try:
            out = parse([{"id": "plan", "argv": sys.argv[2:]}])
        except ImportError as exc:  # no vLLM parser in this image: nothing judged, said so
            out = [{"id": "plan", "ok": None, "unchecked": True, "args": None, "error": repr(exc)[-300:]}]
        for case in out:
            case["vllm"] = release()
        sys.stdout.flush()
        print(MARKER + " " + json.dumps(out))
        return
    out = parse(json.load(sys.stdin))
    with open(sys.argv[1], "w") as fh:  # stdout carries vLLM's own log lines
        json.dump(out, fh)


if __name__ == "__main__":
    main()
