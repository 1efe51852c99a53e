"""The documented stage order is site.yml's: docs/architecture.md (its stage table and its data-flow picture) and
the README's stage table name the roles in the order playbooks/site.yml runs them, each under the tag it runs by.

site.yml is read as Ansible reads it: plays in order, their roles and tasks (pre_tasks, blocks, import/include of
task files followed), each role where it is first imported or included as a whole (a `tasks_from` entry point,
such as the front door's drain or the service's load check, is not a stage of its own)."""

import os
import re

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PLAYBOOKS = os.path.join(ROOT, "playbooks")
ROLES = sorted(d for d in os.listdir(os.path.join(ROOT, "roles")) if not d.startswith("_"))
ROLE_KEYS = ("ansible.builtin.import_role", "ansible.builtin.include_role", "import_role", "include_role")
TASK_FILE_KEYS = ("ansible.builtin.import_tasks", "ansible.builtin.include_tasks", "import_tasks", "include_tasks")
SKIP_TAGS = ("always", "never")
SITE = os.path.join(PLAYBOOKS, "site.yml")


def _tags(node):
    tags = node.get("tags") or []
    return [tags] if isinstance(tags, str) else list(tags)


def _role_name(name):
    return str(name).rsplit(".", maxsplit=1)[-1]


def _walk_tasks(tasks, tags, base, out):
    for task in tasks or []:
        here = [t for t in _tags(task) if t not in SKIP_TAGS] or tags
        for key in ("block", "rescue", "always"):
            if key in task:
                _walk_tasks(task[key], here, base, out)
        for key in ROLE_KEYS:
            if key in task and not task[key].get("tasks_from"):
                out.append((here[0] if here else None, _role_name(task[key]["name"])))
        for key in TASK_FILE_KEYS:
            if key in task:
                spec = task[key]
                path = os.path.join(base, spec["file"] if isinstance(spec, dict) else spec)
                if os.path.isfile(path):
                    with open(path) as f:
                        _walk_tasks(yaml.safe_load(f), here, os.path.dirname(path), out)


def site_order(path=SITE):
    """[(tag, role)] in the order site.yml first runs each role; an imported playbook is ('<stem>', 'playbooks/<file>')."""
    with open(path) as f:
        plays = yaml.safe_load(f)
    found = []
    for play in plays:
        if "ansible.builtin.import_playbook" in play or "import_playbook" in play:
            target = play.get("ansible.builtin.import_playbook") or play.get("import_playbook")
            found.append((os.path.splitext(target)[0], "playbooks/" + target))
            continue
        tags = [t for t in _tags(play) if t not in SKIP_TAGS]
        for role in play.get("roles") or []:
            name = role["role"] if isinstance(role, dict) else role
            found.append((tags[0] if tags else None, _role_name(name)))
        for key in ("pre_tasks", "tasks", "post_tasks"):
            _walk_tasks(play.get(key), tags, PLAYBOOKS, found)
    order, seen = [], set()
    for tag, role in found:
        if role not in seen:
            seen.add(role)
            order.append((tag, role))
    return order


def _doc(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def _table_rows(text, header_start):
    """The cells of each row of the Markdown table whose header line starts with header_start."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def _first_role(cell):
    for name in re.findall(r"`([^`]+)`", cell):
        if name in ROLES or name.startswith("playbooks/"):
            return name
    return None


def test_site_yml_is_read_as_a_whole():
    order = site_order()
    roles = [r for _t, r in order]
    # What the reader above must find (a change of site.yml that hides a stage from it fails here first).
    for role in (
        "bundle",
        "preflight",
        "nvidia_driver",
        "nvidia_toolkit",
        "gpu_free",
        "vllm_model",
        "vllm_image",
        "vllm_plan",
        "vllm_service",
        "vllm_front",
    ):
        assert role in roles, (role, order)
    assert order[0] == ("validate", "playbooks/validate.yml")


def test_the_architecture_stage_table_is_site_yml_order():
    documented = []
    for cells in _table_rows(_doc("docs", "architecture.md"), "| stage (tag) |"):
        if "tasks_from" in cells[1]:
            continue  # an entry point of a role already listed (the load check)
        documented.append((cells[0].split()[0], _first_role(cells[1])))
    assert documented == site_order()


def test_the_architecture_picture_is_site_yml_order():
    text = _doc("docs", "architecture.md")
    section = text.split("## From bundle to running service", 1)[1]
    picture = re.search(r"```\n(.*?)```", section, re.S).group(1)
    firsts = {}
    for role in ROLES:
        m = re.search(r"(?<![\w./-])%s(?![\w/-])" % re.escape(role), picture)
        if m:
            firsts[role] = m.start()
    in_site = [r for _t, r in site_order() if r in ROLES]
    assert set(in_site) <= set(firsts), "not in the picture: %s" % sorted(set(in_site) - set(firsts))
    assert sorted(in_site, key=firsts.get) == in_site


def test_the_readme_stage_table_is_site_yml_order():
    documented = []
    for cells in _table_rows(_doc("README.md"), "| stage | role |"):
        stage = re.sub(r"^\d+\.\s*", "", cells[0]).lower()
        documented.append((stage, _first_role(cells[1])))
    assert documented == [(t, r) for t, r in site_order() if not r.startswith("playbooks/")]
