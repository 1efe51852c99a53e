"""The HTTP side of `vllm serve`: /health, /metrics, /version, /v1/models, /v1/chat/completions,
/v1/completions. stdlib only; binds only after the engine is ready, like the real server."""
import json
import os
import signal
import sys
import threading
import time
import traceback
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from vllm import __version__
from vllm._standin import cli, model as model_mod
from vllm._standin.engine import Engine, EngineCoreDied
from vllm.logger import init_logger

logger = init_logger("vllm.entrypoints.openai.api_server")
# vLLM 0.27.1 logs the non-default args (API keys included) from this module (serve/utils/api_utils.py:273).
args_logger = init_logger("vllm.entrypoints.serve.utils.api_utils")
# vllm/entrypoints/openai/server_utils.py: only these prefixes need the API key.
_PROTECTED = ("/v1", "/v2", "/inference", "/cohere")


class State:
    pass


def _labels(pairs):
    return ",".join('%s="%s"' % (k, str(v).replace("\\", "\\\\").replace('"', '\\"'))
                    for k, v in pairs)


def render_metrics(st):
    eng, name = st.engine, st.served[0]
    base = [("engine", "0"), ("model_name", name)]
    out = []

    def metric(mname, mtype, doc, value, extra=()):
        out.append("# HELP %s %s" % (mname, doc))
        out.append("# TYPE %s %s" % (mname, mtype))
        suffix = "_total" if mtype == "counter" else ""
        out.append("%s%s{%s} %s" % (mname, suffix, _labels(base + list(extra)), float(value)))
        if mtype == "counter":
            out.append("%s_created{%s} %s" % (mname, _labels(base + list(extra)), st.started))

    out.append("# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig")
    out.append("# TYPE vllm:cache_config_info gauge")
    out.append("vllm:cache_config_info{%s} 1.0" % _labels(eng.cache_config_labels() + [("engine", "0")]))
    c = eng.counters
    metric("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", 0)
    metric("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", 0)
    metric("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", 0.0)
    metric("vllm:prefix_cache_queries", "counter",
           "Prefix cache queries, in terms of number of queried tokens.", c["prefix_cache_queries"])
    metric("vllm:prefix_cache_hits", "counter",
           "Prefix cache hits, in terms of number of cached tokens.", c["prefix_cache_hits"])
    metric("vllm:num_preemptions", "counter", "Cumulative number of preemption from the engine.",
           c["num_preemptions"])
    metric("vllm:prompt_tokens", "counter", "Number of prefill tokens processed.", c["prompt_tokens"])
    metric("vllm:generation_tokens", "counter", "Number of generation tokens processed.",
           c["generation_tokens"])
    metric("vllm:request_success", "counter", "Count of successfully processed requests.",
           c["request_success"], [("finished_reason", "stop")])
    if eng.num_spec:
        metric("vllm:spec_decode_num_drafts", "counter", "Number of spec decoding drafts.",
               c["spec_decode_num_drafts"])
        metric("vllm:spec_decode_num_draft_tokens", "counter", "Number of draft tokens.",
               c["spec_decode_num_draft_tokens"])
        metric("vllm:spec_decode_num_accepted_tokens", "counter", "Number of accepted tokens.",
               c["spec_decode_num_accepted_tokens"])
        out.append("# HELP vllm:spec_decode_num_accepted_tokens_per_pos Accepted tokens per draft position.")
        out.append("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter")
        for pos, n in enumerate(eng.accepted_per_pos):
            out.append("vllm:spec_decode_num_accepted_tokens_per_pos_total{%s} %s"
                       % (_labels(base + [("position", str(pos))]), float(n)))
    return "\n".join(out) + "\n"


def _example(schema):
    t = (schema or {}).get("type")
    if "enum" in (schema or {}):
        return schema["enum"][0]
    return {"string": "stand-in", "integer": 1, "number": 1.0, "boolean": True,
            "array": [], "object": {}}.get(t, "stand-in")


