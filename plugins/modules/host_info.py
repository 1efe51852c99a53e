#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: host_info
short_description: Kylin-aware host facts for the GPU roles
version_added: 0.1.0
description:
  - Distribution from os-release, the Kylin V10 service pack from C(/etc/.productinfo) or the codename
    (Tercel=SP1, Sword=SP2, Lance=SP3, Halberd=SP3), kernel release, target Python version, and the Docker
    engine version and registered runtimes from C(docker info).
  - The service pack is a name; C(V10) is never compared as a number.
options:
  kernel_release:
    description: Kernel release to report instead of the running one (tests run on another kernel).
    type: str
  os_release_path:
    description: os-release file.
    type: path
    default: /etc/os-release
  productinfo_path:
    description: Kylin product info file.
    type: path
    default: /etc/.productinfo
  docker:
    description: Query the Docker engine (C(docker info)).
    type: bool
    default: true
  docker_bin:
    description: Docker CLI to query (name on the PATH or absolute path).
    type: str
    default: docker
  pci:
    description:
      - List the NVIDIA GPUs and NVSwitches on the PCI bus (C(lspci -D -mm -nn -d 10de:)), which works with no
        driver loaded.
      - A GPU is a function of vendor 10de with a display-controller class (03xx), an NVSwitch one of class 0680;
        the rule lives in module_utils/host/_pci.py.
    type: bool
    default: false
  rpms:
    description:
      - Installed versions (C(version-release), no epoch or arch) of these RPM names, from one C(rpm -qa); a
        name not installed is absent from RV(rpms).
    type: list
    elements: str
    default: []
  files:
    description:
      - Read these small text files (up to 1 MiB each); RV(files) gives each one's content, null when absent.
    type: list
    elements: path
    default: []
  images:
    description:
      - Image references to resolve in the local Docker (C(docker image inspect)); RV(images) gives each one's
        image ID, null when absent. Needs O(docker).
    type: list
    elements: str
    default: []
  disk:
    description:
      - Paths whose free space to measure (of the nearest existing parent when a path does not exist yet, as
        C(df) would); RV(disk) gives bytes free and the mount point of each.
    type: list
    elements: path
    default: []
  listening:
    description: List the local TCP ports in LISTEN state (C(/proc/net/tcp) and C(tcp6); no C(ss) needed) as RV(listening_ports).
    type: bool
    default: false
  dev_char:
    description:
      - List the NVIDIA character devices (C(/dev/nvidia*), C(/dev/nvidia-caps/*)) and their C(/dev/char/MAJOR:MINOR)
        links as RV(dev_char) (module_utils/driver/_dev_char.py), for the systemd cgroup driver's daemon-reload hazard.
    type: bool
    default: false
  exists:
    description: Paths to look for (links followed); RV(exists) says whether each one exists.
    type: list
    elements: path
    default: []
  units:
    description:
      - systemd units to read (C(systemctl show)); RV(units) gives each one's state and whether it is started
        and enabled (module_utils/common/_unit_wait.py).
    type: list
    elements: str
    default: []
  paths:
    description:
      - Paths a role would write, with what it would write there; RV(paths) gives each one's state and
        RV(paths_differing) the ones a write would change (module_utils/common/_files.py), so a converged re-run
        reads every file of a configuration in one task.
      - Content is compared by SHA-1 only; nothing of a file's content is returned.
    type: list
    elements: dict
    default: []
    suboptions:
      path: {description: "The path (links are not followed).", type: path, required: true}
      type: {description: "What belongs there.", type: str, choices: [file, directory], default: file}
      mode: {description: "Permission bits, octal string.", type: str, required: true}
      uid: {description: "Owner.", type: int, default: 0}
      gid: {description: "Group.", type: int, default: 0}
      sha1: {description: "SHA-1 of the content a file must have; unset = any content.", type: str}
  nvidia_driver:
    description:
      - Read the NVIDIA driver's state in one pass (NVML, packaged driver RPMs, dkms, the .run's
        C(nvidia-installer --version), nouveau, C(nvidia-smi), the nouveau blacklist and the dnf module file)
        and say whether it is converged at O(nvidia_driver.version) (module_utils/driver/_driver_state.py).
    type: dict
    suboptions:
      version: {description: "Driver version wanted.", type: str, required: true}
      version_file: {description: "File giving the loaded kernel module's version.", type: path,
                     default: /proc/driver/nvidia/version}
      keep_rpms: {description: "Shell-style patterns of driver package names kept.", type: list, elements: str,
                  default: []}
      extra_rpms: {description: "More package names that count as the packaged driver.", type: list,
                   elements: str, default: []}
      blacklist_file: {description: "The nouveau blacklist file; empty: not managed.", type: path}
      blacklist_content: {description: "What O(nvidia_driver.blacklist_file) must hold.", type: str, default: ''}
      dnf_module_file: {description: "dnf's nvidia-driver module state file.", type: path,
                        default: /etc/dnf/modules.d/nvidia-driver.module}
      fabric_manager:
        description:
          - Whether the host needs NVIDIA Fabric Manager (C(auto) decides from the NVSwitches on the PCI bus and reads
            the bus even without O(pci)); when it does, its RPMs are kept from the driver clean-up. The decision is
            module_utils/driver/_fabric_manager.py's.
          - C(auto), C(true) or C(false) (a YAML boolean or its words yes, no, on, off).
        type: str
        default: 'false'
      kernel_release:
        description:
          - The kernel the driver install builds its module for. Given, the next boot's kernel is read offline from
            grub2's files (C(/boot/grub2/grubenv) next_entry/saved_entry, C(/etc/default/grub) GRUB_DEFAULT, the BLS
            entries in C(/boot/loader/entries) or C(/boot/grub2/grub.cfg); C(grubby --default-kernel) only when
            they name nothing) with the nvidia module built for it, and RV(nvidia_driver.next_kernel) says what
            the role does about it (module_utils/driver/_boot_kernel.py).
        type: str
      next_kernel:
        description: "What to do when the next boot's kernel has no nvidia module of O(nvidia_driver.version): build
          it, fail, or ignore it."
        type: str
        choices: [build, fail, ignore]
        default: build
extends_documentation_fragment:
  - airgap.vllm.attributes.read_only
author:
  - airgap.vllm maintainers (@airgap-vllm)
'''

EXAMPLES = r'''
- name: Read host facts
  airgap.vllm.host_info:
    kernel_release: "{{ preflight_kernel_release }}"
  register: __host

- name: Which files of a configuration a write would change (content compared by SHA-1)
  airgap.vllm.host_info:
    docker: false
    paths:
      - {path: /etc/airgap-vllm/vllm, type: directory, mode: "0700"}
      - {path: /etc/systemd/system/vllm.service, mode: "0644", sha1: "{{ lookup('ansible.builtin.template', 'vllm.service.j2') | hash('sha1') }}"}
  register: __config
'''

RETURN = r'''
distribution: {description: "NAME from os-release.", returned: always, type: str, sample: Kylin Linux Advanced Server}
distribution_id: {description: "ID from os-release.", returned: always, type: str, sample: kylin}
distribution_version: {description: "VERSION_ID from os-release (a string; V10 for Kylin).", returned: always,
                       type: str, sample: V10}
distribution_release: {description: "Codename from the os-release VERSION.", returned: always, type: str, sample: Lance}
kylin: {description: "Whether the host is Kylin.", returned: always, type: bool}
kylin_sp: {description: "Kylin V10 service pack (SP1, SP2, SP3) or null.", returned: always, type: str, sample: SP3}
kernel_release: {description: "Running kernel release, or I(kernel_release) when given.", returned: always, type: str,
                 sample: 4.19.90-52.22.v2207.ky10.x86_64}
python_version: {description: "Target Python version.", returned: always, type: str, sample: 3.7.9}
docker:
  description: Docker engine facts.
  returned: always
  type: dict
  contains:
    installed: {description: "docker CLI found.", type: bool, returned: always}
    running: {description: "The daemon answered.", type: bool, returned: always}
    error: {description: "Why the daemon did not answer.", type: str, returned: when not running}
    server_version: {description: "Engine version.", type: str, returned: when running, sample: 20.10.24}
    runtimes: {description: "Registered runtimes.", type: list, elements: str, returned: when running,
               sample: [io.containerd.runc.v2, nvidia, runc]}
    default_runtime: {description: "Default runtime.", type: str, returned: when running, sample: runc}
    logging_driver: {description: "Default logging driver.", type: str, returned: when running, sample: json-file}
    security_options: {description: "The engine's security options, null when it does not say.", type: list,
                       elements: str, returned: when running, sample: ["name=seccomp,profile=default"]}
    cgroup_driver: {description: "Cgroup driver.", type: str, returned: when running, sample: cgroupfs}
pci:
  description: NVIDIA GPUs on the PCI bus.
  returned: when I(pci=true)
  type: dict
  contains:
    lspci: {description: "lspci used (null when not found).", type: str, returned: always}
    error: {description: "Why the bus could not be read, or null.", type: str, returned: always}
    gpus:
      description: One entry per GPU function, in bus order.
      type: list
      elements: dict
      returned: always
      sample: [{slot: "0000:3b:00.0", class: "0300", class_name: VGA compatible controller, vendor: 10de,
                vendor_name: NVIDIA Corporation, device: 26b1, device_name: "AD102GL [RTX 6000 Ada Generation]"}]
    summary: {description: "One line per GPU for reports.", type: list, elements: str, returned: always,
              sample: ["0000:3b:00.0 AD102GL [RTX 6000 Ada Generation] [10de:26b1]"]}
    nvswitches: {description: "One entry per NVSwitch function (class 0680), in bus order, shaped like RV(pci.gpus).",
                 type: list, elements: dict, returned: always}
    nvswitch_summary: {description: "One line per NVSwitch for reports.", type: list, elements: str, returned: always,
                       sample: ["0000:07:00.0 GH100 [H100 NVSwitch] [10de:22a3]"]}
rpms:
  description: Installed versions of the O(rpms) names (several when several are installed).
  returned: when O(rpms) is not empty
  type: dict
  sample: {nvidia-container-toolkit: ["1.17.8-1"]}
rpm_error:
  description: Why C(rpm -qa) could not be read, or null.
  returned: when O(rpms) is not empty or O(nvidia_driver) is set
  type: str
files:
  description: Content of each O(files) path, null when absent (or unreadable, with a warning).
  returned: when O(files) is not empty
  type: dict
  sample: {/etc/docker/daemon.json: '{"runtimes": {}}'}
images:
  description: Image ID of each O(images) reference, null when absent.
  returned: when O(images) is not empty and Docker answered
  type: dict
  sample: {vllm/vllm-openai:v0.27.1: "sha256:fbe3f3727118..."}
images_error:
  description: Why O(images) could not be resolved (Docker not running, or the inspection failed), or null.
  returned: when O(images) is not empty
  type: str
disk:
  description: C(free) (bytes available, -1 when unreadable) and C(mount) of each O(disk) path.
  returned: when O(disk) is not empty
  type: dict
  sample: {/var/lib/docker: {free: 412316860416, mount: /}}
listening_ports:
  description: Local TCP ports in LISTEN state, sorted.
  returned: when O(listening) is true
  type: list
  elements: int
  sample: [22, 8000]
dev_char:
  description:
    - C(nodes) (C({path, major, minor}) of each NVIDIA character device), C(links) (C(MAJOR:MINOR) to the resolved
      target of its C(/dev/char) link, null when absent) and C(missing) (the device paths without a link).
  returned: when O(dev_char) is true
  type: dict
exists:
  description: Whether each O(exists) path exists.
  returned: when O(exists) is not empty
  type: dict
  sample: {/usr/bin/nvidia-ctk: true}
units:
  description: Each O(units) unit's C(LoadState), C(ActiveState), C(SubState), C(UnitFileState), C(started_enabled)
    (runs and starts at boot), C(started_at) (epoch seconds its current run started; null when not running) and
    C(needs_daemon_reload) (its unit file changed since systemd loaded it), or null when C(systemctl) is missing.
  returned: when O(units) is not empty
  type: dict
  sample: {vllm: {LoadState: loaded, ActiveState: active, SubState: running, UnitFileState: enabled,
                  started_enabled: true, started_at: 1796598000.5, needs_daemon_reload: false}}
paths:
  description: State of each O(paths) path - C(type) (file, directory, link, other), C(mode), C(uid), C(gid),
    C(sha1) (files) - or null when absent.
  returned: when O(paths) is not empty
  type: dict
  sample: {/etc/airgap-vllm/vllm: {type: directory, mode: '0700', uid: 0, gid: 0, sha1: null}}
paths_differing:
  description: The O(paths) paths whose type, mode, owner or content differ from what was given, in order.
  returned: when O(paths) is not empty
  type: list
  elements: str
  sample: [/etc/systemd/system/vllm.service]
nvidia_driver:
  description: The driver's state (O(nvidia_driver) set).
  returned: when O(nvidia_driver) is set
  type: dict
  contains:
    nvml: {description: "What airgap.vllm.nvml_info returns.", type: dict, returned: always}
    rpms: {description: "Installed packaged-driver RPM names (the container toolkit's kept).", type: list,
           elements: str, returned: always}
    installed_version: {description: "Version of the .run-installed driver, empty when none.", type: str,
                        returned: always}
    dkms_versions: {description: "nvidia versions dkms knows.", type: list, elements: str, returned: always}
    nouveau_loaded: {description: "The nouveau module is loaded.", type: bool, returned: always}
    blacklist_text: {description: "Content of the blacklist file, null when absent.", type: str, returned: always}
    dnf_module_reset: {description: "The dnf module file is absent or reset.", type: bool, returned: always}
    smi_rc: {description: "nvidia-smi exit status, null when not found.", type: int, returned: always}
    smi_output: {description: "nvidia-smi output (its first 2000 characters).", type: str, returned: always}
    pending: {description: "Why the driver is not converged; empty when it is.", type: list, elements: str,
              returned: always}
    next_kernel:
      description:
        - The next boot's kernel and what the role does about it (C(action) none, build, fail or ignore, C(kernel),
          C(how) it was found, C(reason), C(method) dkms or run, C(source_path), C(devel_package), C(needs_devel)
          when its kernel-devel tree is missing, C(module_version) and C(module_path) of the nvidia.ko built for it).
        - Not part of RV(nvidia_driver.converged), which is about the running driver.
      type: dict
      returned: when O(nvidia_driver.kernel_release) is set
      sample: {action: build, kernel: 4.19.90-89.11.v2401.ky10.x86_64,
               how: "grubenv saved_entry 'e2f...-4.19.90-89.11.v2401.ky10.x86_64' -> BLS entry e2f...-4.19.90-89.11.v2401.ky10.x86_64",
               method: dkms, source_path: /usr/src/kernels/4.19.90-89.11.v2401.ky10.x86_64,
               devel_package: kernel-devel-4.19.90-89.11.v2401.ky10.x86_64, needs_devel: false, module_version: null,
               module_path: null, reason: "..."}
    converged: {description: "Nothing left for the nvidia_driver role to change.", type: bool, returned: always}
    fabric_manager:
      description: Whether the host needs Fabric Manager (C(needed) true, false, or null when it cannot tell), why.
      type: dict
      returned: always
      sample: {needed: true, reason: "lspci shows 1 NVSwitch(es) (vendor 10de, class 0680): ...", nvswitches: []}
'''

from ansible_collections.airgap.vllm.plugins.module_utils.host._hostinfo import probe
from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module


@ansible_module(
    dict(
        kernel_release=dict(type='str'),
        os_release_path=dict(type='path', default='/etc/os-release'),
        productinfo_path=dict(type='path', default='/etc/.productinfo'),
        docker=dict(type='bool', default=True),
        docker_bin=dict(type='str', default='docker'),
        pci=dict(type='bool', default=False),
        rpms=dict(type='list', elements='str', default=[]),
        files=dict(type='list', elements='path', default=[]),
        images=dict(type='list', elements='str', default=[]),
        units=dict(type='list', elements='str', default=[]),
        disk=dict(type='list', elements='path', default=[]),
        listening=dict(type='bool', default=False),
        dev_char=dict(type='bool', default=False),
        exists=dict(type='list', elements='path', default=[]),
        paths=dict(
            type='list',
            elements='dict',
            default=[],
            options=dict(
                path=dict(type='path', required=True),
                type=dict(type='str', choices=['file', 'directory'], default='file'),
                mode=dict(type='str', required=True),
                uid=dict(type='int', default=0),
                gid=dict(type='int', default=0),
                sha1=dict(type='str'),
            ),
        ),
        nvidia_driver=dict(
            type='dict',
            options=dict(
                version=dict(type='str', required=True),
                version_file=dict(type='path', default='/proc/driver/nvidia/version'),
                keep_rpms=dict(type='list', elements='str', default=[]),
                extra_rpms=dict(type='list', elements='str', default=[]),
                blacklist_file=dict(type='path'),
                blacklist_content=dict(type='str', default=''),
                dnf_module_file=dict(type='path', default='/etc/dnf/modules.d/nvidia-driver.module'),
                fabric_manager=dict(type='str', default='false'),
                kernel_release=dict(type='str'),
                next_kernel=dict(type='str', choices=['build', 'fail', 'ignore'], default='build'),
            ),
        ),
    ),
    errors=(ValueError,),
)
def main(module):
    return dict(changed=False, **probe(module))


if __name__ == '__main__':
    main()
