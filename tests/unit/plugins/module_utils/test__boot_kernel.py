"""The next boot's kernel from grub2's real file shapes (RHEL 8 BLS, Kylin V10 grub.cfg), and the plan for it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.driver import _boot_kernel as B

MID = "e2f0c1d4a5b64c2e8f0a9b8c7d6e5f41"
K1 = "4.19.90-52.22.v2207.ky10.x86_64"
K2 = "4.19.90-89.11.v2401.ky10.x86_64"
V = "580.65.06"

# grub2-editenv pads the block to 1024 bytes with '#'.
GRUBENV = (
    "# GRUB Environment Block\nsaved_entry=%s-%s\nkernelopts=root=/dev/mapper/klas-root ro "
    "crashkernel=auto rd.lvm.lv=klas/root rhgb quiet \nboot_success=0\n" % (MID, K2)
)
GRUBENV += "#" * (1024 - len(GRUBENV))
DEFAULT_GRUB = (
    'GRUB_TIMEOUT=5\nGRUB_DISTRIBUTOR="$(sed \'s, release .*$,,g\' /etc/system-release)"\n'
    'GRUB_DEFAULT=saved\nGRUB_DISABLE_SUBMENU=true\nGRUB_TERMINAL_OUTPUT="console"\n'
    'GRUB_CMDLINE_LINUX="crashkernel=auto rhgb quiet"\nGRUB_DISABLE_RECOVERY="true"\n'
    'GRUB_ENABLE_BLSCFG=true\n'
)
GRUB_CFG_BLS = "### BEGIN /etc/grub.d/10_linux ###\ninsmod part_gpt\nblscfg\n### END /etc/grub.d/10_linux ###\n"


def bls(kernel, title="Kylin Linux Advanced Server"):
    return (
        "title %s (%s) V10 (Lance)\nversion %s\nlinux /vmlinuz-%s\ninitrd /initramfs-%s.img $tuned_initrd\n"
        "options $kernelopts $tuned_params\nid kylin-20240110-%s\ngrub_users $grub_users\n"
        "grub_arg --unrestricted\ngrub_class kernel\n" % (title, kernel, kernel, kernel, kernel, kernel)
    )


ENTRIES = {
    "%s-%s" % (MID, K1): bls(K1),
    "%s-%s" % (MID, K2): bls(K2),
    "%s-0-rescue" % MID: "title Kylin (0-rescue-%s)\nversion 0-rescue-%s\nlinux /vmlinuz-0-rescue-%s\n"
    % (MID, MID, MID),
}

# A grub.cfg as grub2-mkconfig writes it without BLS (GRUB_DISABLE_SUBMENU=true): the newest kernel first.
GRUB_CFG_MENU = """### BEGIN /etc/grub.d/10_linux ###
menuentry 'Kylin Linux Advanced Server (%(k2)s) V10 (Lance)' --class kylin --unrestricted $menuentry_id_option 'gnulinux-%(k2)s-advanced-3d2c' {
\tload_video
\tset gfxpayload=keep
\tinsmod xfs
\tlinux16 /vmlinuz-%(k2)s root=/dev/mapper/klas-root ro crashkernel=auto
\tinitrd16 /initramfs-%(k2)s.img
}
menuentry 'Kylin Linux Advanced Server (%(k1)s) V10 (Lance)' --class kylin --unrestricted $menuentry_id_option 'gnulinux-%(k1)s-advanced-3d2c' {
\tlinuxefi /vmlinuz-%(k1)s root=/dev/mapper/klas-root ro
\tinitrdefi /initramfs-%(k1)s.img
}
### END /etc/grub.d/10_linux ###
""" % {"k1": K1, "k2": K2}


def test_grubenv_and_grub_default():
    env = B.parse_grubenv(GRUBENV)
    assert env["saved_entry"] == "%s-%s" % (MID, K2) and env["boot_success"] == "0"
    assert env["kernelopts"].startswith("root=/dev/mapper/klas-root")
    assert B.grub_default(DEFAULT_GRUB) == "saved"
    assert B.grub_default('GRUB_DEFAULT="Kylin Linux (x)"\n') == "Kylin Linux (x)"
    assert B.grub_default("GRUB_DEFAULT=0\n#GRUB_DEFAULT=saved\n") == "0"
    assert B.grub_default(None) is None and B.parse_grubenv(None) == {}


def test_kernel_of():
    assert B.kernel_of("/vmlinuz-" + K1) == K1 and B.kernel_of("/boot/vmlinuz-" + K2) == K2
    assert B.kernel_of("/boot/efi/EFI/kylin/grubx64.efi") is None and B.kernel_of("/vmlinuz-") is None
    assert B.kernel_of(None) is None


@pytest.mark.parametrize(
    "a,b,want",
    [
        ("4.19.90-89.11.v2401.ky10", "4.19.90-52.22.v2207.ky10", 1),
        ("1.0", "1.0", 0),
        ("1.10", "1.9", 1),
        ("1.0a", "1.0", 1),
        ("1.0~rc1", "1.0", -1),
        ("1.0", "1.0a", -1),
        ("2", "a", 1),
        ("0-rescue-abc", K1, -1),
    ],
)
def test_rpmvercmp(a, b, want):
    assert B.rpmvercmp(a, b) == want
    newer, older = b, a
    assert B.rpmvercmp(newer, older) == -want


def test_bls_menu_newest_first_and_ids():
    menu = B.bls_menu(ENTRIES)
    assert [m["kernel"] for m in menu] == [K2, K1, "0-rescue-" + MID]
    assert menu[0]["id"] == "%s-%s" % (MID, K2) and "kylin-20240110-" + K2 in menu[0]["aliases"]


def test_default_from_saved_entry_bls():
    kernel, how = B.default_kernel(GRUBENV, DEFAULT_GRUB, ENTRIES, GRUB_CFG_BLS)
    assert kernel == K2 and "grubenv saved_entry" in how and "BLS entry %s-%s" % (MID, K2) in how


def test_next_entry_wins_once():
    env = GRUBENV.replace("boot_success=0", "next_entry=%s-%s" % (MID, K1))
    assert B.default_kernel(env, DEFAULT_GRUB, ENTRIES, GRUB_CFG_BLS)[0] == K1


def test_empty_saved_entry_is_entry_zero_and_index_and_title():
    assert B.default_kernel("# GRUB Environment Block\n", None, ENTRIES, None)[0] == K2
    assert B.default_kernel(None, "GRUB_DEFAULT=1\n", ENTRIES, GRUB_CFG_BLS) == (
        K1,
        "GRUB_DEFAULT '1' -> BLS entry %s-%s" % (MID, K1),
    )
    env = "saved_entry=Kylin Linux Advanced Server (%s) V10 (Lance)\n" % K1
    assert B.default_kernel(env, DEFAULT_GRUB, ENTRIES, GRUB_CFG_BLS)[0] == K1


def test_grub_cfg_menu_without_bls():
    menu = B.grub_cfg_menu(GRUB_CFG_MENU)
    assert [m["kernel"] for m in menu] == [K2, K1]
    assert menu[1]["id"] == "gnulinux-%s-advanced-3d2c" % K1
    # Kylin V10 saves the title; BLS entries on disk but grub.cfg does not call blscfg: grub.cfg rules.
    env = "saved_entry=Kylin Linux Advanced Server (%s) V10 (Lance)\n" % K1
    kernel, how = B.default_kernel(env, DEFAULT_GRUB, {"x-" + K2: bls(K2)}, GRUB_CFG_MENU)
    assert kernel == K1 and "grub.cfg menuentry" in how
    assert B.default_kernel("saved_entry=gnulinux-%s-advanced-3d2c\n" % K2, None, {}, GRUB_CFG_MENU)[0] == K2
    assert (
        B.default_kernel(
            "saved_entry=Advanced options>Kylin Linux Advanced Server (%s) V10 (Lance)\n" % K1, None, {}, GRUB_CFG_MENU
        )[0]
        == K1
    )


def test_unknown_and_grubby_fallback():
    kernel, how = B.default_kernel(None, None, {}, None)
    assert kernel is None and "no boot menu found" in how
    assert B.default_kernel(None, None, {}, None, "/boot/vmlinuz-%s\n" % K2) == (K2, "grubby --default-kernel")
    kernel, how = B.default_kernel("saved_entry=gone\n", DEFAULT_GRUB, ENTRIES, GRUB_CFG_BLS)
    assert kernel is None and "'gone' names no menu entry" in how
    assert B.default_kernel("saved_entry=7\n", DEFAULT_GRUB, ENTRIES, None)[0] is None


def test_module_version_and_candidates():
    data = b"\x7fELF...\x00srcversion=ABC\x00version=580.65.06\x00license=Dual MIT/GPL\x00"
    assert B.module_version(data) == V
    assert B.module_version(b"version=560.35.03\x00") == "560.35.03"
    assert B.module_version(b"\x00srcversion=1.2\x00") is None and B.module_version(None) is None
    base = "/lib/modules/" + K2
    paths = [
        base + "/weak-updates/nvidia/nvidia.ko",
        base + "/kernel/drivers/video/nvidia.ko",
        base + "/extra/nvidia.ko.xz",
        base + "/kernel/drivers/video/nvidia-uvm.ko",
        base + "/updates/dkms/nvidia.ko",
    ]
    assert B.module_candidates(paths) == [paths[4], paths[2], paths[1], paths[0]]


def plan(**over):
    args = dict(
        default=K2,
        how="grubenv saved_entry",
        build_kernel=K1,
        version=V,
        installed=True,
        module=None,
        tree=True,
        dkms_registered=True,
        mode="build",
    )
    args.update(over)
    return B.next_kernel_plan(**args)


def test_plan_nothing_to_do():
    assert plan(default=None, how="no boot menu found")["action"] == "none"
    assert plan(default=K1)["action"] == "none"
    assert plan(module=V)["action"] == "none"
    p = plan(installed=False)
    assert p["action"] == "none" and "not installed" in p["reason"]


def test_plan_build_dkms_or_run():
    p = plan()
    assert p["action"] == "build" and p["method"] == "dkms" and not p["needs_devel"]
    assert p["source_path"] == "/usr/src/kernels/" + K2 and p["devel_package"] == "kernel-devel-" + K2
    p = plan(dkms_registered=False, tree=False, module="560.35.03")
    assert p["method"] == "run" and p["needs_devel"] and "the nvidia 560.35.03 module, not " + V in p["reason"]
    assert "after installing kernel-devel-" + K2 in p["reason"]


def test_plan_fail_ignore_and_bad_mode():
    p = plan(mode="fail")
    assert p["action"] == "fail" and "nvidia_driver_next_kernel=fail" in p["reason"] and K2 in p["reason"]
    assert plan(mode="ignore")["action"] == "ignore"
    assert plan(mode="ignore", module=V)["action"] == "none"
    with pytest.raises(ValueError):
        plan(mode="maybe")
