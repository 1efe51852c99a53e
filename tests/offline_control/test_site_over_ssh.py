# -*- coding: utf-8 -*-
"""Day 0 at a site: site.yml from an air-gapped control node, over SSH with sudo, from a read-only bundle (issue 27).

1. test_site_from_a_read_only_bundle_over_ssh: the control-node image of tests/offline_control (a bare Debian: python3,
   venv, ssh; build-images.sh) is started on the host's site LAN (an internal Docker network: the simulated host and
   nothing else) with a built bundle mounted READ-ONLY at /mnt/airgap, the inventory (inventories/simulated, its host
   renamed to the container's name, plus host_vars that put the run's files where a site's are: the roles' defaults
   under ~/.airgap-vllm) and the SSH key and known host passed in read-only. It runs docs/site-setup.md's steps 2, 3,
   7, 8 and 9 as the page writes them (control_node_script; step 7's `vi` edits are the inventory written instead):
   the checksums, `sh setup-controller.sh`, the inventory copied off the disk, the login proof, then site.yml with
   --check and twice for real, as the ordinary user ops with root through sudo. The host must be converged: tests/
   simulate's (the test skips with the reason otherwise), or a served host of the scenarios (molecule control runs
   this test with this file's environment variables pointed at its host: molecule/shared/control_node.yml). The control node
   starts with the site CA of the machine that converged it (its ~/.airgap-vllm/pki, moved along as docs/operations.md
   says; a new CA would re-issue the host's certificate) and no reports: the first run fetches them into
   ~/.airgap-vllm/reports and changes nothing else; the second is changed=0. No file under the bundle was written (it
   is read-only: no run may have needed to).
   The simulated bundle is built without wheels (tests/world/bundle-vars.yml, to keep tests/simulate offline); the
   ansible-core wheels bundle_build would put into its wheels/ are downloaded once to AIRGAP_TEST_CACHE and mounted
   read-only at /mnt/airgap/wheels.
2. test_requiretty_fails_as_documented_and_the_exemption_fixes_it: a throwaway host of the test world's Kylin image on
   the same LAN, set up as docs/operations.md ("Logging in") says; an EL-style `Defaults requiretty` in /etc/sudoers
   makes the documented proof command fail with "sudo: sorry, you must have a tty to run sudo" (pipelining is on);
   `Defaults:ops !requiretty` in /etc/sudoers.d/ops fixes it.

Env: AIRGAP_SIM_NAME (airgap-kylin-sim), AIRGAP_SIM_NETWORK (airgap-sim-lan), AIRGAP_SIM_SSH_DIR (~/.airgap-vllm/ssh),
AIRGAP_TEST_BUNDLE (build/simulated-bundle), AIRGAP_SIM_PKI_DIR (~/.airgap-vllm/simulated/pki, as tests/simulate and the
simulated inventory have it), AIRGAP_OFFLINE_SSH_SUITES (control-node Debian suites, default "bookworm": Python 3.11; "trixie": 3.13).
Cost on a converged host: two converged runs of site.yml over SSH (~1-2 min each on 2 busy cores); the requiretty
test ~30 s.
"""

import glob
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from systemd_container import systemd_flags  # noqa: E402

NAME = os.environ.get("AIRGAP_SIM_NAME") or "airgap-kylin-sim"
NET = os.environ.get("AIRGAP_SIM_NETWORK") or "airgap-sim-lan"
SSH_DIR = os.path.expanduser(os.environ.get("AIRGAP_SIM_SSH_DIR") or "~/.airgap-vllm/ssh")
BUNDLE = os.environ.get("AIRGAP_TEST_BUNDLE") or os.path.join(ROOT, "build", "simulated-bundle")
CACHE = os.environ.get("AIRGAP_TEST_CACHE") or "/var/cache/airgap-test"
SUITES = {"bookworm": "3.11", "trixie": "3.13"}
RUN_SUITES = (os.environ.get("AIRGAP_OFFLINE_SSH_SUITES") or "bookworm").split()
# The host's inventory name: the container's (tests/simulate's airgap-kylin-sim; molecule control's kylin-control, whose
# converge runs this test against its served host): the copy of inventories/simulated is renamed to it.
HOST = NAME
KYLIN_IMAGE = "airgap-test/kylin:v10sp3"
# The site CA of the machine that converged the host: tests/simulate's default (molecule control sets its own).
PKI_DIR = os.path.expanduser(os.environ.get("AIRGAP_SIM_PKI_DIR") or "~/.airgap-vllm/simulated/pki")
TTY_NAME = "airgap-kylin-requiretty"
TTY_ADDRESS = "10.231.8.23"


