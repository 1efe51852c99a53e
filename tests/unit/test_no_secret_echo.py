"""No task can print a secret (issue 42 item 1), checked from the roles' and playbooks' YAML.

The secret-carrying names are _secrets.SECRET_VARIABLES (the API keys, the container environment, the front door's
client keys and metrics tokens) and _secrets.SECRET_CARRIERS (the lists of per-service settings that may hold them),
plus every variable and fact made from one of them: a role's vars/defaults, a task's vars and a set_fact of a
task that reads a secret (found here, to a fixed point). A task that reads one of them in what it may print (its
arguments, its loop, a message) must be no_log; one that writes a file from a template that reads one must be
no_log and diff: false. What cannot print a value is allowed without: a condition (when, that, changed_when, ...),
a length or membership test, an include or import (the included tasks are checked themselves), an argument
the module declares no_log, a field _secrets.PUBLIC_FIELDS names, and the redacted part of service_vars.

Run against another tree (e.g. main's, to see it fail): AIRGAP_SECRET_ECHO_ROOT=/path/to/tree pytest this file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import glob
import os
import re

import pytest
import yaml

from ansible_collections.airgap.vllm.plugins.module_utils.common._secrets import (
    PUBLIC_FIELDS,
    SECRET_CARRIERS,
    SECRET_VARIABLES,
    is_secret_name,
)

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROOT = os.environ.get("AIRGAP_SECRET_ECHO_ROOT") or HERE

# Parts of a carrier that hold no secret: (carrier, first attribute) -> why.
SAFE_PARTS = {
    ("__vllm_front_inputs", "services"): "front_inputs: client and metrics keys as SHA-256 digests only",
    ("__airgap_vllm_services", "preflight"): "service_instances: name, host port and GPUs of each service",
    ("__airgap_vllm_services", "gpu_memory_utilization"): "a number",
    ("__airgap_vllm_services", "kv_offloading"): "a boolean",
    ("__airgap_vllm_services", "variables"): "the names the services set, no values",
}
# A service's settings, read one by one (roles' vars/main.yml): a setting is secret when its name is.
SETTINGS_ALIASES = ("__vllm_service_settings", "__vllm_plan_settings")
# Carriers found from the tree once (they do not change during a test run).
_CACHE = {}
CONDITION_KEYS = ("when", "changed_when", "failed_when", "until", "that")
INCLUDES = (
    "ansible.builtin.include_tasks",
    "ansible.builtin.import_tasks",
    "ansible.builtin.include_role",
    "ansible.builtin.import_role",
)
FILE_WRITERS = ("ansible.builtin.template", "ansible.builtin.copy")
TASK_KEYWORDS = frozenset(
    "name tags when changed_when failed_when until retries delay register no_log diff check_mode become become_user"
    " delegate_to run_once ignore_errors notify loop loop_control vars environment args async poll listen throttle"
    " delegate_facts any_errors_fatal ignore_unreachable timeout with_items with_dict".split()
)
JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)


class _Loader(yaml.SafeLoader):
    pass


def _tagged(loader, suffix, node):
    """!unsafe, !vault and the like: their text (a scalar), else nothing."""
    return loader.construct_scalar(node) if isinstance(node, yaml.ScalarNode) else None


_Loader.add_multi_constructor("!", _tagged)


def _load(path):
    with open(path) as handle:
        return yaml.load(handle, Loader=_Loader)


def _strings(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


def _expressions(value, raw=False):
    """The Jinja a value holds: every {{ }} / {% %} of its strings; a condition is Jinja as a whole."""
    for s in _strings(value):
        if raw:
            yield s
        else:
            for m in JINJA.finditer(s):
                yield m.group(0)


def _blank_literals(expr):
    """expr with the inside of its quoted strings blanked (a name in a message's text is no reference)."""
    return re.sub(r"'[^']*'|\"[^\"]*\"", lambda m: m.group(0)[0] + " " * (len(m.group(0)) - 2) + m.group(0)[-1], expr)


def _secret_refs(expr, carriers):
    """The references to carriers in expr that may hold a secret value (exemptions above applied)."""
    found = []
    masked = _blank_literals(expr)
    for name in carriers:
        for m in re.finditer(r"(?<![\w.])%s\b((?:\.\w+|\[['\"]\w+['\"]\])?)" % re.escape(name), masked):
            attr = expr[m.start(1) : m.end(1)].strip(".[]'\"")
            if attr and (name, attr) in SAFE_PARTS:
                continue
            if attr and attr in PUBLIC_FIELDS.get(name, ()):
                continue
            if attr and name in SETTINGS_ALIASES:
                # The setting read is the reference: public by its name, or a public field of a secret one.
                field = re.match(r"\.(\w+)", expr[m.end() :])
                if not is_secret_name(attr) or (field and field.group(1) in PUBLIC_FIELDS.get(attr, ())):
                    continue
            before, after = expr[: m.start()], expr[m.end() :]
            if re.match(r"\s*\|\s*length\b", after) or re.match(r"\s*is\s+(not\s+)?defined\b", after):
                continue
            if re.search(r"\bin\s*$", before) and not re.search(r"\bfor\s+\w+\s+in\s*$", before):
                continue
            if re.match(r"\s*\|\s*airgap\.vllm\.service_vars\((?:(?!\}\}).)*part='public'", after, re.S):
                continue
            if re.match(r"\s*\|\s*airgap\.vllm\.redacted\b", after):
                continue
            found.append(name + (("." + attr) if attr else ""))
    return found


def _module_options(path):
    """{option: (type, no_log)} of every dict(...) entry of a module's argument_spec (read with ast, not run)."""
    with open(path) as handle:
        tree = ast.parse(handle.read())
    out = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "dict"):
            continue
        for keyword in node.keywords:
            value = keyword.value
            if keyword.arg and isinstance(value, ast.Call) and getattr(value.func, "id", None) == "dict":
                spec = dict((k.arg, getattr(k.value, "value", None)) for k in value.keywords if k.arg)
                if "type" in spec or "no_log" in spec or "required" in spec or "default" in spec:
                    out[keyword.arg] = (spec.get("type"), spec.get("no_log") is True)
    return out


