"""airgap.vllm.vllm_service_config_expected and airgap.vllm.vllm_service_config_fingerprint as vllm_service's
tasks/configure.yml calls them, checked against the Jinja they replaced (copied verbatim from the role before issue 32
item 2): the same expected list (host_info's paths) and the same fingerprint (stored in hosts' state records)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib

import pytest
import yaml
from jinja2.nativetypes import NativeEnvironment

from ansible.plugins.filter.core import FilterModule as CoreFilters
from ansible.plugins.filter.mathstuff import FilterModule as MathFilters

from ..module_utils.test__service_config import DIR, FILES, PROFILE, SECRET
from .conftest import load_filters

TEMPLATES = {
    "vllm.service.j2": "# Ansible managed\n[Unit]\nDescription=vLLM Qwen3\nExecStart=/usr/bin/docker run\n",
    "logging.json.j2": "{\n  \"version\": 1\n}",
    "container.env.j2": "# Ansible managed\nHF_TOKEN=hf_s3cret-\u00e9\nVLLM_USE_V1=1\n",
    "keys.yaml.j2": "# Ansible managed\napi-key:\n  - \"sk-1\"\n",
}
FILE_LOOKUPS = {"seccomp-clone3-enosys.json": "{\"defaultAction\": \"SCMP_ACT_ERRNO\"}\n"}

# The role's tasks before issue 32 item 2 (tasks/configure.yml), verbatim.
OLD_EXPECTED = yaml.safe_load(r"""
    - name: Hash the configuration this run would write
      ansible.builtin.set_fact:
        __vllm_service_config_expected: >-
          {%- set expected = [{'path': __vllm_service_dir, 'type': 'directory', 'mode': '0700'},
                              {'path': __vllm_service_dir ~ '/last-good', 'type': 'directory', 'mode': '0700'}] -%}
          {%- if vllm_service_seccomp == 'profile' -%}
          {%-   set _ = expected.append({'path': __vllm_service_seccomp_profile, 'mode': '0600',
                  'sha1': lookup('ansible.builtin.file', 'seccomp-clone3-enosys.json', rstrip=false) | hash('sha1')}) -%}
          {%- endif -%}
          {%- for file in __vllm_service_files | rejectattr('src', 'in', __vllm_service_secret_files) -%}
          {%-   set _ = expected.append({'path': file.dest, 'mode': file.mode,
                  'sha1': lookup('ansible.builtin.template', file.src, convert_data=false) | hash('sha1')}) -%}
          {%- endfor -%}
          {{ expected }}

    - name: Hash the secret files this run would write (never shown)
      ansible.builtin.set_fact:
        __vllm_service_config_expected: >-
          {%- set expected = __vllm_service_config_expected -%}
          {%- for file in __vllm_service_files | selectattr('src', 'in', __vllm_service_secret_files) -%}
          {%-   set _ = expected.append({'path': file.dest, 'mode': file.mode,
                  'sha1': lookup('ansible.builtin.template', file.src, convert_data=false) | hash('sha1')}) -%}
          {%- endfor -%}
          {{ expected }}
      no_log: true
""")
OLD_FINGERPRINT = yaml.safe_load(r"""
        __vllm_service_config_fingerprint: >-
          {{ (((__vllm_service_files | rejectattr('src', 'in', __vllm_service_secret_files) | map(attribute='dest') | list)
               + [__vllm_service_dir ~ '/container.env', __vllm_service_dir ~ '/keys.yaml']
              ) | map('extract', __vllm_service_config_probe.paths) | map(attribute='sha1') | list
              + [__vllm_service_config_probe.paths[__vllm_service_seccomp_profile].sha1
                 if vllm_service_seccomp == 'profile' else '']) | join(',') | hash('sha256')
             if __vllm_service_config_converged else
             ((__vllm_service_written.results | default([]) | map(attribute='checksum', default='') | list)
              + [__vllm_service_env_written.checksum | default(''), __vllm_service_keys_written.checksum | default(''),
                 __vllm_service_seccomp_written.checksum | default('')]) | join(',') | hash('sha256') }}
