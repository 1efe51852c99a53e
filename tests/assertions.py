"""The inventory of every check the scenarios and the roles' verify steps make (issue 40, "No proof lost").

A check is a task that can fail on purpose: ``ansible.builtin.assert`` (one line per ``that`` condition),
``ansible.builtin.fail``, a task with ``failed_when`` (other than ``false``), and a testinfra/pytest function
``test_*`` under molecule/. Each line is ``file<TAB>task<TAB>what``, sorted, with paths relative to the repository
root. The scenarios move between folders, so a check is matched by (task, what), not by file.

Usage:
    python3 tests/assertions.py list [ROOT]            print the inventory
    python3 tests/assertions.py diff BEFORE AFTER      the checks of BEFORE missing from AFTER, and the new ones
"""

import ast
import sys
from pathlib import Path

import yaml

ASSERT = ("ansible.builtin.assert", "assert")
FAIL = ("ansible.builtin.fail", "fail")


def _text(value):
    return " ".join(str(value).split())


def _tasks(node):
    """Every task of a play/task list, blocks and rescues flattened."""
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item)
    elif isinstance(node, dict):
        for key in ("block", "rescue", "always", "tasks", "pre_tasks", "post_tasks", "handlers"):
            if key in node:
                yield from _tasks(node[key])
        if not any(k in node for k in ("block", "tasks", "pre_tasks", "post_tasks", "hosts", "import_playbook")):
            yield node


def yaml_checks(path, rel):
    try:
        docs = list(yaml.safe_load_all(path.read_text()))
    except yaml.YAMLError:
        return
    for doc in docs:
        for task in _tasks(doc):
            name = _text(task.get("name", "(unnamed)"))
            for key in ASSERT:
                if key in task:
                    that = (task[key] or {}).get("that", [])
                    for cond in that if isinstance(that, list) else [that]:
                        yield rel, name, "assert " + _text(cond)
            for key in FAIL:
                if key in task:
                    yield rel, name, "fail " + _text((task[key] or {}).get("msg", ""))[:160]
            fw = task.get("failed_when")
            if fw is not None and fw is not False and str(fw).strip().lower() != "false":
                for cond in fw if isinstance(fw, list) else [fw]:
                    yield rel, name, "failed_when " + _text(cond)


def python_checks(path, rel):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            asserts = sum(isinstance(n, ast.Assert) for n in ast.walk(node))
            yield rel, node.name, "testinfra test ({} asserts)".format(asserts)


def inventory(root):
    root = Path(root)
    rows = set()
    files = sorted(root.glob("molecule/**/*.yml")) + sorted(root.glob("roles/*/tasks/verify*.yml"))
    for path in files:
        rows.update(yaml_checks(path, str(path.relative_to(root))))
    for path in sorted(root.glob("molecule/**/test_*.py")):
        rows.update(python_checks(path, str(path.relative_to(root))))
    return sorted(rows)


def _read(path):
    rows = []
    for line in Path(path).read_text().splitlines():
        if line and not line.startswith("#"):
            rows.append(tuple(line.split("\t", 2)))
    return rows


def diff(before, after):
    """(lost, new): the checks (task, what) of BEFORE not in AFTER, and those of AFTER not in BEFORE."""

    def key(r):
        return (r[1], r[2])

    b = {key(r): r for r in before}
    a = {key(r): r for r in after}
    lost = [b[k] for k in sorted(set(b) - set(a))]
    new = [a[k] for k in sorted(set(a) - set(b))]
    return lost, new


def main(argv):
    if len(argv) >= 2 and argv[1] == "list":
        for row in inventory(argv[2] if len(argv) > 2 else "."):
            print("\t".join(row))
        return 0
    if len(argv) == 4 and argv[1] == "diff":
        before, after = _read(argv[2]), _read(argv[3])
        lost, new = diff(before, after)
        print(
            "before: {} checks, after: {} checks, lost: {}, new: {}".format(
                len(before), len(after), len(lost), len(new)
            )
        )
        for row in lost:
            print("LOST\t" + "\t".join(row))
        for row in new:
            print("NEW\t" + "\t".join(row))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