def run(cmd, timeout=600, **kw):
    return subprocess.run(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        universal_newlines=True,
        timeout=timeout,
        check=False,
        **kw,
    )


def docker(*args, **kw):
    return run(("docker",) + args, **kw)


def recaps(out, host):
    """{'ok': .., 'changed': .., ...} of every recap line of host in out, in order."""
    return [
        dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", ln))
        for ln in out.splitlines()
        if re.match(r"^%s\s+:\s+ok=" % re.escape(host), ln)
    ]


def changed_tasks(out):
    """The names of the tasks that reported changed, in order."""
    names, task = [], None
    for ln in out.splitlines():
        m = re.match(r"^TASK \[(.*)\] \**$", ln)
        if m:
            task = m.group(1)
        elif ln.startswith("changed: [") and task:
            names.append(task)
    return names


def assert_ops_logged_in_from(address, since):
    """The host's journal since `since` (epoch s): ops logged in over SSH from `address` with its key, root by sudo."""
    log = docker(
        "exec",
        NAME,
        "journalctl",
        "--since",
        "@%d" % int(since),
        "-o",
        "cat",
        "_COMM=sshd",
        "+",
        "_COMM=sudo",
        timeout=120,
    ).stdout
    assert "Accepted publickey for ops from %s " % address in log, log[-2000:]
    assert re.search(r"ops : .*USER=root", log), log[-2000:]


def assert_first_run_changed_only_controller(out):
    """A new control node's first site.yml changes only its own state directory (reports, the CA fetched)."""
    print("changed by the first run:", changed_tasks(out))
    assert all("controller" in t for t in changed_tasks(out)), changed_tasks(out)


def files_of(top):
    """{relative path: (size, mtime_ns)} of every file and link under top."""
    out = {}
    for d, dirs, files in os.walk(top):
        for f in files + [x for x in dirs if os.path.islink(os.path.join(d, x))]:
            p = os.path.join(d, f)
            st = os.lstat(p)
            out[os.path.relpath(p, top)] = (st.st_size, st.st_mtime_ns)
    return out


@pytest.fixture(scope="module")
def sim_host(needs_docker):
    """tests/simulate's host, set up for SSH, and its bundle; skips with the reason and the command otherwise."""
    state = docker("inspect", "-f", "{{.State.Status}}", NAME).stdout.strip()
    if state != "running":
        pytest.skip(
            "the simulated host %s is not running (%s): `bash tests/simulate` makes and converges it"
            % (NAME, state or "no such container")
        )
    if docker("exec", NAME, "test", "-x", "/usr/sbin/sshd").returncode != 0:
        pytest.skip("%s was made from an image without sshd: `bash tests/simulate --fresh` replaces it" % NAME)
    key, known = os.path.join(SSH_DIR, "id_ed25519"), os.path.join(SSH_DIR, "known_hosts-" + NAME)
    if not (os.path.isfile(key) and os.path.isfile(known)):
        pytest.skip("no SSH login to %s set up (%s, %s): `bash tests/simulate` sets it up" % (NAME, key, known))
    if not os.path.isfile(os.path.join(BUNDLE, "manifest.yml")):
        pytest.skip("no built bundle at %s: `bash tests/simulate` builds it" % BUNDLE)
    address = docker(
        "inspect", "-f", '{{with index .NetworkSettings.Networks "%s"}}{{.IPAddress}}{{end}}' % NET, NAME
    ).stdout.strip()
    assert address, "%s has no address on %s" % (NAME, NET)
    return {"address": address, "key": key, "known": known}


@pytest.fixture(scope="module")
def sim(sim_host):
    """That host, converged."""
    if (
        docker(
            "exec", NAME, "sh", "-c", "test -s /var/lib/airgap-vllm/state/service.json && systemctl -q is-active vllm"
        ).returncode
        != 0
    ):
        pytest.skip("%s is not converged (no active vllm service): `bash tests/simulate` first" % NAME)
    return sim_host


def wheels(version):
    """ansible-core wheels for one control-node Python, as bundle_build downloads them (cached)."""
    dest = os.path.join(CACHE, "controller-wheels", "py" + version)
    if not glob.glob(os.path.join(dest, "ansible_core-2.17.*.whl")):
        p = run(
            [
                "python3",
                "-m",
                "pip",
                "download",
                "--disable-pip-version-check",
                "--only-binary=:all:",
                "--dest",
                dest + ".new",
                "--python-version",
                version,
                "--platform",
                "manylinux2014_x86_64",
                "ansible-core>=2.17,<2.18",
            ]
        )
        assert p.returncode == 0, p.stdout[-3000:]
        shutil.rmtree(dest, ignore_errors=True)
        os.rename(dest + ".new", dest)
    return os.path.dirname(dest)


