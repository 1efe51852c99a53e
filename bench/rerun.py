"""Bench 5 - a converged re-run of site.yml on the simulated host, divided by the first run.

FULL mode only (it takes the simulated host for many minutes): `docker rm -f airgap-kylin-sim` (a fresh
host), `bash tests/simulate` (first run), `bash tests/simulate` again (converged), both with the
ansible.posix.profile_tasks callback. The playbook times come from profile_tasks' elapsed-time lines
(tests/simulate runs bundle_build.yml, then site.yml: the last playbook of each output is site.yml);
the slowest tasks of the re-run are listed. Target: re-run <= 15 % of the first run, changed=0.
Logs stay in /var/tmp/airgap-bench/rerun-logs/ (the raw evidence), the simulated host stays up
(stop it with `docker rm -f airgap-kylin-sim`).

CI mode (--small) never touches the simulated host: it runs the same parsing and ratio code on
recorded profile_tasks output (bench/fixtures/profile_tasks-{first,rerun}.txt).
"""

import os
import re
import subprocess
import sys
import time

import benchlib as B

NAME = "rerun"
HOST = "airgap-kylin-sim"
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")

# "Monday 30 November 2026  12:57:27 +0000 (0:00:00.016)       0:00:00.016 *******"
_BANNER = re.compile(r"\((\d+):(\d\d):(\d\d(?:\.\d+)?)\)\s+(\d+):(\d\d):(\d\d(?:\.\d+)?)\s+\*+\s*$")
# "Slow first-time import (skipped when converged) ------------------------- 2.11s"
_TASK = re.compile(r"^(?P<name>.*?) -+ (?P<secs>\d+(?:\.\d+)?)s\s*$")
_RULE = re.compile(r"^=+\s*$")
# "localhost   : ok=4    changed=3    unreachable=0    failed=0    skipped=0    rescued=0    ignored=0"
_HOST = re.compile(r"^(?P<host>\S+)\s+:\s+(?P<stats>(?:\w+=\d+\s*)+)$")


def _hms(h, m, s):
    return int(h) * 3600 + int(m) * 60 + float(s)


def parse_profile(text):
    """ansible-playbook output with profile_tasks -> one dict per playbook run:
    {'total_s': elapsed at the stats line, 'tasks': [(name, seconds)] as listed (slowest first),
     'hosts': {host: {'ok': n, 'changed': n, ...}}}"""
    runs = []
    last_elapsed = None
    hosts = {}
    current = None
    for raw in text.splitlines():
        line = raw.rstrip("\n")
        if current is not None:
            m = _TASK.match(line)
            if m:
                current["tasks"].append((m.group("name"), float(m.group("secs"))))
                continue
            runs.append(current)
            current = None
        m = _BANNER.search(line)
        if m:
            last_elapsed = _hms(*m.groups()[3:])
            continue
        m = _HOST.match(line.strip())
        if m:
            hosts[m.group("host")] = dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", m.group("stats")))
            continue
        if _RULE.match(line) and last_elapsed is not None:
            current = {"total_s": last_elapsed, "tasks": [], "hosts": hosts}
            hosts = {}
            last_elapsed = None
    if current is not None:
        runs.append(current)
    return runs


def compare(first_text, rerun_text):
    """Ratio of the last playbook (site.yml) of each output: {'first_s', 'rerun_s', 'ratio', 'changed',
    'failed', 'slowest': [(name, s)] of the re-run}."""
    first, rerun = parse_profile(first_text), parse_profile(rerun_text)
    if not first or not rerun:
        raise ValueError(
            "no profile_tasks summary found (was ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_tasks set?)"
        )
    a, b = first[-1], rerun[-1]
    return {
        "first_s": a["total_s"],
        "rerun_s": b["total_s"],
        "ratio": B.ratio(b["total_s"], a["total_s"]),
        "changed": sum(h.get("changed", 0) for h in b["hosts"].values()),
        "failed": sum(
            h.get("failed", 0) + h.get("unreachable", 0) for h in list(a["hosts"].values()) + list(b["hosts"].values())
        ),
        "slowest": sorted(b["tasks"], key=lambda t: -t[1])[:10],
        "first_slowest": sorted(a["tasks"], key=lambda t: -t[1])[:10],
    }


def report(c, source):
    print(
        "  %s: site.yml first run %.1f s, converged re-run %.1f s, re-run changed=%d, failed/unreachable=%d"
        % (source, c["first_s"], c["rerun_s"], c["changed"], c["failed"])
    )
    print("  slowest tasks of the re-run:")
    for name, secs in c["slowest"]:
        print("    %7.2f s  %s" % (secs, name))
    B.result(
        NAME,
        "rerun_vs_first",
        c["ratio"],
        "converged site.yml / first run (%s)" % source,
        target="<= 0.15",
        detail="%.0f s vs %.0f s, re-run changed=%d; slowest: %s"
        % (c["rerun_s"], c["first_s"], c["changed"], ", ".join("%s %.1fs" % (n, s) for n, s in c["slowest"][:3])),
    )
    B.result(
        NAME,
        "rerun_changed",
        c["changed"],
        "tasks reported changed by the converged re-run (%s)" % source,
        unit="tasks",
        target="<= 0",
    )


def simulate(log, command=("bash", "tests/simulate")):
    """Run the simulation once with profile_tasks on; returns its output (also left in `log`)."""
    env = dict(os.environ)
    cbs = [c for c in env.get("ANSIBLE_CALLBACKS_ENABLED", "").split(",") if c.strip()]
    if "ansible.posix.profile_tasks" not in cbs:
        cbs.append("ansible.posix.profile_tasks")
    env.update(ANSIBLE_CALLBACKS_ENABLED=",".join(cbs), PROFILE_TASKS_TASK_OUTPUT_LIMIT="all", ANSIBLE_NOCOLOR="1")
    t = time.perf_counter()
    with open(log, "w") as f:
        rc = subprocess.call(list(command), cwd=B.ROOT, env=env, stdout=f, stderr=subprocess.STDOUT)
    secs = time.perf_counter() - t
    with open(log) as f:
        text = f.read()
    print("  %s: rc=%d in %.0f s (log %s)" % (" ".join(command), rc, secs, log))
    if rc != 0:
        print("\n".join(text.splitlines()[-30:]))
        raise SystemExit("tests/simulate failed (rc=%d): no re-run ratio" % rc)
    return text


def main():
    if B.small():
        with open(os.path.join(FIXTURES, "profile_tasks-first.txt")) as f:
            first = f.read()
        with open(os.path.join(FIXTURES, "profile_tasks-rerun.txt")) as f:
            rerun = f.read()
        report(compare(first, rerun), "recorded fixture, not the simulated host")
        return 0
    if subprocess.call(["docker", "version"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) != 0:
        B.skipped(NAME, "rerun_vs_first", "docker is not running here: the simulated host needs it")
        return 0
    logs = os.path.join(os.environ.get("AIRGAP_BENCH_DIR", "/var/tmp/airgap-bench"), "rerun-logs")
    os.makedirs(logs, exist_ok=True)
    print("  fresh simulated host: docker rm -f %s" % HOST)
    subprocess.call(["docker", "rm", "-f", HOST], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first = simulate(os.path.join(logs, "first.log"))
    rerun = simulate(os.path.join(logs, "rerun.log"))
    report(compare(first, rerun), "simulated host, bash tests/simulate twice")
    return 0


if __name__ == "__main__":
    sys.exit(main())
