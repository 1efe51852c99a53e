"""Ownership before every destructive step (issue 24): paths below our roots, units and containers by our marks."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.common import _ownership as O

ROOTS = ["/etc/airgap-vllm", "/var/lib/airgap-vllm"]


@pytest.mark.parametrize(
    "path",
    [
        "/etc/airgap-vllm/..",  # failed on 9dce105: the service named '..' removed /etc
        "/etc/airgap-vllm/vllm/../..",
        "/etc/airgap-vllm/.",
        "/etc/airgap-vllm",  # a root itself
        "/etc/airgap-vllm/",
        "/etc",
        "/",
        "/etc/ssh",
        "/var/lib",
        "/var/lib/airgap-vllm-other/x",  # a prefix is not a parent
        "relative/vllm",
        "",
        "/etc/airgap-vllm/vl\nlm",
        None,
    ],
)
def test_paths_outside_our_roots_are_refused(path):
    assert O.owned_path_problem(path, ROOTS)


@pytest.mark.parametrize(
    "path", ["/etc/airgap-vllm/vllm", "/etc/airgap-vllm/vllm-b/", "/var/lib/airgap-vllm/state/x.json"]
)
def test_paths_below_our_roots_pass(path):
    assert O.owned_path_problem(path, ROOTS) is None


@pytest.mark.parametrize(
    "roots", [["/"], ["/etc"], ["/var/lib/"], ["/usr"], ["etc/airgap-vllm"], [], None, ["/var/../etc"]]
)
def test_system_directories_are_never_our_roots(roots):
    assert O.owned_path_problem("/etc/ssh/sshd_config", roots)


def test_links_are_resolved(tmp_path):
    root = tmp_path / "root"
    (root / "svc").mkdir(parents=True)
    outside = tmp_path / "outside"
    (outside / "precious").mkdir(parents=True)
    os.symlink(str(outside), str(root / "escape"))
    # Below a link that leads out of the root: refused (it really is outside).
    problem = O.owned_path_problem(str(root / "escape" / "precious"), [str(root)])
    assert problem and "really" in problem
    # The link itself lies below the root: it may go (the link, never what it points at).
    assert O.owned_path_problem(str(root / "escape"), [str(root)]) is None
    # A root that is itself a link resolves too.
    os.symlink(str(root), str(tmp_path / "root-link"))
    assert O.owned_path_problem(str(root / "svc"), [str(tmp_path / "root-link")]) is None
    assert O.owned_path_problem(str(tmp_path / "root-link" / "svc"), [str(root)]) is None


MARKED = """# Ansible managed
# org.airgap.vllm.service=vllm-b config_dir=/etc/airgap-vllm/vllm-b
[Unit]
Description=vLLM OpenAI-compatible server qwen (airgap.vllm)
"""
LEGACY = """#
[Unit]
Description=vLLM OpenAI-compatible server qwen (airgap.vllm)
[Service]
ExecStart=/usr/bin/docker run --rm --name "vllm" \\
    "--env-file" "/etc/airgap-vllm/vllm/container.env" \\
