"""Bench 2 - bytes read from the bundle medium per first deployment, divided by the bundle size.

The limit is 1.0 (every byte of the USB disk read once). The naive operator procedure - `sha256sum -c`
on the medium, `cp -r` to the host, `sha256sum -c` of the copy - reads the bundle 3x (2x from the
medium). Measured from /proc/<pid>/io of the processes themselves: rchar (bytes read() returned) and
read_bytes (what the disk delivered; the page cache is emptied of the bundle first, per file with
POSIX_FADV_DONTNEED, so a cold medium is simulated without root).

Ours = the real airgap.vllm.bundle_stage module (remote_src=true: the bundle mounted on the target,
the path where staging reads the medium itself), run in a child process; and the same preceded by
the real bundle_verify module (roles/bundle with bundle_verify_on_controller=true).
"""
import os
import sys

import benchlib as B
import stagelib as S

NAME = "medium"


def main():
    small = B.small()
    if small:
        sizes = [24 * B.MIB, 8 * B.MIB, 3 * B.MIB, 1 * B.MIB, 4096, 0]
    else:
        # One image archive, a model's shards, small driver/toolkit/config files: 4 GiB in all.
        sizes = [2 * B.GIB, 3 * 320 * B.MIB, 64 * B.MIB] + [448 * B.MIB, 448 * B.MIB, 4 * B.MIB, 4096]
        sizes = sizes[:1] + [320 * B.MIB] * 3 + sizes[2:]
    total = sum(sizes)
    d = B.scratch(NAME)
    try:
        B.need_space(os.path.dirname(d), 3 * total, slack=0 if small else B.GIB)
        src = os.path.join(d, "medium")
        entries = B.make_bundle(src, sizes)
        B.write_manifest(src, entries)
        src_files = [os.path.join(src, e["path"]) for e in entries]
        print("bundle: %d files, %s (%s)" % (len(entries), B.human(total), ", ".join(B.human(s) for s in sizes)))

        # Ours: the staging module alone (roles/bundle default: no separate verify pass).
        dest = os.path.join(d, "dest-ours")
        B.drop_cache(src_files)
        secs, rep, _rc = S.stage(src, dest, entries, d)
        ours = S.medium_bytes(rep)
        assert rep["result"]["bytes_copied"] == total, rep["result"]
        print("  bundle_stage:                 %6.1f s  rchar %s (medium %s, local %s)  read_bytes %s" % (
            secs, B.human(rep["io"]["rchar"]), B.human(ours), B.human(rep["local_io"].get("rchar", 0)),
            B.human(rep["io"]["read_bytes"])))

        # Ours with bundle_verify_on_controller=true: a verify pass over the medium first.
        dest2 = os.path.join(d, "dest-verify")
        B.drop_cache(src_files)
        vsecs, vrep, _rc = S.verify(src, entries, d)
        ssecs, srep, _rc = S.stage(src, dest2, entries, d)
        with_verify = vrep["io"]["rchar"] + S.medium_bytes(srep)
        print("  bundle_verify + bundle_stage: %6.1f s  medium rchar %s" % (vsecs + ssecs, B.human(with_verify)))
        B.cleanup(dest2)

        # Naive: sha256sum -c on the medium, cp -r, sha256sum -c of the copy.
        dest3 = os.path.join(d, "dest-naive")
        os.makedirs(dest3)
        with open(os.path.join(src, "SHA256SUMS")) as f:
            sums = f.read()
        B.drop_cache(src_files)
        t1, io1 = B.run_measured(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=src)
        t2, io2 = B.run_measured(["cp", "-r", os.path.join(src, "artifacts"), dest3])
        with open(os.path.join(dest3, "SHA256SUMS"), "w") as f:
            f.write(sums)
        t3, io3 = B.run_measured(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=dest3)
        naive_medium = io1["rchar"] + io2["rchar"]
        naive_all = naive_medium + io3["rchar"]
        print("  sha256sum -c; cp -r; sha256sum -c: %6.1f s  medium rchar %s, all reads %s" % (
            t1 + t2 + t3, B.human(naive_medium), B.human(naive_all)))
        B.cleanup(dest3)

        sz = "%s bundle, %d files" % (B.human(total), len(sizes))
        B.result(NAME, "reads_per_bundle", B.ratio(ours, total),
                 "bytes read from the medium by bundle_stage / bundle size, first deployment, " + sz,
                 target="<= 1.05", detail="all reads %s, disk read_bytes %s" % (
                     B.human(rep["io"]["rchar"]), B.human(rep["io"]["read_bytes"])))
        B.result(NAME, "reads_per_bundle_with_verify", B.ratio(with_verify, total),
                 "same with bundle_verify_on_controller=true (verify pass, then stage), " + sz)
        B.result(NAME, "naive_reads_per_bundle", B.ratio(naive_all, total),
                 "naive sha256sum -c; cp -r; sha256sum -c: all bytes read / bundle size (%.2gx from the medium)"
                 % B.ratio(naive_medium, total))
        B.result(NAME, "vs_naive", B.ratio(ours, naive_medium),
                 "medium bytes read: bundle_stage / naive procedure", target="<= 0.55")
    finally:
        B.cleanup(d)


if __name__ == "__main__":
    sys.exit(main())
