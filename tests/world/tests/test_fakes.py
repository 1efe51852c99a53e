"""Behaviour of the test world's fakes: they must fail the way NVIDIA's real tools fail."""

import json
import os

import pytest

from worldlib import FAKES, KYLIN_KERNEL, NEW_DRIVER, OLD_DRIVER, sh

RUN = "/opt/fakes/NVIDIA-Linux-x86_64-%s.run" % NEW_DRIVER
GOOD_FLAGS = (
    "-s --no-questions --ui=none --accept-license --dkms --no-x-check -k %s --kernel-source-path="
    "/lib/modules/%s/build -M open --no-opengl-files --no-drm --systemd" % (KYLIN_KERNEL, KYLIN_KERNEL)
)
NVIDIA_RPMS = "nvidia-driver nvidia-driver-cuda nvidia-driver-libs kmod-nvidia-latest-dkms"
CTK = os.path.join(FAKES, "toolkit", "nvidia-ctk")
LSPCI = os.path.join(FAKES, "pci", "lspci")
STATE = os.path.join(FAKES, "state.json")


def remove_rpm_driver(c):
    c.run("rpm -e %s" % NVIDIA_RPMS, check=True)


# ------------------------------------------------------------------------------------------ .run, on the host
@pytest.mark.parametrize("flag", ["--force", "--yes", "-y", "--silent-mode", "--kernel-module-type"])
def test_run_rejects_unknown_or_incomplete_flags(built, flag):
    # Parsing happens before anything is touched, so this is safe to run on the build host.
    p = sh(["sh", str(built / ("NVIDIA-Linux-x86_64-%s.run" % NEW_DRIVER)), "-s", flag])
    assert p.returncode == 1
    assert "ERROR: Invalid commandline, please run `nvidia-installer --help`" in p.stderr
    assert flag in p.stderr