def chat(st, req):
    """Returns (status, body)."""
    a = st.args
    if st.template is None:
        return 400, _err("As of transformers v4.44, default chat template is no longer allowed, "
                         "so you must provide a chat template if the tokenizer does not define one.",
                         "BadRequestError", 400)
    messages = req.get("messages") or []
    prompt = " ".join(str(m.get("content") or "") for m in messages if isinstance(m, dict))
    last = next((str(m.get("content")) for m in reversed(messages)
                 if isinstance(m, dict) and m.get("role") == "user"), "")
    tools = req.get("tools") or []
    choice = req.get("tool_choice", "auto" if tools else "none")
    if tools and choice == "auto" and not (a.enable_auto_tool_choice and a.tool_call_parser):
        return 400, _err('"auto" tool choice requires --enable-auto-tool-choice and '
                         '--tool-call-parser to be set', "BadRequestError", 400)
    max_tokens = req.get("max_tokens") or req.get("max_completion_tokens") or 16
    message = {"role": "assistant", "content": None, "refusal": None, "annotations": None,
               "audio": None, "function_call": None, "tool_calls": [], "reasoning": None}
    finish = "stop"
    target = None
    if tools and choice not in ("none",):
        if isinstance(choice, dict):
            target = next((t for t in tools if t.get("function", {}).get("name")
                           == choice.get("function", {}).get("name")), None)
        else:
            target = tools[0]
    if target:
        fn = target.get("function", {})
        params = fn.get("parameters") or {}
        args_obj = {k: _example(params.get("properties", {}).get(k))
                    for k in params.get("required", [])}
        message["tool_calls"] = [{"id": "chatcmpl-tool-" + uuid.uuid4().hex[:16], "type": "function",
                                  "function": {"name": fn.get("name"),
                                               "arguments": json.dumps(args_obj)}}]
        finish = "tool_calls"
    else:
        words = ("Stand-in reply to: " + last).split()[:max_tokens]
        message["content"] = " ".join(words)
    thinking = (req.get("chat_template_kwargs") or {}).get(
        "enable_thinking", (a.default_chat_template_kwargs or {}).get("enable_thinking", True))
    if a.reasoning_parser and thinking is not False:
        message["reasoning"] = "The user asked: %s" % " ".join(last.split()[:8])
    completion = len((message["content"] or "").split()) + (len(message["tool_calls"]) * 8)
    st.engine.record(prompt, completion)
    prompt_tokens = len(prompt.split())
    return 200, {
        "id": "chatcmpl-" + uuid.uuid4().hex, "object": "chat.completion",
        "created": int(time.time()), "model": req.get("model") or st.served[0],
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish,
                     "stop_reason": None, "token_ids": None}],
        "service_tier": None, "system_fingerprint": None,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion,
                  "completion_tokens": completion, "prompt_tokens_details": None},
        "prompt_logprobs": None, "prompt_token_ids": None, "kv_transfer_params": None}


def completion(st, req):
    prompt = req.get("prompt") or ""
    if isinstance(prompt, list):
        prompt = " ".join(map(str, prompt))
    max_tokens = req.get("max_tokens") or 16
    text = " ".join(("stand-in continuation of " + prompt).split()[:max_tokens])
    n = len(text.split())
    st.engine.record(prompt, n)
    return 200, {"id": "cmpl-" + uuid.uuid4().hex, "object": "text_completion",
                 "created": int(time.time()), "model": req.get("model") or st.served[0],
                 "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": "length",
                              "stop_reason": None}],
                 "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": n,
                           "total_tokens": len(prompt.split()) + n}}


def _err(msg, typ, code, param=None):
    return {"error": {"message": msg, "type": typ, "param": param, "code": code}}