def _no_log_options(module):
    """The options an airgap.vllm module declares no_log=True in its argument_spec."""
    path = os.path.join(ROOT, "plugins", "modules", module.split(".")[-1] + ".py")
    if not module.startswith("airgap.vllm.") or not os.path.exists(path):
        return frozenset()
    return frozenset(name for name, (_type, no_log) in _module_options(path).items() if no_log)


def _action(task):
    for key in task:
        if key not in TASK_KEYWORDS and key not in ("block", "rescue", "always"):
            return key
    return None


def _task_files():
    files = []
    for pattern in ("roles/*/tasks/*.yml", "roles/*/handlers/*.yml", "playbooks/*.yml", "playbooks/tasks/*.yml"):
        files.extend(sorted(glob.glob(os.path.join(ROOT, pattern))))
    return files


def _tasks(path):
    """(task, inherited no_log, inherited diff) of every task of a tasks file or playbook, blocks flattened."""
    data = _load(path)
    out = []

    def walk(tasks, no_log, diff):
        for task in tasks or []:
            if not isinstance(task, dict):
                continue
            task_no_log = task.get("no_log", no_log)
            task_diff = task.get("diff", diff)
            if "block" in task:
                for part in ("block", "rescue", "always"):
                    walk(task.get(part), task_no_log, task_diff)
            else:
                out.append((task, task_no_log, task_diff))

    for item in data or []:
        if isinstance(item, dict) and ("hosts" in item or "import_playbook" in item):
            for part in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                walk(item.get(part), item.get("no_log"), item.get("diff"))
        else:
            walk([item], None, None)
    return out


def _role_of(path):
    rel = os.path.relpath(path, ROOT).split(os.sep)
    return rel[1] if rel[0] == "roles" else None


