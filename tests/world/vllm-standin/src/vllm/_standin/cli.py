"""`vllm serve` argv handling rebuilt from the real 0.27.1 option table (flags.json).

The table is produced by gen_flags.py from the real parser; the pre-processing below follows
vllm/utils/argparse_utils.py (FlexibleArgumentParser.parse_args / _pull_args_from_config /
load_config_file) and the converters follow vllm/engine/arg_utils.py.
"""
import argparse
import json
import os
import re
import sys
from collections import defaultdict

from vllm._standin import miniyaml
from vllm.logger import init_logger

logger = init_logger("vllm.utils.argparse_utils")
FLAGS_JSON = os.environ.get("VLLM_STANDIN_FLAGS_JSON",
                            os.path.join(os.path.dirname(__file__), "flags.json"))


def load_table():
    with open(FLAGS_JSON) as fh:
        return json.load(fh)


# ---- converters (vllm/utils/argparse_utils.py, vllm/engine/arg_utils.py) ----
def human_readable_int(value):
    value = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if match:
        number, suffix = match.groups()
        if suffix in "kmgt":
            return int(float(number) * 10 ** (3 * ("kmgt".index(suffix) + 1)))
        try:
            return int(number) * 2 ** (10 * ("KMGT".index(suffix) + 1))
        except ValueError:
            raise argparse.ArgumentTypeError(
                "Decimals are not allowed with binary suffixes like %s. Did you mean to use "
                "%s%s instead?" % (suffix, number, suffix.lower()))
    return int(value)


def human_readable_int_or_auto(value):
    value = value.strip()
    if value == "-1" or value.lower() == "auto":
        return -1
    return human_readable_int(value)


def _parse(fn, label):
    def _parse_type(val):
        try:
            return fn(val)
        except ValueError:
            raise argparse.ArgumentTypeError("Value %s cannot be converted to %s." % (val, label))
    _parse_type.__name__ = label
    return _parse_type


def _expand_human_numbers(val):
    # JSON configs accept "80g"-style numbers (arg_utils._expand_json_human_readable_numbers).
    def repl(m):
        return str(human_readable_int(m.group(1)))
    return re.sub(r'(?<=[:\[,\s])\s*"?(\d+(?:\.\d+)?[kKmMgGtT])"?(?=\s*[,}\]])', repl, val)


def json_dataclass(val):
    try:
        obj = json.loads(_expand_human_numbers(val))
    except ValueError as e:
        raise argparse.ArgumentTypeError("1 validation error\n  Invalid JSON: %s" % e)
    if not isinstance(obj, dict):
        raise argparse.ArgumentTypeError("1 validation error\n  Input should be an object")
    return obj


def union_dict_and_str(val):
    if not re.match(r"(?s)^\s*{.*}\s*$", val):
        return str(val)
    return optional(json.loads, "json")(val)


def optional(fn, label):
    def _optional_type(val):
        if val == "" or val == "None":
            return None
        return _parse(fn, label)(val)
    return _optional_type


def check_port(value):
    try:
        value = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError("Port must be an integer")
    if not 1024 <= value <= 65535:
        raise argparse.ArgumentTypeError("Port must be between 1024 and 65535")
    return value


def lower_underscore(s):
    return s.lower().replace("-", "_")


def comma_list(s):
    return [int(d) if d.isdigit() else d for d in (part.strip() for part in s.split(","))]


_BASE = {
    "lower_underscore": lower_underscore, "comma_list": comma_list,
    "str": str, "int": int, "float": float, "json": json.loads,
    "human_readable_int": human_readable_int,
    "human_readable_int_or_auto": human_readable_int_or_auto,
    "union_dict_and_str": union_dict_and_str, "json_dataclass": json_dataclass,
    "check_port": check_port,
}


def converter(spec):
    if spec.startswith("optional:"):
        inner = spec[len("optional:"):]
        return optional(_BASE[inner], inner)
    fn = _BASE[spec]
    return fn if fn in (str, int, float, check_port, lower_underscore, comma_list, human_readable_int,
                        human_readable_int_or_auto, union_dict_and_str,
                        json_dataclass) else _parse(fn, spec)