"""
FOREIGN = "[Unit]\nDescription=Someone else's vllm\n[Service]\nExecStart=/usr/bin/docker run --name vllm x\n"


def test_units_are_ours_by_our_marks():
    assert O.parse_unit(MARKED) == {"service": "vllm-b", "config_dir": "/etc/airgap-vllm/vllm-b", "marked": True}
    assert O.parse_unit(LEGACY) == {"service": None, "config_dir": "/etc/airgap-vllm/vllm", "marked": False}
    assert O.parse_unit(FOREIGN) is None and O.parse_unit(None) is None


def test_containers_are_ours_by_our_label_only():
    rows = O.parse_docker_ps("aaa\tvllm\tvllm\nbbb\tvllm-b\t\nccc\tother,vllm-b\tvllm-b\nddd\tx\tvllm-b\n\nbad\n")
    assert O.split_containers(rows, "vllm") == (["aaa"], [])
    assert O.split_containers(rows, "vllm-b") == (["ccc"], ["bbb"])


def test_survey_finds_services_by_marks_and_names_what_only_looks_ours():
    units = {
        "/etc/systemd/system/vllm-b.service": MARKED,
        "/etc/systemd/system/vllm.service": LEGACY,
        "/etc/systemd/system/vllm-c.service": FOREIGN,  # has a name we may be asked about
        "/etc/systemd/system/sshd.service": MARKED.replace("vllm-b", "sshd"),  # a host unit is never ours
        "/etc/systemd/system/evil.service": MARKED,  # marker for another name
    }
    rows = O.parse_docker_ps("aaa\tvllm-d\tvllm-d\nbbb\tvllm-c\t\n")
    out = O.survey(["vllm-c", "..", "docker"], units, rows)
    assert out["discovered"] == ["vllm", "vllm-b", "vllm-d"]
    assert sorted(out["services"]) == ["vllm", "vllm-b", "vllm-c", "vllm-d"]
    assert len(out["problems"]) == 2  # '..' and docker
    c = out["services"]["vllm-c"]
    assert not c["unit_ours"] and c["unit_foreign"] and c["containers"] == [] and c["foreign_containers"] == ["bbb"]
    assert out["services"]["vllm-b"]["config_dir"] == "/etc/airgap-vllm/vllm-b"
    assert out["services"]["vllm-d"] == {
        "unit": "/etc/systemd/system/vllm-d.service",
        "unit_ours": False,
        "unit_foreign": False,
        "config_dir": None,
        "containers": ["aaa"],
        "foreign_containers": [],
    }
    assert any("vllm-c" in w and "not our label" in w for w in out["notes"])
    assert any("evil.service" in w for w in out["notes"]) and any("sshd.service" in w for w in out["notes"])
    # Docker not asked: no container is listed, none is guessed.
    assert O.survey(["vllm"], {}, None)["services"]["vllm"]["containers"] == []


def _render_unit(name="vllm-b", docker="/usr/bin/docker"):
    jinja2 = pytest.importorskip("jinja2")
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
    with open(os.path.join(root, "roles", "vllm_service", "templates", "vllm.service.j2")) as f:
        env = jinja2.Environment(keep_trailing_newline=True, trim_blocks=True)
        env.filters["comment"] = lambda s: "#\n# %s\n#" % s
        return env.from_string(f.read()).render(
            ansible_managed="Ansible managed",
            __vllm_service_served_name="q",
            vllm_service_docker_bin=docker,
            vllm_service_name=name,
            __vllm_service_dir="/etc/airgap-vllm/" + name,
            vllm_service_image="img:1",
            __vllm_service_run_argv=[docker, "run", "--rm", "--name", name, "img:1", "--model", "/m"],
        )


def test_the_unit_template_carries_our_marker_and_label():
    """The unit we write is found again by parse_unit, and its container carries our label."""
    text = _render_unit()
    assert O.parse_unit(text) == {"service": "vllm-b", "config_dir": "/etc/airgap-vllm/vllm-b", "marked": True}
    assert '"run" \\\n    "--label" "%s=vllm-b" \\\n    "--rm"' % O.CONTAINER_LABEL in text


def _systemd_words(value):
    """The argv systemd makes of an Exec line's value: words split on blanks, "..." with C escapes, $$ -> $."""
    import shlex

    return [w.replace("$$", "$") for w in shlex.split(value, posix=True)]


FAKE_DOCKER = """#!/bin/sh
echo "$*" >> "$LOG"
case "$1" in
  ps) case "$*" in
        *label=*) [ -e "$DIR/ours" ] && cat "$DIR/ours" ;;
        *) [ -e "$DIR/ours" ] && cat "$DIR/ours"; [ -e "$DIR/foreign" ] && cat "$DIR/foreign" ;;
      esac ;;
  rm) rm -f "$DIR/ours" ;;
esac
exit 0
"""


@pytest.mark.parametrize("ours,foreign,rc", [(False, False, 0), (True, False, 0), (False, True, 1)])
def test_the_units_start_removes_only_our_labelled_container(tmp_path, ours, foreign, rc):
    """Failed before: ExecStartPre ran `docker rm -f <name>` on whatever container had the name. Now it removes
    only the container with our label and the name; one that merely has the name fails the start, named."""
    import subprocess

    docker = tmp_path / "docker"
    docker.write_text(FAKE_DOCKER)
    docker.chmod(0o755)
    text = _render_unit(name="vllm.b", docker=str(docker))
    assert text == _render_unit(name="vllm.b", docker=str(docker))  # the role compares it by checksum
    line = [ln for ln in text.splitlines() if ln.startswith("ExecStartPre=")]
    assert len(line) == 1 and not line[0].startswith("ExecStartPre=-")
    argv = _systemd_words(line[0][len("ExecStartPre=") :])
    assert argv[:2] == ["/bin/sh", "-c"] and len(argv) == 3
    if ours:
        (tmp_path / "ours").write_text("1" * 64 + "\n")
    if foreign:
        (tmp_path / "foreign").write_text("f" * 64 + "\n")
    log = tmp_path / "log"
    env = dict(os.environ, LOG=str(log), DIR=str(tmp_path))
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30, check=False)
    calls = log.read_text().splitlines()
    assert done.returncode == rc, done.stderr
    assert "--filter label=%s=vllm.b --filter name=^/vllm\\.b$" % O.CONTAINER_LABEL in calls[0]
    removed = [c for c in calls if c.startswith("rm")]
    assert removed == (["rm -f " + "1" * 64] if ours else [])
    assert (tmp_path / "foreign").exists() == foreign
    if foreign:
        assert "container vllm.b exists without our label %s=vllm.b" % O.CONTAINER_LABEL in done.stderr
