"""Bench 8 (release-day) - release day on the simulated fleet: what a site's client sees while the fleet walks from
vLLM 0.27.1 to 0.30.0 and back behind its front door (issue 45, docs/performance.md "Release day").

The walk is molecule release_day (a long proof in its own lane: `bash tests/run-all molecule:release_day`, about an
hour on this machine): two served hosts with the real CPU engines of both releases behind one balancer, a client
streaming chat requests through the balancer without a pause (molecule/release_day/files/stream_client.py), and the
operator's commands of docs/operations.md one after the other (baseline load checks, stage, dry run, rollout,
rollback, a bad release stopped by the gate, site.yml). The scenario keeps its records in build/release-day/:
requests.jsonl (every request: start, end, outcome ok / failed / cut), phases.jsonl (each step's start and end) and
summary.json (each member's image and plan at each point, each step's seconds, the gate's verdicts).

This bench reads those records and reports, per phase of the walk, the requests sent, failed and cut (target 0 each,
over the whole walk) and the latency p50 / p99 of the succeeded ones, with each phase's p50 over the baseline's (the
cost of a host drained and restarting under the client's feet).

FULL mode: the records of the last run (build/release-day/, AIRGAP_RELEASE_DAY_RECORDS moves it); with
AIRGAP_RELEASE_DAY_RUN=1 it runs the scenario first (an hour; the machine's CPU for all of it). No records: skipped,
saying how to make them.
CI mode (--small): the same counting code on a recorded excerpt of a real run (bench/fixtures/release-day/: the
first requests of each phase); shown, never judged.
"""

import importlib.util
import json
import os
import subprocess
import sys

import benchlib as B

NAME = "release-day"
HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures", "release-day")
RECORDS = os.environ.get("AIRGAP_RELEASE_DAY_RECORDS", os.path.join(B.ROOT, "build", "release-day"))
COUNTER = os.path.join(B.ROOT, "molecule", "release_day", "files", "phase_counts.py")
# The phases of the walk during which a member is drained, restarted or rolled back under the client.
MOVING = ("rollout 0.30.0", "rollback 0.27.1", "bad rollout")


def _counter():
    """The scenario's own counting code (molecule/release_day/files/phase_counts.py): one rule for both."""
    spec = importlib.util.spec_from_file_location("release_day_phase_counts", COUNTER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load(records):
    """(rows of phase_counts.counts, summary.json or {}) from a records directory."""
    pc = _counter()
    rows = pc.counts(
        pc.read_jsonl(os.path.join(records, "requests.jsonl")), pc.read_jsonl(os.path.join(records, "phases.jsonl"))
    )
    summary = {}
    path = os.path.join(records, "summary.json")
    if os.path.exists(path):
        with open(path) as f:
            summary = json.load(f)
    return rows, summary


def baseline_p50(rows):
    """The p50 of the steady state the walk is compared with: the baseline load checks' phases, else the whole run."""
    base = [r["p50_ms"] for r in rows if r["phase"].startswith("baseline") and r["p50_ms"] is not None]
    if base:
        return sorted(base)[len(base) // 2]
    allp = [r["p50_ms"] for r in rows if r["p50_ms"] is not None]
    return sorted(allp)[len(allp) // 2] if allp else None


def report(rows, summary, source):
    pc = _counter()
    print("  %s" % source)
    for line in pc.table(rows).splitlines():
        print("    " + line)
    sent = sum(r["sent"] for r in rows)
    failed = sum(r["failed"] for r in rows)
    cut = sum(r["cut"] for r in rows)
    B.result(NAME, "failed", failed, "client requests failed over the whole walk (%d sent)" % sent, "<= 0", unit="")
    B.result(NAME, "cut", cut, "client streams cut mid-stream over the whole walk", "<= 0", unit="")
    base = baseline_p50(rows)
    for r in rows:
        if r["phase"] not in MOVING or r["p50_ms"] is None:
            continue
        key = r["phase"].replace(" ", "_")
        B.result(
            NAME,
            key + "_p50",
            B.ratio(r["p50_ms"], base),
            "client latency p50 during %s / during the baseline" % r["phase"],
            detail="p50 %.0f ms, p99 %.0f ms, %d sent, %d ok" % (r["p50_ms"], r["p99_ms"], r["sent"], r["succeeded"]),
        )
    steps = summary.get("steps") or {}
    if steps:
        print("  each step's seconds: " + ", ".join("%s %.0f" % (k, v) for k, v in steps.items()))
    return failed, cut


def main():
    if B.small():
        rows, summary = load(FIXTURES)
        report(rows, summary, "recorded excerpt of a real run (bench/fixtures/release-day/), not the fleet")
        return 0
    if os.environ.get("AIRGAP_RELEASE_DAY_RUN", "") not in ("", "0"):
        print("  bash tests/run-all molecule:release_day (about an hour)")
        rc = subprocess.call(["bash", "tests/run-all", "molecule:release_day"], cwd=B.ROOT)
        if rc != 0:
            print("  the scenario failed (rc=%d): the records below are those of a walk that did not end" % rc)
    if not os.path.exists(os.path.join(RECORDS, "requests.jsonl")):
        B.skipped(
            NAME,
            "failed",
            "no records in %s: run bash tests/run-all molecule:release_day (about an hour), "
            "or bench/run release-day with AIRGAP_RELEASE_DAY_RUN=1" % RECORDS,
        )
        return 0
    rows, summary = load(RECORDS)
    report(rows, summary, "molecule release_day's records in %s" % RECORDS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