def control_node_images(suites):
    """{suite: image} of the control-node images (build-images.sh: built once, cached by its inputs)."""
    p = run(["bash", os.path.join(ROOT, "tests", "offline_control", "build-images.sh")] + list(suites), timeout=900)
    assert p.returncode == 0, p.stdout[-3000:]
    return dict(line.split() for line in p.stdout.splitlines() if line.count(" ") == 1 and ":" in line)


@pytest.fixture(scope="module")
def images(needs_docker):
    return control_node_images(RUN_SUITES)


# The run's own files where a site's go: the roles' defaults under the control node's ~/.airgap-vllm (the simulated
# inventory puts them beside the bundle build, which is the USB disk here).
SITE_HOST_VARS = """---
vllm_service_report_fetch_dir: "{{ lookup('ansible.builtin.env', 'HOME') }}/.airgap-vllm/reports"
vllm_front_pki_dir: "{{ lookup('ansible.builtin.env', 'HOME') }}/.airgap-vllm/pki"
vllm_front_ca_fetch_dir: "{{ vllm_service_report_fetch_dir }}"
"""

SITE_SETUP = os.path.join(ROOT, "docs", "site-setup.md")


def site_setup_steps(path=SITE_SETUP):
    """{step number: [command lines]} of docs/site-setup.md's ```sh blocks, comments and blank lines dropped."""
    steps, step, block = {}, None, False
    with open(path) as f:
        for line in f:
            m = re.match(r"^## (\d+)\. ", line)
            if m:
                step = int(m.group(1))
            elif line.startswith("```"):
                block = line.strip() == "```sh"
            elif block and step is not None:
                cmd = re.sub(r"\s+#\s.*$", "", line.rstrip("\n")).rstrip()
                if cmd:
                    steps.setdefault(step, []).append(cmd)
    return steps


README = os.path.join(ROOT, "README.md")
# The README's day-2 block (production use), by what each line is for (its comment).
README_DAY2 = {
    "change a setting": "--tags plan,service -e vllm_plan_concurrency=8",
    "a new image release": "--tags bundle,image,service",
    "hand a server back": "airgap.vllm.uninstall",
}


def readme_day2(path=README):
    """{its comment: the command line} of the README's ```sh block of day-2 commands, as written."""
    with open(path) as f:
        for block in re.findall(r"```sh\n(.*?)```", f.read(), re.S):
            lines = dict(
                (m.group(2), m.group(1).strip())
                for m in (re.match(r"^(.*?)\s+#\s+(.*)$", ln) for ln in block.splitlines())
                if m
            )
            if set(lines) == set(README_DAY2):
                return lines
    raise AssertionError("no ```sh block of the day-2 commands %s in README.md" % sorted(README_DAY2))


def control_node_script(steps, numbers=(2, 3, 7, 8, 9), readme=()):
    """The control node's shell script: docs/site-setup.md's steps (2, 3, 7, 8 and 9) as the page writes them, with
    the disk mounted at the page's /mnt/airgap, then the README's day-2 commands named in readme (from the bundle
    root, as written). Step 7's two `vi` edits are the site's own files written instead (the simulated inventory's,
    as /site/inventory holds them); step 9's runs and the README's are marked for the assertions."""
    out = [
        "set -eu",
        "echo \"=== control node at $(python3 -c 'import socket; print(socket.gethostbyname(socket.gethostname()))')\"",
    ]
    for n in numbers:
        out.append("echo '=== site-setup step %d'" % n)
        for cmd in steps[n]:
            if cmd.startswith("vi "):
                dest = cmd.split()[1]
                rel = dest.split("/kylin-prod/", 1)[1]
                out.append("cp /site/inventory/%s %s" % (rel, dest))
                continue
            if cmd.startswith("ansible-playbook site.yml"):
                out.append("echo '=== %s'" % cmd)
            out.append(cmd)
        if n == 7:
            out.append("cp -r /site/inventory/host_vars ~/airgap-site/kylin-prod/")
    lines = readme_day2() if readme else {}
    for what in readme:
        out += ["cd /mnt/airgap", "echo '=== README: %s'" % what, lines[what]]
    return "\n".join(out) + "\n"


