"""The scenarios side by side (issue 40): which scenarios and unit tests prove a file, and the pool that runs them.

  python3 tests/lanes.py select PATH...          the unit test files and scenarios that prove PATH (tests/prove)
  python3 tests/lanes.py run [--workers N] [--budget-dir DIR] [--log-dir DIR] SCENARIO...
                                                 run the scenarios, N at a time (default: AIRGAP_LANES or 3)
  python3 tests/lanes.py check                   the map against molecule/ and the collection (exit 1 on a gap)
  python3 tests/lanes.py chain [STEP...]         the scenarios tests/run-all runs for its steps: with none named or
                                                 `molecule`, CI's chain (all but those with `lane: own`, long proofs);
                                                 `molecule:NAME` adds that one (bash tests/run-all molecule:NAME)

The map is tests/scenarios.yml. The pool starts the longest scenario first; one that starts from the served host
(served: true) waits while molecule serve is running and there is no served host for this world yet
(tests/world/served.sh have), and is failed with that reason when serve ended without one. Each scenario's whole
output goes to LOG_DIR/<scenario>.log, and a record of its time to the budget folder (tests/budget.py; lane
scenarios-<worker>). After each scenario the destroyed instances' volumes are pruned.
"""

import fnmatch
import os
import re
import subprocess
import sys
import threading
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import budget  # noqa: E402

MAP = os.path.join(HERE, "scenarios.yml")
# A scenario's `lane`: absent, it is in CI's chain (tests/run-all molecule); "own", a long proof kept out of the chain
# (issue 40), run by name: bash tests/run-all molecule:NAME, or bash tests/prove with a file it covers.
LANES = ("own",)


def load_map(path=MAP):
    with open(path) as f:
        return yaml.safe_load(f)


def chain(smap, steps=()):
    """The scenarios tests/run-all runs for the steps it was given, in the map's order: with no step or `molecule`,
    CI's chain (every scenario without `lane: own`); `molecule:NAME` adds that scenario, of any lane."""
    whole = not steps or "molecule" in steps
    return [
        name
        for name, s in smap.items()
        if (whole and (s or {}).get("lane") not in LANES) or "molecule:" + name in steps
    ]


def _files(root=ROOT):
    out = subprocess.run(["git", "ls-files"], cwd=root, stdout=subprocess.PIPE, universal_newlines=True, check=True)
    return [line for line in out.stdout.splitlines() if line and os.path.exists(os.path.join(root, line))]


def expand(paths, files):
    """Each path as the tracked files it names (a folder: every file under it), relative to the root."""
    out = []
    for p in paths:
        p = os.path.relpath(os.path.abspath(p), ROOT) if os.path.isabs(p) or os.path.exists(p) else p
        p = p.rstrip("/")
        under = [f for f in files if f == p or f.startswith(p + "/")]
        out.extend(under or [p])
    return sorted(set(out))


def _direct(paths, smap):
    return {name for name, s in smap.items() for p in paths for g in s["covers"] if fnmatch.fnmatch(p, g)}


def _read(root, f):
    with open(os.path.join(root, f), errors="replace") as fh:
        return fh.read()


def plugin_names(root, f):
    """The names a plugin file is called by from YAML: a module's or action's file name, a filter file's filters."""
    m = re.match(r"plugins/(modules|action|filter)/(\w+)\.py$", f)
    if not m:
        return set()
    if m.group(1) == "filter":
        return set(re.findall(r"['\"](\w+)['\"]\s*:", _read(root, f)))
    return {m.group(2)}


def callers(root, files):
    """airgap.vllm.NAME -> the role and playbook files that call it."""
    out = {}
    for f in files:
        if f.startswith(("roles/", "playbooks/")) and f.endswith((".yml", ".j2")):
            for used in set(re.findall(r"airgap\.vllm\.(\w+)", _read(root, f))):
                out.setdefault(used, set()).add(f)
    return out


