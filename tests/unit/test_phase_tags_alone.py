"""Phase tags run alone, for real (issue 42; the static walk is tests/unit/test_role_tags.py): ansible-playbook on the
local machine runs the bundle role with `--tags bundle_verify` and nothing else - it checks what the configure phase
recorded on the host (it failed on "The 'skipped' test expects a dictionary" before), fails naming a missing artifact,
and refuses with what to run when nothing was recorded. vllm_service_start alone is held to its shape: the reads and
the restart decision run with it, the writes do not, and a configuration it did not write is refused."""

import json
import os
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: The configure phase's record, as an earlier run left it
      airgap.vllm.stage_state:
        dir: "{{ airgap_vllm_state_dir }}"
        stage: bundle
        state: present
        data: {stage_dir: "{{ bundle_stage_dir }}", facts: {bundle_staged: {driver: [{path: "{{ staged }}"}]}}}
      when: staged | length > 0
      tags: [always]
    - name: The bundle role
      ansible.builtin.import_role:
        name: airgap.vllm.bundle
"""


def _verify_alone(tmp_path, staged):
    (tmp_path / "play.yml").write_text(PLAY)
    extra = {
        "airgap_vllm_state_dir": str(tmp_path / "state"),
        "bundle_stage_dir": str(tmp_path / "stage"),
        "staged": staged,
        "ansible_python_interpreter": sys.executable,
    }
    run = subprocess.run(
        [
            "ansible-playbook",
            "-i",
            "localhost,",
            "-c",
            "local",
            str(tmp_path / "play.yml"),
            "--tags",
            "bundle_verify",
            "-e",
            json.dumps(extra),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        universal_newlines=True,
        check=False,
        env=dict(os.environ, ANSIBLE_NOCOLOR="1"),
    )
    return run.returncode, " ".join(run.stdout.split())  # one line: a long message is wrapped


def test_bundle_verify_alone_checks_the_recorded_artifacts(tmp_path):
    (tmp_path / "stage").mkdir()
    (tmp_path / "stage" / "driver.run").write_text("x")
    rc, out = _verify_alone(tmp_path, str(tmp_path / "stage" / "driver.run"))
    assert rc == 0, out
    assert "Check every staged artifact is in place" in out and "expects a dictionary" not in out
    assert "ok: [localhost] => (item=%s)" % (tmp_path / "stage" / "driver.run") in out


def test_bundle_verify_alone_names_a_missing_artifact(tmp_path):
    (tmp_path / "stage").mkdir()
    rc, out = _verify_alone(tmp_path, str(tmp_path / "stage" / "gone.run"))
    assert rc != 0 and "gone.run is not staged under" in out, out


def test_bundle_verify_alone_without_a_record_says_what_to_run(tmp_path):
    rc, out = _verify_alone(tmp_path, "")
    assert rc != 0 and "No staged bundle is recorded on this host" in out and "--tags bundle" in out, out


def _tags(task):
    tags = task.get("tags") or []
    return [tags] if isinstance(tags, str) else tags


def test_a_start_run_alone_reads_decides_and_writes_nothing():
    with open(os.path.join(ROOT, "roles", "vllm_service", "tasks", "configure.yml")) as f:
        tasks = yaml.safe_load(f)
    alone = [t["name"] for t in tasks if "vllm_service_start" in _tags(t)]
    assert alone == [
        "Hash the configuration this run would write",
        "Hash the secret files this run would write (never shown)",
        "Read the configuration on the host (one probe for every file, the unit's state and the retired exposure's "
        "record)",
        "Decide whether anything must be written",
        "Fail when the host's configuration is not the one this run would write (a start run without configure)",
        "Decide whether the running service must be restarted",
    ]
    for task in tasks:
        if "vllm_service_start" not in _tags(task):
            assert not any(k in task for k in ("ansible.builtin.assert", "airgap.vllm.host_info")), task["name"]
    guard = [t for t in tasks if t["name"].startswith("Fail when the host's configuration")][0]
    assert guard["ansible.builtin.assert"]["that"] == "__vllm_service_config_converged or __vllm_service_configuring"
    decide = [t for t in tasks if t["name"] == "Decide whether the running service must be restarted"][0]
    assert "if __vllm_service_configuring else []" in decide["ansible.builtin.set_fact"]["__vllm_service_restart"]
    flag = [t for t in tasks if t["name"] == "Note that this run writes this service's configuration"][0]
    assert "tags" not in flag  # the configure phase's own (from the import), never the start's


@pytest.mark.parametrize("name", ["instance.yml"])
def test_each_service_starts_without_the_flag(name):
    with open(os.path.join(ROOT, "roles", "vllm_service", "tasks", name)) as f:
        tasks = yaml.safe_load(f)
    reset = tasks[0]["ansible.builtin.set_fact"]
    assert reset["__vllm_service_configuring"] is False and reset["__vllm_service_start_failure"] == ""