def readme_production_blocks(path=README):
    """The command lines of each ```sh block of the README's "Production use" section (up to the next "## "
    heading), comments dropped."""
    with open(path) as f:
        text = f.read()
    text = text[text.index("## Production use") :]
    # Up to the next section (the contributing section's commands are tests/unit/tools/test_scenarios.py's).
    nxt = text.find("\n## ", 1)
    text = text if nxt < 0 else text[:nxt]
    return [
        [ln for ln in (re.sub(r"\s+#\s.*$", "", x).rstrip() for x in block.splitlines()) if ln]
        for block in re.findall(r"```sh\n(.*?)```", text, re.S)
    ]


def test_every_readme_production_command_is_run_as_written_by_a_test():
    """Each line of the README's production section is one a test runs as written: the bundle build block
    (test_usb_disk, the whole block), the control node's (docs/site-setup.md's steps 3, 7 and 9: the same lines; the
    `vi` is the inventory written instead), the day-2 block (molecule release, above) and the plan block
    (tests/first_hour runs the whole block from a fresh clone)."""
    steps = site_setup_steps()
    page = set(cmd for n in (3, 7, 9) for cmd in steps[n])
    day2 = set(readme_day2().values())
    blocks = readme_production_blocks()
    assert len(blocks) == 4, blocks
    build, control, change, plan = blocks
    assert build[-1] == "ansible-playbook playbooks/bundle_build.yml -e @my-bundle.yml", build
    assert [ln for ln in control if ln not in page] == [], (control, sorted(page))
    assert set(change) == day2, change
    assert "playbooks/plan.yml" in plan[1], plan


def test_the_readme_day2_commands_are_the_ones_the_control_node_runs():
    lines = readme_day2()
    for what, part in README_DAY2.items():
        assert part in lines[what] and "-i ~/airgap-site/kylin-prod" in lines[what], (what, lines[what])
    script = control_node_script(site_setup_steps(), (3, 7), tuple(README_DAY2)).splitlines()
    assert [ln for ln in script if ln.startswith("ansible-playbook")] == [lines[w] for w in README_DAY2]


def test_the_control_node_runs_the_site_setup_page_as_written():
    steps = site_setup_steps()
    script = control_node_script(steps)
    for n in (2, 3, 8, 9):
        for cmd in steps[n]:
            assert cmd in script.splitlines(), cmd
    assert "mkdir -p ~/airgap-site && cp -r /mnt/airgap/kylin-prod ~/airgap-site/" in script.splitlines()
    assert not [ln for ln in script.splitlines() if ln.startswith("vi ")]
    runs = [ln for ln in script.splitlines() if ln.startswith("ansible-playbook site.yml")]
    assert runs == [
        "ansible-playbook site.yml -i ~/airgap-site/kylin-prod --check --diff",
        "ansible-playbook site.yml -i ~/airgap-site/kylin-prod",
        "ansible-playbook site.yml -i ~/airgap-site/kylin-prod",
    ], runs
    assert "ansible vllm_servers -i ~/airgap-site/kylin-prod -m ansible.builtin.command -a id -b" in script


@pytest.fixture
def bundle(sim_host):
    """The built bundle as a hard-linked copy beside it: another checkout's tests/simulate on this machine may rebuild
    build/simulated-bundle while the test runs (then only this copy's files tell what the control node wrote)."""
    dest = os.path.join(os.path.dirname(BUNDLE), ".offline-ssh-bundle-%d" % os.getpid())
    shutil.rmtree(dest, ignore_errors=True)
    p = run(["cp", "-al", BUNDLE, dest])
    assert p.returncode == 0, p.stdout
    yield dest
    shutil.rmtree(dest, ignore_errors=True)


