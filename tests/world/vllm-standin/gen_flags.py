"""Dump the real vLLM `vllm serve` option table to flags.json for the stand-in image.

Run with the real vLLM 0.27.1 venv (tests/vllm_parser/setup-venv.sh):
    $VENV/bin/python tests/world/vllm-standin/gen_flags.py   # writes flags.json next to it
The stand-in rebuilds an argparse parser from this table, so its accept/reject behaviour
(unknown flags, --x/--no-x pairs, choices, nargs, k/K suffixes, JSON flags) is the real one.
"""

import json
import os
import sys
from importlib.metadata import version


def _closure_fn(fn):
    for cell in fn.__closure__ or ():
        if callable(cell.cell_contents):
            return cell.cell_contents
    raise ValueError("no wrapped callable in %r" % fn)


def describe_type(fn):
    """Name the converter the way the stand-in implements it (vllm/engine/arg_utils.py helpers)."""
    if fn is None or fn is str:
        return "str"
    if fn is int or fn is float:
        return fn.__name__
    if fn is json.loads:
        return "json"
    name = getattr(fn, "__name__", "")
    if name == "_optional_type":
        return "optional:" + describe_type(_closure_fn(fn))
    if name == "_parse_type":
        return describe_type(_closure_fn(fn))
    if name == "parse_dataclass":
        return "json_dataclass"
    if name in ("human_readable_int", "human_readable_int_or_auto", "union_dict_and_str", "check_port"):
        return name
    if name == "<lambda>":
        # EngineArgs.add_cli_args lambdas: --device-ids (comma list), --moe/--linear-backend.
        if fn("Ab-C") == "ab_c":
            return "lower_underscore"
        if fn("2, x") == [2, "x"]:
            return "comma_list"
    raise ValueError("unknown converter %r (%s)" % (fn, name))


STD_ACTIONS = (
    "_StoreAction",
    "_AppendAction",
    "_StoreTrueAction",
    "_StoreFalseAction",
    "_StoreConstAction",
    "_CountAction",
    "BooleanOptionalAction",
    "_HelpAction",
    "_VersionAction",
)


def jsonable(value):
    try:
        json.dumps(value)
        return value
    except TypeError:
        return repr(value)


def main():
    from vllm.entrypoints.openai.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    out = []
    for act in parser._actions:
        kind = type(act).__name__
        entry = {
            "option_strings": list(act.option_strings),
            "dest": act.dest,
            "action": kind,
        }
        if kind not in STD_ACTIONS:
            # Custom actions (LoRAParserAction) validate JSON themselves; the stand-in stores.
            entry["action"] = "_StoreAction"
            entry["custom_action"] = kind
            kind = "_StoreAction"
        if kind in ("_StoreAction", "_AppendAction"):
            entry["type"] = describe_type(act.type)
            entry["nargs"] = act.nargs
            if act.const is not None:
                entry["const"] = jsonable(act.const)
            if act.choices is not None:
                entry["choices"] = [jsonable(c) for c in act.choices]
        if kind not in ("_HelpAction", "_VersionAction"):
            try:
                json.dumps(act.default)
                entry["default"] = act.default
            except TypeError:
                # Config objects (EPLBConfig(), ...): argparse must not run them through `type`.
                entry["default_repr"] = repr(act.default)
        if act.required:
            entry["required"] = True
        out.append(entry)
    # validate_api_server_args() checks these names after parsing (entrypoints/openai/api_server.py)
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    doc = {
        "vllm_version": version("vllm").split("+")[0],  # drop the venv's +cpu tag
        "prog": "vllm serve",
        "actions": out,
        "tool_call_parsers": sorted(ToolParserManager.list_registered()),
        "reasoning_parsers": sorted(ReasoningParserManager.list_registered()),
    }
    # vLLM logs to stdout, so the table goes to a file.
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "flags.json")
    with open(path, "w") as fh:
        json.dump(doc, fh, indent=1, sort_keys=True)
        fh.write("\n")


if __name__ == "__main__":
    main()
