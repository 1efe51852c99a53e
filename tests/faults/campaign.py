"""Interruption campaign (issue 46): a day-2 change on a serving host, cut at task boundaries, then re-run.

For each chosen cut point the change's run (README's "change a setting": site.yml --tags plan,service with a new
vllm_plan_concurrency) is started towards a setting the host does not serve yet, and cut the moment the play
reaches that task: SIGKILL of ansible-playbook's whole process group (an SSH session that drops, Ctrl-C twice),
or a power loss (the host container killed and started again). Then, as an operator would:

  1. the same command again: it must succeed (rc 0);
  2. the same command once more: changed=0 (the host converged, not merely survived);
  3. the host as the site left it: daemon.json byte for byte, one unit and one container of ours, the engine
     serving the new setting (its unit's --max-num-seqs), healthy, no half-written part or temp file of ours.

The reference run (uncut, towards the first setting) lists the task boundaries; `--points` picks from them:
  sample      the cuts CI runs (SAMPLE: the task names, each cut when the play reaches it)
  all         every task boundary of the reference run (the long lane: tests/faults/run)
  every:N     every N-th boundary, a kill and a power loss in turn
  every:N@S   the same from boundary S on (a sweep that goes on where an earlier one stopped)
  3,17,40     those task numbers of the reference run
Each point's outcome is one JSON line in --out/points.jsonl; `campaign.py --table points.jsonl` prints the table of
docs/reliability.md. Exit 1 when any point did not converge.
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

# The cut CI runs: just before the new unit is started (written, not started: the most fragile moment of a change;
# the cut that found the restart a re-run skipped). The long lane's sweeps add power losses (every:N, all).
SAMPLE = (("kill", "Start or restart the service with the new configuration"),)
TASK_RE = re.compile(r"^TASK \[(?P<name>.*?)\] \*+$")
RECAP_RE = re.compile(
    r"^(?P<host>\S+)\s+: ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unr>\d+)"
    r"\s+failed=(?P<failed>\d+)"
)
SETTINGS = (8, 4)


def site_cmd(repo, inventory, host, concurrency):
    """The README's "change a setting" line, against one host, with the load check's short profile."""
    return [
        "ansible-playbook",
        os.path.join(repo, "playbooks", "site.yml"),
        "-i",
        inventory,
        "--limit",
        host,
        "--tags",
        "plan,service",
        "-e",
        "vllm_plan_concurrency=%d" % concurrency,
        "-e",
        '{"vllm_service_loadcheck_profiles": ["random"]}',
    ]


def env():
    e = dict(os.environ)
    e.update(
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_CALLBACKS_ENABLED="",
        PYTHONUNBUFFERED="1",
    )
    return e


def recap(text, host):
    """The host's PLAY RECAP counters, or None."""
    found = [m.groupdict() for m in map(RECAP_RE.match, text.splitlines()) if m and m.group("host") == host]
    return {k: int(v) for k, v in found[-1].items() if k != "host"} if found else None


def tasks_of(text):
    return [m.group("name") for m in map(TASK_RE.match, text.splitlines()) if m]


def run_to_end(cmd, log):
    t0 = time.time()
    with open(log, "w") as f:
        p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env(), check=False)
    with open(log) as f:
        return p.returncode, f.read(), time.time() - t0


def run_and_cut(cmd, log, at_task):
    """Run cmd; when the at_task-th TASK header (1-based; or the first whose name contains at_task, a str) is
    printed, SIGKILL its process group. Returns (cut: bool, the task name cut at, seconds)."""
    t0 = time.time()
    seen = 0
    with open(log, "w") as f:
        p = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env(), text=True, start_new_session=True
        )
        name = None
        for line in p.stdout:
            f.write(line)
            m = TASK_RE.match(line.rstrip("\n"))
            if m:
                seen += 1
                if seen == at_task or (isinstance(at_task, str) and at_task in m.group("name")):
                    name = m.group("name")
                    os.killpg(p.pid, signal.SIGKILL)
                    break
        p.stdout.close()
        p.wait()
    return name is not None, name, time.time() - t0


