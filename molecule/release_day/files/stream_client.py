"""A site's client during release day (molecule release_day): streamed chat requests through the front door, without a
pause, until told to stop; every request written down with its outcome.

    stream_client.py --base-url https://ADDRESS:PORT --ca CA --key-file FILE --model NAME --out DIR
                     [--concurrency 2] [--max-tokens 24] [--timeout 180]

Runs until DIR/stop exists, then finishes the requests in flight. DIR/requests.jsonl gets one line per request:
{"start", "end" (epoch seconds), "status" (HTTP, 0 without an answer), "events" (content chunks), "done" (the
stream's [DONE] came), "outcome", "error"}. outcome: "ok" (200, content, [DONE]), "cut" (200 and the stream began,
but it ended without [DONE]: cut mid-stream) or "failed" (no answer, another status, or a 200 that never streamed).
The key is read from a file (never in argv). Standard library only: the test world's client image has Python 3.
"""

import argparse
import http.client
import json
import os
import ssl
import sys
import threading
import time
import urllib.parse

QUESTIONS = [
    "What is the weather in Beijing?",
    "Say hello in three words.",
    "What is the weather in Shanghai?",
    "Name a colour.",
]


def one_request(url, ctx, key, model, question, max_tokens, timeout):
    rec = {"start": time.time(), "status": 0, "events": 0, "done": False, "error": ""}
    body = json.dumps(
        {
            "model": model,
            "stream": True,
            "max_tokens": max_tokens,
            "temperature": 0,
            "messages": [{"role": "user", "content": question}],
        }
    ).encode()
    conn = http.client.HTTPSConnection(url.hostname, url.port or 443, context=ctx, timeout=timeout)
    try:
        conn.request(
            "POST",
            "/v1/chat/completions",
            body=body,
            headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"},
        )
        resp = conn.getresponse()
        rec["status"] = resp.status
        if resp.status != 200:
            rec["error"] = resp.read(300).decode("utf-8", "replace")
        else:
            for raw in resp:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    rec["done"] = True
                    break
                try:
                    chunk = json.loads(data)
                except ValueError:
                    continue
                if chunk.get("error"):
                    rec["error"] = json.dumps(chunk["error"])[:300]
                    break
                rec["events"] += 1
    except (OSError, http.client.HTTPException) as e:
        rec["error"] = "%s: %s" % (type(e).__name__, e)
    finally:
        conn.close()
    rec["end"] = time.time()
    rec["outcome"] = outcome(rec)
    return rec


def outcome(rec):
    if rec["status"] == 200 and rec["done"] and rec["events"] > 0 and not rec["error"]:
        return "ok"
    if rec["status"] == 200 and rec["events"] > 0:
        return "cut"
    return "failed"


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--ca", required=True)
    ap.add_argument("--key-file", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=24)
    ap.add_argument("--timeout", type=float, default=180)
    args = ap.parse_args(argv)
    url = urllib.parse.urlsplit(args.base_url)
    ctx = ssl.create_default_context(cafile=args.ca)
    with open(args.key_file) as f:
        key = f.read().strip()
    stop = os.path.join(args.out, "stop")
    log = open(os.path.join(args.out, "requests.jsonl"), "a")
    lock = threading.Lock()

    def worker(index):
        n = index
        while not os.path.exists(stop):
            rec = one_request(url, ctx, key, args.model, QUESTIONS[n % len(QUESTIONS)], args.max_tokens, args.timeout)
            n += 1
            with lock:
                log.write(json.dumps(rec) + "\n")
                log.flush()
            if rec["outcome"] != "ok":
                time.sleep(0.2)  # no tight loop against a door that refuses

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(args.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
