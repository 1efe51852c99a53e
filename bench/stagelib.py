"""Drive the real staging module in a child process (bench/stage_child.py) for benches medium and staging."""

import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def module_args_file(d, name, args):
    path = os.path.join(d, "%s-args.json" % name)
    with open(path, "w") as f:
        json.dump({"ANSIBLE_MODULE_ARGS": args}, f)
    return path


def run_module(d, module, args, die_at=None):
    """Run plugins/modules/<module>.py in a child; returns (seconds, parsed child report, returncode).

    A child that killed itself (die_at) returns (seconds, None, -9)."""
    cmd = [sys.executable, os.path.join(HERE, "stage_child.py"), module, module_args_file(d, module, args)]
    if die_at is not None:
        cmd += ["--die-at", str(die_at)]
    t = time.perf_counter()
    p = subprocess.run(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, cwd=HERE, check=False
    )
    secs = time.perf_counter() - t
    if p.returncode < 0:
        return secs, None, p.returncode
    try:
        report = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RuntimeError("%s: no report (rc=%s): %s %s" % (module, p.returncode, p.stdout[-2000:], p.stderr[-2000:]))
    if p.returncode != 0:
        raise RuntimeError("%s failed: %s" % (module, report["result"].get("msg")))
    return secs, report, p.returncode


def stage(src, dest, entries, d, die_at=None, stamp_file=""):
    """bundle_stage with remote_src=true (the bundle mounted on the target), as roles/bundle runs it."""
    args = {
        "src": src,
        "dest": dest,
        "remote_src": True,
        "artifacts": entries,
        "stamp_file": stamp_file,
        "log_path": os.path.join(d, "stage.log"),
        "min_free_bytes": 0,
    }
    return run_module(d, "bundle_stage", args, die_at=die_at)


def verify(src, entries, d, stamp_file=""):
    args = {"path": src, "artifacts": entries, "stamp_file": stamp_file, "workers": os.cpu_count() or 2}
    return run_module(d, "bundle_verify", args)


def medium_bytes(report):
    """Bytes the module asked of the bundle medium: all its reads minus those of the destination disk."""
    return report["io"]["rchar"] - report["local_io"].get("rchar", 0)
