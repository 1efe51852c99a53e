"""Every tag a role's README lists ("The role's own tags", tests/role_readme.py role_tags) selects work when it is the
one tag given (`--tags vllm_service_configure`), as Ansible filters tags:

- a task runs when its tags - its own, its blocks', those of the `import_tasks` above it (static: they are copied
  down) and those of the play and role above - hold the tag or `always`;
- a dynamic `include_tasks` is itself such a task: when it does not run, nothing in its file does; when it runs, the
  included tasks do NOT take the include's own tags, only its `apply: {tags: ...}` and the tags above the include
  (measured with ansible-core 2.17: an include tagged [r, r_a] without apply runs for `--tags r_a`, its file's
  untagged tasks do not).

A tag is reachable when, from the role's tasks/main.yml (the role in a play's `roles:` or `import_role`) or from a
`tasks_from` entry point a playbook of the collection runs it by, at least one task that is not an include runs
with the tag among its own tags (`always` alone does not count). And what that task needs must run too: a dynamic
include reached by the tag must not read a variable that an earlier task of its own list sets only under other tags
(the services' set_fact before vllm_service's loop).
"""

import importlib.util
import os
import re

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ROLES = os.path.join(ROOT, "roles")
PLAYBOOKS = os.path.join(ROOT, "playbooks")
IMPORT_KEYS = ("ansible.builtin.import_tasks", "import_tasks")
INCLUDE_KEYS = ("ansible.builtin.include_tasks", "include_tasks")
ROLE_KEYS = ("ansible.builtin.import_role", "ansible.builtin.include_role", "import_role", "include_role")
SET_FACT_KEYS = ("ansible.builtin.set_fact", "set_fact")
BLOCK_KEYS = ("block", "rescue", "always")


