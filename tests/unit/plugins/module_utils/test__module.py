"""The module base (module_utils/common/_module.py): one place where a module's error becomes fail_json."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import types

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module


class Refused(Exception):
    pass


class Detailed(Exception):
    details = {"files": ["a"], "bytes_copied": 3}


def module_of(raise_it=None, **kwargs):
    @ansible_module(dict(name=dict(type="str", default="x")), **kwargs)
    def main(module):
        if raise_it is not None:
            raise raise_it
        return dict(changed=not module.check_mode, name=module.params["name"])

    return types.SimpleNamespace(main=main)


def test_the_result_is_what_main_returns_in_check_mode_too(run_module):
    assert run_module(module_of(), name="n")["changed"] is True
    r = run_module(module_of(), check_mode=True)
    assert r["changed"] is False and r["name"] == "x"


@pytest.mark.parametrize(
    "exc, kwargs, msg, extra",
    [
        (Refused("no"), dict(errors=(Refused,)), "no", {}),
        (Detailed("partly"), dict(errors=(Detailed,)), "partly", {"files": ["a"], "bytes_copied": 3}),
        (
            OSError(28, "No space left"),
            dict(wording="staging {name} failed: {0}"),
            "staging x failed: [Errno 28] No space left",
            {},
        ),
        (ValueError("bad"), dict(wording="record: {0}", worded=(ValueError,)), "record: bad", {}),
    ],
)
def test_an_error_of_the_module_fails_with_its_message(run_module, exc, kwargs, msg, extra):
    r = run_module(module_of(exc, **kwargs))
    assert r["failed"] is True and r["msg"] == msg
    assert dict((k, r[k]) for k in extra) == extra


def test_an_error_the_module_does_not_name_stays_a_traceback(run_module):
    with pytest.raises(OSError):
        run_module(module_of(OSError("unworded"), errors=(Refused,)))
