"""The suite's budget (issue 26): time every step of tests/run-all and every molecule action, then report.

  python3 tests/budget.py tee STEP DIR          copy stdin to stdout; write DIR/STEP.json when stdin ends
                                                (seconds, cold or cached, molecule actions with their seconds)
  python3 tests/budget.py result STEP DIR RC    add the step's exit status to DIR/STEP.json
  python3 tests/budget.py report DIR [--baseline FILE] [--warm-limit S] [--cold-limit S] [--top N]
                                                the closing table; BUDGET EXCEEDED when the run went over
  python3 tests/budget.py failed DIR            the steps that failed, one per line
  python3 tests/budget.py passed DIR            how many steps passed
  python3 tests/budget.py why DIR               each failed step's last failure lines (Ansible's fatal/failed
                                                results, pytest's E lines, errors): the reason stays in the
                                                tail of the run's output, where CI shows it

tests/run-all runs some steps in a background lane beside the others: the run's total is its wall clock (the first
step's start to the last step's end), not the sum of the steps; the table shows both.

A step is *cold* when its output shows that it built something that is cached across runs (a world stage,
the vLLM venv, a bundle built from scratch); a run is warm when no step was cold. The limits are CI's: a warm
run within 35 minutes, a cold one (a new machine) within 55; the hard limit is 90 (issue 40).

Each step records its lane (the environment's AIRGAP_LANE, set by tests/run-all: checks, main, scenarios-1, ...);
the table names it and closes with one line per lane: its steps' seconds added up and its own wall clock.
"""

import json
import os
import re
import sys
import time

WARM_LIMIT = 35 * 60
COLD_LIMIT = 55 * 60
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# Molecule 26: "INFO     default ➜ converge: Executing" ... "default ➜ converge: Executed: Successful"
ACTION = re.compile(r"(?P<scenario>[\w.-]+) \u279c (?P<action>[\w-]+): (?P<what>Executing|Executed)")
# What a step prints when it (re)builds something it caches (tests/world/build.sh, tests/vllm_parser/setup-venv.sh).
COLD = re.compile(
    r"\[build\.sh [0-9:]+\] (debootstrap|installing|building|training|saving|importing|finishing)"
    r"|setup-venv: (creating|installing)"
)
# A step that grew by more than this over its baseline is named when the budget is exceeded.
GROWTH = 1.2
GROWTH_MIN_S = 10  # a step must also have grown by this many seconds: 0.4 s against 0.3 s is noise, not growth
# Lines that say why a step failed: Ansible's failed results and recap, pytest's failures, shell errors. Each starts
# a block that takes the lines after it (molecule wraps a long result over several lines) up to the next task.
FAILURE = re.compile(
    r"^(fatal: |failed: |\S+ *: ok=\d+ .*failed=[1-9]|FAILED (?!- RETRYING)|E  |ERROR|CRITICAL|Traceback|"
    r"\w*(Error|Exception): )"
)
# The lines that only say that something failed (a play's recap, molecule's ERROR/CRITICAL lines about the action):
# kept apart, so that molecule's tail (ERROR, the instance's deletion, the recap) never pushes out the failed task's
# own lines, which are what the CI's excerpt must show (a serve that failed in CI printed only molecule's tail).
SUMMARY = re.compile(r"^(\S+ *: ok=\d+ .*failed=[1-9]|ERROR|CRITICAL)")
SUMMARY_BLOCKS = 2
# Molecule's frame in front of the playbook's lines ("  │ fatal: ...").
FRAME = re.compile(r"^\s*\u2502 ?")
BLOCK_END = re.compile(r"^(TASK \[|PLAY \[|PLAY RECAP|RUNNING HANDLER|INFO |=== |ok: \[|changed: \[|skipping: \[)")
FAILURE_BLOCKS = 4  # blocks kept per step (the last ones)
FAILURE_BLOCK_LINES = 16
FAILURE_WIDTH = 700  # characters kept per line


