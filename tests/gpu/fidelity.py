"""Render the GPU harness's results (summary.json from device.sh) as the tables of docs/fidelity.md.

Usage: python3 tests/gpu/fidelity.py summary.json [more summary.json ...] > table.md

Per case: planned vs engine for the budget, weights, activation peak, non-torch memory, CUDA graphs and KV pool
(vllm_plan_confirm's parts, from the engine's one-line memory summary), KV tokens and full-length requests at once,
each error as (planned - engine) / engine, flagged where it is outside +-5 % and more than 0.1 GiB off (issue 43's
bounds); then the load at full length.
"""

import json
import sys

GIB = float(1 << 30)
PARTS = ("budget", "weights", "activation_peak", "non_torch", "cuda_graphs", "kv_pool")


def pct(p, m):
    if p is None or not m:
        return None
    return 100.0 * (p - m) / float(m)


def flag(p, m, absolute=0.1 * GIB):
    e = pct(p, m)
    if e is None:
        return ""
    return " **out**" if abs(e) > 5.0 and abs(p - m) > absolute else ""


def fmt_gib(b):
    return "–" if b is None else "%.2f" % (b / GIB)


def fmt_pct(e):
    return "–" if e is None else "%+.1f %%" % e


def case_rows(r):
    out = []
    p, conf, load = r.get("planned") or {}, r.get("confirm") or {}, r.get("load") or {}
    m = conf.get("measured") or {}
    gpu = ((r.get("nvml") or {}).get("gpus") or [{}])[0].get("name", "?")
    out.append("### %s (%s)\n" % (r["case"], gpu))
    out.append("Plan: `%s`\n" % " ".join(p.get("argv", [])[1:]))
    out.append("| part | planned GiB | engine GiB | error |")
    out.append("| --- | --- | --- | --- |")
    parts = conf.get("parts") or {}
    for name in PARTS:
        q = parts.get(name)
        if not q and name in ("weights", "kv_pool"):  # no memory summary: the weights line and the pool itself
            mb = (
                m.get("weights_bytes")
                if name == "weights"
                else (m.get("kv_cache_memory_bytes") or m.get("budget_bytes"))
            )
            q = dict(planned_bytes=_planned(p, name), measured_bytes=mb) if mb else None
        if not q:
            out.append("| %s | %s | – (not in the engine's log) | – |" % (name, fmt_gib(_planned(p, name))))
            continue
        pb, mb = q.get("planned_bytes"), q.get("measured_bytes")
        out.append("| %s | %s | %s | %s%s |" % (name, fmt_gib(pb), fmt_gib(mb), fmt_pct(pct(pb, mb)), flag(pb, mb)))
    pt, mt = p.get("gpu_kv_cache_tokens"), m.get("kv_cache_size_tokens")
    out.append(
        "| KV tokens | %s | %s | %s%s |" % (_n(pt), _n(mt), fmt_pct(pct(pt, mt)), " **out**" if _out(pt, mt) else "")
    )
    pc, mc = p.get("max_concurrency_at_len"), conf.get("measured_concurrency_at_len")
    out.append(
        "| full-length requests at %s | %s | %s | %s |" % (_n(p.get("max_model_len")), pc, mc, fmt_pct(pct(pc, mc)))
    )
    out.append("")
    out.append(
        "Blocks: planned %s of %s tokens, engine %s of %s. Verdict: %s."
        % (
            p.get("num_gpu_blocks"),
            p.get("block_size"),
            m.get("num_gpu_blocks"),
            m.get("block_size"),
            conf.get("verdict"),
        )
    )
    if load:
        out.append(
            "Load: %s requests sent together, each of %s tokens (prompt %s + %s out; full length: %s): %s completed, %s failed, "
            "%s unfinished in %s s; **%s preemptions**; peak running %s (all at once: %s), peak KV use %s."
            % (
                load.get("requests"),
                _n(load.get("max_model_len")),
                _n(load.get("prompt_len")),
                load.get("output_len"),
                load.get("full_length"),
                load.get("completed"),
                load.get("failed"),
                load.get("unfinished"),
                load.get("seconds"),
                _n(load.get("preemptions")),
                _n(load.get("peak_running")),
                load.get("all_at_once", (load.get("peak_running") or 0) >= (load.get("requests") or 0)),
                "–" if load.get("peak_kv_cache_usage") is None else "%.0f %%" % (100 * load["peak_kv_cache_usage"]),
            )
        )
    t = r.get("times") or {}
    out.append(
        "Seconds: %s."
        % ", ".join("%s %s" % (k, t[k]) for k in ("plan", "health", "confirm", "load", "stop", "case") if k in t)
    )
    if r.get("error"):
        out.append("Error: `%s`" % r["error"])
    out.append("")
    return out


def _planned(p, name):
    if name == "budget":
        return p.get("budget_bytes")
    if name == "kv_pool":
        return p.get("kv_pool_bytes")
    return (p.get("components") or {}).get(name, (p.get("outside_pool") or {}).get(name))


def _out(p, m):
    e = pct(p, m)
    return e is not None and abs(e) > 5.0


def _n(x):
    if x is None:
        return "–"
    if isinstance(x, float) and x.is_integer():
        x = int(x)
    return "{:,}".format(x) if isinstance(x, int) else str(x)


def main(paths):
    lines = []
    for path in paths:
        with open(path) as fh:
            for r in json.load(fh):
                lines.extend(case_rows(r))
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