def _role_readme():
    spec = importlib.util.spec_from_file_location("role_readme", os.path.join(ROOT, "tests", "role_readme.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load(path):
    with open(path) as f:
        return yaml.safe_load(f) or []


def _tags(node):
    tags = node.get("tags") or []
    return [tags] if isinstance(tags, str) else list(tags)


def _runs(tags, tag):
    return "always" in tags or tag in tags


def _file(task, key):
    value = task[key]
    return value if isinstance(value, str) else (value or {}).get("file")


def _text(task):
    """The task without its name and tags, as text to search; one line per value (a folded line would split a
    `name | default` in two)."""
    return yaml.safe_dump({k: v for k, v in task.items() if k not in ("name", "tags")}, width=float("inf"))


def _defines(task):
    """Names a task sets: its register and its set_fact keys."""
    names = set()
    if task.get("register"):
        names.add(task["register"])
    for key in SET_FACT_KEYS:
        if isinstance(task.get(key), dict):
            names.update(k for k in task[key] if k != "cacheable")
    return names


def _role_vars(role_dir):
    """{name: value as text} of the role's vars/main.yml and defaults/main.yml."""
    found = {}
    for part in ("defaults", "vars"):
        path = os.path.join(role_dir, part, "main.yml")
        if os.path.exists(path):
            for name, value in (_load(path) or {}).items():
                found[name] = yaml.safe_dump(value, width=float("inf"))
    return found


class Walk(object):
    """The tasks that run for `--tags <tag>` under one entry point, and what they need that does not run."""

    def __init__(self, role_dir, tag):
        self.role_dir, self.tag = role_dir, tag
        self.role_vars = _role_vars(role_dir)
        self.selected, self.missing = [], []
        # Over the whole walk, in order (imports share them): facts set by tasks the tag skips, and by tasks it runs.
        self.skipped_defs, self.run_defs = {}, set()

    def _reads(self, task, where, text=None):
        """Note a task that the tag runs and that reads a fact only a skipped task sets (and not with a default)."""
        text = self._expand(text if text is not None else _text(task))
        own = _defines(task)  # its own register or facts, read in its changed_when or failed_when: set by then
        for name, definer in sorted(self.skipped_defs.items()):
            if name in self.run_defs or name in own:
                continue
            for match in re.finditer(
                r"\b%s\b([.\w\[\]'\"]*)\s*(\|\s*default|is\s+(not\s+)?defined)?" % re.escape(name), text
            ):
                if not match.group(2):
                    self.missing.append(
                        "%s: %r reads %s, set by %r only under other tags" % (where, task.get("name"), name, definer)
                    )
                    break

    def _expand(self, text):
        """The text with the value of every role variable it names (vars/main.yml, defaults/main.yml; evaluated
        lazily, where the task reads them), and theirs in turn."""
        seen, todo = set(), [text]
        while todo:
            here = todo.pop()
            for name, value in sorted(self.role_vars.items()):
                if name not in seen and re.search(r"\b%s\b" % re.escape(name), here):
                    seen.add(name)
                    todo.append(value)
        return text + "\n" + "\n".join(self.role_vars[name] for name in sorted(seen))

    def file(self, name, inherited, depth=0):
        if "{{" in name or depth > 25:
            return
        path = os.path.join(self.role_dir, "tasks", name)
        if os.path.exists(path):
            self.tasks(_load(path), inherited, name, depth + 1)

    def tasks(self, tasks, inherited, where, depth):
        for task in tasks or []:
            if not isinstance(task, dict):
                continue
            tags = inherited + _tags(task)
            runs = _runs(tags, self.tag)
            if any(key in task for key in BLOCK_KEYS):
                for key in BLOCK_KEYS:
                    self.tasks(task.get(key), tags, where, depth)
                continue
            imported = [k for k in IMPORT_KEYS if k in task]
            included = [k for k in INCLUDE_KEYS if k in task]
            if imported:
                self.file(_file(task, imported[0]), tags, depth)
                continue
            if included:
                if not runs:
                    continue
                text = _text(task)
                for name, definer in sorted(self.skipped_defs.items()):
                    if name not in self.run_defs and re.search(r"\b%s\b" % re.escape(name), text):
                        self.missing.append(
                            "%s: %r reads %s, set by %r only under other tags"
                            % (where, task.get("name"), name, definer)
                        )
                value = task[included[0]]
                apply = (value.get("apply") or {}) if isinstance(value, dict) else {}
                before = len(self.selected)
                self.file(_file(task, included[0]), inherited + _tags(apply), depth)
                if self.tag in _tags(task) and len(self.selected) == before:
                    self.missing.append(
                        "%s: %r is tagged %s, but none of its tasks takes the tag (the include's own tags are not "
                        "passed down: apply: {tags: [...]})" % (where, task.get("name"), self.tag)
                    )
                continue
            if any(k in task for k in ROLE_KEYS):
                continue
            if runs:
                self._reads(task, where)
                self.run_defs.update(_defines(task))
                if self.tag in tags:
                    self.selected.append("%s: %s" % (where, task.get("name")))
            else:
                for name in _defines(task):
                    self.skipped_defs.setdefault(name, task.get("name"))


def _playbook_entry_points(role):
    """[(tasks_from file, inherited tags, gate tags)] for each place a playbook of the collection runs `role` by a
    tasks_from entry point."""
    fqcn = "airgap.vllm." + role
    found = []

    def walk(node, inherited):
        if isinstance(node, list):
            for value in node:
                walk(value, inherited)
        elif isinstance(node, dict):
            here = inherited + _tags(node)
            for key in ROLE_KEYS:
                spec = node.get(key)
                if isinstance(spec, dict) and spec.get("name") == fqcn and spec.get("tasks_from"):
                    dynamic = "include" in key
                    apply = _tags(spec.get("apply") or {})
                    name = spec["tasks_from"]
                    name = name if name.endswith((".yml", ".yaml")) else name + ".yml"
                    found.append((name, (inherited + apply) if dynamic else here, here))
            for key, value in node.items():
                if key != "tags":
                    walk(value, here)

    for name in sorted(os.listdir(PLAYBOOKS)):
        if name.endswith(".yml"):
            walk(_load(os.path.join(PLAYBOOKS, name)), [])
    return found


def reachability(role, tag):
    """(tasks that run with the tag, missing prerequisites) over the role's entry points."""
    role_dir = os.path.join(ROLES, role)
    selected, missing = [], []
    entries = [("main.yml", [], [])] + _playbook_entry_points(role)
    for name, inherited, gate in entries:
        if name != "main.yml" and not _runs(gate, tag):
            continue
        walk = Walk(role_dir, tag)
        walk.file(name, inherited)
        selected += walk.selected
        missing += walk.missing
    return selected, missing


README = _role_readme()
CASES = [
    (role, tag)
    for role in README.roles(ROLES)
    if os.path.exists(os.path.join(ROLES, role, "tasks", "main.yml"))
    for tag in README.role_tags(os.path.join(ROLES, role))
]


# Every phase runs alone (issue 42): the read-only phases run under the later phases' tags, and a phase that used to read
# what a CHANGING phase just did takes it from the host when that phase did not run (bundle_verify: the configure
# phase's record; bundle_build_configure: the payload as bundle_pack reads it in check mode; bundle_build_verify: the
# bundle as it is; vllm_image_verify: the import and the choice of image, read-only; vllm_service_start: the probe and
# the restart decision, refusing a configuration that is not this run's). No tag is excused.


@pytest.mark.parametrize("role,tag", CASES, ids=["%s:%s" % case for case in CASES])
def test_every_documented_tag_selects_work(role, tag):
    selected, missing = reachability(role, tag)
    assert selected, "roles/%s/README.md lists --tags %s, but no task of the role runs with it" % (role, tag)
    assert missing == [], "--tags %s alone fails on a fact another phase sets" % tag


def test_the_walk_sees_a_task_that_reads_a_fact_of_a_skipped_phase(tmp_path):
    """What vllm_front's configure did before its preflight ran under every phase tag: a plain task (not an include)
    reading a fact set only under another tag is found; one that reads it with a default is not."""
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "main.yml").write_text(
        yaml.safe_dump(
            [
                {"name": "facts", "ansible.builtin.set_fact": {"__r_inputs": 1}, "tags": ["r", "r_pre"]},
                {"name": "uses", "ansible.builtin.debug": {"msg": "{{ __r_inputs.services }}"}, "tags": ["r", "r_c"]},
                {
                    "name": "soft",
                    "ansible.builtin.debug": {"msg": "{{ __r_inputs | default(0) }}"},
                    "tags": ["r", "r_v"],
                },
            ]
        )
    )
    walk = Walk(str(tmp_path), "r_c")
    walk.file("main.yml", [])
    assert walk.missing == ["main.yml: 'uses' reads __r_inputs, set by 'facts' only under other tags"]
    walk = Walk(str(tmp_path), "r_v")
    walk.file("main.yml", [])
    assert walk.selected and walk.missing == []


def test_the_walk_reads_role_variables_and_long_lines(tmp_path):
    """A fact read through a role variable (vars/main.yml, evaluated where the task reads it) counts, as does one in a
    long expression (yaml folds long lines: `x | default` must not be split in two); a guarded read does not."""
    (tmp_path / "tasks").mkdir()
    (tmp_path / "vars").mkdir()
    (tmp_path / "vars" / "main.yml").write_text(
        yaml.safe_dump({"__r_current": "{{ __r_mid }}", "__r_mid": "{{ not __r_import.loaded }}"})
    )
    long_read = "{{ " + " +\n     ".join(["__r_written | default(0)"] * 12) + " }}"
    (tmp_path / "tasks" / "main.yml").write_text(
        yaml.safe_dump(
            [
                {"name": "import", "ansible.builtin.set_fact": {"__r_import": 1, "__r_written": 1}, "tags": ["r_i"]},
                {"name": "verify", "ansible.builtin.debug": {"msg": "x"}, "when": "__r_current", "tags": ["r_v"]},
                {"name": "long", "ansible.builtin.debug": {"msg": long_read}, "tags": ["r_l"]},
            ]
        )
    )
    walk = Walk(str(tmp_path), "r_v")
    walk.file("main.yml", [])
    assert walk.missing == ["main.yml: 'verify' reads __r_import, set by 'import' only under other tags"]
    walk = Walk(str(tmp_path), "r_l")
    walk.file("main.yml", [])
    assert walk.selected == ["main.yml: long"] and walk.missing == []


def test_the_walk_sees_an_include_without_its_tag_and_one_without_apply(tmp_path):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "main.yml").write_text(
        yaml.safe_dump(
            [
                {"name": "facts", "ansible.builtin.set_fact": {"__x": 1}, "tags": ["r"]},
                {
                    "name": "loop",
                    "ansible.builtin.include_tasks": {"file": "inner.yml"},
                    "loop": "{{ __x }}",
                    "tags": ["r", "r_b"],
                },
                {
                    "name": "gated",
                    "ansible.builtin.include_tasks": {"file": "inner.yml", "apply": {"tags": ["r"]}},
                    "tags": ["r"],
                },
            ]
        )
    )
    (tasks / "inner.yml").write_text(
        yaml.safe_dump(
            [
                {"name": "a", "ansible.builtin.import_tasks": "a.yml", "tags": ["r_a"]},
                {"name": "plain", "ansible.builtin.debug": {"msg": "x"}},
            ]
        )
    )
    (tasks / "a.yml").write_text(yaml.safe_dump([{"name": "task a", "ansible.builtin.debug": {"msg": "a"}}]))
    walk = Walk(str(tmp_path), "r_a")
    walk.file("main.yml", [])
    assert walk.selected == []  # both includes lack r_a: inner.yml never loads
    walk = Walk(str(tmp_path), "r_b")
    walk.file("main.yml", [])
    assert walk.selected == []  # loaded, but its tasks do not take the include's own r_b
    assert "__x" in walk.missing[0] and "none of its tasks takes the tag" in walk.missing[1]
    walk = Walk(str(tmp_path), "r")
    walk.file("main.yml", [])
    assert walk.selected == ["main.yml: facts", "a.yml: task a", "inner.yml: plain"]
    assert len(walk.missing) == 1 and "'loop' is tagged r, but none of its tasks takes the tag" in walk.missing[0]


