"""Each shipped inventory works from a built bundle's root (issue 14, "Done when").

Builds the offline bundle from the test world's artifacts (the command tests/simulate runs, into its own
build/shipped-inventories-bundle, kept between runs so a re-run only compares), checks that every shipped
inventory (inventories/* but simulated) is in the bundle root byte for byte, then for each one:
- `ansible-inventory -i <it> --list` from the bundle root;
- `ansible-playbook site.yml -i <it> --check` from the bundle root against one simulated Kylin V10 SP3 host
  (a systemd container of the test world, no network), its fake GPU set to the card the setup is for.

What is added on the command line is only the host: the connection (`-e ansible_connection/ansible_host`),
the control node's state directory (`-e airgap_vllm_controller_dir`, a temporary one instead of the build
machine's ~/.airgap-vllm) and the simulated host's own facts, taken from inventories/simulated (the Kylin kernel release a container
cannot run, the stand-in driver's version file, the fake reboot, the test world's unsigned RPMs). None of
them is a setting of a shipped setup (asserted). The --check runs the whole pipeline and passes fully:
validation (every variable, the bundle found at inventory_dir/.., the connection), preflight (OS, GPU,
disk, the setup's port), the bundle, driver and toolkit decisions, the model and image imports as
predictions; the plan and service stages wait for the imported model, which --check does not import
(the documented "--check before the model is imported" skip, asserted). What the planner makes of each
setup is tested by test_setups_doc.py. Nothing on the host changes (asserted).
The host's disk is the build machine's: when it has less free space than a setup's real requirement
(40 GB for the model), the run must stop at preflight with the disk line naming that need (asserted
instead, and only accepted when the free space measured around the run was short).
Cost: one container for the inventories, one bundle build (~2.4 GB under build/, reused), a --check run each.
"""

import json
import os
import re
import stat
import subprocess
import sys

import pytest
import yaml

pytestmark = pytest.mark.molecule

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from systemd_container import systemd_flags  # noqa: E402

NAME = "airgap-kylin-shipped"
IMAGE = "airgap-test/kylin:v10sp3"
BUNDLE = os.path.join(ROOT, "build", "shipped-inventories-bundle")
SHIPPED = sorted(
    d
    for d in os.listdir(os.path.join(ROOT, "inventories"))
    if d != "simulated" and os.path.isfile(os.path.join(ROOT, "inventories", d, "hosts.yml"))
)
# The simulated host's facts (inventories/simulated/group_vars): what a container cannot be, not a setting.
HOST_FACTS = (
    "preflight_kernel_release",
    "nvidia_driver_kernel_release",
    "vllm_plan_kernel_release",
    "vllm_image_kernel_release",
    "preflight_nvidia_version_file",
    "nvidia_driver_version_file",
    "nvidia_driver_reboot_command",
    "nvidia_driver_boot_time_command",
    "nvidia_toolkit_disable_gpg_check",
)
MIB = 1 << 20
# The card each setup is for, as the fake NVML and lspci report it (tests/world/fakes/nvml/README.md).
CARDS = {
    "kylin-prod": {
        "name": "NVIDIA RTX 6000 Ada Generation",
        "memory_total": 49140 * MIB,
        "pci_device_id": "0x26B110DE",
        "compute_capability": [8, 9],
    },
    "rtx-pro-6000": {
        "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "memory_total": 97887 * MIB,
        "pci_device_id": "0x2BB510DE",
        "compute_capability": [12, 0],
    },
    # The RAG set (docs/rag.md): three services sharing the Ada card.
    "rag-example": {
        "name": "NVIDIA RTX 6000 Ada Generation",
        "memory_total": 49140 * MIB,
        "pci_device_id": "0x26B110DE",
        "compute_capability": [8, 9],
    },
}


def sh(cmd, cwd, env=None, timeout=900):
    r = subprocess.run(
        cmd,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        universal_newlines=True,
        timeout=timeout,
        check=False,
    )
    return r.returncode, r.stdout


def docker(*args, **kw):
    return subprocess.run(
        ("docker",) + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False, **kw
    )


def recap(out, host):
    lines = [ln for ln in out.splitlines() if re.match(r"^%s\s+:\s+ok=" % re.escape(host), ln)]
    assert lines, "no recap for %s in:\n%s" % (host, out[-3000:])
    return dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", lines[-1]))


def group_vars(inventory):
    with open(os.path.join(ROOT, "inventories", inventory, "group_vars", "vllm_servers.yml")) as f:
        return yaml.safe_load(f)


def hosts_of(inventory):
    with open(os.path.join(ROOT, "inventories", inventory, "hosts.yml")) as f:
        return list(yaml.safe_load(f)["all"]["children"]["vllm_servers"]["hosts"])


