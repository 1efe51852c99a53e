"""vllm_source_patch as Ansible runs it: the catalogue and the madvise decision (no root: reads nothing)."""
import json

import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.airgap.vllm.plugins.modules import vllm_source_patch as M


def run(monkeypatch, capsys, **args):
    args.setdefault("_ansible_check_mode", False)
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args})))
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    with pytest.raises(SystemExit):
        M.main()
    return json.loads(capsys.readouterr().out)


def test_catalogue_only_says_nothing_about_the_decision(monkeypatch, capsys):
    r = run(monkeypatch, capsys)
    assert not r["changed"] and r["files"] == [] and "madvise_patch_needed" not in r
    assert r["catalogue"][0]["name"] == "madvise_populate_write"


@pytest.mark.parametrize("offload,kernel,needed", [
    (True, "4.19.90-52.22.v2207.ky10.x86_64", True),
    (True, "5.15.0", False),
    (False, "4.19.90", False),
    (True, None, True),
    (True, "garbage", True),
])
def test_the_decision_is_the_planners_rule(monkeypatch, capsys, offload, kernel, needed):
    args = dict(kv_offloading=offload)
    if kernel is not None:
        args["kernel_release"] = kernel
    r = run(monkeypatch, capsys, **args)
    assert r["madvise_patch_needed"] is needed and r["madvise_patch_reason"] and not r["changed"]
