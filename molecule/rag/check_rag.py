"""The RAG set as a client workstation of the site sees it (issue 44): one front door, one key, routed by `model`.

    check_rag.py --base-url https://HOST:PORT --ca ca.crt --keys keys.json --chat MODEL --embed MODEL
                 --rerank MODEL --dimension N

keys.json: {"good": "sk-...",          a client allowed every model of the door
            "chat_only": "sk-...",     a client limited to the chat model (its `models` in vllm_front_clients)
            "bad": "sk-..."}           a key no client has

Runs in the test world's client container (the real `openai` client and its HTTP client, TLS checked against the site
CA). Each check prints one JSON line {"check", "ok", "detail"} and the last line is a summary; exit 1 when any
check failed. What it proves: a chat completion, an embedding array of N x the model's dimension and a rerank
through the same base URL and key; /v1/models lists the union for a client allowed every model and only the chat
model for the limited one; the limited client gets 403 on the embedder and the reranker; an unknown model 404;
a route the model does not serve 400; no key 401; the engine's /openapi.json is not reachable through the door.
"""

import argparse
import json
import math
import ssl
import sys

import openai

DOCS = ["the forbidden city is in the centre of beijing.", "tomatoes need warm weather to ripen."]
QUERY = "where is the forbidden city?"


class Door:
    def __init__(self, args, keys):
        self.args = args
        self.keys = keys
        self.ctx = ssl.create_default_context(cafile=args.ca)
        # The openai client's own HTTP client (its httpx), for the routes it has no method for (rerank, score).
        self.http = openai.DefaultHttpxClient(verify=self.ctx, trust_env=False, timeout=args.timeout)

    def client(self, key):
        return openai.OpenAI(
            base_url=self.args.base_url.rstrip("/") + "/v1",
            api_key=key,
            max_retries=0,
            timeout=self.args.timeout,
            http_client=openai.DefaultHttpxClient(verify=self.ctx, trust_env=False),
        )

    def post(self, path, key, body):
        headers = {"Authorization": "Bearer " + key} if key else {}
        r = self.http.post(self.args.base_url.rstrip("/") + path, headers=headers, json=body)
        try:
            return r.status_code, r.json()
        except ValueError:
            return r.status_code, {"text": r.text[:300]}


def error_code(exc):
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            return err.get("code")
    return None


def expect_status(fn, status, code=None):
    """(ok, detail): fn() must raise openai.APIStatusError of `status` (and error.code `code` where given)."""
    try:
        got = fn()
    except openai.APIStatusError as e:
        ok = e.status_code == status and (code is None or error_code(e) == code)
        return ok, {"status": e.status_code, "code": error_code(e)}
    return False, {"status": 200, "answer": str(got)[:200]}


def check_models(d):
    good = sorted(m.id for m in d.client(d.keys["good"]).models.list().data)
    limited = sorted(m.id for m in d.client(d.keys["chat_only"]).models.list().data)
    want = sorted([d.args.chat, d.args.embed, d.args.rerank])
    return good == want and limited == [d.args.chat], {"good": good, "chat_only": limited}


def check_chat(d):
    r = d.client(d.keys["good"]).chat.completions.create(
        model=d.args.chat,
        messages=[{"role": "user", "content": "Answer from this text only: %s\n\nQuestion: %s" % (DOCS[0], QUERY)}],
        max_tokens=24,
    )
    msg = r.choices[0].message
    text = (msg.content or "") + (getattr(msg, "reasoning_content", None) or "")
    ok = r.model == d.args.chat and len(r.choices) == 1 and r.usage.completion_tokens > 0
    return ok, {
        "model": r.model,
        "finish_reason": r.choices[0].finish_reason,
        "completion_tokens": r.usage.completion_tokens,
        "content": (msg.content or "")[:120],
        "text_chars": len(text),
    }


def check_embeddings(d):
    r = d.client(d.keys["good"]).embeddings.create(model=d.args.embed, input=DOCS)
    vectors = [e.embedding for e in r.data]
    shape = [len(vectors), len(vectors[0]) if vectors else 0]
    norms = [round(math.sqrt(sum(x * x for x in v)), 4) for v in vectors]
    finite = all(isinstance(x, float) and math.isfinite(x) for v in vectors for x in v)
    ok = (
        r.model == d.args.embed
        and shape == [len(DOCS), d.args.dimension]
        and all(len(v) == d.args.dimension for v in vectors)
        and finite
        and all(n > 0 for n in norms)
    )
    return ok, {
        "model": r.model,
        "shape": shape,
        "dimension_wanted": d.args.dimension,
        "norms": norms,
        "first": [round(x, 4) for x in vectors[0][:4]] if vectors else [],
    }


