# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Release day (docs/operations.md, "Release day"): the decisions of the walk from one vLLM release to the next.

- ``gate``: after a host's service moved to the new release, its engine's confirmation and its short load check
  against the promises and against the same host's figures under the previous release: pass or stop, one line why.
- ``merge_staged``: what the host has staged once a delta bundle (the new image alone) is staged beside the bundle
  staged before (the model and everything else stay where they are, recorded as they were).
- ``plan_change``: the dry run's lines for one service: the release, the argv and the plan's numbers, before and after.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.airgap.vllm.plugins.module_utils.service._loadcheck_metrics import finite

# The gate's thresholds (the vllm_release role's vllm_release_gate_* variables; its argument_specs hold the same).
GATE_DEFAULTS = {
    # tok/s under the new release over tok/s under the previous one on the same host, each figure below.
    "min_tok_s_ratio": 0.9,
    # Share of the tools profile's requests answered with a parsed tool call (arguments JSON).
    "min_tool_call_rate": 1.0,
}
# The engine's own verdicts (_plan_verdict) a release may pass with: the planned pool and context hold the planned
# requests, or they fit a pool a test setting fixed (the CPU engine's VLLM_CPU_KVCACHE_SPACE).
PASSING_VERDICTS = ("confirmed", "not_measured")
# The speed figures compared with the previous release: (profile, figure, words).
TOK_S_FIGURES = (
    ("single-stream", "decode_tok_s", "single-stream decode"),
    ("single-stream", "prefill_tok_s", "prefill"),
    ("random", "decode_tok_s", "per-stream decode"),
)
# What the dry run shows of a plan's ledger, when the plan has it.
PLAN_NUMBERS = (
    ("max_model_len", "context"),
    ("concurrency", "concurrency"),
    ("kv_pool_bytes", "KV pool bytes"),
    ("num_gpu_blocks", "KV blocks"),
    ("max_num_batched_tokens", "prefill chunk (max_num_batched_tokens)"),
)


class ReleaseError(ValueError):
    """An input the release decisions cannot read (a record of the wrong shape)."""


def _mapping(value, what):
    if value is None or value == "":
        return {}
    if not isinstance(value, dict):
        raise ReleaseError("%s is not a mapping (%s)" % (what, type(value).__name__))
    return value


def thresholds_of(overrides):
    """The gate's thresholds: the defaults with OVERRIDES over them, each a finite number >= 0 (rates <= 1)."""
    out = dict(GATE_DEFAULTS)
    for key, value in _mapping(overrides, "the gate's thresholds").items():
        if key not in GATE_DEFAULTS:
            raise ReleaseError("unknown gate threshold %s (known: %s)" % (key, ", ".join(sorted(GATE_DEFAULTS))))
        x = finite(value)
        if x is None or x < 0 or (key == "min_tool_call_rate" and x > 1):
            raise ReleaseError(
                "gate threshold %s must be a number >= 0%s, not %r"
                % (key, " and <= 1" if key == "min_tool_call_rate" else "", value)
            )
        out[key] = x
    return out


def _figure(loadcheck, profile, key):
    profiles = _mapping(loadcheck, "the load check").get("profiles") or {}
    return finite(((profiles.get(profile) or {}).get("figures") or {}).get(key))


def _promise(loadcheck, key):
    for row in _mapping(loadcheck, "the load check").get("promises") or []:
        if isinstance(row, dict) and row.get("key") == key:
            return row
    return None


def _failed(loadcheck):
    profiles = _mapping(loadcheck, "the load check").get("profiles") or {}
    return sum(
        int(finite(((r or {}).get("figures") or {}).get("failed")) or 0)
        for name, r in profiles.items()
        if name != "_all" and isinstance(r, dict)
    )


def _fmt(x):
    return "%.0f" % x if abs(x) >= 100 else "%.3g" % x


