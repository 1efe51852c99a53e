"""The one Docker CLI helper: argv on the configured binary, typed errors, missing vs failing, time limit."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.common._docker import (
    DockerCli,
    DockerError,
    DockerTimeout,
    is_missing,
    subprocess_run,
)


class Recorder(object):
    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def __call__(self, argv):
        self.calls.append(argv)
        for prefix, answer in self.answers:
            if argv[1 : 1 + len(prefix)] == prefix:
                return answer
        return 1, "", "unexpected %s" % argv


def test_every_call_runs_the_configured_binary():
    run = Recorder([(["ps"], (0, "a\nb\n", ""))])
    cli = DockerCli("/opt/docker/bin/docker", run=run)
    assert cli.container_ids() == {"a", "b"}
    assert run.calls == [["/opt/docker/bin/docker", "ps", "-a", "--no-trunc", "--format", "{{.ID}}"]]


def test_a_failing_call_raises_with_command_rc_and_outputs():
    cli = DockerCli("docker", run=Recorder([(["stop"], (1, "out", "daemon gone"))]))
    with pytest.raises(DockerError, match=r"docker stop x failed \(rc=1\): daemon gone") as info:
        cli.call(["stop", "x"])
    assert info.value.cmd == ["docker", "stop", "x"] and info.value.rc == 1
    assert info.value.stdout == "out" and info.value.stderr == "daemon gone"
    assert cli.call(["stop", "x"], check=False)[0] == 1


def test_inspect_json_tells_missing_from_failing():
    cli = DockerCli(
        "docker",
        run=Recorder(
            [
                (["inspect", "--type", "container", "gone"], (1, "[]", "Error: No such container: gone")),
                (["inspect", "--type", "container", "here"], (0, json.dumps([{"Id": "c1"}]), "")),
                (["inspect", "--type", "container", "down"], (1, "", "Cannot connect to the Docker daemon")),
                (["service", "inspect", "svc"], (1, "[]", "Error: no such service: svc")),
                (
                    ["service", "inspect", "off"],
                    (1, "", "Error response from daemon: This node is not a swarm manager."),
                ),
            ]
        ),
    )
    assert cli.inspect("container", ["gone", "here"]) == [{"Id": "c1"}]
    assert cli.inspect("service", ["svc", "off"]) == []
    with pytest.raises(DockerError, match="Cannot connect"):
        cli.inspect("container", ["down"])


def test_inspect_json_refuses_non_json_output():
    cli = DockerCli("docker", run=Recorder([(["info"], (0, "WARNING: not json", ""))]))
    with pytest.raises(DockerError, match="printed no JSON"):
        cli.info()


def test_image_id_present_absent_and_broken():
    cli = DockerCli(
        "docker",
        run=Recorder(
            [
                (["image", "inspect", "--format", "{{.Id}}", "present"], (0, "sha256:abc\n", "")),
                (
                    ["image", "inspect", "--format", "{{.Id}}", "absent"],
                    (1, "", "Error response from daemon: No such image: absent"),
                ),
            ]
        ),
    )
    assert cli.image_id("present") == "sha256:abc"
    assert cli.image_id("absent") is None
    with pytest.raises(DockerError):
        cli.image_id("other")


def test_swarm_state_and_services():
    cli = DockerCli("docker", run=Recorder([(["info"], (0, "active\n", "")), (["service", "ls"], (0, "a\nb\n", ""))]))
    assert cli.swarm_state() == "active" and cli.service_names() == {"a", "b"}
    down = DockerCli("docker", run=Recorder([(["info"], (1, "", "Cannot connect"))]))
    with pytest.raises(DockerError):
        down.swarm_state()
    assert down.swarm_active() is False and down.service_names() == set()


def test_is_missing_is_case_blind_and_narrow():
    assert is_missing("Error: No such object: x") and is_missing("error: no such service: y")
    assert not is_missing("exec: docker: executable file not found in $PATH")


def test_subprocess_runner_times_out_and_kills(tmp_path):
    script = tmp_path / "slow-docker"
    script.write_text("#!/bin/sh\necho started\nexec sleep 30\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    cli = DockerCli(str(script), timeout=1)
    with pytest.raises(DockerTimeout, match="did not finish within 1s") as info:
        cli.call(["ps"])
    assert info.value.stdout.startswith("started")


def test_subprocess_runner_real_process_and_missing_binary(tmp_path):
    assert subprocess_run(["sh", "-c", "echo out; echo err >&2; exit 3"], 10) == (3, "out\n", "err\n")
    rc, out, err = subprocess_run([str(tmp_path / "no-docker")], 10)
    assert rc == 127 and "no-docker" in err
    with pytest.raises(DockerError, match="rc=127"):
        DockerCli(os.path.join(str(tmp_path), "no-docker")).call(["ps"])
