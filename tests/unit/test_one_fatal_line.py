"""One cause, one fatal line. A block whose rescue fails again prints two `fatal:` lines for one cause: the rescued
task's (the stdout callback prints a failure as it happens, rescued or not) and the rescue's own. The driver rollout -
what a failing fleet prints - has none: its failed task is the stage's one failure, and the block's `always` rolls
back and says so without failing again (roles/nvidia_driver/tasks/main.yml; molecule/fleet/verify.yml counts the
lines of a real failed rollout).

The driver's installer, uninstaller and build packages are read, not failed on, and one task then fails with their own
words (test_a_failure_read_then_said_once); an image import fails once with its cause (docker_archive's
failure_message). A failing vLLM start is read, not failed on (verify.yml: the health wait, the cache settings, the smoke
test; filter vllm_start_failure), and one task after the re-plan or the rollback fails with the reason and what the
rollback did (test_a_failing_start_is_said_once). A new rescue-then-fail block fails this test."""

import os

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FAILS = ("ansible.builtin.fail", "ansible.builtin.assert", "fail", "assert")
BLOCK_KEYS = ("block", "rescue", "always")
KNOWN = set()


def _fails(tasks):
    for task in tasks or []:
        if isinstance(task, dict):
            if any(key in task for key in FAILS) or any(_fails(task.get(key)) for key in BLOCK_KEYS):
                return True
    return False


def rescue_then_fail(tasks, path):
    """[(path, block name)] of the blocks whose rescue holds a fail or assert task."""
    found = []
    for task in tasks or []:
        if not isinstance(task, dict):
            continue
        if _fails(task.get("rescue")):
            found.append((path, task.get("name")))
        for key in BLOCK_KEYS:
            found += rescue_then_fail(task.get(key), path)
    return found


def _task_files():
    for top in ("roles", "playbooks"):
        for dirpath, _dirs, names in os.walk(os.path.join(ROOT, top)):
            for name in sorted(names):
                if name.endswith(".yml") and (top == "playbooks" or os.path.basename(dirpath) == "tasks"):
                    yield os.path.join(dirpath, name)


def _tasks_of(data):
    for entry in data or []:
        if isinstance(entry, dict) and ("hosts" in entry or "import_playbook" in "".join(entry)):
            for key in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                yield from entry.get(key) or []
        else:
            yield entry


def test_no_new_block_fails_twice_for_one_cause():
    found = set()
    for path in _task_files():
        with open(path) as f:
            data = yaml.safe_load(f)
        found.update(rescue_then_fail(list(_tasks_of(data)), os.path.relpath(path, ROOT)))
    assert found - KNOWN == set()
    assert KNOWN - found == set(), "fixed: take it off KNOWN"


def test_the_driver_rollback_fails_once():
    with open(os.path.join(ROOT, "roles", "nvidia_driver", "tasks", "main.yml")) as f:
        tasks = yaml.safe_load(f)
    block = [t for t in tasks if t.get("name") == "Load and verify the new driver, rolling back when it fails"][0]
    assert "rescue" not in block
    assert not _fails(block["always"])
    # The always runs after success too: each of its tasks acts only when the driver did not verify.
    for task in block["always"]:
        when = task.get("when")
        when = when if isinstance(when, list) else [when]
        assert "not __nvidia_driver_verified" in when, task["name"]
    assert block["block"][-1]["ansible.builtin.set_fact"] == {"__nvidia_driver_verified": True}


def test_the_check_sees_a_rescue_that_fails_again():
    tasks = [
        {
            "name": "outer",
            "block": [{"name": "cause", "ansible.builtin.command": "false"}],
            "rescue": [{"name": "again", "ansible.builtin.fail": {"msg": "x"}}],
        },
        {"name": "fine", "block": [], "always": [{"name": "say", "ansible.builtin.debug": {"msg": "x"}}]},
    ]
    assert rescue_then_fail(tasks, "t.yml") == [("t.yml", "outer")]


def _named(tasks, name):
    for task in tasks or []:
        if not isinstance(task, dict):
            continue
        if task.get("name") == name:
            return task
        for key in BLOCK_KEYS:
            found = _named(task.get(key), name)
            if found:
                return found
    return None


def test_a_failure_read_then_said_once():
    """The installer, the uninstaller and dnf are read (failed_when: false), and the one task that fails says why, only
    when they failed (their rc): turning either back into a rescue, or failing on success, fails here."""
    cases = [
        ("install.yml", "Run the NVIDIA installer silently", "Fail with the installer's own words"),
        ("uninstall.yml", "Run nvidia-installer --uninstall silently", "Fail with the uninstaller's own words"),
        (
            "extra_rpms.yml",
            "Install the driver build's missing packages from the bundle",
            "Fail when the bundle's RPM directories cannot provide them",
        ),
    ]
    for name, runs, fails in cases:
        with open(os.path.join(ROOT, "roles", "nvidia_driver", "tasks", name)) as f:
            tasks = yaml.safe_load(f)
        run, fail = _named(tasks, runs), _named(tasks, fails)
        assert run["failed_when"] is False, name
        when = fail["when"] if isinstance(fail["when"], str) else " and ".join(fail["when"])
        assert "%s.rc | default(1) != 0" % run["register"] in when, name
        assert rescue_then_fail(tasks, name) == [], name


def test_a_failing_start_is_said_once():
    """vllm_service: the health wait, the cache settings and the smoke test are read (verify.yml has no failing task;
    its reason is noted), the steps after it run only when it noted none, and one task - after the re-plan or the
    rollback, outside any rescue - fails with that reason. Turning the health wait back into a failure, or the
    reason into a rescue's ansible_failed_result, fails here."""
    tasks_dir = os.path.join(ROOT, "roles", "vllm_service", "tasks")
    with open(os.path.join(tasks_dir, "verify.yml")) as f:
        verify = yaml.safe_load(f)
    wait = _named(verify, "Wait for /health, or stop waiting when the container exits; then read /metrics")
    assert wait["failed_when"] is False
    assert not _fails(verify)
    decide = _named(verify, "Decide whether the service came up as planned and answers")
    assert "airgap.vllm.vllm_start_failure" in decide["ansible.builtin.set_fact"]["__vllm_service_start_failure"]
    with open(os.path.join(tasks_dir, "start.yml")) as f:
        start = yaml.safe_load(f)
    assert rescue_then_fail(start, "start.yml") == []
    block = _named(start, "Re-plan once or roll back a start that failed, and fail once with the reason")
    assert block["when"] == "__vllm_service_failed_start | length > 0"
    fail = _named(block["block"], "Fail with vLLM's own reason and what the failed start printed")
    assert "Failure: {{ __vllm_service_start_failure }}" in fail["ansible.builtin.fail"]["msg"]
    # Only one fail in the whole file: the one above.
    fails = [t for t in _all(start) if any(key in t for key in FAILS)]
    assert fails == [fail]
    verified = _named(start, "Verify the service, then confirm, load-check and keep it")
    for task in verified["block"][1:]:
        when = task["when"] if isinstance(task["when"], str) else " and ".join(task["when"])
        assert "__vllm_service_start_failure | length == 0" in when, task["name"]
    with open(os.path.join(tasks_dir, "replan.yml")) as f:
        replan = yaml.safe_load(f)
    assert _named(replan, "Confirm the re-plan (never restarts again)")["when"] == (
        "__vllm_service_start_failure | length == 0"
    )


def _all(tasks):
    for task in tasks or []:
        if isinstance(task, dict):
            yield task
            for key in BLOCK_KEYS:
                yield from _all(task.get(key))