def site_files(top, sim, host_vars=""):
    """A site's files for a new control node, under `top`: the simulated inventory with its host renamed to the
    container's (SITE_HOST_VARS + host_vars), the SSH key and known host, and a state directory that holds only the
    site CA of the machine that converged the host. (inventory, ssh, state) paths."""
    inventory = top / "inventory"
    shutil.copytree(os.path.join(ROOT, "inventories", "simulated"), str(inventory))
    hosts = inventory / "hosts.yml"
    hosts.write_text(hosts.read_text().replace("\n        airgap-kylin-sim:\n", "\n        %s:\n" % HOST, 1))
    assert "        %s:\n" % HOST in hosts.read_text()
    (inventory / "host_vars").mkdir(exist_ok=True)
    (inventory / "host_vars" / (HOST + ".yml")).write_text(SITE_HOST_VARS + host_vars)
    ssh = top / "ssh"
    ssh.mkdir(mode=0o700)
    for src, dst in ((sim["key"], "id_ed25519"), (sim["known"], "known_hosts-" + NAME)):
        shutil.copy(src, str(ssh / dst))
        os.chmod(str(ssh / dst), 0o600)
    state = top / "airgap-vllm"
    state.mkdir(mode=0o700)
    # Without it the new control node would be refused by the host's front door (it serves the site CA): say so here.
    if not os.path.isfile(os.path.join(PKI_DIR, "ca.crt")):
        pytest.skip("no site CA at %s (the one that converged %s): set AIRGAP_SIM_PKI_DIR" % (PKI_DIR, NAME))
    shutil.copytree(PKI_DIR, str(state / "pki"))
    return inventory, ssh, state


def run_control_node(sim, images, bundle, suite, tmp_path, script, host_vars=""):
    """script in the control-node image on the host's site LAN: the bundle read-only at /mnt/airgap, the simulated
    inventory (its host renamed to the container's, SITE_HOST_VARS) at /site/inventory, the SSH key and known host at
    /site/ssh, and a state directory that starts with the site CA of the machine that converged the host.
    Returns (output, state directory, start time); the output's marked sections are printed."""
    inventory, ssh, home = site_files(tmp_path, sim, host_vars)
    t0 = time.time()
    p = docker(
        "run",
        "--rm",
        "--network",
        NET,
        "-v",
        "%s:/mnt/airgap:ro" % bundle,
        "-v",
        "%s:/mnt/airgap/wheels:ro" % wheels(SUITES[suite]),
        "-v",
        "%s:/site/inventory:ro" % inventory,
        "-v",
        "%s:/site/ssh:ro" % ssh,
        "-v",
        "%s:/root/.airgap-vllm" % home,
        "-e",
        "AIRGAP_SIM_NAME=" + NAME,
        "-e",
        "AIRGAP_SIM_ADDRESS=" + sim["address"],
        "-e",
        "AIRGAP_SIM_SSH_DIR=/site/ssh",
        "-e",
        "AIRGAP_TEST_BUNDLE=/mnt/airgap",
        "-e",
        "ANSIBLE_NOCOLOR=1",
        "-e",
        "ANSIBLE_FORCE_COLOR=0",
        images[suite],
        "sh",
        "-c",
        script,
        timeout=2400,
    )
    out = p.stdout
    print("control node %s: %.0f s" % (suite, time.time() - t0))
    for ln in out.splitlines():
        if ln.startswith("===") or re.match(r"^%s\s+:\s+ok=" % re.escape(HOST), ln):
            print(ln)
    assert p.returncode == 0, out[-6000:]
    assert "Control node ready (Python %s" % SUITES[suite] in out, out[:3000]
    assert "Read-only file system" not in out
    return out, home, t0


def sections(out):
    """[(marker, the output after it up to the next marker)] of the script's `=== ...` lines."""
    parts = re.split(r"^=== (.*)$", out, flags=re.M)
    return list(zip(parts[1::2], parts[2::2]))


@pytest.mark.parametrize("suite", RUN_SUITES)
def test_site_from_a_read_only_bundle_over_ssh(sim, images, bundle, suite, tmp_path):
    before = files_of(bundle)
    # The page's steps, then the README's "a new image release" line: the bundle's image is the one serving, so it
    # changes nothing (the release walk itself is molecule release's day2.yml, through the same stages).
    out, home, t0 = run_control_node(
        sim, images, bundle, suite, tmp_path, control_node_script(site_setup_steps(), readme=("a new image release",))
    )
    marked = sections(out)
    # The page's step 8 (the login proof), step 9's three runs and the README's line, each after its marker.
    proof = dict(marked)["site-setup step 8"]
    assert re.search(r"^%s \| CHANGED \| rc=0 >>\nuid=0\(root\)" % re.escape(HOST), proof, re.M), proof[-2000:]
    check, first, second = [text for m, text in marked if m.startswith("ansible-playbook site.yml")]
    release = dict(marked)["README: a new image release"]
    rc, r1, r2, r3 = recaps(check, HOST), recaps(first, HOST), recaps(second, HOST), recaps(release, HOST)
    assert rc and r1 and r2 and r3, out[-4000:]
    assert rc[-1]["failed"] == 0 and rc[-1]["unreachable"] == 0, check[-4000:]
    assert r1[-1]["failed"] == 0 and r1[-1]["unreachable"] == 0, first[-4000:]
    # Over SSH from the control node's own address as ops with its key, root through sudo: the host's journal says so.
    me = re.search(r"^=== control node at (\S+)$", out, re.M).group(1)
    assert_ops_logged_in_from(me, t0)
    # The first run changed only the new control node's state directory (reports and the CA fetched into it).
    assert_first_run_changed_only_controller(first)
    assert r2[-1]["changed"] == 0 and r2[-1]["failed"] == 0, second[-5000:]
    assert r3[-1]["changed"] == 0 and r3[-1]["failed"] == 0, release[-5000:]
    reports = home / "reports" / HOST
    assert (reports / "vllm" / "report.json").is_file(), sorted(files_of(str(home)))
    assert (reports / "front-ca.crt").is_file(), sorted(files_of(str(home)))
    assert files_of(bundle) == before, "files under the bundle changed"