class StepTimer:
    """Reads one step's output line by line; knows the molecule actions and whether the step built anything."""

    def __init__(self, step, clock=time.monotonic, wall=time.time):
        self.step = step
        self.clock = clock
        self.wall = wall
        self.started = wall()
        self.start = clock()
        self.cold = False
        self.actions = []  # [scenario, action, seconds]
        self.failures = []  # the last FAILURE_BLOCKS blocks of lines that say why, each line cut to FAILURE_WIDTH
        self.summaries = []  # the last SUMMARY_BLOCKS blocks that only say that something failed
        self._block = None
        self._open = {}

    def line(self, text):
        plain = ANSI.sub("", text)
        if not self.cold and COLD.search(plain):
            self.cold = True
        self._failure_line(FRAME.sub("", plain.rstrip("\n")))
        m = ACTION.search(plain)
        if not m:
            return
        key = (m.group("scenario"), m.group("action"))
        now = self.clock()
        if m.group("what") == "Executing":
            self._open[key] = now
        elif key in self._open:
            self.actions.append([key[0], key[1], round(now - self._open.pop(key), 1)])

    def _failure_line(self, line):
        line = line if len(line) <= FAILURE_WIDTH else line[:FAILURE_WIDTH] + " …"
        if FAILURE.search(line):
            self._block = [line]
            if SUMMARY.search(line):
                self.summaries = (self.summaries + [self._block])[-SUMMARY_BLOCKS:]
            else:
                self.failures = (self.failures + [self._block])[-FAILURE_BLOCKS:]
        elif self._block is not None:
            if BLOCK_END.search(line) or len(self._block) >= FAILURE_BLOCK_LINES:
                self._block = None
            elif line.strip():
                self._block.append(line)

    def result(self):
        now = self.clock()
        actions = self.actions + [[s, a, round(now - t, 1)] for (s, a), t in self._open.items()]  # cut short
        return {
            "step": self.step,
            "seconds": round(now - self.start, 1),
            "cold": self.cold,
            "actions": actions,
            "failures": self.failures + self.summaries,
            "started": round(self.started, 1),
            "ended": round(self.wall(), 1),
        }


def load(directory):
    steps = []
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        if name.endswith(".json"):
            with open(os.path.join(directory, name)) as f:
                try:
                    steps.append(json.load(f))
                except ValueError:
                    continue
    return sorted(steps, key=lambda s: s.get("order", 0))


def wall_seconds(steps):
    """The run's wall clock: first start to last end where the steps say when they ran, else their sum."""
    if steps and all("started" in s and "ended" in s for s in steps):
        return max(s["ended"] for s in steps) - min(s["started"] for s in steps)
    return sum(s["seconds"] for s in steps)


def failed_steps(steps):
    return [s["step"] for s in steps if s.get("rc") != 0]


def why(steps):
    """Each failed step's last failure lines, as lines of text (none when every step passed)."""
    out = []
    for s in steps:
        if s.get("rc") == 0:
            continue
        out.append("why %s failed (its last failure lines; the whole output is above):" % s["step"])
        blocks = s.get("failures") or [["(no failure line recognised)"]]
        out.extend("  " + line for block in blocks for line in ([block] if isinstance(block, str) else block))
    return out


def lanes(steps, width=4):
    """One line per lane: its steps' seconds added up, and its wall clock (first start to last end)."""
    by_lane = {}
    for s in steps:
        by_lane.setdefault(s.get("lane") or "main", []).append(s)
    if len(by_lane) < 2:
        return []
    out = []
    for name in sorted(by_lane):
        own = by_lane[name]
        out.append(
            "%s %8.0f  %-6s (%d steps, wall %.0f s)"
            % (("lane " + name).ljust(width), sum(s["seconds"] for s in own), "", len(own), wall_seconds(own))
        )
    return out


