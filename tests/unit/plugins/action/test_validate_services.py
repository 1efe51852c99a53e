"""airgap.vllm.validate on a real ansible-playbook run: a wrong airgap_vllm_services list stops the play before
anything runs, one line per problem, with the variable's place in the list; a good one passes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Check the variables
      airgap.vllm.validate:
        stages: [preflight, vllm_plan, vllm_service]
        check_connection: false
"""


def run(tmp_path, services, play=PLAY, **host_vars):
    (tmp_path / "play.yml").write_text(play)
    (tmp_path / "hosts.yml").write_text(
        yaml.safe_dump(
            {
                "all": {
                    "hosts": {
                        "node": dict(
                            {
                                "ansible_connection": "local",
                                "ansible_python_interpreter": "python3",
                                "airgap_vllm_services": services,
                            },
                            **host_vars,
                        )
                    }
                }
            }
        )
    )
    env = dict(
        os.environ,
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_COLLECTIONS_PATH=os.pathsep.join(
            [os.path.join(ROOT, "build", "collections"), os.environ.get("ANSIBLE_COLLECTIONS_PATH", "")]
        ),
    )
    out = subprocess.run(
        ["ansible-playbook", "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml")],
        cwd=str(tmp_path),
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    result = json.loads(out.stdout)["plays"][0]["tasks"][0]["hosts"]["node"]
    return out.returncode, result


@pytest.mark.skipif(
    not os.path.isdir(os.path.join(ROOT, "build", "collections", "ansible_collections", "airgap")),
    reason="the collection is not linked (bash tests/link-collection.sh)",
)
def test_a_wrong_list_stops_with_each_problem_and_a_good_one_passes(tmp_path):
    rc, r = run(
        tmp_path,
        [
            {"vllm_service_name": "vllm", "vllm_plan_gpus": ["0"]},
            {
                "vllm_service_name": "vllm",
                # GPU 0 shared in part (a card is shared whole: the same GPUs as the service it shares them with).
                "vllm_plan_gpus": ["0", "1"],
                "vllm_plan_concurrency": "many",
                "vllm_service_api_keys": {"k": "sk-never-shown"},
            },
        ],
    )
    assert rc != 0 and r.get("failed") is True
    msg = r["msg"]
    assert "airgap_vllm_services[1].vllm_service_name: got 'vllm' (a string); wants a name no other service" in msg
    assert "airgap_vllm_services[1].vllm_service_port" in msg
    assert "airgap_vllm_services[1].vllm_plan_gpus" in msg
    assert "airgap_vllm_services[1].vllm_plan_concurrency: got 'many' (a string); wants an integer" in msg
    assert "sk-never-shown" not in json.dumps(r)

    rc, r = run(
        tmp_path,
        [
            {"vllm_service_name": "vllm", "vllm_plan_gpus": ["0"]},
            {"vllm_service_name": "vllm-b", "vllm_plan_gpus": ["1"], "vllm_service_port": 8001},
        ],
    )
    assert rc == 0, r.get("msg")


@pytest.mark.skipif(
    not os.path.isdir(os.path.join(ROOT, "build", "collections", "ansible_collections", "airgap")),
    reason="the collection is not linked (bash tests/link-collection.sh)",
)
def test_names_ranges_and_fractions_are_reported_all_at_once(tmp_path):
    rc, r = run(
        tmp_path,
        [
            {"vllm_service_name": "docker", "vllm_plan_gpus": ["0"], "vllm_service_port": 0},
            {
                "vllm_service_name": "vllm-b\n",
                "vllm_plan_gpus": ["1"],
                "vllm_service_port": 8001,
                "vllm_plan_gpu_memory_utilization": "nan",
            },
        ],
    )
    assert rc != 0 and r.get("failed") is True
    lines = r["msg"].splitlines()
    assert lines[0].startswith("4 problems"), r["msg"]
    assert any(line.startswith("- airgap_vllm_services[0].vllm_service_name: got 'docker'") for line in lines)
    assert any(
        line.startswith("- airgap_vllm_services[0].vllm_service_port: got 0") and "65535" in line for line in lines
    )
    assert any(line.startswith("- airgap_vllm_services[1].vllm_service_name: got 'vllm-b\\n'") for line in lines)
    assert any(line.startswith("- airgap_vllm_services[1].vllm_plan_gpu_memory_utilization") for line in lines)

    rc, r = run(
        tmp_path,
        [
            {"vllm_service_name": "vllm", "vllm_plan_gpus": ["0"], "vllm_plan_gpu_memory_utilization": 0.97},
        ],
    )
    assert rc == 0, r.get("msg")
    assert any(
        "airgap_vllm_services[0].vllm_plan_gpu_memory_utilization is 0.97: above 0.95" in w
        for w in r.get("warnings", [])
    ), r


@pytest.mark.skipif(
    not os.path.isdir(os.path.join(ROOT, "build", "collections", "ansible_collections", "airgap")),
    reason="the collection is not linked (bash tests/link-collection.sh)",
)
def test_the_hosts_own_name_port_fraction_and_sources_are_checked(tmp_path):
    rc, r = run(
        tmp_path,
        [],
        vllm_service_name="sshd",
        vllm_service_port=70000,
        vllm_plan_gpu_memory_utilization=0,
        vllm_service_metrics_sources=["10.0.0.2"],
        vllm_plan_concurrency=0,
    )
    assert rc != 0 and r.get("failed") is True
    lines = r["msg"].splitlines()
    for variable in (
        "vllm_service_name",
        "vllm_service_port",
        "vllm_plan_gpu_memory_utilization",
        "vllm_service_metrics_sources",
        "vllm_plan_concurrency",
    ):
        assert sum(1 for line in lines if line.startswith("- " + variable)) == 1, (variable, r["msg"])
    # The removed whole-port metrics exposure: one line naming the front door's variables.
    assert any(
        line.startswith("- vllm_service_metrics_sources is removed") and "vllm_front_metrics_sources" in line
        for line in lines
    ), r["msg"]


@pytest.mark.skipif(
    not os.path.isdir(os.path.join(ROOT, "build", "collections", "ansible_collections", "airgap")),
    reason="the collection is not linked (bash tests/link-collection.sh)",
)
def test_a_host_that_cannot_run_modules_is_named_with_what_it_said(tmp_path):
    # What a target says when sudo refuses (requiretty): words on stderr, exit 1, no module output. The connection
    # problem must carry those words, not only ansible's "MODULE FAILURE".
    fake = tmp_path / "python-behind-requiretty"
    fake.write_text("#!/bin/sh\necho 'sudo: sorry, you must have a tty to run sudo' >&2\nexit 1\n")
    fake.chmod(0o755)
    rc, result = run(
        tmp_path,
        [],
        play=PLAY.replace("check_connection: false", "check_connection: true"),
        ansible_python_interpreter=str(fake),
    )
    assert rc != 0 and result.get("failed")
    assert "you must have a tty to run sudo" in json.dumps(result)