def engine_starts():
    """(the serving container's start time, the engine's start banners in the unit's journal) on the host."""
    started = docker("exec", NAME, "docker", "inspect", "--format", "{{.State.StartedAt}}", "vllm").stdout.strip()
    banners = docker(
        "exec", NAME, "sh", "-c", "journalctl -u vllm -o cat --no-pager | grep -cE 'version 0\\.[0-9]+' || true"
    ).stdout.strip()
    return started, int(banners or 0)


def test_readme_change_a_setting_over_ssh(sim, images, bundle, tmp_path):
    """The README's "change a setting" line, as written, from the control node: one restart, the new setting serves.
    molecule release's day2.yml runs it first (then the host serves at concurrency 8 until the next plan)."""
    suite = RUN_SUITES[0]
    started, banners = engine_starts()
    # The site's inventory may trim the load check a restart runs (the line itself stays as written): the first
    # converge ran every profile; here vLLM's random profile alone proves the new setting serves (~1 min less).
    out, home, t0 = run_control_node(
        sim,
        images,
        bundle,
        suite,
        tmp_path,
        control_node_script(site_setup_steps(), (3, 7), ("change a setting",)),
        host_vars="vllm_service_loadcheck_profiles: [random]\n",
    )
    text = dict(sections(out))["README: change a setting"]
    recap = recaps(text, HOST)
    assert recap and recap[-1]["failed"] == 0 and recap[-1]["unreachable"] == 0, text[-5000:]
    assert recap[-1]["changed"] > 0, text[-3000:]
    unit = docker("exec", NAME, "cat", "/etc/systemd/system/vllm.service").stdout
    assert '"--max-num-seqs" "8"' in unit, unit[-2000:]
    now, banners_now = engine_starts()
    assert now != started and banners_now == banners + 1, (started, now, banners, banners_now)
    assert (home / "reports" / HOST / "vllm" / "report.json").is_file(), sorted(files_of(str(home)))


def test_readme_hand_a_server_back_over_ssh(sim_host, images, bundle, tmp_path):
    """The README's "hand a server back" line, as written, from the control node: the uninstall runs green and
    nothing of our services is left. molecule uninstall runs it, as the operator's
    run after the damaged record the first uninstall set aside was looked at (docs/operations.md); it skips
    elsewhere: it would remove tests/simulate's service unless AIRGAP_SIM_UNINSTALL=1 says that is wanted."""
    if os.environ.get("AIRGAP_SIM_UNINSTALL") != "1":
        pytest.skip("uninstalls the simulated host's service: set AIRGAP_SIM_UNINSTALL=1 to run it")
    suite = RUN_SUITES[0]
    out, home, t0 = run_control_node(
        sim_host,
        images,
        bundle,
        suite,
        tmp_path,
        control_node_script(site_setup_steps(), (3, 7), ("hand a server back",)),
    )
    text = dict(sections(out))["README: hand a server back"]
    recap = recaps(text, HOST)
    assert recap and recap[-1]["failed"] == 0 and recap[-1]["unreachable"] == 0, text[-5000:]
    left = docker(
        "exec",
        NAME,
        "sh",
        "-c",
        "grep -l org.airgap.vllm.service= /etc/systemd/system/vllm*.service 2>/dev/null; "
        "ls /var/lib/airgap-vllm/state/service*.json 2>/dev/null; "
        "docker ps -aq --filter label=org.airgap.vllm.service",
    ).stdout.split()
    assert left == [], left