def sh(container, script, timeout=120):
    p = subprocess.run(
        ["docker", "exec", container, "sh", "-c", script], capture_output=True, text=True, timeout=timeout, check=False
    )
    return p.returncode, p.stdout


def power_cycle(container, host_addr, wait_s=240):
    """A power loss: the host container killed (no shutdown) and started again; waits for its SSH port."""
    subprocess.run(["docker", "kill", "-s", "KILL", container], capture_output=True, check=False)
    subprocess.run(["docker", "start", container], capture_output=True, check=True)
    deadline = time.time() + wait_s
    while time.time() < deadline:
        rc, _out = sh(container, "systemctl is-active sshd || systemctl is-active ssh", timeout=30)
        if rc == 0:
            return True
        time.sleep(3)
    return False


STATE_SCRIPT = r"""
echo "daemon=$(sha256sum /etc/docker/daemon.json 2>/dev/null | cut -c1-64)"
echo "units=$(grep -l org.airgap.vllm.service= /etc/systemd/system/*.service 2>/dev/null | tr '\n' ' ')"
echo "containers=$(docker ps -a --filter label=org.airgap.vllm.service --format '{{.Names}}:{{.State}}' | sort | tr '\n' ' ')"
echo "seqs=$(grep -o '"--max-num-seqs" "[0-9]*"' /etc/systemd/system/vllm.service 2>/dev/null | grep -o '[0-9]*')"
echo "running=$(docker inspect -f '{{json .Args}}' vllm 2>/dev/null | grep -o '"--max-num-seqs","[0-9]*"' | grep -o '[0-9]*')"
echo "active=$(systemctl is-active vllm)"
echo "health=$(python3 -c 'import urllib.request as u; print(u.urlopen("http://127.0.0.1:8000/health", timeout=10).status)' 2>/dev/null || echo 000)"
echo "partial=$(find /var/lib/airgap-vllm /opt/airgap-vllm /etc/airgap-vllm -name '*.part' -o -name '*.tmp' -o -name '.ansible_tmp*' 2>/dev/null | tr '\n' ' ')"
"""


def host_state(container):
    rc, out = sh(container, STATE_SCRIPT)
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def judge(before, after, want_seqs):
    """What is wrong with the host after the re-runs, in words (empty: nothing)."""
    wrong = []
    if after.get("daemon") != before.get("daemon"):
        wrong.append("daemon.json changed")
    if after.get("units") != before.get("units"):
        wrong.append("our units %r, before %r" % (after.get("units"), before.get("units")))
    if after.get("containers") != before.get("containers"):
        wrong.append("our containers %r, before %r" % (after.get("containers"), before.get("containers")))
    if after.get("seqs") != str(want_seqs):
        wrong.append("the unit runs --max-num-seqs %s, not %d" % (after.get("seqs"), want_seqs))
    if after.get("running") != str(want_seqs):
        wrong.append("the running container has --max-num-seqs %s, not %d" % (after.get("running"), want_seqs))
    if after.get("active") != "active" or after.get("health") != "200":
        wrong.append("engine %s, /health %s" % (after.get("active"), after.get("health")))
    if after.get("partial", "").strip():
        wrong.append("left behind: %s" % after["partial"].strip())
    return wrong


def choose(points, reference):
    """[(kind, task number)] from --points and the reference run's task list."""
    if points == "all":
        return [("kill", i) for i in range(2, len(reference) + 1)]
    if points.startswith("every:"):
        # Every n-th boundary, a kill and a power loss in turn (the long lane's shorter sweep).
        step, start = (points.split(":", 1)[1] + "@").split("@")[:2]
        first = max(2, int(start or 2))
        return [
            ("kill" if k % 2 == 0 else "power", i) for k, i in enumerate(range(first, len(reference) + 1, int(step)))
        ]
    return [("kill", int(n)) for n in points.split(",")]