def importers(root, files, path):
    """The modules, actions and filters nearest to PATH (a plugins/module_utils file) that import it: those that
    import it directly, else (a helper of helpers) those of the next layer up. The nearest callers are what a change
    to the file is proven by; every layer up would be every scenario (the validator imports most helpers)."""
    plugins = [f for f in files if f.startswith("plugins/") and f.endswith(".py")]
    layer = {os.path.splitext(os.path.basename(path))[0]}
    seen = set()
    while layer:
        # `module_utils.<stage>._x import ...`, `module_utils.<stage> import _a, _x` (any place in the list)
        pat = re.compile(
            r"module_utils(\.\w+)*?(\.|\s+import\s+[\w\s,(]*?)(" + "|".join(map(re.escape, layer)) + r")\b"
        )
        users = {f for f in plugins if f not in seen and f != path and pat.search(_read(root, f))}
        seen |= users
        callable_users = {f for f in users if not f.startswith("plugins/module_utils/")}
        if callable_users:
            return callable_users
        layer = {os.path.splitext(os.path.basename(f))[0] for f in users}
    return set()


def scenarios_for(paths, smap, root=ROOT, files=None):
    """The scenarios whose globs match PATHS; a plugin file through the role and playbook files that call it."""
    names = _direct(paths, smap)
    plugins = [p for p in paths if p.startswith("plugins/") and p.endswith(".py")]
    if plugins:
        files = files or _files(root)
        calls = callers(root, files)
        for p in plugins:
            users = {p} | (importers(root, files, p) if p.startswith("plugins/module_utils/") else set())
            via = set().union(*[calls.get(n, set()) for u in users for n in plugin_names(root, u)] or [set()])
            names |= _direct(sorted(via), smap)
    return sorted(names)


def _mentions(text, word):
    return re.search(r"(?<![\w])" + re.escape(word) + r"(?![\w])", text) is not None


def unit_tests_for(paths, root=ROOT):
    """The pytest files that prove PATHS: a test file itself; else the unit test files naming the file's stem (a
    module_utils file `_front.py` -> `_front`, a role folder's files -> the role's name and every module it calls)."""
    tests_dir = os.path.join(root, "tests", "unit")
    candidates = []
    for dirpath, _dirs, names in os.walk(tests_dir):
        candidates.extend(os.path.join(dirpath, n) for n in names if n.startswith("test_") and n.endswith(".py"))
    texts = {c: open(c).read() for c in candidates}
    words = set()
    chosen = set()
    for p in paths:
        base = os.path.basename(p)
        if base.startswith("test_") and base.endswith(".py"):
            chosen.add(os.path.join(root, p))
            continue
        parts = p.split("/")
        if parts[0] == "roles" and len(parts) > 1:
            words.add(parts[1])
            full = os.path.join(root, p)
            if os.path.isfile(full):
                with open(full, errors="replace") as f:
                    words.update(re.findall(r"airgap\.vllm\.(\w+)", f.read()))
        elif p.endswith(".py"):
            words.add(os.path.splitext(base)[0])
    for c, text in texts.items():
        if any(_mentions(text, w) for w in words):
            chosen.add(c)
    return sorted(os.path.relpath(c, root) for c in chosen)


def select(paths, smap=None, root=ROOT):
    smap = smap or load_map()
    tracked = _files(root)
    files = expand(paths, tracked)
    return unit_tests_for(files, root), scenarios_for(files, smap, root, tracked)


# ------------------------------------------------------------------------------------------------- the map checked
def check(smap=None, root=ROOT):
    """The map's gaps, as lines (none when whole)."""
    smap = smap or load_map()
    problems = []
    mol = os.path.join(root, "molecule")
    scenarios = {d for d in os.listdir(mol) if os.path.isfile(os.path.join(mol, d, "molecule.yml"))}
    for name in sorted(scenarios - set(smap)):
        problems.append("molecule/%s is in no entry of tests/scenarios.yml" % name)
    for name in sorted(set(smap) - scenarios):
        problems.append("tests/scenarios.yml names %s, which is no scenario of molecule/" % name)
    for name, s in smap.items():
        for key in ("served", "minutes", "covers"):
            if key not in s:
                problems.append("tests/scenarios.yml: %s has no %s" % (name, key))
        if "lane" in s and s["lane"] not in LANES:
            problems.append("tests/scenarios.yml: %s has lane %r (known: %s)" % (name, s["lane"], ", ".join(LANES)))
    files = _files(root)
    covered = {f for f in files if _direct([f], smap)}
    must = [f for f in files if re.match(r"roles/[^/]+/(tasks|templates)/", f) or re.match(r"playbooks/[^/]+\.yml$", f)]
    for f in must:
        if f not in covered and not f.startswith("playbooks/plan.yml"):
            problems.append("%s is covered by no scenario" % f)
    # A module, action or filter is covered through the roles and playbooks that call it (what molecule runs).
    calls = callers(root, files)
    for f in files:
        names = plugin_names(root, f)
        if not names:
            continue
        via = set().union(*[calls.get(n, set()) for n in names])
        if not via & covered:
            problems.append("%s is called by no file a scenario covers (%s)" % (f, ", ".join(sorted(via)) or "none"))
    return problems