# --------------------------------------------------------------------------------------------------- requiretty
@pytest.fixture
def fresh_host(needs_docker):
    """A fresh host of the test world's Kylin image on the site LAN at TTY_ADDRESS, its sshd up; nobody set up."""
    if docker("image", "inspect", KYLIN_IMAGE).returncode != 0:
        pytest.skip("no %s: bash tests/world/build.sh kylin" % KYLIN_IMAGE)
    if docker("network", "inspect", NET).returncode != 0:
        pytest.skip("no site LAN %s: bash tests/simulate makes it" % NET)
    docker("rm", "-fv", TTY_NAME)
    p = docker(
        *(
            ["run", "-d", "--name", TTY_NAME, "--hostname", TTY_NAME, "--network", NET, "--ip", TTY_ADDRESS]
            + systemd_flags()
            + [KYLIN_IMAGE, "/lib/systemd/systemd"]
        )
    )
    assert p.returncode == 0, p.stdout
    try:
        for dummy in range(90):
            if (
                docker("exec", TTY_NAME, "test", "-s", "/etc/ssh/ssh_host_ed25519_key.pub").returncode == 0
                and docker("exec", TTY_NAME, "systemctl", "-q", "is-active", "ssh").returncode == 0
            ):
                break
            time.sleep(1)
        yield TTY_NAME
    finally:
        docker("rm", "-fv", TTY_NAME)


@pytest.fixture
def tty_host(fresh_host, tmp_path):
    """That host, set up as docs/operations.md says."""
    ssh = tmp_path / "ssh"
    ssh.mkdir(mode=0o700)
    assert run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(ssh / "id_ed25519")]).returncode == 0
    pub = (ssh / "id_ed25519.pub").read_text().strip()
    # docs/operations.md, "Logging in", steps 1 and 2, as root on the server.
    admin = (
        "useradd -m ops && install -d -m 0700 -o ops -g ops ~ops/.ssh && "
        "printf '%s\\n' \"$PUB\" >~ops/.ssh/authorized_keys && "
        "chown ops:ops ~ops/.ssh/authorized_keys && chmod 0600 ~ops/.ssh/authorized_keys && "
        "echo 'ops ALL=(root) NOPASSWD: ALL' >/etc/sudoers.d/ops && chmod 0440 /etc/sudoers.d/ops && "
        "visudo -cf /etc/sudoers.d/ops"
    )
    p = docker("exec", "-e", "PUB=" + pub, TTY_NAME, "sh", "-euc", admin)
    assert p.returncode == 0, p.stdout
    hostkey = " ".join(docker("exec", TTY_NAME, "cat", "/etc/ssh/ssh_host_ed25519_key.pub").stdout.split()[:2])
    (ssh / ("known_hosts-" + TTY_NAME)).write_text("%s %s\n" % (TTY_ADDRESS, hostkey))
    yield str(ssh)


SETUP_NODE = "airgap-setup-control-node"
# The operator at a terminal: runs argv[1] (a shell line) on a pty, and at ssh's host key question answers yes only
# when the fingerprint shown is argv[2], no otherwise; exits with the command's status.
ANSWER_HOST_KEY = r"""
import os, pty, sys
pid, fd = pty.fork()
if pid == 0:
    os.execvp("sh", ["sh", "-c", sys.argv[1]])
out, answered = b"", False
while True:
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
    if not answered and b"(yes/no" in out:
        answered = True
        ok = sys.argv[2].encode() in out
        os.write(fd, b"yes\n" if ok else b"no\n")
        out += b"\n[answered " + (b"yes" if ok else b"no") + b"]\n"
status = os.waitpid(pid, 0)[1]
sys.stdout.write(out.decode("utf-8", "replace"))
sys.exit(os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status >> 8)
"""