class Handler(BaseHTTPRequestHandler):
    server_version = "uvicorn"
    sys_version = ""
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stdout.write('INFO:     %s - "%s" %s\n' % (self.client_address[0], self.requestline,
                                                       args[1] if len(args) > 1 else ""))

    def _send(self, code, body, ctype="application/json"):
        data = body if isinstance(body, bytes) else (
            body.encode() if isinstance(body, str) else json.dumps(body).encode())
        self.send_response(code)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self):
        keys = self.server.st.api_keys
        path = self.path.split("?")[0]
        if not keys or self.command == "OPTIONS" or not path.startswith(_PROTECTED):
            return True
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Bearer ") and auth[len("Bearer "):] in keys:
            return True
        self._send(401, {"error": "Unauthorized"})
        return False

    def do_GET(self):
        st = self.server.st
        path = self.path.split("?")[0]
        if not self._authorized():
            return
        if path == "/health":
            self._send(200, b"")
        elif path == "/metrics":
            self._send(200, render_metrics(st), "text/plain; version=0.0.4; charset=utf-8")
        elif path == "/version":
            self._send(200, {"version": __version__})
        elif path == "/v1/models":
            self._send(200, {"object": "list", "data": [
                {"id": n, "object": "model", "created": int(st.started), "owned_by": "vllm",
                 "root": st.args.model, "parent": None, "max_model_len": st.engine.max_model_len,
                 "permission": []} for n in st.served]})
        else:
            self._send(404, {"detail": "Not Found"})

    def do_POST(self):
        st = self.server.st
        path = self.path.split("?")[0]
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not self._authorized():
            return
        if path not in ("/v1/chat/completions", "/v1/completions"):
            self._send(404 if path != "/health" else 405, {"detail": "Not Found"})
            return
        try:
            req = json.loads(raw or b"{}")
        except ValueError as e:
            self._send(400, _err("JSON decode error: %s" % e, "BadRequestError", 400))
            return
        name = req.get("model")
        if name is not None and name not in st.served:
            self._send(404, _err("The model `%s` does not exist." % name, "NotFoundError", 404,
                                 "model"))
            return
        code, body = chat(st, req) if path == "/v1/chat/completions" else completion(st, req)
        self._send(code, body)


def serve(args, table):
    logger.info("vLLM API server version %s", __version__)
    args_logger.info("non-default args: %s", cli.non_default(args, table))
    a = args
    if a.enable_auto_tool_choice and not a.tool_call_parser:
        raise TypeError("Error: --enable-auto-tool-choice requires --tool-call-parser")
    valid_tools = table.get("tool_call_parsers") or []
    if a.enable_auto_tool_choice and a.tool_call_parser not in valid_tools:
        raise KeyError("invalid tool call parser: %s (chose from { %s })"
                       % (a.tool_call_parser, ",".join(valid_tools)))
    valid_reasoning = table.get("reasoning_parsers") or []
    if a.reasoning_parser and a.reasoning_parser not in valid_reasoning:
        raise KeyError("invalid reasoning parser: %s (chose from { %s })"
                       % (a.reasoning_parser, ",".join(valid_reasoning)))
    if not a.model:
        raise ValueError("No model specified! Please specify model either "
                         "as a positional argument or in a config file.")
    config, weight_bytes, gen = model_mod.check(a)
    if gen:
        logger.info("Default sampling parameters have been overridden by the model's Hugging Face "
                    "generation config recommended from the model creator.")
    st = State()
    st.args = a
    st.served = list(a.served_model_name or [a.model])
    keys = a.api_key or ([os.environ["VLLM_API_KEY"]] if os.environ.get("VLLM_API_KEY") else [])
    st.api_keys = set(keys)
    st.template = model_mod.chat_template(a)
    st.engine = Engine(a, config, weight_bytes)
    try:
        st.engine.start()
    except EngineCoreDied as e:
        st.engine.shutdown()
        raise RuntimeError("Engine core initialization failed. See root cause above. "
                           "Failed core proc(s): %s" % (e.args[0],)) from None
    except Exception:
        logger.error("EngineCore failed to start.\n%s", traceback.format_exc().rstrip())
        st.engine.shutdown()
        raise RuntimeError("Engine core initialization failed. See root cause above. "
                           "Failed core proc(s): {}") from None
    time.sleep(float(os.environ.get("VLLM_STANDIN_LOAD_SECONDS", "3")))
    host = a.host or "0.0.0.0"
    httpd = ThreadingHTTPServer((host, a.port), Handler)
    httpd.daemon_threads = True
    httpd.st = st
    st.started = time.time()

    def stop(signum, frame):
        logger.info("Shutting down FastAPI HTTP server.")
        threading.Thread(target=httpd.shutdown, daemon=True).start()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    logger.info("Starting vLLM API server 0 on http://%s:%d", host, a.port)
    sys.stdout.write("INFO:     Started server process [%d]\nINFO:     Waiting for application "
                     "startup.\nINFO:     Application startup complete.\n" % os.getpid())
    sys.stdout.flush()
    try:
        httpd.serve_forever()
    finally:
        httpd.server_close()
        st.engine.shutdown()
