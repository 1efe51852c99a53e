"""Bench 3 - staging throughput vs `cp` then `sha256sum` of the copy; resume after a kill at 50 %.

Ours: the real airgap.vllm.bundle_stage module (remote_src=true), which hashes while copying, writes
`<file>.part`, fsyncs and renames only when every file matched. The alternative an operator runs:
`cp -r` of the bundle, `sha256sum -c` of the copy, and `sync` of the copied files (ours is durable when
it returns; without the sync, cp's writes would still be in the page cache). Every contender starts
with the medium evicted from the page cache. Two shapes: a few large files, many small ones.

Resume: the module kills itself with SIGKILL once a file's copy passes 50 % (deterministic kill point),
then runs again. Reported: bytes re-read from the medium (beyond the half still to copy), and the
part prefix re-hashed from the destination disk; `cp` after the same interruption starts over.
"""

import os
import shutil
import sys

import benchlib as B
import stagelib as S

NAME = "staging"


def baseline(src, dest, entries):
    """cp -r, sha256sum -c of the copy, sync of the copied files; returns seconds."""
    os.makedirs(dest)
    B.drop_cache([os.path.join(src, e["path"]) for e in entries])
    secs = 0.0
    secs += B.timed(lambda: B.run_quiet(["cp", "-r", os.path.join(src, "artifacts"), dest]))[0]
    shutil.copy(os.path.join(src, "SHA256SUMS"), dest)
    secs += B.timed(lambda: B.run_quiet(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=dest))[0]
    copied = B.walk_files(os.path.join(dest, "artifacts"))
    # `sync FILE...` fsyncs just those files: not the other users' dirty pages on this shared disk.
    for i in range(0, len(copied), 500):
        secs += B.timed(lambda: B.run_quiet(["sync"] + copied[i : i + 500]))[0]
    return secs


def ours(src, dest, entries, d):
    B.drop_cache([os.path.join(src, e["path"]) for e in entries])
    secs, rep, _rc = S.stage(src, dest, entries, d)
    assert rep["result"]["bytes_copied"] == sum(e["size"] for e in entries), rep["result"]
    return secs


def throughput(d, label, sizes, repeats):
    src = os.path.join(d, "medium-" + label)
    entries = B.make_bundle(src, sizes)
    B.write_manifest(src, entries)
    total = sum(sizes)
    t_ours, t_base = [], []
    for i in range(repeats):  # interleaved
        dest = os.path.join(d, "dest")
        t_base.append(baseline(src, dest, entries))
        shutil.rmtree(dest)
        t_ours.append(ours(src, dest, entries, d))
        shutil.rmtree(dest)
    mo, mb = B.median(t_ours), B.median(t_base)
    mib = total / float(B.MIB)
    print(
        "  %s: %d files, %s, median of %d: bundle_stage %.2f s (%.0f MiB/s), cp+sha256sum+sync %.2f s (%.0f MiB/s)"
        % (label, len(sizes), B.human(total), repeats, mo, mib / mo, mb, mib / mb)
    )
    B.result(
        NAME,
        "%s_vs_cp_sha256sum" % label,
        B.ratio(mb, mo),
        "staging throughput / (cp -r; sha256sum -c; sync), %d files, %s" % (len(sizes), B.human(total)),
        target=">= 1",
    )
    shutil.rmtree(src)


def resume(d, size):
    src = os.path.join(d, "medium-resume")
    entries = B.make_bundle(src, [size])
    B.write_manifest(src, entries)
    medium_file = os.path.join(src, entries[0]["path"])
    dest = os.path.join(d, "dest")
    _secs, rep, rc = S.stage(src, dest, entries, d, die_at=0.5)
    assert rep is None and rc == -9, "the first run should have been killed at 50 %"
    part = os.path.join(dest, entries[0]["path"]) + ".part"
    have = os.path.getsize(part)
    B.drop_cache([medium_file, part])
    _secs, rep, _rc = S.stage(src, dest, entries, d)
    res = rep["result"]["files"][0]
    assert res["resumed_from"] == have and res["bytes_copied"] == size - have, res
    medium = S.medium_bytes(rep)
    local = rep["local_io"]["rchar"]
    reread = max(0, medium - (size - have))
    print(
        "  resume: killed at %s of %s (%.0f %%); re-run read %s from the medium (%s still to copy), "
        "re-hashed %s of .part from the destination disk"
        % (B.human(have), B.human(size), 100.0 * have / size, B.human(medium), B.human(size - have), B.human(local))
    )
    # cp after the same interruption: it truncates the destination and reads the whole file again.
    cp_dest = os.path.join(d, "cp-dest")
    os.makedirs(cp_dest)
    with open(medium_file, "rb") as f, open(os.path.join(cp_dest, "blob.bin"), "wb") as out:
        out.write(f.read(have))
    B.drop_cache([medium_file])
    _t, cp_io = B.run_measured(["cp", medium_file, os.path.join(cp_dest, "blob.bin")])
    B.result(
        NAME,
        "resume_medium_reread",
        B.ratio(reread, size),
        "after a kill at %.0f %%: bytes re-read from the medium / file size (%s file)"
        % (100.0 * have / size, B.human(size)),
        target="<= 0.01",
        detail="cp re-reads %s (%.2gx of the file)" % (B.human(cp_io["rchar"]), B.ratio(cp_io["rchar"], size)),
    )
    B.result(
        NAME,
        "resume_vs_cp_medium_reads",
        B.ratio(medium, cp_io["rchar"]),
        "medium bytes read by the resumed run / by cp re-run after the same interruption",
        target="<= 0.55",
        detail="plus %s of .part prefix re-hashed from the destination disk" % B.human(local),
    )
    shutil.rmtree(src)
    shutil.rmtree(dest)
    shutil.rmtree(cp_dest)


def main():
    small = B.small()
    if small:
        large, many, resume_size, repeats = [4 * B.MIB] * 3, [16 * 1024] * 100, 16 * B.MIB, 1
    else:
        large, many, resume_size, repeats = [1 * B.GIB] * 3, [256 * 1024] * 4000, 2 * B.GIB, 3
    d = B.scratch(NAME)
    try:
        B.need_space(os.path.dirname(d), 3 * max(sum(large), resume_size), slack=0 if small else B.GIB)
        throughput(d, "large_files", large, repeats)
        # Small files hinge on per-file fsync latency, the noisiest thing on a shared disk: more repeats.
        throughput(d, "small_files", many, repeats if small else 5)
        resume(d, resume_size)
    finally:
        B.cleanup(d)


if __name__ == "__main__":
    sys.exit(main())
