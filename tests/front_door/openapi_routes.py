"""The real vLLM engine's /openapi.json route table, without an engine (run with the vLLM venv's python).

    python openapi_routes.py            -> JSON {"version": ..., "groups": {group: {path: [methods]}}, "errors": {}}

vLLM's API server builds its FastAPI app from the CLI args and the model's supported tasks
(vllm.entrypoints.openai.api_server.build_app); the app's openapi() is what GET /openapi.json serves. Nothing
here loads a model or starts an engine. Groups: one per supported task vLLM knows (a chat model serves
"generate"), plus the switches that add routes: VLLM_SERVER_DEV_MODE=1 and --enable-fault-tolerance.
"""

import json
import os
import typing
import warnings


def paths(app):
    doc = app.openapi()
    return {p: sorted(m.upper() for m in ops) for p, ops in doc.get("paths", {}).items()}


def main():
    warnings.simplefilter("ignore")
    # vLLM logs to stdout: keep stdout for the JSON alone.
    out_fd = os.dup(1)
    os.dup2(2, 1)
    # Dev routes are registered when the env var is set at build time; read it per group below.
    import vllm
    from vllm import tasks as vtasks
    from vllm.entrypoints.openai import api_server
    from vllm.entrypoints.openai.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    class PoolingModel:
        """What build_app reads of a pooling model's ModelConfig (the task it pools for, its label count)."""

        hf_config = type("HfConfig", (), {"num_labels": 1})()
        io_processor_plugin = None

        @staticmethod
        def get_pooling_task(task_set):
            return next((t for t in task_set if t in vtasks.POOLING_TASKS), None)

    def build(argv, task_set, dev=False):
        args = make_arg_parser(FlexibleArgumentParser()).parse_args(["--model", "m"] + argv)
        old = os.environ.get("VLLM_SERVER_DEV_MODE")
        os.environ["VLLM_SERVER_DEV_MODE"] = "1" if dev else "0"
        try:
            pooling = any(t in vtasks.POOLING_TASKS for t in task_set)
            return paths(api_server.build_app(args, task_set, PoolingModel() if pooling else None))
        finally:
            if old is None:
                os.environ.pop("VLLM_SERVER_DEV_MODE", None)
            else:
                os.environ["VLLM_SERVER_DEV_MODE"] = old

    out, errors = {}, {}
    groups = [
        (t, [], (t,), False)
        for t in typing.get_args(vtasks.SupportedTask)
        for t in ([t] if isinstance(t, str) else typing.get_args(t))
    ]
    groups += [
        ("dev_mode", [], ("generate",), True),
        ("fault_tolerance", ["--enable-fault-tolerance"], ("generate",), False),
    ]
    for name, argv, task_set, dev in groups:
        try:
            out[name] = build(argv, task_set, dev)
        except Exception as e:  # a group vLLM cannot build without a model config is reported, not fatal
            errors[name] = "%s: %s" % (type(e).__name__, str(e)[:300])
    with os.fdopen(out_fd, "w") as fh:
        json.dump(
            {"version": getattr(vllm, "__version__", "?"), "groups": out, "errors": errors},
            fh,
            indent=1,
            sort_keys=True,
        )
        fh.write("\n")


if __name__ == "__main__":
    main()