def _carriers():
    """Every secret-carrying name: the listed ones, then role vars/defaults and set_facts made from them."""
    if "carriers" not in _CACHE:
        _CACHE["carriers"] = _find_carriers()
    return _CACHE["carriers"]


def _find_carriers():
    carriers = set(SECRET_VARIABLES) | set(SECRET_CARRIERS)
    var_files = glob.glob(os.path.join(ROOT, "roles", "*", "vars", "*.yml"))
    var_files += glob.glob(os.path.join(ROOT, "roles", "*", "defaults", "*.yml"))
    all_tasks = [t for path in _task_files() for t, _n, _d in _tasks(path)]
    while True:
        before = len(carriers)
        for path in var_files:
            for name, value in (_load(path) or {}).items():
                if name not in carriers and any(_secret_refs(e, carriers) for e in _expressions(value)):
                    carriers.add(name)
        for task in all_tasks:
            facts = task.get("ansible.builtin.set_fact")
            if isinstance(facts, dict):
                scope = set(carriers) | set(
                    n
                    for n, v in (task.get("vars") or {}).items()
                    if any(_secret_refs(e, carriers) for e in _expressions(v))
                )
                for name, value in facts.items():
                    if name not in carriers and any(_secret_refs(e, scope) for e in _expressions(value)):
                        carriers.add(name)
        if len(carriers) == before:
            return carriers


def _secret_templates(role):
    carriers = _carriers()
    out = set()
    for path in glob.glob(os.path.join(ROOT, "roles", role, "templates", "*")):
        with open(path) as handle:
            text = handle.read()
        if any(_secret_refs(e, carriers) for e in JINJA.findall(text)):
            out.add(os.path.basename(path))
    return out


def leaks():
    """[(file, task name, why)] of every task that may print a secret."""
    carriers = _carriers()
    out = []
    for path in _task_files():
        rel = os.path.relpath(path, ROOT)
        role = _role_of(path)
        for task, no_log, diff in _tasks(path):
            action = _action(task)
            if action in INCLUDES or action is None:
                continue
            scope = set(carriers) | set(
                n
                for n, v in (task.get("vars") or {}).items()
                if any(_secret_refs(e, carriers) for e in _expressions(v))
            )
            safe_options = _no_log_options(action)
            refs = []
            args = task.get(action)
            for key, value in args.items() if isinstance(args, dict) else [(None, args)]:
                if key in safe_options:
                    continue
                for expr in _expressions(value):
                    refs.extend(_secret_refs(expr, scope))
            for key in ("loop", "with_items", "with_dict", "loop_control", "environment", "args"):
                for expr in _expressions(task.get(key)):
                    refs.extend(_secret_refs(expr, scope))
            writes_secret = False
            if action in FILE_WRITERS and isinstance(args, dict):
                src = str(args.get("src", ""))
                secret_templates = _secret_templates(role) if role else set()
                if "{{" not in src and src in secret_templates:
                    writes_secret = True
                elif "{{" in src and secret_templates and "_secret_files" not in str(task.get("loop")):
                    writes_secret = True
                if any(_secret_refs(e, scope) for e in _expressions(args.get("content"))):
                    writes_secret = True
            if refs and no_log is not True and not (isinstance(no_log, str) and "{{" in no_log):
                out.append((rel, task.get("name"), "prints %s: not no_log" % ", ".join(sorted(set(refs)))))
            if writes_secret and (no_log is not True or diff is not False):
                out.append((rel, task.get("name"), "writes a secret file: needs no_log: true and diff: false"))
    return out


def test_no_task_can_print_a_secret():
    found = leaks()
    assert found == [], "\n".join("%s: %s: %s" % leak for leak in found)


def test_the_secret_carriers_include_what_the_roles_make_of_the_secrets():
    carriers = _carriers()
    assert {"__vllm_service_secrets", "__vllm_front_inputs", "__airgap_vllm_services"} <= carriers
    # A count or a yes/no made from a secret is not one.
    assert "__vllm_service_has_keys" not in carriers


