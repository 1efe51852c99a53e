"""Shared helpers of the bench suite (bench/run): sizes, scratch space, timing, /proc io, results.

Every bench compares the collection's code against what an operator would run instead, *in the same
run*, and reports the ratio; absolute times on a shared 2-core machine mean little, ratios of things
measured back to back (median of repeats) mostly cancel the noise.

Results: each bench calls `result(...)`, which prints a human line and, when AIRGAP_BENCH_RESULTS
names a file, appends a JSON line there; `python3 bench/benchlib.py summary FILE` prints the table.
"""

from __future__ import print_function

import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
COLLECTIONS = os.path.join(ROOT, "build", "collections")
MIB = 1024 * 1024
GIB = 1024 * MIB


def import_collection():
    """Make `ansible_collections.airgap.vllm` resolve to this work tree (same link as tests/link-collection.sh)."""
    link = os.path.join(COLLECTIONS, "ansible_collections", "airgap", "vllm")
    if not os.path.islink(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        try:
            os.symlink(ROOT, link)
        except FileExistsError:
            pass
    if COLLECTIONS not in sys.path:
        sys.path.insert(0, COLLECTIONS)


def small():
    """CI mode: tiny sizes, finishes in seconds (bench/run --small, or AIRGAP_BENCH_SMALL=1)."""
    return os.environ.get("AIRGAP_BENCH_SMALL", "") not in ("", "0") or "--small" in sys.argv[1:]


def scratch(name):
    """A fresh scratch directory for one bench, under AIRGAP_BENCH_DIR (default /var/tmp/airgap-bench).

    Named per process: a CI-mode run started by someone else meanwhile must not wipe a full run's data."""
    base = os.environ.get("AIRGAP_BENCH_DIR", "/var/tmp/airgap-bench")
    d = os.path.join(base, "%s-%s-%d" % (name, "small" if small() else "full", os.getpid()))
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def cleanup(d):
    if os.environ.get("AIRGAP_BENCH_KEEP", "") in ("", "0"):
        shutil.rmtree(d, ignore_errors=True)


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def need_space(path, nbytes, slack=2 * GIB):
    """Refuse (SystemExit with a message) rather than fill a shared disk."""
    free = free_bytes(path)
    if free < nbytes + slack:
        raise SystemExit(
            "%s: %s free, this bench needs %s (+%s slack); set AIRGAP_BENCH_DIR or use --small"
            % (path, human(free), human(nbytes), human(slack))
        )


def human(n):
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.1f %s" % (n, unit))
        n /= 1024.0


def median(xs):
    return statistics.median(list(xs))


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def run_quiet(cmd, **kw):
    """subprocess.run with output discarded and a non-zero exit raised."""
    kw.setdefault("stdout", subprocess.DEVNULL)
    return subprocess.run(cmd, check=True, **kw)


# ---------------------------------------------------------------- data


def fill_block(seed):
    """1 MiB of pseudo-random bytes, the same for the same seed (no os.urandom: reproducible sums)."""
    out = bytearray()
    h = hashlib.sha256(("airgap-bench-%s" % seed).encode())
    while len(out) < MIB:
        h = hashlib.sha256(h.digest())
        out += h.digest() * 64
    return bytes(out[:MIB])


def write_file(path, size, seed):
    """Write `size` bytes of non-sparse, non-repeating-per-MiB data; return its sha256 (no re-read)."""
    block = fill_block(seed)
    h = hashlib.sha256()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        left = size
        i = 0
        while left > 0:
            chunk = (i.to_bytes(8, "little") + block[8:])[:left]
            f.write(chunk)
            h.update(chunk)
            left -= len(chunk)
            i += 1
    return h.hexdigest()


def make_bundle(root, sizes, prefix="artifacts/blob", seed="b"):
    """Files of the given sizes under root; returns manifest entries (path, size, sha256, kind)."""
    entries = []
    width = len(str(len(sizes)))
    for i, size in enumerate(sizes):
        rel = "%s-%0*d.bin" % (prefix, width, i)
        sha = write_file(os.path.join(root, rel), size, "%s-%d" % (seed, i))
        entries.append({"path": rel, "size": size, "sha256": sha, "kind": "file"})
    return entries


def write_manifest(root, entries):
    """manifest.yml in its JSON subset (readable without PyYAML) and SHA256SUMS, as bundle_build writes."""
    with open(os.path.join(root, "manifest.yml"), "w") as f:
        json.dump({"artifacts": entries}, f, indent=1)
    with open(os.path.join(root, "SHA256SUMS"), "w") as f:
        for e in sorted(entries, key=lambda x: x["path"]):
            f.write("%s  %s\n" % (e["sha256"], e["path"]))


def drop_cache(paths):
    """Evict files from the page cache (fdatasync + POSIX_FADV_DONTNEED; no root, no drop_caches), so
    the next read really comes from the disk and shows in read_bytes. Best effort: returns how many."""
    n = 0
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            n += 1
        except OSError:
            pass
        finally:
            os.close(fd)
    return n


def walk_files(root):
    out = []
    for dirpath, _dirs, files in os.walk(root):
        out.extend(os.path.join(dirpath, f) for f in files)
    return sorted(out)


# ---------------------------------------------------------------- /proc/<pid>/io


def parse_proc_io(text):
    """`/proc/<pid>/io` text -> {'rchar': int, ...}. rchar: bytes asked of read() and friends (page
    cache hits included); read_bytes: bytes the block layer fetched for the process."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and value.strip().isdigit():
            out[key.strip()] = int(value.strip())
    if "rchar" not in out:
        raise ValueError("not a /proc/<pid>/io text: %r" % text[:80])
    return out


def proc_io(pid="self"):
    """The io counters of a process; for `self` they include every child already reaped."""
    with open("/proc/%s/io" % pid) as f:
        return parse_proc_io(f.read())


def io_delta(before, after):
    return dict((k, after[k] - before.get(k, 0)) for k in after)


def run_measured(cmd, **kw):
    """Run cmd to completion; return (seconds, io delta of it and all its children).

    /proc/self/io of this process grows by the io of each child once the child is reaped, so the delta
    around a wait() is exactly the child tree's io (this process does nothing else meanwhile)."""
    kw.setdefault("stdout", subprocess.DEVNULL)
    before = proc_io()
    t = time.perf_counter()
    subprocess.run(cmd, check=True, **kw)
    secs = time.perf_counter() - t
    return secs, io_delta(before, proc_io())


# ---------------------------------------------------------------- results

_TARGET = re.compile(r"^\s*(<=|>=|<|>)\s*([0-9.]+)\s*$")


def parse_target(target):
    """'<= 1.05' -> ('<=', 1.05); None/'' -> None."""
    if not target:
        return None
    m = _TARGET.match(target)
    if not m:
        raise ValueError("target %r is not '<op> <number>'" % target)
    return m.group(1), float(m.group(2))


def verdict(value, target):
    """'met' / 'missed' / 'info' (no target, or no value) for a value against parse_target(target)."""
    t = parse_target(target)
    if t is None or value is None:
        return "info"
    op, num = t
    ok = {"<=": value <= num, ">=": value >= num, "<": value < num, ">": value > num}[op]
    return "met" if ok else "missed"


def margin(value, target):
    """How far from the target, as a factor: >1 means that much headroom, <1 that much short."""
    t = parse_target(target)
    if t is None or value is None:
        return None
    op, num = t
    if op in ("<=", "<"):
        return (num / value) if value > 0 else float("inf")
    return (value / num) if num > 0 else float("inf")


def ratio(ours, theirs):
    """ours / theirs, None when theirs is 0 or missing."""
    if ours is None or not theirs:
        return None
    return float(ours) / float(theirs)


def result(bench, key, value, what, target=None, unit="x", detail=""):
    """Report one number (usually a ratio: `unit` 'x'); prints it and appends it to the results file."""
    rec = {
        "bench": bench,
        "key": key,
        "value": value,
        "unit": unit,
        "what": what,
        "target": target,
        "verdict": verdict(value, target),
        "margin": margin(value, target),
        "detail": detail,
        "small": small(),
    }
    if rec["small"] and rec["verdict"] in ("met", "missed"):
        # Tiny sizes measure start-up costs, not the thing the target is about: shown, never judged.
        rec["verdict"] = "not judged (small)"
    tgt = (" target %s: %s" % (target, rec["verdict"].upper())) if target else ""
    tail = ("  " + detail) if detail else ""
    print("RESULT %s.%s = %s%s  (%s)%s" % (bench, key, fmt_value(value, unit), tgt, what, tail))
    path = os.environ.get("AIRGAP_BENCH_RESULTS")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(rec, sort_keys=True) + "\n")
    sys.stdout.flush()
    return rec