def table(rows):
    """The campaign's table (docs/reliability.md): one line per cut, then the totals."""
    out = [
        "| # | cut | at task | new setting | converged | what was wrong | cut / re-run / again (s) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for n, r in enumerate(rows):
        out.append(
            "| %d | %s | %s | %s | %s | %s | %s / %s / %s |"
            % (
                n + 1,
                r["kind"],
                r["task"] or r["point"],
                r["setting"],
                "yes" if r["converged"] else "**no**",
                "; ".join(r["wrong"]) or "",
                r["seconds"]["cut"],
                r["seconds"]["rerun"],
                r["seconds"]["again"],
            )
        )
    good = sum(1 for r in rows if r["converged"])
    out.append("")
    out.append(
        "%d points tried, %d converged (the re-run succeeded, the run after it changed nothing, the host's "
        "state as the site left it), %d not." % (len(rows), good, len(rows) - good)
    )
    return "\n".join(out)


def main(argv=None):
    if argv is None and sys.argv[1:2] == ["--table"]:
        with open(sys.argv[2]) as f:
            print(table([json.loads(line) for line in f if line.strip()]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", required=True)
    ap.add_argument("--inventory", required=True)
    ap.add_argument("--host", required=True)
    ap.add_argument("--container", required=True)
    ap.add_argument("--points", default="sample")
    ap.add_argument("--kind", choices=("kill", "power"), help="every point of this kind (default: the sample's own)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    before = host_state(a.container)
    if a.points == "sample":
        # The sample cuts by task name: no reference run needed (CI's time).
        points = list(SAMPLE)
    else:
        # The reference run: the other setting, uncut; its task headers are the boundaries a cut can fall on.
        first = SETTINGS[1] if before.get("seqs") == str(SETTINGS[0]) else SETTINGS[0]
        log = os.path.join(a.out, "ref.log")
        rc, text, secs = run_to_end(site_cmd(a.repo, a.inventory, a.host, first), log)
        if rc != 0:
            print(text[-4000:])
            raise SystemExit("the reference run failed (rc %d)" % rc)
        reference = tasks_of(text)
        print("reference run: %d tasks, %.0f s, %s" % (len(reference), secs, recap(text, a.host)))
        points = choose(a.points, reference)
        before = host_state(a.container)
    results = []
    current = int(before.get("seqs") or 0)
    for n, (kind, point) in enumerate(points):
        kind = a.kind or kind
        want = SETTINGS[1] if current == SETTINGS[0] else SETTINGS[0]
        cmd = site_cmd(a.repo, a.inventory, a.host, want)
        tag = "%02d-%s-%s" % (n, kind, point if isinstance(point, int) else "sample")
        cut, name, t_cut = run_and_cut(cmd, os.path.join(a.out, tag + "-cut.log"), point)
        # A power loss while the play is at that task: the play is cut the same way, then the host loses power.
        if kind == "power" and cut and not power_cycle(a.container, a.host):
            cut = False
        rc1, t1, s1 = run_to_end(cmd, os.path.join(a.out, tag + "-rerun.log"))
        rc2, t2, s2 = run_to_end(cmd, os.path.join(a.out, tag + "-again.log"))
        r2 = recap(t2, a.host) or {}
        after = host_state(a.container)
        wrong = judge(before, after, want)
        if not cut:
            wrong.append("the run ended before task %s" % point)
        if rc1 != 0:
            wrong.append(
                "the re-run failed (rc %d): %s"
                % (rc1, "; ".join(ln for ln in t1.splitlines() if ln.startswith(("fatal:", "failed:")))[:600])
            )
        if rc2 != 0 or r2.get("changed") != 0:
            wrong.append("the run after it: rc %d, changed=%s" % (rc2, r2.get("changed")))
        row = dict(
            point=point,
            kind=kind,
            task=name,
            setting=want,
            converged=not wrong,
            wrong=wrong,
            seconds=dict(cut=round(t_cut), rerun=round(s1), again=round(s2)),
        )
        results.append(row)
        with open(os.path.join(a.out, "points.jsonl"), "a") as f:
            f.write(json.dumps(row) + "\n")
        print(
            "%-5s %3s %-70.70s %s %s"
            % (kind, point, name, "converged" if not wrong else "NOT CONVERGED", "; ".join(wrong)),
            flush=True,
        )
        current = want
    bad = [r for r in results if not r["converged"]]
    print(table(results))
    print("%d of %d cuts converged on the next run" % (len(results) - len(bad), len(results)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