class ConfigDefault(object):
    """A config-object default (EPLBConfig(), ...): not a str, so argparse leaves it alone."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


_ACTIONS = {
    "_StoreTrueAction": "store_true", "_StoreFalseAction": "store_false",
    "_StoreConstAction": "store_const", "_CountAction": "count",
    "BooleanOptionalAction": argparse.BooleanOptionalAction,
    "_StoreAction": "store", "_AppendAction": "append",
}


def build_serve_parser(subparsers, table):
    p = subparsers.add_parser("serve", usage="vllm serve [model_tag] [options]",
                              description="Launch a local OpenAI-compatible API server.")
    for a in table["actions"]:
        if a["action"] in ("_HelpAction", "_VersionAction"):
            continue
        kw = {"dest": a["dest"]} if a["option_strings"] else {}
        if "default" in a:
            kw["default"] = a["default"]
        elif "default_repr" in a:
            kw["default"] = ConfigDefault(a["default_repr"])
        if a["action"] in ("_StoreAction", "_AppendAction"):
            kw["action"] = _ACTIONS[a["action"]]
            kw["type"] = converter(a.get("type", "str"))
            if a.get("nargs") is not None:
                kw["nargs"] = a["nargs"]
            if "const" in a:
                kw["const"] = a["const"]
            if "choices" in a:
                kw["choices"] = a["choices"]
        else:
            kw["action"] = _ACTIONS[a["action"]]
        if a.get("required"):
            kw["required"] = True
        if a["option_strings"]:
            p.add_argument(*a["option_strings"], **kw)
        else:
            kw.pop("dest", None)
            p.add_argument(a["dest"], **kw)
    return p


def build_parser(table):
    parser = argparse.ArgumentParser(prog="vllm", description="vLLM CLI")
    parser.add_argument("-v", "--version", action="version", version=table["vllm_version"])
    sub = parser.add_subparsers(required=False, dest="subparser")
    build_serve_parser(sub, table)
    return parser


# ---- FlexibleArgumentParser pre-processing ----
def load_config_file(file_path):
    extension = file_path.split(".")[-1]
    if extension not in ("yaml", "yml"):
        raise ValueError("Config file must be of a yaml/yml type. %s supplied" % extension)
    try:
        with open(file_path) as fh:
            config = miniyaml.load(fh.read())
    except Exception:
        logger.error("Unable to read the config file at %s. Check path correctness", file_path)
        raise
    out = []
    for key, value in (config or {}).items():
        if isinstance(value, bool):
            if value:
                out.append("--" + key)
        elif isinstance(value, list):
            if value:
                out.append("--" + key)
                out.extend(str(item) for item in value)
        elif isinstance(value, dict):
            out += ["--" + key, json.dumps(value)]
        else:
            out += ["--" + key, str(value)]
    return out


def pull_args_from_config(args):
    assert args.count("--config") <= 1, "More than one config file specified!"
    index = args.index("--config")
    if index == len(args) - 1:
        raise ValueError("No config file specified! Please check your command-line arguments.")
    config_args = load_config_file(args[index + 1])
    if args[0].startswith("-"):
        return config_args + args[0:index] + args[index + 2:]
    if args[0] == "serve":
        model_in_cli = len(args) > 1 and not args[1].startswith("-")
        if not model_in_cli and "--model" not in config_args:
            raise ValueError("No model specified! Please specify model either "
                             "as a positional argument or in a config file.")
        if model_in_cli:
            return [args[0], args[1]] + config_args + args[2:index] + args[index + 2:]
    return [args[0]] + config_args + args[1:index] + args[index + 2:]


def preprocess(args):
    args = list(args)
    if args and args[0] == "serve":
        idx = next((i for i, a in enumerate(args) if re.match(r"^--model(=.+|$)", a)), None)
        if idx is not None:
            logger.warning("With `vllm serve`, you should provide the model as a positional "
                           "argument or in a config file instead of via the `--model` option. "
                           "The `--model` option will be removed in a future version.")
            if args[idx] == "--model":
                tag, rest = args[idx + 1], idx + 2
            else:
                tag, rest = args[idx][len("--model="):], idx + 1
            args = ["serve", tag] + args[1:idx] + args[rest:]
        if (len(args) > 1 and args[1].startswith("-")
                and not any(re.match(r"^--config(=.+|$)", a) for a in args)
                and any(re.match(r"^--served[-_]model[-_]name(=.+|$)", a) for a in args)):
            raise ValueError("`model` should be provided as the first positional argument when "
                             "using `vllm serve`. i.e. `vllm serve <model> --<arg> <value>`.")
    if "--config" in args:
        args = pull_args_from_config(args)

    pattern = re.compile(r"(?<=--)[^\.]*")

    def dash(m):
        return m.group(0).replace("_", "-")
    out = []
    for i, arg in enumerate(args):
        if arg.startswith("--"):
            if "=" in arg:
                key, value = arg.split("=", 1)
                out.append("%s=%s" % (pattern.sub(dash, key, count=1), value))
            else:
                out.append(pattern.sub(dash, arg, count=1))
        elif arg.startswith("-O") and arg != "-O":
            out += ["--optimization-level", arg[3:] if arg[2] == "=" else arg[2:]]
        elif arg == "-O" and i + 1 < len(args) and args[i + 1] in {"0", "1", "2", "3"}:
            out.append("--optimization-level")
        else:
            out.append(arg)

    # dotted JSON sub-keys: --speculative-config.method mtp
    delete, dict_args = set(), defaultdict(dict)
    for i, arg in enumerate(out):
        if i in delete or not (arg.startswith("-") and "." in arg):
            continue
        if "=" in arg:
            arg, value_str = arg.split("=", 1)
            if "." not in arg:
                continue
        else:
            value_str = out[i + 1]
            delete.add(i + 1)
        if arg.endswith("+"):
            arg, value_str = arg[:-1], json.dumps(value_str.split(","))
        key, *keys = arg.split(".")
        try:
            value = json.loads(value_str)
        except ValueError:
            try:
                value = human_readable_int(value_str)
            except (ValueError, argparse.ArgumentTypeError):
                value = value_str
        node = dict_args[key]
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = value
        delete.add(i)
    out = [a for i, a in enumerate(out) if i not in delete]
    for key, value in dict_args.items():
        out += [key, json.dumps(value)]
    return out


def parse(argv, table=None):
    """argv as after `vllm` (e.g. ['serve', '/models/x', '--port', '8001'])."""
    table = table or load_table()
    parser = build_parser(table)
    args = parser.parse_args(preprocess(argv))
    if getattr(args, "model_tag", None) is not None:
        args.model = args.model_tag
    return parser, args, table


def non_default(args, table):
    defaults = {a["dest"]: a.get("default") for a in table["actions"] if "default" in a}
    return {k: v for k, v in sorted(vars(args).items())
            if k in defaults and v != defaults[k] and k != "model_tag"}


def fail(msg, code=1):
    sys.stderr.write(msg + "\n")
    sys.exit(code)
