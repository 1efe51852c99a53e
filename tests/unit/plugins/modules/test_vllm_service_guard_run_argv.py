"""The unit's docker run command composed by vllm_service_guard (run_argv) is the one the role's Jinja composed.

The role's vars/main.yml composed __vllm_service_run_argv (and the served name, the container port, the read-only
mount suffix) in Jinja until issue 32 item 2. A changed unit text restarts every serving host once on upgrade, so the
guard's composition must render the unit BYTE-IDENTICAL to the old one for the same inputs: each case below calls
the module with the arguments the role's guard.yml gives it, renders the old expressions (kept verbatim below, as
they were in roles/vllm_service/vars/main.yml at c6ffc11) on the same inputs, and renders vllm.service.j2 with both.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import itertools
import os
import posixpath
import subprocess

import jinja2
import pytest
import yaml
from jinja2.nativetypes import NativeEnvironment

from ansible_collections.airgap.vllm.plugins.modules import vllm_service_guard as M

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
ROLE = os.path.join(ROOT, "roles", "vllm_service")
OLD_COMMIT = "c6ffc11"

# Verbatim from roles/vllm_service/vars/main.yml at c6ffc11 (checked against git below when the history is there).
OLD_VARS = r"""
__vllm_service_served_name: >-
  {{ __vllm_service_argv[__vllm_service_argv.index('--served-model-name') + 1]
     if '--served-model-name' in __vllm_service_argv else vllm_service_model_dir | basename }}
__vllm_service_container_port: >-
  {{ __vllm_service_argv[__vllm_service_argv.index('--port') + 1] if '--port' in __vllm_service_argv else 8000 }}
__vllm_service_container_logging: /etc/vllm/logging.json
__vllm_service_has_keys: "{{ vllm_service_api_keys | length > 0 }}"
__vllm_service_run_argv: >-
  {{ [vllm_service_docker_bin, 'run', '--rm', '--name', vllm_service_name,
      '--publish', vllm_service_host ~ ':' ~ vllm_service_port ~ ':' ~ __vllm_service_container_port,
      '--env-file', __vllm_service_dir ~ '/container.env',
      '--env', 'VLLM_LOGGING_CONFIG_PATH=' ~ __vllm_service_container_logging,
      '--volume', __vllm_service_dir ~ '/logging.json:' ~ __vllm_service_container_logging ~ __vllm_service_mount_ro,
      '--volume', vllm_service_model_dir ~ ':' ~ vllm_service_model_dir ~ __vllm_service_mount_ro]
     + (['--label', 'org.airgap.vllm.model-version=' ~ vllm_service_model_version]
        if vllm_service_model_version | length > 0 else [])
     + (['--volume', __vllm_service_dir ~ '/keys.yaml:' ~ vllm_service_api_keys_container_path ~ __vllm_service_mount_ro]
        if __vllm_service_has_keys else [])
     + __vllm_service_guard.docker_options
     + [vllm_service_image]
     + __vllm_service_argv
     + (['--config', vllm_service_api_keys_container_path]
        if __vllm_service_has_keys and '--config' not in __vllm_service_argv else []) }}
__vllm_service_selinux_enabled: "{{ (ansible_facts['selinux'] | default({})).status | default('disabled') == 'enabled' }}"
__vllm_service_mount_ro: >-
  {{ ':ro,z' if (vllm_service_selinux_relabel == 'always'
                 or (vllm_service_selinux_relabel == 'auto' and __vllm_service_selinux_enabled | bool)) else ':ro' }}
