"""airgap.vllm.toolkit_daemon_plan as the nvidia_toolkit role calls it: tasks/probe.yml on host_info's readings
(the file's text straight from the probe), tasks/uninstall.yml with remove on the slurped text."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible.plugins.filter.core import to_nice_json

PROBE = (
    "{{ probe.files[path] | airgap.vllm.toolkit_daemon_plan(set_as_default=default, docker=probe.docker"
    " | default({}), rpms=probe.rpms | default({}), packages=packages, version=version, path=path) }}"
)
REMOVE = "{{ content | airgap.vllm.toolkit_daemon_plan(remove=true, path=path) }}"
PATH = "/etc/docker/daemon.json"
PACKAGES = [
    "libnvidia-container1",
    "libnvidia-container-tools",
    "nvidia-container-toolkit-base",
    "nvidia-container-toolkit",
]
VERSION = "1.17.8-1"
DOCKER = {"installed": True, "running": True, "server_version": "20.10.24", "runtimes": ["nvidia", "runc"]}


def probe(text, docker=None, rpms=None):
    return {
        "files": {PATH: text},
        "docker": docker or DOCKER,
        "rpms": dict((n, [VERSION]) for n in PACKAGES) if rpms is None else rpms,
    }


def run(render, text, default=False, **kw):
    return render(PROBE, probe=probe(text, **kw), path=PATH, default=default, packages=PACKAGES, version=VERSION)


def test_an_absent_file_gets_the_runtime_and_the_preview_is_nvidia_ctks_format(render):
    p = run(render, None)
    assert p["differs"] is True and p["converged"] is False and p["error"] == ""
    assert to_nice_json(p["after"], indent=4, sort_keys=True) == (
        '{\n    "runtimes": {\n        "nvidia": {\n            "args": [],\n'
        '            "path": "nvidia-container-runtime"\n        }\n    }\n}'
    )
    assert p["argv"] == ["nvidia-ctk", "runtime", "configure", "--runtime=docker", "--config=" + PATH]


def test_other_keys_kept_and_set_as_default(render):
    text = json.dumps({"log-driver": "json-file", "data-root": "/srv/docker", "runtimes": {"kata": {"path": "k"}}})
    p = run(render, text, default=True)
    assert p["after"] == {
        "log-driver": "json-file",
        "data-root": "/srv/docker",
        "default-runtime": "nvidia",
        "runtimes": {"kata": {"path": "k"}, "nvidia": {"args": [], "path": "nvidia-container-runtime"}},
    }
    assert p["argv"][-1] == "--set-as-default"


def test_converged_from_the_probe(render):
    text = '{"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}}}\n'
    assert run(render, text)["converged"] is True
    stale = run(render, text, docker={"running": True, "runtimes": ["runc"]})
    assert stale["converged"] is False and stale["restart"] is True
    old = run(render, text, rpms={"nvidia-container-toolkit": ["1.16.2-1"]})
    assert old["converged"] is False and old["rpms_wrong"] == PACKAGES


def test_a_probe_without_docker_or_rpms(render):
    p = render(
        "{{ probe.files[path] | airgap.vllm.toolkit_daemon_plan(docker=probe.docker | default({}),"
        " rpms=probe.rpms | default({}), packages=packages, version=version) }}",
        probe={"files": {PATH: '{"runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}}}'}},
        path=PATH,
        packages=PACKAGES,
        version=VERSION,
    )
    assert p["rpms_wrong"] == PACKAGES and p["differs"] is False and p["converged"] is False
    assert p["restart"] is True  # the file is right, the daemon not seen to list the runtime


def test_bad_files_are_an_error_to_fail_with_not_a_filter_error(render):
    assert "is not valid JSON" in run(render, "{oops")["error"]
    assert "its top level is an array" in run(render, "[]")["error"]


def test_removal(render):
    text = json.dumps(
        {
            "runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}},
            "default-runtime": "nvidia",
            "log-driver": "journald",
        }
    )
    p = render(REMOVE, content=text, path=PATH)
    assert p["after"] == {"log-driver": "journald"} and p["differs"] is True
    assert render(REMOVE, content="", path=PATH)["differs"] is False
    assert "cannot be taken out" in render(REMOVE, content="{", path=PATH)["error"]
