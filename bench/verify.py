"""Bench 1 - bundle verification vs `sha256sum`, and the stamp-cached re-verify.

Alternatives an operator would run: `sha256sum -c SHA256SUMS` (one process, serial) and one
`sha256sum` process per file (parallel). Files are read warm (from the page cache): this is the CPU
side; on a real USB disk the medium is the limit for every tool, which bench `medium` measures.
Ratios > 1 mean bundle_verify is that many times faster.
"""

import os
import subprocess
import sys

import benchlib as B

B.import_collection()
from ansible_collections.airgap.vllm.plugins.module_utils.bundle import _bundle_hash  # noqa: E402

NAME = "verify"


def main():
    small = B.small()
    n_files, size, repeats = (4, 4 * B.MIB, 3) if small else (4, 256 * B.MIB, 5)
    workers = os.cpu_count() or 2
    d = B.scratch(NAME)
    try:
        B.need_space(os.path.dirname(d), n_files * size, slack=0 if small else B.GIB)
        entries = B.make_bundle(d, [size] * n_files)
        B.write_manifest(d, entries)
        paths = [e["path"] for e in entries]
        total = n_files * size
        stamp_path = os.path.join(d, "stamps.json")

        def ours():
            if os.path.exists(stamp_path):
                os.unlink(stamp_path)
            stamps = _bundle_hash.StampCache(stamp_path)
            _res, summary = _bundle_hash.verify_bundle(d, entries, stamps=stamps, workers=workers, scan_dirs=())
            assert summary["ok"] == n_files and summary["hashed_bytes"] == total, summary
            stamps.save()

        def serial():
            B.run_quiet(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=d)

        def per_file():
            procs = [subprocess.Popen(["sha256sum", p], cwd=d, stdout=subprocess.DEVNULL) for p in paths]
            if any(p.wait() for p in procs):
                raise RuntimeError("sha256sum failed")

        def cached():
            stamps = _bundle_hash.StampCache(stamp_path)
            _res, summary = _bundle_hash.verify_bundle(d, entries, stamps=stamps, workers=workers, scan_dirs=())
            assert summary["ok"] == n_files and summary["hashed_bytes"] == 0, summary

        serial()  # warm the page cache: every contender reads the same cached bytes
        t = {"ours": [], "serial": [], "per_file": [], "cached": []}
        for _rep in range(repeats):  # interleaved, so load from other users hits all alike
            for key, fn in (("serial", serial), ("per_file", per_file), ("ours", ours), ("cached", cached)):
                t[key].append(B.timed(fn)[0])
        m = dict((k, B.median(v)) for k, v in t.items())
        mib = total / float(B.MIB)
        print(
            "data: %d files x %s = %s, warm, %d CPUs, workers=%d, median of %d"
            % (n_files, B.human(size), B.human(total), os.cpu_count(), workers, repeats)
        )
        for k, label in (
            ("serial", "sha256sum -c (one process, serial)"),
            ("per_file", "sha256sum, one process per file"),
            ("ours", "bundle_verify, first run (threads)"),
            ("cached", "bundle_verify, stamp-cached re-run"),
        ):
            print("  %-38s %8.3f s  %8.1f MiB/s" % (label, m[k], mib / m[k] if m[k] else 0))
        sz = "%s in %d files" % (B.human(total), n_files)
        B.result(
            NAME,
            "vs_sha256sum_serial",
            B.ratio(m["serial"], m["ours"]),
            "throughput of bundle_verify / sha256sum -c (serial), " + sz,
            target=">= 1",
        )
        B.result(
            NAME,
            "vs_sha256sum_per_file",
            B.ratio(m["per_file"], m["ours"]),
            "throughput of bundle_verify / one sha256sum per file, " + sz,
            target=">= 0.9",
        )
        B.result(
            NAME,
            "cached_vs_sha256sum",
            B.ratio(m["cached"], m["serial"]),
            "stamp-cached re-verify time / sha256sum -c time, " + sz,
            target="<= 0.01",
            detail="cached re-verify %.1f ms" % (m["cached"] * 1000),
        )
    finally:
        B.cleanup(d)


if __name__ == "__main__":
    sys.exit(main())