def gate(report, loadcheck, previous_loadcheck, thresholds=None):
    """Pass or stop one service after its move to a new release. REPORT: the new deployment's report.json (the
    engine's confirmation: ``verdict``, ``verdict_text``); LOADCHECK: its load check's saved result (loadcheck.json:
    ``profiles`` with each profile's ``figures``, ``promises``); PREVIOUS_LOADCHECK: the same host's load check under
    the previous release (kept by the walk before the change), None or {} when there is none. Returns
    {"ok", "reason" (one line), "checks": [{"check", "ok", "detail"}]}: the reason is the first check that stopped
    it, else every check's detail in one line."""
    t = thresholds_of(thresholds)
    report = _mapping(report, "the deployment report")
    loadcheck = _mapping(loadcheck, "the load check")
    previous = _mapping(previous_loadcheck, "the previous release's load check")
    checks = []

    def add(name, ok, detail):
        checks.append({"check": name, "ok": bool(ok), "detail": detail})

    # 1. The engine's own confirmation of the plan.
    verdict = report.get("verdict")
    if not verdict:
        add("confirm", False, "no confirmation of the plan by the engine (report.json has no verdict)")
    else:
        add(
            "confirm",
            verdict in PASSING_VERDICTS,
            "confirm %s%s"
            % (verdict, "" if verdict in PASSING_VERDICTS else ": " + str(report.get("verdict_text") or "")),
        )
    # 2. A load check ran under the new release, and no request failed.
    if not loadcheck.get("profiles"):
        add("loadcheck", False, "no load check of the new release (vllm_service_loadcheck off, or it did not run)")
    else:
        failed = _failed(loadcheck)
        add("loadcheck", failed == 0, "%d request(s) failed in the load check" % failed if failed else "0 failed")
    # 3. The context promise: a request of the planned context admitted and finished.
    row = _promise(loadcheck, "context")
    status = (row or {}).get("status") or "not measured"
    add(
        "context",
        status == "MET",
        "context %s%s"
        % (status, (" (%s)" % row["measured"]) if row and row.get("measured") and status != "MET" else ""),
    )
    # 4. The concurrency promise: not contradicted (MET, or the /metrics reads could not have seen it).
    row = _promise(loadcheck, "concurrency")
    status = (row or {}).get("status") or "not measured"
    add(
        "concurrency",
        status in ("MET", "not witnessed"),
        "concurrency %s%s"
        % (status, (" (%s)" % row["measured"]) if row and row.get("measured") and status != "MET" else ""),
    )
    # 5. Tool calls parse: the tools profile's rate, whenever it was measured under either release.
    rate, before = _figure(loadcheck, "tools", "parse_rate"), _figure(previous, "tools", "parse_rate")
    if rate is None and before is None:
        add("tool_calls", True, "tool calls not measured under either release")
    elif rate is None:
        add(
            "tool_calls",
            False,
            "tool calls not measured under the new release (%.0f %% under the previous one)" % (100 * before),
        )
    else:
        add(
            "tool_calls",
            rate >= t["min_tool_call_rate"],
            "tool calls %.0f %% (at least %.0f %%)" % (100 * rate, 100 * t["min_tool_call_rate"]),
        )
    # 6. Speed against the previous release measured on this host.
    if not previous.get("profiles"):
        add(
            "tok_s",
            False,
            "no load check of the previous release kept on this host to compare tok/s with "
            "(run ansible-playbook site.yml --tags loadcheck before the rollout)",
        )
    else:
        ratios, missing = [], []
        for profile, key, words in TOK_S_FIGURES:
            new, old = _figure(loadcheck, profile, key), _figure(previous, profile, key)
            if old is None or old <= 0:
                continue
            if new is None:
                missing.append(words)
                continue
            ratios.append((new / old, words, new, old))
        if missing:
            add(
                "tok_s",
                False,
                "%s tok/s not measured under the new release (measured under the previous one)" % ", ".join(missing),
            )
        elif not ratios:
            add("tok_s", False, "no tok/s figure measured under the previous release to compare with")
        else:
            worst = min(ratios)
            ok = worst[0] >= t["min_tok_s_ratio"]
            if ok:
                detail = "tok/s new/previous %s (at least %.2f)" % (
                    ", ".join("%s %.2f" % (w, r) for r, w, _n, _o in ratios),
                    t["min_tok_s_ratio"],
                )
            else:
                detail = "%s %s tok/s is %.2f of the previous release's %s on this host (at least %.2f)" % (
                    worst[1],
                    _fmt(worst[2]),
                    worst[0],
                    _fmt(worst[3]),
                    t["min_tok_s_ratio"],
                )
            add("tok_s", ok, detail)
    stopped = [c for c in checks if not c["ok"]]
    reason = stopped[0]["detail"] if stopped else "; ".join(c["detail"] for c in checks)
    return {"ok": not stopped, "reason": reason, "checks": checks}


def merge_staged(previous, delta):
    """The staged artifacts by kind once DELTA (a bundle's bundle_staged: kind -> [{name, version, path, ...}]) is
    staged over PREVIOUS (what the host recorded before): an entry of DELTA replaces the entry of its kind with the
    same name; every other entry of PREVIOUS stays (the model, the driver, the proxy's image)."""
    previous = _mapping(previous, "the previous staged bundle")
    delta = _mapping(delta, "the staged delta bundle")
    out = {}
    for kind in list(previous) + [k for k in delta if k not in previous]:
        new = [e for e in delta.get(kind) or [] if isinstance(e, dict)]
        names = set(e.get("name") for e in new)
        kept = [e for e in previous.get(kind) or [] if isinstance(e, dict) and e.get("name") not in names]
        out[kind] = new + kept
    return out


def plan_change(service, previous_release, release, previous_plan, plan):
    """The dry run's lines for SERVICE: the release (before -> after), the argv the new release's parser judges (the
    flags that go and come), and the plan's numbers that change. PREVIOUS_PLAN / PLAN: vllm_plan_result mappings."""
    previous_plan = _mapping(previous_plan, "the previous plan")
    plan = _mapping(plan, "the plan")
    lines = ["%s: vLLM %s -> %s" % (service, previous_release or "?", release or "?")]
    old_argv, new_argv = [str(a) for a in previous_plan.get("argv") or []], [str(a) for a in plan.get("argv") or []]
    lines.append("  argv: " + " ".join(new_argv))
    if old_argv != new_argv:
        gone = [a for a in old_argv if a.startswith("--") and a not in new_argv]
        came = [a for a in new_argv if a.startswith("--") and a not in old_argv]
        said = (["drops " + " ".join(gone)] if gone else []) + (["adds " + " ".join(came)] if came else [])
        lines.append("  argv changes: %s" % ("; ".join(said) or "values only"))
    else:
        lines.append("  argv unchanged")
    old_l, new_l = previous_plan.get("ledger") or {}, plan.get("ledger") or {}
    for key, words in PLAN_NUMBERS:
        if key in new_l or key in old_l:
            a, b = old_l.get(key), new_l.get(key)
            lines.append("  %s: %s%s" % (words, b, "" if a == b else " (was %s)" % a))
    return lines
