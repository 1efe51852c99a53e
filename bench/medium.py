"""Bench 2 - bytes read from the bundle medium per first deployment, divided by the bundle size.

The limit is 1.0 (every byte of the USB disk read once). The naive operator procedure - `sha256sum -c`
on the medium, `cp -r` to the host, `sha256sum -c` of the copy - reads the bundle 3x (2x from the
medium). Measured from /proc/<pid>/io of the processes themselves: rchar (bytes read() returned) and
read_bytes (what the disk delivered; the page cache is emptied of the bundle first, per file with
POSIX_FADV_DONTNEED, so a cold medium is simulated without root).

Ours = the real airgap.vllm.bundle_stage module (remote_src=true: the bundle mounted on the target,
the path where staging reads the medium itself), run in a child process; and the same preceded by
the real bundle_verify module (roles/bundle with bundle_verify_on_controller=true).

Also the roles' default, bundle_source=controller: `ansible localhost -c local -m airgap.vllm.bundle_stage`
(the action plugin streams chunks, the target appends them and hashes the parts at commit). One process
tree reads both the medium and the destination there, so its reads are attributed by path with
`strace -f -y` (skipped with a message when strace is missing or not permitted).
"""

import json
import os
import subprocess
import sys

import benchlib as B
import stagelib as S
import stracelib as ST

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
        print(
            "  bundle_stage:                 %6.1f s  rchar %s (medium %s, local %s)  read_bytes %s"
            % (
                secs,
                B.human(rep["io"]["rchar"]),
                B.human(ours),
                B.human(rep["local_io"].get("rchar", 0)),
                B.human(rep["io"]["read_bytes"]),
            )
        )

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
        print(
            "  sha256sum -c; cp -r; sha256sum -c: %6.1f s  medium rchar %s, all reads %s"
            % (t1 + t2 + t3, B.human(naive_medium), B.human(naive_all))
        )
        B.cleanup(dest3)

        ctl = controller(src, d, entries, total)

        sz = "%s bundle, %d files" % (B.human(total), len(sizes))
        B.result(
            NAME,
            "reads_per_bundle",
            B.ratio(ours, total),
            "bytes read from the medium by bundle_stage / bundle size, first deployment, " + sz,
            target="<= 1.05",
            detail="all reads %s, disk read_bytes %s" % (B.human(rep["io"]["rchar"]), B.human(rep["io"]["read_bytes"])),
        )
        B.result(
            NAME,
            "reads_per_bundle_with_verify",
            B.ratio(with_verify, total),
            "same with bundle_verify_on_controller=true (verify pass, then stage), " + sz,
        )
        B.result(
            NAME,
            "naive_reads_per_bundle",
            B.ratio(naive_all, total),
            "naive sha256sum -c; cp -r; sha256sum -c: all bytes read / bundle size (%.2gx from the medium)"
            % B.ratio(naive_medium, total),
        )
        B.result(
            NAME,
            "vs_naive",
            B.ratio(ours, naive_medium),
            "medium bytes read: bundle_stage / naive procedure",
            target="<= 0.55",
        )
        if ctl:
            B.result(
                NAME,
                "controller_reads_per_bundle",
                B.ratio(ctl["medium"], total),
                "bundle_source=controller (action plugin): bytes read from the medium / bundle size, " + sz,
                target="<= 1.05",
                detail="plus %.2gx of the bundle re-read from local disks (chunk files, "
                "commit hash)" % B.ratio(ctl["local"], total),
            )
    finally:
        B.cleanup(d)


def controller(src, d, entries, total):
    """The action plugin path under strace: {'medium': bytes, 'local': bytes} or None when skipped."""
    if not ST.available():
        B.skipped(NAME, "controller_reads_per_bundle", "strace is missing or not permitted here")
        return None
    dest = os.path.join(d, "dest-controller")
    tmp = os.path.join(d, "tmp")
    os.makedirs(tmp)
    args = {
        "src": src,
        "dest": dest,
        "artifacts": entries,
        "stamp_file": "",
        "log_path": os.path.join(d, "stage-controller.log"),
        "min_free_bytes": 0,
    }
    trace = os.path.join(d, "strace.log")
    env = dict(
        os.environ,
        TMPDIR=tmp,
        ANSIBLE_LOCAL_TEMP=tmp,
        ANSIBLE_REMOTE_TMP=tmp,
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_COLLECTIONS_PATH=B.COLLECTIONS,
    )
    cmd = ST.TRACE + [
        "-o",
        trace,
        "ansible",
        "localhost",
        "-i",
        "localhost,",
        "-c",
        "local",
        "-m",
        "airgap.vllm.bundle_stage",
        "-a",
        json.dumps(args),
        "-e",
        "ansible_python_interpreter=" + sys.executable,
    ]
    B.drop_cache([os.path.join(src, e["path"]) for e in entries])

    def staging():
        return subprocess.run(
            cmd,
            cwd=B.ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            universal_newlines=True,
            check=False,
        )

    secs, proc = B.timed(staging)
    if proc.returncode != 0:
        raise RuntimeError(
            "ansible -m airgap.vllm.bundle_stage failed (rc=%d):\n%s" % (proc.returncode, proc.stdout[-3000:])
        )
    with open(trace) as f:
        by_path = ST.reads_by_path(f.read())
    medium = ST.bytes_under(by_path, src)
    local = ST.bytes_under(by_path, dest) + ST.bytes_under(by_path, tmp)
    staged = sum(os.path.getsize(os.path.join(dest, e["path"])) for e in entries)
    assert staged == total, "controller staging left %d of %d bytes" % (staged, total)
    print(
        "  ansible -m bundle_stage (controller): %6.1f s under strace  medium %s, local re-reads %s"
        % (secs, B.human(medium), B.human(local))
    )
    B.cleanup(dest)
    B.cleanup(tmp)
    os.unlink(trace)
    return {"medium": medium, "local": local}


if __name__ == "__main__":
    sys.exit(main())
