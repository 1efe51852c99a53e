"""Release day's client counts by phase (molecule release_day): every request of the stream client, by the phase its
start fell in.

    phase_counts.py REQUESTS.jsonl PHASES.jsonl     prints {"phases": [...], "table": "..."} as JSON

PHASES.jsonl: one {"phase", "start", "end"} per step of the walk, in order. A request that started between two steps
(or before the first, after the last) counts under "between". Each phase: sent, succeeded (ok), failed, cut, and the
latency of the succeeded requests (p50, p99 in ms, nearest rank).
"""

import json
import math
import sys


def percentile(values, q):
    """The nearest-rank percentile Q (0-100) of VALUES, None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, int(math.ceil(q / 100.0 * len(ordered))))
    return ordered[rank - 1]


def phase_of(start, phases):
    for p in phases:
        if p["start"] <= start < p["end"]:
            return p["phase"]
    return "between"


def counts(requests, phases):
    """[{phase, sent, succeeded, failed, cut, p50_ms, p99_ms}] in the phases' order, "between" last when any."""
    names = [p["phase"] for p in phases] + ["between"]
    rows = dict((n, {"phase": n, "sent": 0, "succeeded": 0, "failed": 0, "cut": 0, "_lat": []}) for n in names)
    for r in requests:
        row = rows[phase_of(r["start"], phases)]
        row["sent"] += 1
        key = {"ok": "succeeded", "cut": "cut"}.get(r.get("outcome"), "failed")
        row[key] += 1
        if key == "succeeded":
            row["_lat"].append(round(1000.0 * (r["end"] - r["start"]), 1))
    out = []
    for n in names:
        row = rows[n]
        if n == "between" and not row["sent"]:
            continue
        lat = row.pop("_lat")
        row["p50_ms"], row["p99_ms"] = percentile(lat, 50), percentile(lat, 99)
        out.append(row)
    return out


def table(rows):
    lines = ["%-22s %6s %9s %6s %4s %8s %8s" % ("phase", "sent", "succeeded", "failed", "cut", "p50 ms", "p99 ms")]
    for r in rows:
        lines.append(
            "%-22s %6d %9d %6d %4d %8s %8s"
            % (
                r["phase"],
                r["sent"],
                r["succeeded"],
                r["failed"],
                r["cut"],
                "-" if r["p50_ms"] is None else "%.0f" % r["p50_ms"],
                "-" if r["p99_ms"] is None else "%.0f" % r["p99_ms"],
            )
        )
    return "\n".join(lines)


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main(argv):
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    rows = counts(read_jsonl(argv[0]), read_jsonl(argv[1]))
    print(json.dumps({"phases": rows, "table": table(rows)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