def report(steps, baseline=None, warm_limit=WARM_LIMIT, cold_limit=COLD_LIMIT, top=10):
    """The closing table and verdict as lines of text (a pure function of the recorded steps)."""
    baseline = baseline or {}
    total = wall_seconds(steps)
    summed = sum(s["seconds"] for s in steps)
    warm = not any(s.get("cold") for s in steps)
    width = max([len(s["step"]) for s in steps] + [4])
    out = ["%s %8s  %-6s %-7s %s" % ("step".ljust(width), "seconds", "cache", "status", "lane")]
    for s in steps:
        status = {None: "?", 0: "passed"}.get(s.get("rc"), "FAILED")
        out.append(
            "%s %8.0f  %-6s %-7s %s"
            % (
                str(s["step"]).ljust(width),
                s["seconds"],
                "cold" if s.get("cold") else "warm",
                status,
                s.get("lane", ""),
            )
        )
    out.extend(lanes(steps, width))
    if summed - total >= 1:
        out.append(
            "%s %8.0f  %-6s (steps run in lanes side by side: their own seconds added up)"
            % ("steps".ljust(width), summed, "")
        )
    out.append(
        "%s %8.0f  %-6s (%.1f min; limit %d min %s)"
        % (
            "total".ljust(width),
            total,
            "warm" if warm else "cold",
            total / 60.0,
            (warm_limit if warm else cold_limit) // 60,
            "warm" if warm else "on a new machine",
        )
    )
    actions = sorted(([s["step"]] + a for s in steps for a in s.get("actions", [])), key=lambda a: -a[3])[:top]
    if actions:
        out.append("slowest scenario steps (molecule's own actions):")
        out.extend("  %-28s %-14s %7.0f s" % (step, action, sec) for step, _scenario, action, sec in actions)
    limit = warm_limit if warm else cold_limit
    if total > limit:
        grew = [
            "%s %.0f s (baseline %.0f s)" % (s["step"], s["seconds"], baseline[s["step"]])
            for s in steps
            if s["step"] in baseline
            and s["seconds"] > GROWTH * baseline[s["step"]]
            and s["seconds"] - baseline[s["step"]] >= GROWTH_MIN_S
        ]
        new = ["%s %.0f s (new)" % (s["step"], s["seconds"]) for s in steps if baseline and s["step"] not in baseline]
        out.append(
            "BUDGET EXCEEDED: this %s run took %.1f min, over its %d min; grew: %s"
            % (
                "warm" if warm else "cold",
                total / 60.0,
                limit // 60,
                "; ".join(grew + new)
                or "no step over its baseline by %d %%: the whole suite grew" % round((GROWTH - 1) * 100),
            )
        )
    return out


def main(argv):
    if len(argv) >= 3 and argv[0] == "tee":
        step, directory = argv[1], argv[2]
        timer = StepTimer(step)
        out = getattr(sys.stdout, "buffer", sys.stdout)
        for raw in iter(sys.stdin.buffer.readline, b""):
            out.write(raw)
            out.flush()
            timer.line(raw.decode("utf-8", "replace"))
        os.makedirs(directory, exist_ok=True)
        data = timer.result()
        data["order"] = len([n for n in os.listdir(directory) if n.endswith(".json")])
        data["lane"] = os.environ.get("AIRGAP_LANE", "main")
        with open(os.path.join(directory, step.replace("/", "_").replace(":", "_") + ".json"), "w") as f:
            json.dump(data, f)
        return 0
    if len(argv) == 4 and argv[0] == "result":
        path = os.path.join(argv[2], argv[1].replace("/", "_").replace(":", "_") + ".json")
        if os.path.exists(path):
            with open(path) as f:
                data = json.load(f)
            data["rc"] = int(argv[3])
            with open(path, "w") as f:
                json.dump(data, f)
        return 0
    if len(argv) == 2 and argv[0] == "failed":
        for name in failed_steps(load(argv[1])):
            print(name)
        return 0
    if len(argv) == 2 and argv[0] == "why":
        print("\n".join(why(load(argv[1]))))
        return 0
    if len(argv) == 2 and argv[0] == "passed":
        steps = load(argv[1])
        print(len(steps) - len(failed_steps(steps)))
        return 0
    if len(argv) >= 2 and argv[0] == "report":
        baseline_path = None
        opts = {"--warm-limit": WARM_LIMIT, "--cold-limit": COLD_LIMIT, "--top": 10}
        rest = argv[2:]
        while rest:
            key, value, rest = rest[0], rest[1], rest[2:]
            if key == "--baseline":
                baseline_path = value
            else:
                opts[key] = int(value)
        baseline = {}
        if baseline_path and os.path.exists(baseline_path):
            with open(baseline_path) as f:
                baseline = json.load(f)
        print("\n".join(report(load(argv[1]), baseline, opts["--warm-limit"], opts["--cold-limit"], opts["--top"])))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
