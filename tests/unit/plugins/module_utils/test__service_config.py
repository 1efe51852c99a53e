"""The vllm_service configuration's expected paths and fingerprint (issue 32 item 2): the decisions
roles/vllm_service/tasks/configure.yml made in Jinja loops, kept as they were, in one home."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.service import _service_config as sc

DIR = "/etc/airgap-vllm/vllm"
PROFILE = DIR + "/seccomp.json"
SECRET = ["container.env.j2", "keys.yaml.j2"]
FILES = [
    {"src": "vllm.service.j2", "dest": "/etc/systemd/system/vllm.service", "mode": "0644"},
    {"src": "logging.json.j2", "dest": DIR + "/logging.json", "mode": "0644"},
    {"src": "container.env.j2", "dest": DIR + "/container.env", "mode": "0600"},
    {"src": "keys.yaml.j2", "dest": DIR + "/keys.yaml", "mode": "0600"},
]
TEXTS = {
    "vllm.service.j2": "[Unit]\nDescription=vLLM\n",
    "logging.json.j2": "{}\n",
    "container.env.j2": "HF_TOKEN=s3cret-é\n",
    "keys.yaml.j2": "api-key:\n  - \"k\"\n",
}


def sha1(text):
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def public_texts():
    return dict((k, v) for k, v in TEXTS.items() if k not in SECRET)


def test_text_sha1_is_ansibles_hash_of_the_utf8_text():
    assert sc.text_sha1("é") == hashlib.sha1("é".encode("utf-8")).hexdigest()
    assert sc.text_sha1(b"\xff") == hashlib.sha1(b"\xff").hexdigest()
    # Bytes a file lookup could not decode come back as they were (surrogateescape, as Ansible's to_bytes).
    assert sc.text_sha1(b"\xff".decode("utf-8", "surrogateescape")) == hashlib.sha1(b"\xff").hexdigest()


def test_config_files_public_then_secret_each_in_files_order():
    assert [f["src"] for f in sc.config_files(FILES, SECRET, "public")] == ["vllm.service.j2", "logging.json.j2"]
    assert [f["src"] for f in sc.config_files(FILES, list(reversed(SECRET)), "secret")] == SECRET
    mixed = [FILES[2], FILES[0], FILES[3], FILES[1]]
    assert [f["src"] for f in sc.config_files(mixed, SECRET, "all")] == [
        "vllm.service.j2",
        "logging.json.j2",
        "container.env.j2",
        "keys.yaml.j2",
    ]
    with pytest.raises(ValueError, match="part must be one of"):
        sc.config_files(FILES, SECRET, "everything")


def test_public_part_directories_profile_then_files():
    out = sc.expected_paths(DIR, FILES, public_texts(), SECRET, "public", "profile", PROFILE, "{\"x\": 1}\n")
    assert out == [
        {"path": DIR, "type": "directory", "mode": "0700"},
        {"path": DIR + "/last-good", "type": "directory", "mode": "0700"},
        {"path": PROFILE, "mode": "0600", "sha1": sha1("{\"x\": 1}\n")},
        {"path": "/etc/systemd/system/vllm.service", "mode": "0644", "sha1": sha1(TEXTS["vllm.service.j2"])},
        {"path": DIR + "/logging.json", "mode": "0644", "sha1": sha1("{}\n")},
    ]


@pytest.mark.parametrize("seccomp", ["unconfined", "docker_default", ""])
def test_no_profile_entry_unless_seccomp_profile(seccomp):
    out = sc.expected_paths(DIR, FILES, public_texts(), SECRET, "public", seccomp, PROFILE, "ignored")
    assert [e["path"] for e in out] == [
        DIR,
        DIR + "/last-good",
        "/etc/systemd/system/vllm.service",
        DIR + "/logging.json",
    ]


def test_secret_part_appends_to_the_public_list_without_changing_it():
    public = sc.expected_paths(DIR, FILES, public_texts(), SECRET, "public")
    before = [dict(e) for e in public]
    secret = dict((k, TEXTS[k]) for k in SECRET)
    out = sc.expected_paths("", FILES, secret, SECRET, "secret", expected=public)
    assert public == before
    assert out[: len(public)] == public
    assert out[len(public) :] == [
        {"path": DIR + "/container.env", "mode": "0600", "sha1": sha1(TEXTS["container.env.j2"])},
        {"path": DIR + "/keys.yaml", "mode": "0600", "sha1": sha1(TEXTS["keys.yaml.j2"])},
    ]
    # Both parts at once give the same list.
    assert sc.expected_paths(DIR, FILES, TEXTS, SECRET, "all") == out


def test_a_missing_text_or_profile_is_an_error_never_a_skipped_file():
    with pytest.raises(ValueError, match="no rendered text for logging.json.j2"):
        sc.expected_paths(DIR, FILES, {"vllm.service.j2": ""}, SECRET, "public")
    with pytest.raises(ValueError, match="needs the profile's path and text"):
        sc.expected_paths(DIR, FILES, public_texts(), SECRET, "public", "profile", PROFILE, None)
    with pytest.raises(ValueError, match="only with part='secret'"):
        sc.expected_paths(DIR, FILES, TEXTS, SECRET, "all", expected=[{"path": "/x"}])


def probe_paths(seccomp_sha1="p" * 40):
    paths = dict(
        (f["dest"], {"type": "file", "mode": f["mode"], "uid": 0, "gid": 0, "sha1": sha1(TEXTS[f["src"]])})
        for f in FILES
    )
    paths[PROFILE] = {"type": "file", "mode": "0600", "uid": 0, "gid": 0, "sha1": seccomp_sha1}
    paths[DIR] = {"type": "directory", "mode": "0700", "uid": 0, "gid": 0, "sha1": None}
    return paths


def test_converged_checksums_from_the_probe_in_order():
    assert sc.fingerprint_checksums(True, FILES, SECRET, "profile", PROFILE, probe_paths()) == [
        sha1(TEXTS["vllm.service.j2"]),
        sha1("{}\n"),
        sha1(TEXTS["container.env.j2"]),
        sha1(TEXTS["keys.yaml.j2"]),
        "p" * 40,
    ]
    assert sc.fingerprint_checksums(True, FILES, SECRET, "docker_default", PROFILE, probe_paths())[-1] == ""


def test_written_checksums_from_the_write_results_missing_ones_empty():
    written = {"results": [{"checksum": "a"}, {"skipped": True}]}
    sums = sc.fingerprint_checksums(
        False,
        FILES,
        SECRET,
        "profile",
        PROFILE,
        probe_paths(),
        written,
        [{"checksum": "e"}, {"checksum": None}],
        {"skipped": True},
    )
    # A checksum that is there but null is joined as Jinja's join wrote it: 'None'.
    assert sums == ["a", "", "e", "None", ""]
    assert sc.fingerprint_checksums(False, FILES, SECRET, "profile", PROFILE, None, {}, [], None) == [""]


def test_fingerprint_is_the_sha256_of_the_joined_checksums():
    sums = sc.fingerprint_checksums(True, FILES, SECRET, "profile", PROFILE, probe_paths())
    assert (
        sc.config_fingerprint(True, FILES, SECRET, "profile", PROFILE, probe_paths())
        == hashlib.sha256(",".join(sums).encode("utf-8")).hexdigest()
    )


# ------------------------------------------------------------------ must_restart (issue 46: a run cut before restart)
UNIT = {"ActiveState": "active", "started_at": 1000.0, "needs_daemon_reload": False}
DESTS = [f["dest"] for f in FILES]


def _probe(mtimes, unit=None):
    paths = {d: {"type": "file", "mtime": m} for d, m in zip(DESTS, mtimes)}
    # The configuration's directories (expected_paths lists them first): written last-good/ is not the service's.
    paths[DIR] = paths[DIR + "/last-good"] = {"type": "directory", "mtime": 9999.0}
    return {"units": {"vllm": UNIT if unit is None else unit}, "paths": paths}


def test_a_write_of_this_run_restarts():
    assert sc.must_restart(_probe([900.0] * 4), "vllm", [{"changed": False}, {"changed": True}]) == (
        True,
        "the configuration changed",
    )


def test_files_older_than_the_running_start_restart_nothing():
    assert sc.must_restart(_probe([900.0, 999.5, 1000.9, 400.0]), "vllm", [{"changed": False}, {}]) == (
        False,
        "",
    )


def test_a_file_written_after_the_running_start_restarts_it_and_is_named():
    restart, why = sc.must_restart(_probe([900.0, 1005.0, 900.0, 900.0]), "vllm", [{"skipped": True}])
    assert restart and DIR + "/logging.json" in why and "cut before its restart" in why


def test_a_unit_file_systemd_has_not_loaded_restarts():
    assert sc.must_restart(_probe([900.0] * 4, dict(UNIT, needs_daemon_reload=True)), "vllm")[0]


def test_a_unit_that_does_not_run_is_started_not_restarted_here():
    # started_at None: the start task starts it (and it reads every file then).
    assert sc.must_restart(_probe([5000.0] * 4, dict(UNIT, started_at=None)), "vllm") == (False, "")
    assert sc.must_restart({"paths": {}}, "vllm") == (False, "")