def skipped(bench, key, why):
    rec = {
        "bench": bench,
        "key": key,
        "value": None,
        "unit": "",
        "what": "skipped: " + why,
        "target": None,
        "verdict": "skipped",
        "margin": None,
        "detail": "",
        "small": small(),
    }
    print("SKIPPED %s.%s: %s" % (bench, key, why))
    path = os.environ.get("AIRGAP_BENCH_RESULTS")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(rec, sort_keys=True) + "\n")
    return rec


def fmt_value(value, unit):
    if value is None:
        return "-"
    if unit == "x":
        return format(value, "#.3g") + "x" if value < 1000 else "%.0fx" % value
    if unit == "s":
        return "%.3g s" % value if value >= 1 else "%.3g ms" % (value * 1000)
    if unit == "ms":
        return "%.3g ms" % value
    if unit == "%":
        return "%.1f %%" % value
    return ("%.4g %s" % (value, unit)).strip()


def fmt_margin(m):
    if m is None:
        return "-"
    if m == float("inf"):
        return "inf"
    return ("%.0fx" % m) if m >= 100 else ("%.2gx" % m)


def load_results(path):
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                out.append(json.loads(line))
    return out


def summary_table(records, markdown=False):
    """The results as a table: bench.key, value, target, verdict, margin, what."""
    rows = []
    for r in records:
        m = r.get("margin")
        rows.append(
            [
                "%s.%s" % (r["bench"], r["key"]),
                fmt_value(r.get("value"), r.get("unit", "")),
                r.get("target") or "-",
                r.get("verdict", "info"),
                fmt_margin(m),
                r.get("what", ""),
            ]
        )
    head = ["result", "value", "target", "verdict", "margin", "what"]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)] if rows else [len(h) for h in head]
    widths[-1] = 0
    fmt = "  ".join("%-" + str(w) + "s" for w in widths)
    return "\n".join([fmt % tuple(head)] + [fmt % tuple(row) for row in rows])


def main(argv):
    if len(argv) >= 2 and argv[0] == "summary":
        recs = load_results(argv[1])
        print(summary_table(recs, markdown="--markdown" in argv))
        missed = [r for r in recs if r.get("verdict") == "missed"]
        print(
            "%d results, %d met, %d missed, %d info, %d skipped"
            % (
                len(recs),
                sum(r.get("verdict") == "met" for r in recs),
                len(missed),
                sum(r.get("verdict") == "info" for r in recs),
                sum(r.get("verdict") == "skipped" for r in recs),
            )
        )
        return 0
    print("usage: python3 bench/benchlib.py summary RESULTS.jsonl [--markdown]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