# ------------------------------------------------------------------------------------------------------------ pool
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ACTION = re.compile(r"^(?P<scenario>\S+) \u279c (?P<action>\w+): Executed: (?P<outcome>\w[\w ]*?)(?: \(|$)")


def only_cleanup_failed(text):
    """True when a molecule run failed only in a `destroy` that molecule's own clean-up destroy then completed: every
    other action (create, prepare, converge, idempotence, verify, ...) succeeded, and the last destroy did. Docker under
    load sometimes does not see a systemd container's exit in time ("tried to kill container, but did not receive an
    exit event"); the proof ran whole and the instance is gone, so that is not the scenario's failure. Read from the
    DETAILS block molecule prints at the end."""
    lines = _ANSI.sub("", text).splitlines()
    if "DETAILS" not in [line.strip() for line in lines]:
        return False
    details = lines[max(i for i, line in enumerate(lines) if line.strip() == "DETAILS") + 1 :]
    actions = [m.group("action", "outcome") for m in (_ACTION.match(line.strip()) for line in details) if m]
    failed = [a for a, outcome in actions if outcome.startswith("Failed")]
    destroys = [outcome for a, outcome in actions if a == "destroy"]
    return bool(failed) and set(failed) == {"destroy"} and bool(destroys) and destroys[-1] == "Successful"


def have_served():
    return (
        subprocess.run(["bash", os.path.join(HERE, "world", "served.sh"), "have"], cwd=ROOT, check=False).returncode
        == 0
    )