@pytest.fixture(scope="module")
def env():
    """The operator's environment in the bundle root: its own ansible.cfg decides (nothing of ours exported)."""
    e = dict(
        (k, v)
        for k, v in os.environ.items()
        if not k.startswith("ANSIBLE_") and k not in ("AIRGAP_TEST_BUNDLE", "PYTHONPATH")
    )
    e.update(ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", PY_COLORS="0")
    return e


@pytest.fixture(scope="module")
def bundle():
    rc, out = sh(["bash", "tests/world/build.sh"], ROOT, timeout=1800)
    assert rc == 0, out[-3000:]
    rc, out = sh(
        [
            "ansible-playbook",
            "playbooks/bundle_build.yml",
            "-e",
            "@tests/world/bundle-vars.yml",
            "-e",
            "bundle_build_dir=" + BUNDLE,
        ],
        ROOT,
        timeout=1800,
    )
    assert rc == 0, out[-3000:]
    return BUNDLE


@pytest.fixture(scope="module")
def host():
    """One simulated Kylin host for every inventory (a --check run changes nothing on it)."""
    docker("rm", "-f", NAME)
    args = ["run", "-d", "--name", NAME, "--hostname", NAME, "--network", "none"]
    r = docker(*(args + systemd_flags() + [IMAGE, "/lib/systemd/systemd"]))
    assert r.returncode == 0, r.stderr
    for dummy in range(60):
        state = docker("exec", NAME, "systemctl", "is-system-running").stdout.strip()
        if state in ("running", "degraded"):
            break
        subprocess.call(["sleep", "1"])
    assert state in ("running", "degraded"), "systemd in %s: %s" % (NAME, state)
    yield NAME
    docker("rm", "-f", NAME)


@pytest.fixture(scope="module")
def host_facts(tmp_path_factory):
    with open(os.path.join(ROOT, "inventories", "simulated", "group_vars", "vllm_servers.yml")) as f:
        simulated = yaml.safe_load(f)
    path = str(tmp_path_factory.mktemp("shipped") / "simulated-host.yml")
    with open(path, "w") as f:
        yaml.safe_dump(dict((k, simulated[k]) for k in HOST_FACTS), f)
    return path


def test_there_are_three_shipped_setups():
    assert SHIPPED == ["kylin-prod", "rag-example", "rtx-pro-6000"]


@pytest.mark.parametrize("inventory", SHIPPED)
def test_host_facts_are_no_setting_of_a_shipped_setup(inventory):
    assert not set(HOST_FACTS) & set(group_vars(inventory)), "the test would override a setting of the setup"
    assert group_vars(inventory)["bundle_path"] == "{{ inventory_dir }}/.."


def test_bundle_carries_every_shipped_inventory_verbatim(bundle):
    files = subprocess.run(
        ["git", "ls-files", "inventories"], cwd=ROOT, stdout=subprocess.PIPE, universal_newlines=True, check=True
    ).stdout.split()
    assert not os.path.exists(os.path.join(bundle, "simulated")), "the test host's inventory is not shipped"
    for inventory in SHIPPED:
        mine = [f for f in files if f.startswith("inventories/%s/" % inventory)]
        assert mine, inventory
        for rel in mine:
            copy = os.path.join(bundle, os.path.relpath(rel, "inventories"))
            assert os.path.isfile(copy), "%s is not in the bundle root" % copy
            with open(os.path.join(ROOT, rel), "rb") as a, open(copy, "rb") as b:
                assert a.read() == b.read(), "%s differs from %s" % (copy, rel)


@pytest.mark.parametrize("inventory", SHIPPED)
def test_inventory_lists_from_the_bundle_root(bundle, env, inventory):
    rc, out = sh(["ansible-inventory", "-i", inventory, "--list"], bundle, env, timeout=120)
    assert rc == 0, out
    data = json.loads(out[out.index("{") :])
    assert sorted(data["vllm_servers"]["hosts"]) == sorted(hosts_of(inventory))
    hostvars = data["_meta"]["hostvars"][hosts_of(inventory)[0]]
    assert hostvars["bundle_path"] == "{{ inventory_dir }}/.."
    assert hostvars["vllm_plan_concurrency"] == group_vars(inventory)["vllm_plan_concurrency"]


@pytest.mark.parametrize("inventory", SHIPPED)
def test_site_check_from_the_bundle_root(bundle, env, host, host_facts, inventory, tmp_path):
    state = json.loads(docker("exec", host, "cat", "/etc/fake-nvidia/state.json").stdout)
    state["gpus"][0].update(CARDS[inventory])
    r = docker("exec", "-i", host, "sh", "-c", "cat > /etc/fake-nvidia/state.json", input=json.dumps(state))
    assert r.returncode == 0, r.stderr
    settings = group_vars(inventory)
    name = hosts_of(inventory)[0]
    # In the control node's state directory (airgap_vllm_controller_dir), never on the bundle medium.
    state_dir = str(tmp_path / "controller")
    key_file = os.path.join(state_dir, "credentials", inventory, "vllm-api-key")

    # The simulated host's disk is the build machine's, shared with everything else on it: a setup's real
    # disk needs (preflight_disk_requirements, 40 GB for the model) fit there only while it has room, and
    # that moves while other work runs. Measured before and after the run.
    need = max(d["min_free_gb"] for d in settings["preflight_disk_requirements"])
    before = free_gib(host)
    rc, out = sh(
        [
            "ansible-playbook",
            "site.yml",
            "-i",
            inventory,
            "--check",
            "-e",
            "ansible_connection=community.docker.docker",
            "-e",
            "ansible_host=" + host,
            "-e",
            "airgap_vllm_controller_dir=" + state_dir,
            "-e",
            "@" + host_facts,
        ],
        bundle,
        env,
        timeout=900,
    )
    after = free_gib(host)
    result = recap(out, name)
    assert result["unreachable"] == 0, result
    # Validation passed: every variable of the setup, the bundle at inventory_dir/.., the connection.
    assert re.search(
        r"TASK \[Check the variables, the bundle and the connection\] \*+\nok: \[%s\]" % re.escape(name), out
    ), out[:3000]
    assert "no role reads it" not in out, "a setting of %s is read by no role" % inventory
    if re.search(r"Preflight failed 1 check\(s\):\s+\[disk\]", out):
        # The documented stop, and only when the disk really was short: preflight's one table, the disk line
        # failing with what the setup needs, nothing after it.
        assert min(before, after) < need + 0.5, "disk stop with %.1f/%.1f GiB free" % (before, after)
        assert rc != 0 and out.count("fatal: [") == 1, out[-5000:]
        assert re.search(r"disk\s+FAIL\s+.*need\s+%.1f" % need, out, re.S), out[-5000:]
        # Only the read-only driver reading of the summary play (before the rollout) may name the driver role.
        after_stop = out.split("Preflight failed", 1)[1]
        assert "TASK [airgap.vllm.nvidia_driver" not in after_stop, "the run went on after the failed preflight"
        assert_host_unchanged(host)
        return
    assert max(before, after) >= need - 0.5, "passed with %.1f/%.1f GiB free" % (before, after)
    assert rc == 0, out[-5000:]
    assert result["failed"] == 0, result
    # Preflight on the setup's card, port and disks.
    device = CARDS[inventory]["pci_device_id"][2:6].lower()
    assert re.search(r"gpu_present\s+OK\s+1\s+NVIDIA\s+GPU\(s\):.{0,200}?10de:%s" % device, out, re.S), out[-6000:]
    # Every service's port (the host's one service, or each of airgap_vllm_services).
    for service in settings.get("airgap_vllm_services") or [settings]:
        assert re.search(r"port\s+%d\s+free" % service["vllm_service_port"], out), service["vllm_service_port"]
    for disk in settings["preflight_disk_requirements"]:
        pattern = r"%s\s+\(on [^)]*\):\s+[\d.]+\s+GiB\s+free,\s+need\s+%.1f" % (
            re.escape(disk["path"]),
            disk["min_free_gb"],
        )
        assert re.search(pattern, out), disk
    # The driver and toolkit from the bundle, the model and the image: predicted, not done.
    assert re.search(
        r"Would\s+install\s+NVIDIA\s+driver\s+%s\s+with\s+\S*/NVIDIA-Linux-x86_64-%s\.run"
        % ((re.escape(settings["nvidia_driver_version"]),) * 2),
        out,
    ), out[-6000:]
    assert "Would install libnvidia-container1-" in out
    assert "a real run would import it" in out and "a real run would load it" in out
    # The documented stop of --check on a host without the model: no plan, so no service stage.
    assert re.search(r"TASK \[airgap.vllm.vllm_plan : Plan the flags and the memory ledger\] \*+\nskipping", out), out[
        -6000:
    ]
    # The API key was generated in the control node's state directory, private.
    mode = stat.S_IMODE(os.stat(key_file).st_mode)
    assert mode == 0o600, oct(mode)
    mode = stat.S_IMODE(os.stat(os.path.dirname(key_file)).st_mode)
    assert mode == 0o700, oct(mode)
    with open(key_file) as f:
        assert re.match(r"^[A-Za-z0-9]{48}$", f.read().strip())
    assert_host_unchanged(host)


def free_gib(host):
    """Free GiB on the simulated host's / (where preflight measures /var/lib/docker and /opt/airgap-vllm)."""
    df = docker("exec", host, "df", "-Pk", "/").stdout.splitlines()[-1].split()
    return int(df[3]) / float(1 << 20)


def assert_host_unchanged(host):
    """--check changed nothing on the host."""
    for path in (
        "/var/lib/airgap-vllm",
        "/opt/airgap-vllm",
        "/etc/airgap-vllm",
        "/etc/modprobe.d/blacklist-nouveau.conf",
    ):
        assert docker("exec", host, "test", "-e", path).returncode != 0, "%s was created by --check" % path