@pytest.mark.parametrize(
    "expr,leaks_",
    [
        ("{{ vllm_service_api_keys }}", True),
        ("{{ vllm_service_api_keys[0] }}", True),
        ("{{ 'Bearer ' ~ vllm_service_extra_env.HF_TOKEN }}", True),
        ("{{ vllm_service_api_keys | length > 0 }}", False),
        ("{{ vllm_service_api_keys is defined }}", False),
        ("{{ 'VLLM_CPU_KVCACHE_SPACE' in vllm_service_extra_env }}", False),
        ("{{ vllm_service_extra_env.VLLM_CPU_KVCACHE_SPACE }}", False),
        ("{{ __vllm_front_inputs.services }}", False),
        ("{{ __vllm_front_inputs.engine_keys }}", True),
        ("{{ vllm_service_instances | airgap.vllm.service_vars(v, p, part='public') }}", False),
        ("{{ vllm_service_instances | airgap.vllm.service_vars(v, p) }}", True),
        ("{{ __vllm_service_settings.vllm_service_port }}", False),
        ("{{ __vllm_service_settings.vllm_service_api_keys[0] }}", True),
        ("{{ __vllm_service_settings }}", True),
        ("{{ __vllm_service_settings.vllm_service_extra_env.VLLM_CPU_KVCACHE_SPACE }}", False),
        ("{{ __vllm_service_settings.vllm_service_extra_env.HF_TOKEN }}", True),
        ("{{ my_vllm_service_api_keys }}", False),
        ("{{ 'see vllm_front_metrics_tokens in docs' }}", False),
        ("{{ airgap_vllm_services | airgap.vllm.redacted }}", False),
        ("{{ __vllm_front_inputs['engine_keys'] }}", True),
    ],
)
def test_what_counts_as_printing_a_secret(expr, leaks_):
    carriers = set(SECRET_VARIABLES) | set(SECRET_CARRIERS) | {"__vllm_front_inputs"} | set(SETTINGS_ALIASES)
    assert bool(_secret_refs(expr, carriers)) is leaks_


def test_every_module_option_that_holds_a_secret_is_no_log():
    """A module taking a secret declares it no_log (Ansible then masks it wherever the task's output repeats it)."""
    missing = []
    for path in sorted(glob.glob(os.path.join(ROOT, "plugins", "modules", "*.py"))):
        for name, (kind, no_log) in sorted(_module_options(path).items()):
            if is_secret_name(name) and kind not in ("bool", "int", "float") and not no_log:
                missing.append("%s: %s" % (os.path.basename(path), name))
    assert missing == []


def test_modules_declare_their_secret_options_no_log():
    assert {"api_keys", "extra_env", "env"} <= _no_log_options("airgap.vllm.vllm_service_guard")
    assert "engine_keys" in _no_log_options("airgap.vllm.vllm_front_config")
    assert "token" in _no_log_options("airgap.vllm.bundle_peer_fetch")


def _spec_leaks(where, name, spec):
    """The options of an argument_specs entry that hold a secret and are not no_log (their sub-options checked)."""
    if spec.get("no_log") is True or spec.get("type") in ("bool", "int", "float"):
        return []
    if spec.get("options"):
        out = []
        for sub, sub_spec in sorted(spec["options"].items()):
            out.extend(_spec_leaks("%s.%s" % (where, name), sub, sub_spec or {}))
        return out
    return ["%s.%s" % (where, name)] if is_secret_name(name) or name in SECRET_VARIABLES else []


def test_every_role_option_that_holds_a_secret_is_no_log():
    """Role argument validation and the validate play hide what a no_log option holds (and only that)."""
    missing = []
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml"))):
        role = path.split(os.sep)[-3]
        for entry, data in sorted((_load(path) or {}).get("argument_specs", {}).items()):
            for name, spec in sorted((data.get("options") or {}).items()):
                missing.extend(_spec_leaks("%s/%s" % (role, entry), name, spec or {}))
    assert missing == []
