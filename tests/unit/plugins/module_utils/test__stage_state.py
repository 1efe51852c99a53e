"""Per-stage state files: written once, read back, damaged files named, nothing shared with other users."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.common import _stage_state as S


def test_write_then_read_back_and_unchanged_is_not_a_change(tmp_path):
    d = str(tmp_path / "state")
    changed, before, after = S.write_stage(d, "model", {"dir": "/m/q", "version": "v1"})
    assert changed and before == "" and '"version": "v1"' in after
    assert S.read_all(d) == {"model": {"dir": "/m/q", "version": "v1"}}
    assert S.write_stage(d, "model", {"version": "v1", "dir": "/m/q"})[0] is False
    mode = stat.S_IMODE(os.stat(os.path.join(d, "model.json")).st_mode)
    assert mode & 0o007 == 0, "state files are not for other users"
    assert stat.S_IMODE(os.stat(d).st_mode) & 0o007 == 0


def test_check_mode_writes_nothing(tmp_path):
    d = str(tmp_path / "state")
    changed = S.write_stage(d, "image", {"ref": "sha256:ab"}, check_mode=True)[0]
    assert changed and not os.path.exists(d)
    assert S.read_all(d) == {}


def test_damaged_file_is_named_not_ignored(tmp_path):
    (tmp_path / "plan.json").write_text("{not json")
    with pytest.raises(S.StageStateError, match="plan.json is damaged"):
        S.read_all(str(tmp_path))
    (tmp_path / "plan.json").write_text("[1, 2]")
    with pytest.raises(S.StageStateError, match="not a mapping"):
        S.read_stage(str(tmp_path), "plan")


def test_other_files_are_not_stages(tmp_path):
    (tmp_path / ".tmp123.tmp").write_text("x")
    (tmp_path / "README").write_text("x")
    (tmp_path / "Bad-Name.json").write_text("{}")
    S.write_stage(str(tmp_path), "bundle", {"staged": {}})
    assert list(S.read_all(str(tmp_path))) == ["bundle"]


@pytest.mark.parametrize("stage", ["", "../etc/passwd", "Model", "a/b", "x" * 65, None, "model.json"])
def test_hostile_stage_names_are_refused(tmp_path, stage):
    with pytest.raises(S.StageStateError, match="lowercase"):
        S.write_stage(str(tmp_path), stage, {})


def test_data_that_is_not_json_is_refused(tmp_path):
    with pytest.raises(S.StageStateError, match="JSON"):
        S.write_stage(str(tmp_path), "plan", {"x": object()})


def test_remove(tmp_path):
    d = str(tmp_path)
    S.write_stage(d, "service", {"name": "vllm"})
    assert S.remove_stage(d, "service", check_mode=True)[0] and S.read_all(d)
    assert S.remove_stage(d, "service")[0] and S.read_all(d) == {}
    assert S.remove_stage(d, "service") == (False, "", None)


def test_published_facts_merge_every_stage():
    stages = {
        "model": {"facts": {"vllm_model_dir": "/m"}, "version": "1"},
        "image": {"facts": {"vllm_image_ref": "sha256:a"}},
        "service": {"name": "vllm"},
        "odd": {"facts": ["not", "a", "mapping"]},
    }
    assert S.published_facts(stages) == {"vllm_model_dir": "/m", "vllm_image_ref": "sha256:a"}


def test_services_record_side_by_side_and_the_default_keeps_its_file(tmp_path):
    d = str(tmp_path)
    S.write_stage(d, "service", {"image": "sha256:a"})
    S.write_stage(d, "service", {"image": "sha256:b"}, instance="vllm-b")
    S.write_stage(d, "service", {"image": "sha256:c"}, instance="vllm")  # the default service: service.json
    assert sorted(os.listdir(d)) == ["service.json", "service@vllm-b.json"]
    stages = S.read_all(d)
    assert S.by_instance(stages) == {"service": {"vllm": {"image": "sha256:c"}, "vllm-b": {"image": "sha256:b"}}}
    assert S.read_stage(d, "service", "vllm-b") == {"image": "sha256:b"}
    assert S.remove_stage(d, "service", instance="vllm-b")[0] is True
    assert S.read_stage(d, "service", "vllm-b") is None


def test_only_the_default_service_publishes_facts(tmp_path):
    d = str(tmp_path)
    S.write_stage(d, "plan", {"facts": {"vllm_plan_result": {"argv": ["a"]}}})
    S.write_stage(d, "plan", {"facts": {"vllm_plan_result": {"argv": ["b"]}}}, instance="vllm-b")
    assert S.published_facts(S.read_all(d)) == {"vllm_plan_result": {"argv": ["a"]}}


@pytest.mark.parametrize("instance", ["../x", "a/b", "", "-lead", "a b", "x" * 64, "vl@lm"])
def test_hostile_service_names_are_refused(tmp_path, instance):
    with pytest.raises(S.StageStateError, match="service name"):
        S.write_stage(str(tmp_path), "service", {}, instance=instance)


def test_files_that_only_look_like_service_records_are_ignored(tmp_path):
    for name in ["service@.json", "service@vllm.json", "Service@x.json", "service@-x.json"]:
        (tmp_path / name).write_text("{}")
    assert S.read_all(str(tmp_path)) == {}


def test_every_instance_of_a_stage_is_forgotten_at_once(tmp_path):
    from ansible_collections.airgap.vllm.plugins.module_utils.common._stage_state import remove_every_instance

    d = str(tmp_path)
    S.write_stage(d, "plan", {"a": 1})
    S.write_stage(d, "plan", {"b": 2}, instance="vllm-b")
    S.write_stage(d, "service", {"c": 3}, instance="vllm-b")
    (tmp_path / "plan@.json").write_text("{}")  # not a service's record: left alone
    changed, removed, aside = remove_every_instance(d, "plan", check_mode=True)
    assert (
        changed
        and aside == {}
        and sorted(removed) == [os.path.join(d, "plan.json"), os.path.join(d, "plan@vllm-b.json")]
    )
    assert (tmp_path / "plan.json").exists()  # check mode removes nothing
    changed, removed, aside = remove_every_instance(d, "plan")
    assert changed and len(removed) == 2 and '"b": 2' in removed[os.path.join(d, "plan@vllm-b.json")]
    assert sorted(os.listdir(d)) == ["plan@.json", "service@vllm-b.json"]
    assert remove_every_instance(d, "plan") == (False, {}, {})
    assert remove_every_instance(str(tmp_path / "absent"), "plan") == (False, {}, {})
    with pytest.raises(S.StageStateError):
        remove_every_instance(d, "../plan")


# ------------------------------------------------------------------ issue 24: state that survives damage


def _two_services(tmp_path):
    d = str(tmp_path)
    S.write_stage(d, "service", {"name": "vllm", "config_dir": "/etc/airgap-vllm/vllm"})
    S.write_stage(d, "service", {"name": "vllm-b", "config_dir": "/etc/airgap-vllm/vllm-b"}, instance="vllm-b")
    S.write_stage(d, "image", {"history": ["sha256:" + "a" * 64]})
    return d


def test_one_damaged_record_hides_nothing_else(tmp_path):
    """Failed on 9dce105: read_all raised as a whole, so uninstall saw no service at all."""
    d = _two_services(tmp_path)
    (tmp_path / "service@vllm-c.json").write_text('{"name": "vllm-c", ')  # cut short by a power loss
    (tmp_path / "plan.json").write_bytes(b"\xff\xfe")
    stages, damaged = S.read_each(d)
    assert sorted(stages) == ["image", "service", "service@vllm-b"]
    assert [(x["stage"], x["instance"], x["set_aside"]) for x in damaged] == [
        ("plan", "vllm", False),
        ("service", "vllm-c", False),
    ]
    assert "service@vllm-c.json is damaged" in damaged[1]["reason"]
    assert S.by_instance(stages)["service"].keys() == {"vllm", "vllm-b"}
    # The strict read still refuses, naming every damaged file: a decision that needs them must not go ahead.
    with pytest.raises(S.StageStateError, match="plan.json.*service@vllm-c.json"):
        S.read_all(d)


def test_a_record_named_for_a_host_unit_is_named_not_used(tmp_path):
    d = _two_services(tmp_path)
    (tmp_path / "service@docker.json").write_text('{"name": "docker"}')
    stages, damaged = S.read_each(d)
    assert "service@docker" not in stages
    assert damaged[0]["instance"] is None and "unit or container of the host" in damaged[0]["reason"]
    # ... and uninstall's "forget every service's record" leaves it to the operator.
    changed, removed, aside = S.remove_every_instance(d, "service")
    assert (tmp_path / "service@docker.json").exists() and len(removed) == 2 and aside == {}


def test_removing_a_damaged_record_sets_it_aside_and_later_reads_name_it(tmp_path):
    d = _two_services(tmp_path)
    (tmp_path / "service@vllm-c.json").write_text("{oops")
    changed, removed, aside = S.remove_every_instance(d, "service", check_mode=True)
    assert list(aside) == [os.path.join(d, "service@vllm-c.json")] and (tmp_path / "service@vllm-c.json").exists()
    changed, removed, aside = S.remove_every_instance(d, "service")
    moved = aside[os.path.join(d, "service@vllm-c.json")]
    assert os.path.basename(moved).startswith("service@vllm-c.json.damaged-")
    assert sorted(os.listdir(d)) == ["image.json", os.path.basename(moved)]
    assert open(moved).read() == "{oops"  # kept, not deleted
    stages, damaged = S.read_each(d)
    assert list(stages) == ["image"]
    assert damaged == [
        dict(
            path=moved,
            stage="service",
            instance="vllm-c",
            set_aside=True,
            reason="%s was set aside as damaged by an earlier run" % moved,
        )
    ]


@pytest.mark.parametrize("name", ["docker", "sshd", "containerd", "vllm\n", "..", "vllm.service"])
def test_the_one_service_name_rule(tmp_path, name):
    with pytest.raises(S.StageStateError, match="service name"):
        S.write_stage(str(tmp_path), "service", {}, instance=name)
