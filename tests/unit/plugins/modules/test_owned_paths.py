"""owned_paths as Ansible runs it: nothing outside our roots is removed, check mode honest (issue 24)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.airgap.vllm.plugins.modules import owned_paths as M


def _tree(tmp_path):
    root = tmp_path / "etc" / "airgap-vllm"
    (root / "vllm" / "last-good").mkdir(parents=True)
    (root / "vllm" / "keys.yaml").write_text("k")
    (tmp_path / "etc" / "ssh").mkdir()
    return root


def test_the_parent_of_the_root_is_never_removed(run_module, tmp_path):
    """Failed on 9dce105: a service named '..' made uninstall remove the configuration directory's parent."""
    root = _tree(tmp_path)
    r = run_module(M, paths=[str(root / "vllm"), str(root) + "/.."], roots=[str(root)])
    assert r["failed"] and "'..'" in r["msg"] and r["refused"][0]["path"] == str(root) + "/.."
    assert (root / "vllm" / "keys.yaml").exists() and (tmp_path / "etc" / "ssh").exists()  # nothing removed at all
    r = run_module(M, paths=[str(root)], roots=[str(root)])
    assert r["failed"] and "one of our roots itself" in r["msg"]
    r = run_module(M, paths=[str(tmp_path / "etc" / "ssh")], roots=[str(root)])
    assert r["failed"] and "below any of our roots" in r["msg"]
    r = run_module(M, paths=["/etc/ssh"], roots=["/etc"])
    assert r["failed"] and "no usable root" in r["msg"]


def test_removes_below_the_root_and_check_mode_removes_nothing(run_module, tmp_path):
    root = _tree(tmp_path)
    r = run_module(M, check_mode=True, paths=[str(root / "vllm"), str(root / "gone")], roots=[str(root)])
    assert r["changed"] and r["removed"] == [str(root / "vllm")] and r["absent"] == [str(root / "gone")]
    assert (root / "vllm").exists()
    r = run_module(M, paths=[str(root / "vllm")], roots=[str(root)])
    assert r["changed"] and not (root / "vllm").exists()
    r = run_module(M, paths=[str(root / "vllm")], roots=[str(root)])
    assert not r["changed"] and r["absent"] == [str(root / "vllm")]
    (root / "vllm-b").mkdir()
    r = run_module(M, check_mode=True, paths=[str(root)], roots=[str(root)], state="empty", gone=[str(root / "vllm-b")])
    assert r["changed"] and root.exists()  # check mode: what a real run removes after vllm-b went
    (root / "vllm-b").rmdir()
    # The empty root goes with state=empty (only then, and only when empty).
    r = run_module(M, paths=[str(root)], roots=[str(root)], state="empty")
    assert r["changed"] and not root.exists()


def test_a_root_that_is_not_empty_stays(run_module, tmp_path):
    root = _tree(tmp_path)
    r = run_module(M, paths=[str(root)], roots=[str(root)], state="empty")
    assert not r["changed"] and r["not_ours"] == [str(root)] and root.exists()
    r = run_module(M, paths=["/etc"], roots=["/etc"], state="empty")
    assert r["failed"]


def test_a_link_goes_not_what_it_points_at(run_module, tmp_path):
    root = _tree(tmp_path)
    (root / "lnk").symlink_to(tmp_path / "etc" / "ssh")
    r = run_module(M, paths=[str(root / "lnk")], roots=[str(root)])
    assert r["changed"] and not (root / "lnk").exists() and (tmp_path / "etc" / "ssh").exists()


def test_without_our_mark_it_stays_and_is_named(run_module, tmp_path):
    units = tmp_path / "units"
    units.mkdir()
    (units / "vllm.service").write_text("# org.airgap.vllm.service=vllm\n[Unit]\n")
    (units / "vllm-b.service").write_text("[Unit]\nDescription=someone else's\n")
    r = run_module(
        M,
        paths=[str(units / "vllm.service"), str(units / "vllm-b.service")],
        roots=[str(units)],
        marker="# org.airgap.vllm.service=",
    )
    assert r["removed"] == [str(units / "vllm.service")] and r["not_ours"] == [str(units / "vllm-b.service")]
    assert (units / "vllm-b.service").exists() and r["warnings"]
