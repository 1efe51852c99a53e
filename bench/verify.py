"""Throughput of airgap.vllm bundle verification vs `sha256sum`, and the stamp-cache re-run.

Usage: python3 bench/bundle_verify_bench.py [--dir DIR] [--files N] [--size-mib M] [--workers W]

Writes N random files of M MiB (default 4 x 256 MiB), drops nothing from the page cache (it cannot
without root tricks), so run it twice and read the second, warm numbers as CPU throughput; on a
real USB disk the medium is the limit for both tools.
"""
import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "build", "collections"))
LINK = os.path.join(ROOT, "build", "collections", "ansible_collections", "airgap", "vllm")
if not os.path.islink(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink(ROOT, LINK)

from ansible_collections.airgap.vllm.plugins.module_utils import _bundle  # noqa: E402


def make_files(d, n, size):
    entries = []
    block = os.urandom(1024 * 1024)
    for i in range(n):
        rel = "artifacts/blob-%02d.bin" % i
        path = os.path.join(d, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        h = hashlib.sha256()
        if not os.path.exists(path) or os.path.getsize(path) != size:
            with open(path, "wb") as f:
                for j in range(size // len(block)):
                    chunk = bytes([i, j % 256]) + block[2:]
                    f.write(chunk)
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(8 << 20), b""):
                h.update(chunk)
        entries.append({"path": rel, "size": size, "sha256": h.hexdigest()})
    return entries


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir")
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    a = ap.parse_args()
    d = a.dir or tempfile.mkdtemp(prefix="bundle-bench-")
    entries = make_files(d, a.files, a.size_mib * 1024 * 1024)
    total = sum(e["size"] for e in entries)
    paths = [e["path"] for e in entries]

    t = time.monotonic()
    subprocess.run(["sha256sum"] + paths, cwd=d, check=True, stdout=subprocess.DEVNULL)
    serial = time.monotonic() - t

    t = time.monotonic()
    procs = [subprocess.Popen(["sha256sum", p], cwd=d, stdout=subprocess.DEVNULL) for p in paths]
    for p in procs:
        p.wait()
    parallel = time.monotonic() - t

    stamps = _bundle.StampCache(os.path.join(d, "stamps.json"))
    if os.path.exists(stamps.path):
        os.unlink(stamps.path)
        stamps = _bundle.StampCache(stamps.path)
    t = time.monotonic()
    results, summary = _bundle.verify_bundle(d, entries, stamps=stamps, workers=a.workers, scan_dirs=())
    ours = time.monotonic() - t
    assert summary["ok"] == len(entries), results
    stamps.save()

    t = time.monotonic()
    _results2, summary2 = _bundle.verify_bundle(d, entries, stamps=_bundle.StampCache(stamps.path),
                                                workers=a.workers, scan_dirs=())
    cached = time.monotonic() - t

    mib = total / 1048576.0
    print("data: %d files, %.0f MiB, %d CPUs, workers=%d" % (len(entries), mib, os.cpu_count(), a.workers))
    print("sha256sum (one process, serial):   %6.2f s  %7.1f MiB/s" % (serial, mib / serial))
    print("sha256sum (one process per file):  %6.2f s  %7.1f MiB/s" % (parallel, mib / parallel))
    print("bundle_verify (threads, first run): %6.2f s  %7.1f MiB/s" % (ours, mib / ours))
    print("bundle_verify (stamp cache re-run): %6.3f s  hashed %d bytes" % (cached, summary2["hashed_bytes"]))


if __name__ == "__main__":
    main()