"""
# Resolution order of the old definitions (each reads only those before it).
OLD_ORDER = (
    "__vllm_service_selinux_enabled",
    "__vllm_service_mount_ro",
    "__vllm_service_container_port",
    "__vllm_service_served_name",
    "__vllm_service_container_logging",
    "__vllm_service_has_keys",
    "__vllm_service_run_argv",
)
OMIT = "__omit_place_holder__"


def _native():
    env = NativeEnvironment()
    env.filters["basename"] = posixpath.basename
    env.filters["bool"] = lambda v: v if isinstance(v, bool) else str(v).lower() in ("1", "true", "yes", "on")
    return env


def _render_vars(definitions, names, ctx):
    env = _native()
    ctx = dict(ctx)
    for name in names:
        value = definitions[name]
        ctx[name] = env.from_string(value).render(**ctx) if isinstance(value, str) else value
    return ctx


def _guard_args(ctx):
    """The module arguments of guard.yml's task, templated with ctx the way the role's task is."""
    with open(os.path.join(ROLE, "tasks", "guard.yml")) as f:
        task = yaml.safe_load(f)[0]
    env = _native()

    def walk(value):
        if isinstance(value, str):
            return env.from_string(value).render(**ctx)
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return dict((k, walk(v)) for k, v in value.items())
        return value

    args = walk(task["airgap.vllm.vllm_service_guard"])
    return dict((k, v) for k, v in args.items() if v != OMIT)


def _unit(ctx, run_argv, served_name):
    with open(os.path.join(ROLE, "templates", "vllm.service.j2")) as f:
        env = jinja2.Environment(keep_trailing_newline=True, trim_blocks=True)
        env.filters["comment"] = lambda s: "#\n# %s\n#" % s
        return env.from_string(f.read()).render(
            dict(
                ctx,
                ansible_managed="Ansible managed",
                __vllm_service_run_argv=run_argv,
                __vllm_service_served_name=served_name,
            )
        )


MODEL = "/srv/models/Qwen3 \"8B\" 100%$HOME"
ARGVS = [
    [MODEL],
    [MODEL, "--served-model-name", "qwen3", "--max-model-len", 32768, "--port", 9000],
    [MODEL, "--port", "8001", "--config", "/etc/vllm/other.yaml", "--gpu-memory-utilization", 0.9],
    [MODEL, "--served-model-name", "a", "b", "--enable-prefix-caching", "--kv-cache-dtype", "fp8"],
]
DOCKER_OPTIONS = [
    [],
    ["--gpus", "all", "--shm-size", "16g", "--security-opt", "seccomp=unconfined"],
    ["--runtime", "nvidia", "--ipc", "host", "--log-opt", "max-size=50m"],
]
KEYS = ([], ["sk-one", "sk-two"])
# (relabel, SELinux fact (None: facts not gathered), API keys, model version, argv, docker options, seccomp, host):
# every relabel choice x SELinux state x keys x version, the rest rotated; then every argv x keys x docker options.
CASES = [
    (
        relabel,
        selinux,
        keys,
        version,
        i % len(ARGVS),
        i % len(DOCKER_OPTIONS),
        ("profile", "docker_default")[i % 2],
        (i // 2) % 2,
    )
    for i, (relabel, selinux, keys, version) in enumerate(
        itertools.product(("auto", "always", "never"), (None, "enabled", "disabled"), KEYS, ("", "20250101-abc"))
    )
] + [
    (
        "auto",
        "enabled" if i % 2 else None,
        keys,
        "" if i % 3 else "v2",
        argv_i,
        opts_i,
        ("profile", "docker_default")[i % 2],
        (i // 3) % 2,
    )
    for i, (argv_i, keys, opts_i) in enumerate(itertools.product(range(len(ARGVS)), KEYS, range(len(DOCKER_OPTIONS))))
]
HOSTS = [("127.0.0.1", 8000, "vllm", False), ("10.20.0.15", 18001, "vllm.b-2", True)]


def _ctx(relabel, selinux, keys, version, argv_i, opts_i, seccomp, host_i):
    host, port, name, expose = HOSTS[host_i]
    argv = ARGVS[argv_i]
    service_dir = "/etc/airgap-vllm/" + name
    ctx = dict(
        ansible_facts={} if selinux is None else {"selinux": {"status": selinux}},
        omit=OMIT,
        vllm_service_selinux_relabel=relabel,
        vllm_service_api_keys=keys,
        vllm_service_model_version=version,
        vllm_service_argv=argv,
        __vllm_service_argv=argv,
        vllm_service_docker_options=DOCKER_OPTIONS[opts_i],
        vllm_service_seccomp=seccomp,
        vllm_service_host=host,
        vllm_service_port=port,
        vllm_service_name=name,
        vllm_service_expose_to_network=expose,
        vllm_service_docker_bin="/usr/bin/docker",
        vllm_service_image="sha256:" + "ab" * 32,
        vllm_service_model_dir=MODEL,
        vllm_service_config_dir="/etc/airgap-vllm",
        __vllm_service_dir=service_dir,
        __vllm_service_seccomp_profile=service_dir + "/seccomp.json",
        vllm_service_api_keys_container_path="/etc/vllm/keys.yaml",
        vllm_service_env={"HF_HUB_OFFLINE": "1"},
        vllm_service_extra_env={},
        vllm_service_allow_docker_options=["--ipc"],
        vllm_service_allow_env_names=[],
        __vllm_service_host={"docker": {"security_options": None if seccomp == "profile" else ["name=seccomp"]}},
    )
    # The role's tasks read the service's settings through one alias (vars/main.yml); the old Jinja read them bare.
    ctx["__vllm_service_settings"] = dict((k, v) for k, v in ctx.items() if k.startswith("vllm_service_"))
    return ctx


def test_the_old_expressions_here_are_the_roles_own_at_the_last_commit_that_had_them():
    try:
        text = subprocess.check_output(
            ["git", "-C", ROOT, "show", OLD_COMMIT + ":roles/vllm_service/vars/main.yml"], stderr=subprocess.DEVNULL
        ).decode("utf-8")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("no git history with %s here" % OLD_COMMIT)
    old = yaml.safe_load(text)
    assert yaml.safe_load(OLD_VARS) == dict((k, old[k]) for k in OLD_ORDER)


@pytest.mark.parametrize(
    "case",
    CASES,
    ids=lambda c: "-".join(str(x) if x != [] else "nokeys" for x in c).replace("['sk-one', 'sk-two']", "keys"),
)
def test_the_guards_run_argv_renders_the_unit_byte_identical_to_the_old_jinja(run_module, case):
    relabel, selinux, keys, version, argv_i, opts_i, seccomp, host_i = case
    ctx = _ctx(relabel, selinux, keys, version, argv_i, opts_i, seccomp, host_i)
    with open(os.path.join(ROLE, "vars", "main.yml")) as f:
        new_vars = yaml.safe_load(f)
    ctx = _render_vars(new_vars, ["__vllm_service_selinux_enabled"], ctx)
    new = run_module(M, **_guard_args(ctx))
    assert "failed" not in new, new.get("msg")
    old = _render_vars(yaml.safe_load(OLD_VARS), OLD_ORDER, dict(ctx, __vllm_service_guard=new))
    assert new["run_argv"] == [str(w) for w in old["__vllm_service_run_argv"]]
    assert new["served_model_name"] == str(old["__vllm_service_served_name"])
    assert new["container_port"] == str(old["__vllm_service_container_port"])
    # The role's definitions now read the guard's result; the unit rendered from them is the old unit, byte for byte.
    now = _render_vars(
        new_vars, ["__vllm_service_run_argv", "__vllm_service_served_name"], dict(ctx, __vllm_service_guard=new)
    )
    before = _unit(ctx, old["__vllm_service_run_argv"], old["__vllm_service_served_name"])
    after = _unit(ctx, now["__vllm_service_run_argv"], now["__vllm_service_served_name"])
    assert after == before
    assert ("--label" in after) and ('"org.airgap.vllm.service=%s"' % ctx["vllm_service_name"]) in after


def test_the_old_and_new_mount_suffix_agree_case_by_case():
    """Every relabel choice against every SELinux state: the relabel (`z`) exactly where the old Jinja put it."""
    seen = set()
    for relabel, selinux in itertools.product(("auto", "always", "never"), (None, "enabled", "disabled", "permissive")):
        ctx = _ctx(relabel, selinux, [], "", 0, 0, "docker_default", 0)
        with open(os.path.join(ROLE, "vars", "main.yml")) as f:
            ctx = _render_vars(yaml.safe_load(f), ["__vllm_service_selinux_enabled"], ctx)
        old = _render_vars(yaml.safe_load(OLD_VARS), OLD_ORDER[:2], ctx)["__vllm_service_mount_ro"]
        seen.add(old)
        from ansible_collections.airgap.vllm.plugins.module_utils.service._service_guard import mount_suffix

        assert mount_suffix(relabel, ctx["__vllm_service_selinux_enabled"]) == old
    assert seen == {":ro", ":ro,z"}
