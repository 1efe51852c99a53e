from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import lzma

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.host import _hostinfo

KYLIN_OS_RELEASE = '''NAME="Kylin Linux Advanced Server"
VERSION="V10 (Lance)"
ID="kylin"
VERSION_ID="V10"
PRETTY_NAME="Kylin Linux Advanced Server V10 (Lance)"
ANSI_COLOR="0;31"
'''
ROCKY = 'NAME="Rocky Linux"\nVERSION="9.3 (Blue Onyx)"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.3"\n'


@pytest.mark.parametrize(
    'productinfo,release,sp',
    [
        ('Kylin Linux Advanced Server\nrelease V10 (SP3) /(Lance)-x86_64-Build23/20230324\n', 'Lance', 'SP3'),
        ('Kylin Linux Advanced Server\nrelease V10 (SP1) /(Tercel)-aarch64-Build04/20200711\n', None, 'SP1'),
        ('Kylin Linux Advanced Server\nrelease V10 /(Sword)-x86_64-Build09/20210524\n', None, 'SP2'),
        (None, 'Tercel', 'SP1'),
        (None, 'Sword', 'SP2'),
        (None, 'lance', 'SP3'),
        (None, 'Halberd', 'SP3'),
        (None, 'Unknown', None),
        (None, None, None),
    ],
)
def test_kylin_service_pack(productinfo, release, sp):
    assert _hostinfo.kylin_service_pack(productinfo, release) == sp


def test_kylin_facts_keep_v10_a_string():
    f = _hostinfo.host_facts(KYLIN_OS_RELEASE, None, '4.19.90-52.22.v2207.ky10.x86_64', '3.7.9')
    assert f == {
        'distribution': 'Kylin Linux Advanced Server',
        'distribution_id': 'kylin',
        'distribution_version': 'V10',
        'distribution_release': 'Lance',
        'kylin': True,
        'kylin_sp': 'SP3',
        'kernel_release': '4.19.90-52.22.v2207.ky10.x86_64',
        'python_version': '3.7.9',
    }


def test_productinfo_wins_over_codename():
    f = _hostinfo.host_facts(KYLIN_OS_RELEASE, 'release V10 (SP2) /(Sword)-x86_64\n', 'k', '3.7')
    assert f['kylin_sp'] == 'SP2'


def test_non_kylin_has_no_service_pack():
    f = _hostinfo.host_facts(ROCKY, 'release V10 (SP3)', '5.14.0', '3.9.18')
    assert (f['kylin'], f['kylin_sp'], f['distribution_version'], f['distribution_release']) == (
        False,
        None,
        '9.3',
        'Blue Onyx',
    )


def test_os_release_missing():
    f = _hostinfo.host_facts(None, None, 'k', '3.7')
    assert f['distribution'] is None and f['kylin'] is False


DOCKER_INFO = {
    'ServerVersion': '20.10.24',
    'Driver': 'overlay2',
    'CgroupDriver': 'cgroupfs',
    'CgroupVersion': '1',
    'DefaultRuntime': 'runc',
    'DockerRootDir': '/var/lib/docker',
    'Runtimes': {
        'runc': {'path': 'runc'},
        'nvidia': {'path': 'nvidia-container-runtime'},
        'io.containerd.runc.v2': {'path': 'runc'},
    },
}


def test_parse_docker_info():
    f = _hostinfo.parse_docker_info(json.dumps(DOCKER_INFO))
    assert f['server_version'] == '20.10.24'
    assert f['runtimes'] == ['io.containerd.runc.v2', 'nvidia', 'runc']
    assert (f['default_runtime'], f['cgroup_driver'], f['storage_driver']) == ('runc', 'cgroupfs', 'overlay2')


def test_parse_docker_info_daemon_down():
    # the CLI still prints JSON when the daemon is down, with ServerErrors
    f = _hostinfo.parse_docker_info(json.dumps({'ServerErrors': ['Cannot connect to the Docker daemon']}))
    assert f['server_version'] is None and f['runtimes'] == [] and f['server_errors']


@pytest.mark.parametrize('text', ['not json', '[]'])
def test_parse_docker_info_rejects_garbage(text):
    with pytest.raises(ValueError):
        _hostinfo.parse_docker_info(text)