""")["__vllm_service_config_fingerprint"]

# The new tasks' expressions, as tasks/configure.yml has them.
NEW_PUBLIC = (
    "{{ __vllm_service_files | airgap.vllm.vllm_service_config_expected("
    " dict(__vllm_service_public_srcs | zip(query('ansible.builtin.template', *__vllm_service_public_srcs,"
    " convert_data=false))),"
    " config_dir=__vllm_service_dir, secret=__vllm_service_secret_files, part='public',"
    " seccomp=vllm_service_seccomp, seccomp_profile=__vllm_service_seccomp_profile,"
    " seccomp_text=lookup('ansible.builtin.file', 'seccomp-clone3-enosys.json', rstrip=false)) }}"
)
PUBLIC_SRCS = "{{ __vllm_service_files | map(attribute='src') | reject('in', __vllm_service_secret_files) | list }}"
NEW_SECRET = (
    "{{ __vllm_service_files | airgap.vllm.vllm_service_config_expected("
    " dict(__vllm_service_secret_files | zip(query('ansible.builtin.template', *__vllm_service_secret_files,"
    " convert_data=false))),"
    " secret=__vllm_service_secret_files, part='secret', expected=__vllm_service_config_expected) }}"
)
NEW_FINGERPRINT = (
    "{{ __vllm_service_config_probe | airgap.vllm.vllm_service_config_fingerprint("
    " converged=__vllm_service_config_converged, files=__vllm_service_files,"
    " secret=__vllm_service_secret_files, seccomp=vllm_service_seccomp,"
    " seccomp_profile=__vllm_service_seccomp_profile, written=__vllm_service_written,"
    " secret_written=[__vllm_service_env_written, __vllm_service_keys_written],"
    " seccomp_written=__vllm_service_seccomp_written) }}"
)


def lookup(name, *terms, **kwargs):
    """Ansible's template and file lookups on the sample texts (one term: the text; query: the list)."""
    texts = query(name, *terms, **kwargs)
    return texts[0] if len(texts) == 1 else ",".join(texts)


def query(name, *terms, **kwargs):
    table = {"ansible.builtin.template": TEMPLATES, "ansible.builtin.file": FILE_LOOKUPS}[name]
    return [table[term] for term in terms]


@pytest.fixture(scope="module")
def ansible_render():
    """Jinja with Ansible's own filters (hash, extract, zip, ...), the lookups and this collection's filters."""
    env = NativeEnvironment()
    env.filters.update(CoreFilters().filters())
    env.filters.update(MathFilters().filters())
    env.filters.update(load_filters())
    env.globals.update(lookup=lookup, query=query, dict=dict)

    def run(expression, **variables):
        return env.from_string(expression).render(**variables)

    return run


def role_vars(seccomp="profile"):
    return {
        "__vllm_service_dir": DIR,
        "__vllm_service_files": [dict(f) for f in FILES],
        "__vllm_service_secret_files": list(SECRET),
        "__vllm_service_seccomp_profile": PROFILE,
        "vllm_service_seccomp": seccomp,
    }


def old_expected(ansible_render, v):
    public = ansible_render(OLD_EXPECTED[0]["ansible.builtin.set_fact"]["__vllm_service_config_expected"], **v)
    return ansible_render(
        OLD_EXPECTED[1]["ansible.builtin.set_fact"]["__vllm_service_config_expected"],
        **dict(v, __vllm_service_config_expected=public),
    )


def new_expected(ansible_render, v):
    srcs = ansible_render(PUBLIC_SRCS, **v)
    public = ansible_render(NEW_PUBLIC, __vllm_service_public_srcs=srcs, **v)
    return public, ansible_render(NEW_SECRET, **dict(v, __vllm_service_config_expected=public))


def sha1(text):
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def test_the_old_tasks_are_the_ones_the_role_had():
    assert [t["name"] for t in OLD_EXPECTED] == [
        "Hash the configuration this run would write",
        "Hash the secret files this run would write (never shown)",
    ]
    assert OLD_EXPECTED[1]["no_log"] is True


@pytest.mark.parametrize("seccomp", ["profile", "unconfined", "docker_default"])
def test_expected_list_identical_to_the_old_jinja(ansible_render, seccomp):
    v = role_vars(seccomp)
    public, full = new_expected(ansible_render, v)
    assert full == old_expected(ansible_render, v)
    # The shown part carries no secret file; the list is host_info's paths option as it was.
    assert [e["path"] for e in public] == [DIR, DIR + "/last-good"] + ([PROFILE] if seccomp == "profile" else []) + [
        "/etc/systemd/system/vllm.service",
        DIR + "/logging.json",
    ]
    assert full[-1] == {"path": DIR + "/keys.yaml", "mode": "0600", "sha1": sha1(TEMPLATES["keys.yaml.j2"])}


def converged_probe(v, expected):
    """host_info's answer when every path is as expected (paths: {path: state}; nothing differing)."""
    paths = {}
    for e in expected:
        paths[e["path"]] = {"type": e.get("type", "file"), "mode": e["mode"], "uid": 0, "gid": 0, "sha1": e.get("sha1")}
    return {"paths": paths, "paths_differing": [], "files": {DIR + "/metrics-firewalld.json": None}}


