"""airgap.vllm.validate on a real ansible-playbook run: a wrong airgap_vllm_services list stops the play before
anything runs, one line per problem, with the variable's place in the list; a good one passes."""
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


def run(tmp_path, services):
    (tmp_path / "play.yml").write_text(PLAY)
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"node": {
        "ansible_connection": "local", "ansible_python_interpreter": "python3",
        "airgap_vllm_services": services}}}}))
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([os.path.join(ROOT, "build", "collections"),
                                                         os.environ.get("ANSIBLE_COLLECTIONS_PATH", "")]))
    out = subprocess.run(["ansible-playbook", "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml")],
                         cwd=str(tmp_path), env=env, capture_output=True, text=True, check=False)
    result = json.loads(out.stdout)["plays"][0]["tasks"][0]["hosts"]["node"]
    return out.returncode, result


@pytest.mark.skipif(not os.path.isdir(os.path.join(ROOT, "build", "collections", "ansible_collections", "airgap")),
                    reason="the collection is not linked (bash tests/link-collection.sh)")
def test_a_wrong_list_stops_with_each_problem_and_a_good_one_passes(tmp_path):
    rc, r = run(tmp_path, [
        {"vllm_service_name": "vllm", "vllm_plan_gpus": ["0"]},
        {"vllm_service_name": "vllm", "vllm_plan_gpus": ["0"], "vllm_plan_concurrency": "many",
         "vllm_service_api_keys": {"k": "sk-never-shown"}},
    ])
    assert rc != 0 and r.get("failed") is True
    msg = r["msg"]
    assert "airgap_vllm_services[1].vllm_service_name: got 'vllm' (a string); wants a name no other service" in msg
    assert "airgap_vllm_services[1].vllm_service_port" in msg
    assert "airgap_vllm_services[1].vllm_plan_gpus" in msg
    assert "airgap_vllm_services[1].vllm_plan_concurrency: got 'many' (a string); wants an integer" in msg
    assert "sk-never-shown" not in json.dumps(r)

    rc, r = run(tmp_path, [
        {"vllm_service_name": "vllm", "vllm_plan_gpus": ["0"]},
        {"vllm_service_name": "vllm-b", "vllm_plan_gpus": ["1"], "vllm_service_port": 8001},
    ])
    assert rc == 0, r.get("msg")