def _site_includes(node, found, inherited=()):
    """(role, the include's tags with those of its play and blocks, tasks_from) of every include_role in site.yml."""
    if isinstance(node, dict):
        here = list(inherited) + _tags(node)
        for key in ("ansible.builtin.include_role", "include_role"):
            if isinstance(node.get(key), dict):
                found.append((node[key]["name"].split(".")[-1], here, node[key].get("tasks_from")))
        for key, value in node.items():
            if key != "tags":
                _site_includes(value, found, here)
    elif isinstance(node, list):
        for value in node:
            _site_includes(value, found, inherited)
    return found


def test_site_yml_reaches_every_role_tag_through_its_dynamic_includes():
    """`ansible-playbook site.yml --tags vllm_front_configure` runs that part of the role: site.yml runs the front door
    and observe stages by include_role, which runs only when one of its OWN tags is selected (the included tasks then
    keep theirs), so the include carries every tag the role's README lists. An import_role needs nothing: its tasks
    carry their own tags."""
    readme = _role_readme()
    includes = [i for i in _site_includes(_load(os.path.join(PLAYBOOKS, "site.yml")), []) if not i[2]]
    assert {role for role, _tags_, _from in includes} == {"vllm_front", "vllm_observe"}
    for role, tags, _from in includes:
        wanted = readme.role_tags(os.path.join(ROLES, role))
        assert wanted and set(wanted) <= set(tags), (role, sorted(set(wanted) - set(tags)))