def test_run_version_and_extract(built, tmp_path):
    run = str(built / ("NVIDIA-Linux-x86_64-%s.run" % NEW_DRIVER))
    p = sh(["sh", run, "--version"])
    assert p.returncode == 0 and "nvidia-installer:  version %s" % NEW_DRIVER in p.stdout
    p = sh(["sh", run, "--check"])
    assert p.returncode == 0, p.stderr
    p = sh(["sh", run, "-x"], cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    pkg = tmp_path / ("NVIDIA-Linux-x86_64-%s" % NEW_DRIVER)
    assert (pkg / "nvidia-installer").is_file()
    assert (pkg / ("libnvidia-ml.so.%s" % NEW_DRIVER)).is_file()
    assert 'PACKAGE_VERSION="%s"' % NEW_DRIVER in (pkg / "kernel" / "dkms.conf").read_text()


# --------------------------------------------------------------------------------- .run, in a Kylin container
@pytest.mark.world
def test_run_records_flags_and_aborts_on_alternate_install(kylin):
    p = kylin.run("sh %s %s" % (RUN, GOOD_FLAGS))
    assert p.returncode == 1
    assert (
        "The installation was canceled due to the availability or presence of an alternate driver "
        "installation." in p.stderr
    )
    log = kylin.read("/var/log/nvidia-installer.log")
    cmdline = log.split("nvidia-installer command line:\n", 1)[1]
    for flag in GOOD_FLAGS.split():
        assert "\n    %s\n" % flag in cmdline
    # Nothing of the new driver landed.
    assert kylin.run("ls /usr/lib64/libnvidia-ml.so.%s" % NEW_DRIVER).returncode != 0


@pytest.mark.world
def test_rpm_removal_unregisters_dkms_then_loaded_module_blocks(kylin):
    assert "nvidia/%s, %s, x86_64: installed" % (OLD_DRIVER, KYLIN_KERNEL) in kylin.run("dkms status").stdout
    remove_rpm_driver(kylin)
    assert "nvidia" not in kylin.run("dkms status").stdout
    assert kylin.run("test -e /usr/lib/nvidia/alternate-install-present").returncode == 1
    p = kylin.run("sh %s %s" % (RUN, GOOD_FLAGS + " --no-cc-version-check"))
    assert p.returncode == 1
    assert "An NVIDIA kernel module 'nvidia' appears to already be loaded in your kernel" in p.stderr


@pytest.mark.world
def test_run_needs_kernel_tree_dkms_and_matching_compiler(kylin):
    remove_rpm_driver(kylin)
    kylin.set_state(kernel_module_version=None)
    # Default kernel = the container's (host's) uname -r, which has no devel tree.
    p = kylin.run("sh %s -s --dkms" % RUN)
    assert p.returncode == 1 and "Unable to find the kernel source tree" in p.stderr
    p = kylin.run("sh %s -s --dkms -k %s" % (RUN, KYLIN_KERNEL))
    assert p.returncode == 1 and "The CC version check failed" in p.stderr
    kylin.run("mv /usr/sbin/dkms /usr/sbin/dkms.hidden", check=True)
    p = kylin.run("sh %s -s --dkms --no-cc-version-check -k %s" % (RUN, KYLIN_KERNEL))
    assert p.returncode == 1 and "Failed to find dkms on the system!" in p.stderr


@pytest.mark.world
def test_disable_nouveau_writes_blacklist_and_asks_for_reboot(kylin):
    remove_rpm_driver(kylin)
    kylin.set_state(kernel_module_version=None, nouveau_loaded=True)
    base = "sh %s -s --dkms --no-cc-version-check -k %s" % (RUN, KYLIN_KERNEL)
    p = kylin.run(base)
    assert p.returncode == 1 and "The Nouveau kernel driver is currently in use" in p.stderr
    assert kylin.run("ls /etc/modprobe.d/nvidia-installer-disable-nouveau.conf").returncode != 0
    p = kylin.run(base + " -Z")
    assert p.returncode == 1 and "reboot your system" in p.stderr
    for path in (
        "/etc/modprobe.d/nvidia-installer-disable-nouveau.conf",
        "/usr/lib/modprobe.d/nvidia-installer-disable-nouveau.conf",
    ):
        text = kylin.read(path)
        assert "blacklist nouveau" in text and "options nouveau modeset=0" in text
    kylin.run("/opt/fakes/fake-reboot", check=True)
    assert kylin.state()["nouveau_loaded"] is False
    assert kylin.run(base).returncode == 0


@pytest.mark.world
def test_install_gives_library_nvml_reports_then_uninstall(kylin):
    remove_rpm_driver(kylin)
    kylin.set_state(kernel_module_version=None)  # old module unloaded
    p = kylin.run("sh %s %s --no-cc-version-check" % (RUN, GOOD_FLAGS))
    assert p.returncode == 0, p.stderr
    assert "nvidia/%s, %s, x86_64: installed" % (NEW_DRIVER, KYLIN_KERNEL) in kylin.run("dkms status").stdout
    assert (
        kylin.run("readlink /usr/lib64/libnvidia-ml.so.1", check=True).stdout.strip()
        == "libnvidia-ml.so.%s" % NEW_DRIVER
    )
    # The installer does not load the new module: NVML still sees no driver until a reboot.
    p = kylin.run("nvidia-smi")
    assert p.returncode == 9
    kylin.run("/opt/fakes/fake-reboot", check=True)
    p = kylin.run("nvidia-smi --query-gpu=driver_version,name --format=csv,noheader", check=True)
    assert p.stdout.strip() == "%s, NVIDIA RTX 6000 Ada Generation" % NEW_DRIVER
    assert kylin.run("test -x /usr/bin/nvidia-uninstall").returncode == 0
    p = kylin.run("nvidia-uninstall -s")
    assert p.returncode == 0, p.stderr
    assert "nvidia" not in kylin.run("dkms status").stdout
    assert kylin.run("ls /usr/lib64/libnvidia-ml.so.* /usr/bin/nvidia-smi /usr/bin/nvidia-uninstall").returncode != 0
    assert "nvidia-uninstall" in kylin.read("/var/log/nvidia-uninstall.log")


@pytest.mark.world
def test_install_without_dkms_builds_the_module_into_the_kernel_tree(kylin):
    remove_rpm_driver(kylin)
    kylin.set_state(kernel_module_version=None)
    p = kylin.run("sh %s -s --no-dkms -k %s --no-cc-version-check --log-file-name=/root/i.log" % (RUN, KYLIN_KERNEL))
    assert p.returncode == 0, p.stderr
    ko = "/lib/modules/%s/kernel/drivers/video/nvidia.ko" % KYLIN_KERNEL
    assert kylin.run("modinfo -F version %s" % ko, check=True).stdout.strip() == NEW_DRIVER
    assert "nvidia" not in kylin.run("dkms status").stdout
    assert "--no-dkms" in kylin.read("/root/i.log")
    kylin.run("nvidia-installer --uninstall -s", check=True)
    assert kylin.run("test -e %s" % ko).returncode == 1


@pytest.mark.world
def test_skip_module_unload_leaves_version_mismatch_until_reboot(kylin):
    remove_rpm_driver(kylin)
    p = kylin.run("sh %s %s --no-cc-version-check --skip-module-unload" % (RUN, GOOD_FLAGS))
    assert p.returncode == 0, p.stderr
    p = kylin.run("nvidia-smi")
    assert p.returncode == 18
    assert "Driver/library version mismatch" in p.stdout + p.stderr
    kylin.run("/opt/fakes/fake-reboot", check=True)
    assert kylin.run("nvidia-smi").returncode == 0


def smi_persistence(c):
    return c.run("nvidia-smi --query-gpu=persistence_mode --format=csv,noheader", check=True).stdout.strip()


@pytest.mark.world
def test_persistenced_turns_persistence_mode_on_while_it_runs(kylin):
    """The .run's nvidia-persistenced (no unit, a sample tarball) forks, writes its pid file as --user, and NVML
    says Enabled while it lives: stopped, killed or started with --no-persistence-mode it says Disabled."""
    remove_rpm_driver(kylin)
    kylin.set_state(kernel_module_version=None)
    kylin.run("sh %s %s --no-cc-version-check" % (RUN, GOOD_FLAGS), check=True)
    assert kylin.run("test -x /usr/bin/nvidia-persistenced").returncode == 0
    assert (
        kylin.run("ls /etc/systemd/system/nvidia-persistenced* /usr/lib/systemd/system/nvidia-persistenced*").returncode
        != 0
    )
    listing = kylin.run(
        "tar -tjf /usr/share/doc/NVIDIA_GLX-1.0/samples/nvidia-persistenced-init.tar.bz2", check=True
    ).stdout
    assert "nvidia-persistenced-init/systemd/nvidia-persistenced.service.template" in listing
    # No driver loaded yet: the daemon cannot start.
    p = kylin.run("nvidia-persistenced")
    assert p.returncode == 1 and "failed to initialize" in p.stderr
    kylin.run("/opt/fakes/fake-reboot", check=True)
    assert smi_persistence(kylin) == "Disabled"
    p = kylin.run("nvidia-persistenced --user nvidia-persistenced")
    assert p.returncode == 1 and "Failed to find user ID for user 'nvidia-persistenced'" in p.stderr
    assert kylin.run("nvidia-persistenced --bogus").returncode == 1
    kylin.run("useradd -r -M -d / -s /sbin/nologin nvidia-persistenced", check=True)
    kylin.run("nvidia-persistenced --user nvidia-persistenced --verbose", check=True)
    pid = kylin.read("/var/run/nvidia-persistenced/nvidia-persistenced.pid").strip()
    assert (
        kylin.run("stat -c %%U /proc/%s /var/run/nvidia-persistenced" % pid, check=True).stdout.split()
        == ["nvidia-persistenced"] * 2
    )
    assert smi_persistence(kylin) == "Enabled"
    # One fork, as NVIDIA's daemonize(): the daemon is the child that called setsid(), so it leads its session and
    # systemd's Type=forking guesses it as the main PID (a second fork left an intermediate to guess, under load).
    session = kylin.read("/proc/%s/stat" % pid).rsplit(")", 1)[1].split()[3]
    assert session == pid
    p = kylin.run("nvidia-persistenced")
    assert p.returncode == 1 and "Failed to lock PID file" in p.stderr
    # SIGTERM: the pid file goes; SIGKILL leaves it behind, naming a dead pid: Disabled either way.
    kylin.run("kill %s; sleep 1; test ! -e /var/run/nvidia-persistenced/nvidia-persistenced.pid" % pid, check=True)
    assert smi_persistence(kylin) == "Disabled"
    kylin.run("nvidia-persistenced", check=True)
    assert smi_persistence(kylin) == "Enabled"
    kylin.run("kill -9 $(cat /var/run/nvidia-persistenced/nvidia-persistenced.pid); sleep 0.5", check=True)
    assert smi_persistence(kylin) == "Disabled"
    kylin.run("rm -rf /var/run/nvidia-persistenced && nvidia-persistenced --no-persistence-mode", check=True)
    assert smi_persistence(kylin) == "Disabled"
    kylin.run("kill $(cat /var/run/nvidia-persistenced/nvidia-persistenced.pid); sleep 1", check=True)
    kylin.run("nvidia-uninstall -s", check=True)
    assert kylin.run("ls /usr/bin/nvidia-persistenced").returncode != 0


@pytest.mark.world
def test_persistenced_holds_the_nvidia_module_as_the_kernel_counts_it(kylin):
    """While the daemon runs nvidia is in use (one reference no GPU process accounts for) and the installer of
    another version refuses; nvidia_uvm stays free. Stopped, everything unloads."""
    kylin.run(
        "ln -sfn /opt/fakes/fake-kmod /usr/local/sbin/rmmod && ln -sfn /opt/fakes/fake-kmod /usr/local/sbin/modprobe"
        " && /opt/fakes/fake-reboot",
        check=True,
    )  # the planted 560 driver loaded
    kylin.run("useradd -r -M -d / -s /sbin/nologin nvidia-persistenced", check=True)
    # The RPM driver has no daemon: run the new one's by hand, as a host with both would.
    kylin.run(
        "cd /root && sh %s -x >/dev/null && NVIDIA-Linux-x86_64-%s/nvidia-persistenced --user nvidia-persistenced"
        % (RUN, NEW_DRIVER),
        check=True,
    )
    for module in ("nvidia_drm", "nvidia_modeset", "nvidia_uvm"):
        kylin.run("rmmod %s" % module, check=True)
    p = kylin.run("rmmod nvidia")
    assert p.returncode == 1 and p.stderr.strip() == "rmmod: ERROR: Module nvidia is in use"
    assert kylin.read("/etc/fake-nvidia/proc-modules").split()[:3] == ["nvidia", "54525952", "1"]
    remove_rpm_driver(kylin)
    p = kylin.run("sh %s %s --no-cc-version-check" % (RUN, GOOD_FLAGS))
    assert p.returncode == 1 and "appears to already be loaded" in p.stderr
    kylin.run("kill $(cat /var/run/nvidia-persistenced/nvidia-persistenced.pid); sleep 1", check=True)
    kylin.run("rmmod nvidia", check=True)
    assert kylin.read("/etc/fake-nvidia/proc-modules") == ""


def fabric_state(c):
    out = c.run("nvidia-smi -q", check=True).stdout
    return [line.split(":", 1)[1].strip() for line in out.splitlines() if line.strip().startswith("State ")]


@pytest.mark.world
def test_fabric_manager_needs_nvswitches_and_its_own_driver_version(kylin):
    """nv-fabricmanager (the fake RPM) refuses a host without NVSwitches and a driver of another version in the real
    daemon's words; on an HGX H100 it forks, logs its success line, NVML reports the fabric Completed while it runs
    (Not Started otherwise, N/A on a GPU without NVSwitches) and the nvidia module is in use."""
    remove_rpm_driver(kylin)
    kylin.set_state(kernel_module_version=None)
    kylin.run("sh %s %s --no-cc-version-check" % (RUN, GOOD_FLAGS), check=True)
    kylin.run("ln -sfn /opt/fakes/fake-kmod /usr/local/sbin/rmmod && /opt/fakes/fake-reboot", check=True)
    kylin.run("rpm -i /opt/fakes/fabricmanager/nvidia-fabric-manager-%s-1.x86_64.rpm" % NEW_DRIVER, check=True)
    assert (
        kylin.run("nv-fabricmanager --version", check=True).stdout.strip()
        == "Fabric Manager version is : %s" % NEW_DRIVER
    )
    assert fabric_state(kylin) == ["N/A"]
    cfg = "/usr/share/nvidia/nvswitch/fabricmanager.cfg"
    p = kylin.run("nv-fabricmanager -c %s" % cfg)
    assert p.returncode == 1 and p.stderr.strip() == (
        "request to query NVSwitch device information from NVSwitch driver failed with error:WARNING Nothing to do "
        "[NV_WARN_NOTHING_TO_DO]"
    )
    gpu = dict(
        json.loads(kylin.read("/etc/fake-nvidia/state.json"))["gpus"][0],
        name="NVIDIA H100 80GB HBM3",
        pci_device_id="0x233010DE",
        compute_capability=[9, 0],
    )
    kylin.set_state(gpus=[gpu], nvswitches=[{"pci_bus_id": "00000000:05:00.0", "pci_device_id": "0x22A310DE"}])
    assert "GH100 [H100 NVSwitch] [10de:22a3]" in kylin.run("lspci -nn -d 10de::0680", check=True).stdout
    assert fabric_state(kylin) == ["Not Started"]
    kylin.run("nv-fabricmanager -c %s" % cfg, check=True)
    assert fabric_state(kylin) == ["Completed"]
    # One fork: the daemon leads its own session, the main PID systemd's Type=forking guesses.
    pid = kylin.run("pgrep -o -f 'nv-fabricmanager -c'", check=True).stdout.strip()
    assert kylin.read("/proc/%s/stat" % pid).rsplit(")", 1)[1].split()[3] == pid
    assert "Successfully configured all the available NVSwitches" in kylin.read("/var/log/fabricmanager.log")
    p = kylin.run("nv-fabricmanager -c %s" % cfg)
    assert p.returncode == 1 and "already in use" in p.stderr
    for module in ("nvidia_drm", "nvidia_modeset", "nvidia_uvm"):
        kylin.run("rmmod %s" % module, check=True)
    p = kylin.run("rmmod nvidia")
    assert p.returncode == 1 and p.stderr.strip() == "rmmod: ERROR: Module nvidia is in use"
    kylin.run("pkill -x -f 'python3 /usr/bin/nv-fabricmanager -c %s'; sleep 1" % cfg)
    assert fabric_state(kylin) == ["Not Started"]
    kylin.run("rmmod nvidia", check=True)
    kylin.set_state(kernel_module_version="570.172.08")
    p = kylin.run("nv-fabricmanager -c %s" % cfg)
    assert p.returncode == 1 and p.stderr.strip() == (
        "fabric manager NVIDIA GPU driver interface version %s don't match with driver version 570.172.08. "
        "Please update with matching NVIDIA driver package." % NEW_DRIVER
    )


# ------------------------------------------------------------------------------------------------ nvidia-ctk
def ctk(*args):
    return sh(["python3", CTK] + list(args))


def test_ctk_keeps_other_keys_and_writes_sorted_four_space_json(tmp_path):
    cfg = tmp_path / "daemon.json"
    cfg.write_text(
        '{"storage-driver": "vfs", "runtimes": {"nvidia": {"path": "/old"}, "crun": {"path": "crun"}},'
        ' "log-opts": {"max-size": "10m"}}'
    )
    p = ctk("runtime", "configure", "--runtime=docker", "--config=%s" % cfg)
    assert p.returncode == 0, p.stderr
    text = cfg.read_text()
    data = json.loads(text)
    assert data == {
        "storage-driver": "vfs",
        "log-opts": {"max-size": "10m"},
        "runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}, "crun": {"path": "crun"}},
    }
    assert text == json.dumps(data, indent=4, sort_keys=True)
    assert text.startswith('{\n    "log-opts": {\n        "max-size": "10m"\n    },\n    "runtimes"')


def test_ctk_set_as_default_dry_run_and_missing_file(tmp_path):
    cfg = tmp_path / "docker" / "daemon.json"
    p = ctk("runtime", "configure", "--runtime", "docker", "--config", str(cfg), "--set-as-default", "--dry-run")
    assert p.returncode == 0 and not cfg.exists()
    assert json.loads(p.stdout)["default-runtime"] == "nvidia"
    p = ctk("runtime", "configure", "--runtime=docker", "--config=%s" % cfg)
    assert p.returncode == 0, p.stderr
    assert json.loads(cfg.read_text()) == {"runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}}}


@pytest.mark.parametrize("content", ['{"a": 1,', "not json", "[1, 2]"])
def test_ctk_fails_on_unparsable_json_and_leaves_it(tmp_path, content):
    cfg = tmp_path / "daemon.json"
    cfg.write_text(content)
    p = ctk("runtime", "configure", "--runtime=docker", "--config=%s" % cfg)
    assert p.returncode != 0
    assert "could not load config" in p.stderr
    assert cfg.read_text() == content


def test_ctk_rejects_unknown_flags(tmp_path):
    p = ctk("runtime", "configure", "--runtime=docker", "--config=%s" % (tmp_path / "d.json"), "--restart")
    assert p.returncode != 0 and "flag provided but not defined: -restart" in p.stderr
    assert not (tmp_path / "d.json").exists()


# ---------------------------------------------------------------------------------------------- RPM metadata
def qp(path, fmt):
    return sh(["rpm", "-qp", "--qf", fmt, str(path)]).stdout


def test_old_driver_rpms_metadata(built):
    rpms = {qp(p, "%{NAME}"): p for p in (built / "driver").glob("*.rpm")}
    assert set(rpms) == {"nvidia-driver", "nvidia-driver-libs", "nvidia-driver-cuda", "kmod-nvidia-latest-dkms"}
    evr = "3:%s-1.el8" % OLD_DRIVER
    for path in rpms.values():
        assert qp(path, "%{EPOCH}:%{VERSION}-%{RELEASE} %{ARCH}") == evr + " x86_64"
        assert "/usr/lib/nvidia/alternate-install-present" in sh(["rpm", "-qpl", str(path)]).stdout.split()
    reqs = sh(["rpm", "-qpR", str(rpms["nvidia-driver"])]).stdout.splitlines()
    assert "nvidia-driver-libs = %s" % evr in reqs and "kmod-nvidia-latest-dkms = %s" % evr in reqs
    files = sh(["rpm", "-qpl", str(rpms["nvidia-driver-libs"])]).stdout.split()
    assert "/usr/lib64/libnvidia-ml.so.%s" % OLD_DRIVER in files and "/usr/bin/nvidia-smi" in files
    scripts = sh(["rpm", "-qp", "--scripts", str(rpms["kmod-nvidia-latest-dkms"])]).stdout
    assert "dkms add -m nvidia -v %s" % OLD_DRIVER in scripts and "dkms remove -m nvidia" in scripts


def test_toolkit_rpms_require_exact_version_release(built):
    rpms = {qp(p, "%{NAME}"): p for p in (built / "toolkit").glob("*.rpm")}
    assert set(rpms) == {
        "libnvidia-container1",
        "libnvidia-container-tools",
        "nvidia-container-toolkit-base",
        "nvidia-container-toolkit",
    }
    for path in rpms.values():
        assert qp(path, "%{VERSION}-%{RELEASE}") == "1.17.8-1"
    reqs = set(sh(["rpm", "-qpR", str(rpms["nvidia-container-toolkit"])]).stdout.splitlines())
    assert {
        "nvidia-container-toolkit-base = 1.17.8-1",
        "libnvidia-container-tools = 1.17.8-1",
        "libnvidia-container1 = 1.17.8-1",
    } <= reqs
    assert "/usr/bin/nvidia-ctk" in sh(["rpm", "-qpl", str(rpms["nvidia-container-toolkit-base"])]).stdout.split()
    assert "/usr/bin/nvidia-container-runtime" in sh(["rpm", "-qpl", str(rpms["nvidia-container-toolkit"])]).stdout


@pytest.mark.world
def test_toolkit_installs_offline_with_dnf_in_order_only(kylin):
    # rpm refuses the top package alone: the exact-version requires are real.
    p = kylin.run("rpm -i --test /opt/fakes/toolkit/nvidia-container-toolkit-1.17.8-1.x86_64.rpm")
    assert p.returncode != 0 and "nvidia-container-toolkit-base = 1.17.8-1 is needed" in p.stderr
    kylin.run(
        "printf '[local]\\nname=local\\nbaseurl=file:///opt/fakes/toolkit\\ngpgcheck=0\\n' "
        "> /etc/yum.repos.d/local.repo",
        check=True,
    )
    kylin.run("dnf -y -q --disablerepo='*' --enablerepo=local install nvidia-container-toolkit", check=True)
    assert kylin.run("nvidia-ctk --version", check=True).stdout.startswith(
        "NVIDIA Container Toolkit CLI version 1.17.8"
    )
    kylin.run("echo '{\"data-root\": \"/srv/docker\"}' > /etc/docker/daemon.json", check=True)
    kylin.run("nvidia-ctk runtime configure --runtime=docker --set-as-default", check=True)
    assert json.loads(kylin.read("/etc/docker/daemon.json")) == {
        "data-root": "/srv/docker",
        "default-runtime": "nvidia",
        "runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}},
    }
    assert "runc version" in kylin.run("nvidia-container-runtime --version", check=True).stdout


@pytest.mark.world
def test_docker_runs_a_container_through_the_nvidia_runtime(kylin_systemd):
    c = kylin_systemd
    c.run("rpm -i /opt/fakes/toolkit/*.rpm", check=True)
    c.run("nvidia-ctk runtime configure --runtime=docker && systemctl restart docker", check=True)
    assert " nvidia " in c.run("docker info", check=True).stdout.split("Runtimes:", 1)[1].split("\n", 1)[0] + " "
    c.run(
        "cd /root && printf 'int puts(const char *);int main(void){puts(\"via nvidia\");return 0;}' > h.c"
        " && gcc -static -o hello h.c && tar -c hello | docker import - tiny:1",
        check=True,
    )
    assert c.run("docker run --rm --runtime nvidia tiny:1 /hello", check=True).stdout == "via nvidia\n"


@pytest.mark.world
def test_gpu_containers_hold_fake_gpu_memory_until_they_stop(kylin_systemd):
    """The runtime plays the GPU's part: NVML sees a running GPU container's memory under its pid (and so
    its container), vLLM's share from its --gpu-memory-utilization, and the memory comes back at stop."""
    c = kylin_systemd
    c.run("rpm -i /opt/fakes/toolkit/*.rpm", check=True)
    c.run("nvidia-ctk runtime configure --runtime=docker && systemctl restart docker", check=True)
    c.run(
        "cd /root && printf 'int pause(void);int main(void){pause();return 0;}' > p.c"
        " && gcc -static -o vllm p.c && cp vllm other && tar -c vllm other | docker import - tiny:1",
        check=True,
    )

    def gpu():
        return json.loads(c.read("/etc/fake-nvidia/state.json"))["gpus"][0]

    total = gpu()["memory_total"]
    c.run(
        "docker run -d --name serving --runtime nvidia -e NVIDIA_VISIBLE_DEVICES=all tiny:1 "
        "/vllm serve /m --gpu-memory-utilization 0.5",
        check=True,
    )
    c.run(
        "docker run -d --name other --runtime nvidia -e NVIDIA_VISIBLE_DEVICES=0 "
        "-e FAKE_GPU_MEMORY_BYTES=1073741824 tiny:1 /other",
        check=True,
    )
    c.run("docker run -d --name cpu-only --runtime nvidia tiny:1 /other", check=True)
    g = gpu()
    pids = {int(c.run("docker inspect -f '{{.State.Pid}}' %s" % n, check=True).stdout): n for n in ("serving", "other")}
    held = {pids[p["pid"]]: p["used_memory"] for p in g["processes"]}
    assert held == {"serving": int(total * 0.5), "other": 1073741824}, g
    assert g["memory_used"] == int(total * 0.5) + 1073741824
    # nvml_info attributes a process to its container by the pid's cgroup.
    serving_id = c.run("docker inspect -f '{{.Id}}' serving", check=True).stdout.strip()
    cgroup = c.read("/proc/%d/cgroup" % [p for p, n in pids.items() if n == "serving"][0])
    assert serving_id in cgroup
    c.run("docker stop -t 1 serving && docker rm serving", check=True)
    g = gpu()
    assert [pids[p["pid"]] for p in g["processes"]] == ["other"] and g["memory_used"] == 1073741824
    c.run("docker rm -f other cpu-only", check=True)
    assert gpu()["processes"] == [] and gpu()["memory_used"] == 0


# ----------------------------------------------------------------------------------------------------- lspci
def lspci(*args):
    return sh(["python3", LSPCI] + list(args), env=dict(os.environ, FAKE_NVML_STATE=STATE))


def test_lspci_formats_and_filters():
    out = lspci("-nn", "-d", "10de:").stdout
    assert (
        out == "3b:00.0 VGA compatible controller [0300]: NVIDIA Corporation AD102GL [RTX 6000 Ada "
        "Generation] [10de:26b1] (rev a1)\n"
    )
    assert len(lspci().stdout.splitlines()) == 2  # the host bridge is there too
    assert lspci("-d", "8086:").stdout.startswith("00:00.0 Host bridge")
    assert lspci("-mm", "-D", "-d", "10de:26b1").stdout.startswith(
        '0000:3b:00.0 "VGA compatible controller" "NVIDIA Corporation" "AD102GL [RTX 6000 Ada Generation]" -ra1'
    )
    assert "Kernel driver in use: nvidia" in lspci("-k", "-s", "3b:00.0").stdout
    assert lspci("-d", "10de:1234").stdout == ""
    assert lspci("-z").returncode != 0
