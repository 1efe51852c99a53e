"""The inventory of checks (tests/assertions.py; issue 40): kept current, and no check lost without a reason."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
INV = os.path.join(ROOT, "tests", "inventory")
sys.path.insert(0, os.path.join(ROOT, "tests"))

import assertions  # noqa: E402


def test_the_committed_inventory_is_the_trees():
    current = ["\t".join(r) for r in assertions.inventory(ROOT)]
    committed = open(os.path.join(INV, "assertions.tsv")).read().splitlines()
    assert committed == current, "run: python3 tests/assertions.py list > tests/inventory/assertions.tsv"


def test_no_check_of_the_split_is_lost_without_a_reason():
    before = assertions._read(os.path.join(INV, "assertions-before.tsv"))
    after = [tuple(r) for r in assertions.inventory(ROOT)]
    lost, _new = assertions.diff(before, after)
    reasons = {tuple(r[:2]) for r in assertions._read(os.path.join(INV, "lost.tsv"))}
    unexplained = [r for r in lost if (r[1], r[2]) not in reasons]
    assert unexplained == []


def test_a_removed_assert_is_found(tmp_path):
    play = tmp_path / "molecule" / "x"
    play.mkdir(parents=True)
    (play / "converge.yml").write_text(
        "- hosts: all\n  tasks:\n    - name: Check\n      ansible.builtin.assert:\n        that: [a == 1, b == 2]\n"
    )
    before = assertions.inventory(tmp_path)
    (play / "converge.yml").write_text(
        "- hosts: all\n  tasks:\n    - name: Check\n      ansible.builtin.assert:\n        that: [a == 1]\n"
    )
    lost, new = assertions.diff(before, assertions.inventory(tmp_path))
    assert [r[2] for r in lost] == ["assert b == 2"] and new == []