def written_results(seccomp, checksums=True):
    def written(src, changed=True):
        r = {"changed": changed, "dest": src, "diff": []}
        if checksums:
            r["checksum"] = sha1(TEMPLATES[src])
        return r

    loop = {
        "changed": True,
        "results": [dict(written(f["src"]), item=f, ansible_loop_var="item") for f in FILES if f["src"] not in SECRET],
    }
    env = dict(written("container.env.j2"), censored="the output has been hidden")
    keys = dict(written("keys.yaml.j2", changed=False))
    if seccomp == "profile":
        sec = {"changed": True, "checksum": sha1(FILE_LOOKUPS["seccomp-clone3-enosys.json"])}
    else:
        sec = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}
    return loop, env, keys, sec


def fingerprints(ansible_render, v, converged, probe, written):
    loop, env, keys, sec = written
    facts = dict(
        v,
        __vllm_service_config_converged=converged,
        __vllm_service_config_probe=probe,
        __vllm_service_written=loop,
        __vllm_service_env_written=env,
        __vllm_service_keys_written=keys,
        __vllm_service_seccomp_written=sec,
    )
    return ansible_render(OLD_FINGERPRINT, **facts), ansible_render(NEW_FINGERPRINT, **facts)


@pytest.mark.parametrize("seccomp", ["profile", "unconfined", "docker_default"])
def test_fingerprint_identical_to_the_old_jinja_converged(ansible_render, seccomp):
    v = role_vars(seccomp)
    expected = new_expected(ansible_render, v)[1]
    skipped = (
        {"skipped": True, "results": [{"skipped": True}] * 2},
        {"skipped": True},
        {"skipped": True},
        {"skipped": True},
    )
    old, new = fingerprints(ansible_render, v, True, converged_probe(v, expected), skipped)
    assert new == old
    # Spelled out: today's list - the files' SHA-1s, the profile's or '' - joined with ',' and hashed.
    sums = [sha1(TEMPLATES[f["src"]]) for f in FILES]
    sums.append(sha1(FILE_LOOKUPS["seccomp-clone3-enosys.json"]) if seccomp == "profile" else "")
    assert new == hashlib.sha256(",".join(sums).encode("utf-8")).hexdigest()


@pytest.mark.parametrize("seccomp", ["profile", "docker_default"])
@pytest.mark.parametrize("checksums", [True, False])
def test_fingerprint_identical_to_the_old_jinja_written(ansible_render, seccomp, checksums):
    v = role_vars(seccomp)
    expected = new_expected(ansible_render, v)[1]
    # Not converged: the probe's checksums must not count, the writes' must.
    probe = converged_probe(v, expected)
    probe["paths_differing"] = [DIR + "/keys.yaml"]
    probe["paths"][DIR + "/keys.yaml"]["sha1"] = "0" * 40
    old, new = fingerprints(ansible_render, v, False, probe, written_results(seccomp, checksums))
    assert new == old
    if checksums:
        # Written and converged give the same fingerprint: a re-run after the writes copies nothing again.
        conv_old, conv_new = fingerprints(
            ansible_render, v, True, converged_probe(v, expected), written_results(seccomp)
        )
        assert new == conv_new == conv_old
    else:
        # Writes that returned no checksum count as '' each (the profile's copy still returned one).
        last = sha1(FILE_LOOKUPS["seccomp-clone3-enosys.json"]) if seccomp == "profile" else ""
        assert new == hashlib.sha256(("," * 4 + last).encode("utf-8")).hexdigest()


def test_fingerprint_of_an_empty_loop_result_identical(ansible_render):
    v = role_vars("docker_default")
    loop, env, keys, sec = written_results("docker_default")
    loop = {"skipped": True}  # no results at all: default([]) in the old Jinja
    old, new = fingerprints(ansible_render, v, False, {"paths": {}}, (loop, env, keys, sec))
    assert new == old


def test_the_filters_as_documented(render):
    public = render(
        "{{ files | airgap.vllm.vllm_service_config_expected(rendered, config_dir=dir, secret=secret,"
        " part='public') }}",
        files=FILES,
        rendered=TEMPLATES,
        dir=DIR,
        secret=SECRET,
    )
    assert [e["path"] for e in public] == [
        DIR,
        DIR + "/last-good",
        "/etc/systemd/system/vllm.service",
        DIR + "/logging.json",
    ]
    assert render(
        "{{ files | airgap.vllm.vllm_service_config_expected(rendered, config_dir=dir) }}",
        files=FILES,
        rendered=TEMPLATES,
        dir=DIR,
    )[2:] == [{"path": f["dest"], "mode": f["mode"], "sha1": sha1(TEMPLATES[f["src"]])} for f in FILES]
    with pytest.raises(ValueError, match="no rendered text for container.env.j2"):
        render(
            "{{ files | airgap.vllm.vllm_service_config_expected({}, secret=secret, part='secret') }}",
            files=FILES,
            secret=SECRET,
        )
    fp = render(
        "{{ probe | airgap.vllm.vllm_service_config_fingerprint(converged=false, files=files) }}", probe={}, files=FILES
    )
    assert fp == hashlib.sha256(b"").hexdigest()