class Pool:
    def __init__(self, names, smap, workers, budget_dir, log_dir, out=sys.stdout):
        self.smap = smap
        self.queue = sorted(names, key=lambda n: (n != "serve", -smap[n]["minutes"]))
        self.workers = workers
        self.budget_dir = budget_dir
        self.log_dir = log_dir
        self.out = out
        self.lock = threading.Lock()
        self.results = {}
        self.running = set()
        self.served = None  # cached: True once there is a served host

    def say(self, text):
        with self.lock:
            self.out.write("[lanes %s] %s\n" % (time.strftime("%H:%M:%S"), text))
            self.out.flush()

    def _served_ready(self):
        if not self.served:
            self.served = have_served()
        return self.served

    def _next(self):
        """The next scenario to start, None when none can start yet, or '' when the queue is empty."""
        with self.lock:
            if not self.queue:
                return ""
            for name in self.queue:
                if not self.smap[name]["served"]:
                    self.queue.remove(name)
                    return name
                serve_pending = "serve" in self.queue or "serve" in self.running
                if self._served_ready() or not serve_pending:
                    self.queue.remove(name)
                    return name
            return None

    def _run(self, name, lane):
        log_path = os.path.join(self.log_dir, name + ".log")
        timer = budget.StepTimer("molecule:" + name)
        if self.smap[name]["served"] and not self._served_ready():
            with open(log_path, "w") as log:
                log.write("ERROR no served host for this world: molecule serve did not keep one (see serve.log)\n")
            timer.line("ERROR no served host for this world: molecule serve did not keep one\n")
            return 1, timer
        env = dict(os.environ, AIRGAP_LANE=lane)
        with open(log_path, "w") as log:
            # The base config named: molecule looks for it under a .git directory, which a git worktree does not
            # have (its .git is a file), and would run without it (its prerun then fails on the collection's link).
            proc = subprocess.Popen(
                [
                    "molecule",
                    "--base-config",
                    os.path.join(ROOT, ".config", "molecule", "config.yml"),
                    "test",
                    "-s",
                    name,
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            for raw in iter(proc.stdout.readline, b""):
                text = raw.decode("utf-8", "replace")
                log.write(text)
                timer.line(text)
            rc = proc.wait()
        if rc != 0:
            with open(log_path) as log:
                if only_cleanup_failed(log.read()):
                    note = "lanes: only the clean-up's first destroy failed (molecule's second one completed): passed\n"
                    with open(log_path, "a") as log_append:
                        log_append.write(note)
                    timer.line(note)
                    rc = 0
        subprocess.run(
            ["docker", "volume", "prune", "-f"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
        )
        return rc, timer

    def _record(self, name, lane, rc, timer):
        if not self.budget_dir:
            return
        os.makedirs(self.budget_dir, exist_ok=True)
        data = timer.result()
        data.update(rc=rc, lane=lane, order=len(os.listdir(self.budget_dir)))
        path = os.path.join(self.budget_dir, ("molecule:" + name).replace(":", "_") + ".json")
        with open(path, "w") as f:
            import json

            json.dump(data, f)

    def worker(self, index):
        lane = "scenarios-%d" % index
        while True:
            name = self._next()
            if name == "":
                return
            if name is None:
                time.sleep(5)
                continue
            with self.lock:
                self.running.add(name)
            self.say("%s: molecule test -s %s (log %s)" % (lane, name, os.path.join(self.log_dir, name + ".log")))
            t0 = time.monotonic()
            rc, timer = self._run(name, lane)
            self._record(name, lane, rc, timer)
            with self.lock:
                self.running.discard(name)
                self.results[name] = (rc, time.monotonic() - t0)
                if name == "serve":
                    self.served = None  # read again: serve may have kept one
            self.say("%s: %s %s in %.0f s" % (lane, name, "passed" if rc == 0 else "FAILED", time.monotonic() - t0))

    def run(self):
        threads = [threading.Thread(target=self.worker, args=(i + 1,)) for i in range(self.workers)]
        for t in threads:
            t.start()
            time.sleep(2)  # the first claims serve (or the longest) before the second looks
        for t in threads:
            t.join()
        return self.results


def main(argv):
    if len(argv) >= 2 and argv[0] == "select":
        tests, scenarios = select(argv[1:])
        print("unit: " + " ".join(tests))
        print("scenarios: " + " ".join(scenarios))
        return 0
    if argv and argv[0] == "check":
        problems = check()
        print(
            "\n".join(problems) if problems else "tests/scenarios.yml covers every scenario, role, playbook and module"
        )
        return 1 if problems else 0
    if argv and argv[0] == "chain":
        print(" ".join(chain(load_map(), argv[1:])))
        return 0
    if argv and argv[0] == "run":
        rest = argv[1:]
        workers = int(os.environ.get("AIRGAP_LANES", "3"))
        budget_dir, log_dir = None, os.path.join(ROOT, "build", "lanes")
        while rest and rest[0].startswith("--"):
            key, value, rest = rest[0], rest[1], rest[2:]
            if key == "--workers":
                workers = int(value)
            elif key == "--budget-dir":
                budget_dir = value
            elif key == "--log-dir":
                log_dir = value
        os.makedirs(log_dir, exist_ok=True)
        smap = load_map()
        unknown = [n for n in rest if n not in smap]
        if unknown:
            sys.stderr.write("not in tests/scenarios.yml: %s\n" % " ".join(unknown))
            return 2
        names = list(dict.fromkeys(rest))
        if any(smap[n]["served"] for n in names) and "serve" not in names and not have_served():
            names.insert(0, "serve")  # no served host yet: serve keeps one first
        results = Pool(names, smap, workers, budget_dir, log_dir).run()
        failed = sorted(n for n, (rc, _t) in results.items() if rc != 0)
        print(
            "lanes: %d passed, %d failed%s"
            % (len(results) - len(failed), len(failed), (": " + " ".join(failed)) if failed else "")
        )
        return 1 if failed else 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