def test_site_setup_steps_4_to_6_as_written(fresh_host, images):
    """docs/site-setup.md's steps 4, 5 and 6 as the page writes them, between a new control node (the control-node
    image on the site LAN) and a fresh server: the key made and shown (the passphrase prompts answered empty), the
    server's login user, key and sudoers line made as root (the `vi` is the .pub line written in its place; the
    requiretty lines as written: the grep finds none here, the exemption is harmless), its host key's fingerprint,
    then the first `ssh` from the control node (the page's example address is this server's) answered yes only
    because the fingerprint it shows is step 5's. Afterwards the key logs in as ops and sudo gives root."""
    steps = site_setup_steps()
    suite = RUN_SUITES[0]
    docker("rm", "-fv", SETUP_NODE)
    p = docker("run", "-d", "--name", SETUP_NODE, "--network", NET, images[suite], "sleep", "infinity")
    assert p.returncode == 0, p.stdout
    try:
        # Step 4, on the control node.
        keygen, show = steps[4]
        p = docker("exec", "-i", SETUP_NODE, "sh", "-c", keygen, input="\n\n")
        assert p.returncode == 0, p.stdout
        pub = docker("exec", SETUP_NODE, "sh", "-c", show).stdout.strip()
        assert re.match(r"^ssh-ed25519 AAAA\S+ \S+@\S+$", pub), pub
        # Step 5, on the server as root, line by line.
        fingerprint = None
        for line in steps[5]:
            if line.startswith("vi "):
                line = "printf '%%s\\n' '%s' >%s" % (pub, line.split()[1])
            p = docker("exec", TTY_NAME, "sh", "-c", line)
            if line.startswith("grep -r requiretty"):
                assert p.returncode == 1 and p.stdout == "", p.stdout  # none in the test world's sudoers
                continue
            assert p.returncode == 0, (line, p.stdout)
            if "visudo" in line:
                assert "parsed OK" in p.stdout, p.stdout
            if line.startswith("ssh-keygen -lf"):
                fingerprint = re.search(r"SHA256:\S+", p.stdout).group(0)
        assert fingerprint, steps[5]
        # Step 6, on the control node, in a terminal (ssh asks about the host key there): yes only when the
        # fingerprint shown is step 5's.
        (line,) = steps[6]
        assert "192.0.2.10" in line
        line = line.replace("192.0.2.10", TTY_ADDRESS)
        p = docker("exec", SETUP_NODE, "python3", "-c", ANSWER_HOST_KEY, line, fingerprint)
        assert p.returncode == 0, p.stdout
        assert "answered yes" in p.stdout and fingerprint in p.stdout, (fingerprint, p.stdout)
        known = docker("exec", SETUP_NODE, "ssh-keygen", "-F", TTY_ADDRESS).stdout
        assert "ssh-ed25519" in known, known
        # The login works without a prompt now, as ops, and sudo gives root without a password.
        p = docker("exec", SETUP_NODE, "ssh", "-o", "BatchMode=yes", "ops@" + TTY_ADDRESS, "sudo", "-n", "id", "-u")
        assert p.returncode == 0 and p.stdout.strip().splitlines()[-1] == "0", p.stdout
    finally:
        docker("rm", "-fv", SETUP_NODE)


def prove_root(ssh_dir):
    """The proof command of docs/operations.md: `ansible vllm_servers -i <inv> -m ansible.builtin.command -a id -b`."""
    env = dict(
        os.environ,
        AIRGAP_SIM_NAME=TTY_NAME,
        AIRGAP_SIM_ADDRESS=TTY_ADDRESS,
        AIRGAP_SIM_SSH_DIR=ssh_dir,
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
    )
    env.pop("AIRGAP_SIM_CONNECTION", None)
    return run(
        ["ansible", "vllm_servers", "-i", "inventories/simulated", "-m", "ansible.builtin.command", "-a", "id", "-b"],
        cwd=ROOT,
        env=env,
        timeout=180,
    )


def test_requiretty_fails_as_documented_and_the_exemption_fixes_it(tty_host):
    p = prove_root(tty_host)
    assert p.returncode == 0 and "uid=0(root)" in p.stdout, p.stdout[-3000:]
    # EL 7's /etc/sudoers had it, before the @includedir of /etc/sudoers.d (read last: a later line wins).
    p = docker(
        "exec",
        TTY_NAME,
        "sh",
        "-euc",
        "sed -i 's/^Defaults[[:space:]]*env_reset$/&\\nDefaults    requiretty/' "
        "/etc/sudoers && grep -q '^Defaults    requiretty$' /etc/sudoers && visudo -c",
    )
    assert p.returncode == 0, p.stdout
    p = prove_root(tty_host)
    assert p.returncode != 0, p.stdout[-3000:]
    assert "sudo: sorry, you must have a tty to run sudo" in p.stdout, p.stdout[-3000:]
    # The fix, in the same /etc/sudoers.d/ops (docs/operations.md, "Logging in", step 4).
    p = docker(
        "exec",
        TTY_NAME,
        "sh",
        "-euc",
        "echo 'Defaults:ops !requiretty' >>/etc/sudoers.d/ops && visudo -cf /etc/sudoers.d/ops",
    )
    assert p.returncode == 0, p.stdout
    p = prove_root(tty_host)
    assert p.returncode == 0 and "uid=0(root)" in p.stdout, p.stdout[-3000:]