class _NoGrubby(object):
    """The little of AnsibleModule next_kernel_facts uses: no grubby on the PATH."""

    @staticmethod
    def get_bin_path(_name):
        return None

    @staticmethod
    def warn(msg):
        raise AssertionError(msg)


@pytest.fixture
def boot(tmp_path, monkeypatch):
    """A /boot, /lib/modules and /usr/src/kernels under tmp_path, where the probe looks for them."""
    for name, rel in (
        ("GRUBENV", "boot/grub2/grubenv"),
        ("DEFAULT_GRUB", "etc/default/grub"),
        ("GRUB_CFG", "boot/grub2/grub.cfg"),
        ("BLS_DIR", "boot/loader/entries"),
        ("MODULES_DIR", "lib/modules"),
        ("KERNEL_SRC_DIR", "usr/src/kernels"),
    ):
        monkeypatch.setattr(_hostinfo, name, str(tmp_path / rel))
    (tmp_path / "boot/loader/entries").mkdir(parents=True)
    (tmp_path / "boot/grub2").mkdir(parents=True)
    (tmp_path / "etc/default").mkdir(parents=True)
    (tmp_path / "etc/default/grub").write_text("GRUB_DEFAULT=saved\nGRUB_ENABLE_BLSCFG=true\n")
    (tmp_path / "boot/grub2/grub.cfg").write_text("load_env\nblscfg\n")
    for k in ("4.19.90-52.22.v2207.ky10.x86_64", "4.19.90-89.11.v2401.ky10.x86_64"):
        (tmp_path / "boot/loader/entries" / ("mid-%s.conf" % k)).write_text(
            "title Kylin (%s)\nlinux /vmlinuz-%s\n" % (k, k)
        )
        (tmp_path / "lib/modules" / k / "kernel").mkdir(parents=True)
    (tmp_path / "boot/grub2/grubenv").write_text(
        "# GRUB Environment Block\nsaved_entry=mid-4.19.90-89.11.v2401.ky10.x86_64\n"
    )
    return tmp_path


def next_kernel(version="580.65.06", dkms=("580.65.06",)):
    spec = dict(kernel_release="4.19.90-52.22.v2207.ky10.x86_64", version=version, next_kernel="build")
    return _hostinfo.next_kernel_facts(_NoGrubby(), spec, {"dkms_versions": list(dkms)})


def test_next_kernel_needs_devel_then_builds_then_built(boot):
    k2 = "4.19.90-89.11.v2401.ky10.x86_64"
    plan = next_kernel()
    assert plan["action"] == "build" and plan["kernel"] == k2 and plan["needs_devel"] and plan["method"] == "dkms"
    assert plan["module_version"] is None and "BLS entry mid-" + k2 in plan["how"]
    (boot / "usr/src/kernels" / k2).mkdir(parents=True)
    (boot / "usr/src/kernels" / k2 / "Makefile").write_text("VERSION = 4\n")
    # An old module in the kernel's tree: the wrong version still needs a build.
    (boot / "lib/modules" / k2 / "kernel/nvidia.ko").write_bytes(b"\x7fELF\x00version=560.35.03\x00")
    plan = next_kernel(dkms=())
    assert plan["action"] == "build" and not plan["needs_devel"] and plan["method"] == "run"
    assert plan["module_version"] == "560.35.03"
    # dkms's copy in extra/ (compressed, as RHEL's kmod tools keep it) is what depmod picks.
    (boot / "lib/modules" / k2 / "extra").mkdir()
    with lzma.open(str(boot / "lib/modules" / k2 / "extra/nvidia.ko.xz"), "wb") as f:
        f.write(b"\x7fELF\x00srcversion=X\x00version=580.65.06\x00")
    plan = next_kernel()
    assert plan["action"] == "none" and plan["module_path"].endswith("/extra/nvidia.ko.xz")


def test_next_kernel_unknown_without_files(boot):
    (boot / "boot/grub2/grubenv").write_text("saved_entry=mid-4.19.90-52.22.v2207.ky10.x86_64\n")
    assert next_kernel()["action"] == "none"
    for path in (boot / "boot/loader/entries").iterdir():
        path.unlink()
    (boot / "boot/grub2/grub.cfg").unlink()
    plan = next_kernel()
    assert plan["action"] == "none" and plan["kernel"] is None and "no boot menu found" in plan["how"]
