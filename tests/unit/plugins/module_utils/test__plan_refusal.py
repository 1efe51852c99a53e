"""What follows a refusal (plugins/module_utils/planner/_plan_refusal.py): the re-plan rule. The refused plan noted
and refused next time is tested with the confirmation it follows (test__plan_confirm.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_refusal as R

from .test__plan_confirm_parse import ARGV_REFUSAL, REFUSAL, STARTED_LINE

PLANNED = {"argv": ["m"], "ledger": {"context_requested": False}}
STATED = {"argv": ["m"], "ledger": {"context_requested": True}}


@pytest.mark.parametrize(
    "plan,replan,allowed",
    [
        (PLANNED, True, True),
        (PLANNED, False, False),  # vllm_service_replan off
        (STATED, True, False),  # the operator's context is theirs
        ({"argv": ["m"], "ledger": {}}, True, False),  # a ledger that does not say: stated
        ({"argv": ["m"]}, True, False),  # no ledger
        ({"argv": ["m"], "ledger": None}, True, False),
        ({"argv": ["m"], "ledger": {"context_requested": None}}, True, True),  # said, and not true
        ({}, True, False),  # no plan
        (None, True, False),
    ],
)
def test_replan_allowed_only_for_the_planners_own_context(plan, replan, allowed):
    assert R.replan_allowed(plan, replan) is allowed


def test_a_refused_start_is_re_planned_once():
    journal = STARTED_LINE + "\n" + REFUSAL
    assert R.replan_refusal(PLANNED, journal) is True
    assert R.replan_refusal(PLANNED, journal, replanned=True) is False  # a re-plan never re-plans again
    assert R.replan_refusal(PLANNED, journal, replan=False) is False
    assert R.replan_refusal(STATED, journal) is False


def test_no_refusal_no_re_plan():
    assert R.replan_refusal(PLANNED, "") is False
    assert R.replan_refusal(PLANNED, None) is False
    assert R.replan_refusal(PLANNED, "broken release\n") is False
    assert R.replan_refusal(PLANNED, STARTED_LINE + "\n" + ARGV_REFUSAL) is False  # the parser's, not the memory's
    # An earlier start's refusal says nothing about the last one.
    assert R.replan_refusal(PLANNED, STARTED_LINE + "\n" + REFUSAL + "\n" + STARTED_LINE + "\nbroken\n") is False