def check_rerank(d):
    status, r = d.post("/v1/rerank", d.keys["good"], {"model": d.args.rerank, "query": QUERY, "documents": DOCS})
    results = r.get("results") or []
    scores = dict((x.get("index"), x.get("relevance_score")) for x in results if isinstance(x, dict))
    ok = (
        status == 200
        and sorted(scores) == list(range(len(DOCS)))
        and all(isinstance(s, float) and math.isfinite(s) for s in scores.values())
    )
    return ok, {"status": status, "model": r.get("model"), "scores": scores, "error": r.get("error")}


def check_score(d):
    status, r = d.post("/v1/score", d.keys["good"], {"model": d.args.rerank, "text_1": QUERY, "text_2": DOCS})
    data = r.get("data") or []
    scores = [x.get("score") for x in data if isinstance(x, dict)]
    ok = status == 200 and len(scores) == len(DOCS) and all(isinstance(s, float) for s in scores)
    return ok, {"status": status, "scores": scores, "error": r.get("error")}


def check_chat_only_client(d):
    c = d.client(d.keys["chat_only"])
    embed = expect_status(lambda: c.embeddings.create(model=d.args.embed, input=DOCS), 403, "model_not_allowed")
    status, r = d.post("/v1/rerank", d.keys["chat_only"], {"model": d.args.rerank, "query": QUERY, "documents": DOCS})
    rerank = (status == 403 and (r.get("error") or {}).get("code") == "model_not_allowed", {"status": status})
    chat = c.chat.completions.create(model=d.args.chat, messages=[{"role": "user", "content": "hi"}], max_tokens=4)
    ok = embed[0] and rerank[0] and len(chat.choices) == 1
    return ok, {"embeddings": embed[1], "rerank": rerank[1], "chat": "200, %s" % chat.choices[0].finish_reason}


def check_unknown_model(d):
    c = d.client(d.keys["good"])
    return expect_status(lambda: c.embeddings.create(model="no-such-model", input=DOCS), 404, "model_not_found")


def check_route_not_served(d):
    c = d.client(d.keys["good"])
    embed_of_chat = expect_status(lambda: c.embeddings.create(model=d.args.chat, input=DOCS), 400, "route_not_served")
    chat_of_embed = expect_status(
        lambda: c.chat.completions.create(model=d.args.embed, messages=[{"role": "user", "content": "hi"}]),
        400,
        "route_not_served",
    )
    return embed_of_chat[0] and chat_of_embed[0], {
        "embeddings_of_chat": embed_of_chat[1],
        "chat_of_embedder": chat_of_embed[1],
    }


def check_keys(d):
    bad = expect_status(lambda: d.client(d.keys["bad"]).embeddings.create(model=d.args.embed, input=DOCS), 401)
    status, _r = d.post("/v1/embeddings", None, {"model": d.args.embed, "input": DOCS})
    return bad[0] and status == 401, {"bad_key": bad[1], "no_key": status}


def check_engine_routes_closed(d):
    got = {}
    for path in ("/openapi.json", "/pooling", "/classify", "/score", "/rerank", "/tokenize"):
        r = d.http.request(
            "GET" if path == "/openapi.json" else "POST",
            d.args.base_url.rstrip("/") + path,
            headers={"Authorization": "Bearer " + d.keys["good"]},
            json=None if path == "/openapi.json" else {"model": d.args.embed, "input": DOCS},
        )
        got[path] = r.status_code
    # /pooling and /classify are pooling routes the door routes by model (an embedder serves /pooling); the engine's
    # unguarded ones (/score, /rerank, /tokenize) and its route list are never reached.
    closed = all(got[p] == 404 for p in ("/openapi.json", "/score", "/rerank", "/tokenize"))
    return closed, got


CHECKS = [
    check_models,
    check_chat,
    check_embeddings,
    check_rerank,
    check_score,
    check_chat_only_client,
    check_unknown_model,
    check_route_not_served,
    check_keys,
    check_engine_routes_closed,
]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--base-url", required=True)
    p.add_argument("--ca", required=True)
    p.add_argument("--keys", required=True)
    p.add_argument("--chat", required=True)
    p.add_argument("--embed", required=True)
    p.add_argument("--rerank", required=True)
    p.add_argument("--dimension", type=int, required=True, help="the embedding model's hidden size (config.json)")
    p.add_argument("--timeout", type=float, default=180)
    args = p.parse_args()
    with open(args.keys) as f:
        keys = json.load(f)
    d = Door(args, keys)
    failed = []
    for check in CHECKS:
        name = check.__name__[len("check_") :]
        try:
            ok, detail = check(d)
        except Exception as e:  # a check that raises is a failed check, with what it raised
            ok, detail = False, {"raised": "%s: %s" % (type(e).__name__, str(e)[:500])}
        if not ok:
            failed.append(name)
        print(json.dumps({"check": name, "ok": bool(ok), "detail": detail}, sort_keys=True), flush=True)
    print(json.dumps({"summary": "%d of %d passed" % (len(CHECKS) - len(failed), len(CHECKS)), "failed": failed}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
