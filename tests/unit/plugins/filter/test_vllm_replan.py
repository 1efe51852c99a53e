"""airgap.vllm.vllm_replan_allowed / vllm_replan_refusal as vllm_service's vars/main.yml and tasks/start.yml call
them (issue 41 item 3: the re-plan rule, once Jinja, decided in _plan_refusal). The Jinja they replaced is pinned
here and rendered on the same inputs: the filters give what it gave."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import itertools

import pytest
from jinja2 import ChainableUndefined
from jinja2.nativetypes import NativeEnvironment

from .conftest import load_filters

REFUSAL = (
    "Dec 01 10:00:00 gpu1 systemd[1]: Started vllm.service - vLLM OpenAI-compatible server m (airgap.vllm).\n"
    "Dec 01 10:01:00 gpu1 vllm[811]: ValueError: To serve at least one request with the model's max seq len "
    "(524288), (64.0 GiB KV cache is needed, which is larger than the available KV cache memory (40.2 GiB). "
    "Based on the available memory, the estimated maximum model length is 329216. Try increasing "
    "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.\n"
)
BUSY = (
    "Free memory on device cuda:0 (3.2/47.4 GiB) on startup is less than desired GPU memory utilization "
    "(0.93, 44.1 GiB)\n"
)
# A refusal of an earlier start says nothing about this one (the journal's last start is read).
EARLIER = REFUSAL + "Dec 01 10:05:00 gpu1 systemd[1]: Started vllm.service - vLLM (airgap.vllm).\nbroken\n"

# The Jinja of vars/main.yml and tasks/start.yml before the filters (Ansible's undefined is chainable).
OLD_ALLOWED = (
    "{{ settings.vllm_service_replan and vllm_service_plan | length > 0"
    " and not (vllm_service_plan.ledger.context_requested | default(true)) }}"
)
OLD_REFUSAL = (
    "{{ allowed and not replanned"
    " and (journal.stdout | default('') | airgap.vllm.vllm_journal_facts).refusal is not none }}"
)
# Today's wiring.
NEW_ALLOWED = "{{ vllm_service_plan | airgap.vllm.vllm_replan_allowed(settings.vllm_service_replan) }}"
NEW_REFUSAL = (
    "{{ vllm_service_plan | airgap.vllm.vllm_replan_refusal(journal.stdout | default(''),"
    " replan=settings.vllm_service_replan, replanned=replanned) }}"
)

PLANS = [
    {},
    {"argv": ["m"]},
    {"argv": ["m"], "ledger": None},
    {"argv": ["m"], "ledger": {}},
    {"argv": ["m"], "ledger": {"context_requested": True}},
    {"argv": ["m"], "ledger": {"context_requested": False}},
    {"argv": ["m"], "ledger": {"context_requested": None}},
    {"argv": ["m"], "ledger": {"context_requested": 0}},
]
JOURNALS = [{"stdout": REFUSAL}, {"stdout": BUSY}, {"stdout": ""}, {"stdout": EARLIER}, {}]


@pytest.fixture(scope="module")
def ansible_like():
    env = NativeEnvironment(undefined=ChainableUndefined)
    env.filters.update(load_filters())
    return lambda expression, **variables: env.from_string(expression).render(**variables)


@pytest.mark.parametrize("plan,replan", list(itertools.product(PLANS, [True, False])))
def test_allowed_is_what_the_jinja_said(ansible_like, plan, replan):
    v = dict(vllm_service_plan=plan, settings={"vllm_service_replan": replan})
    assert ansible_like(NEW_ALLOWED, **v) is bool(ansible_like(OLD_ALLOWED, **v))


@pytest.mark.parametrize(
    "plan,replan,replanned,journal", list(itertools.product(PLANS, [True, False], [True, False], JOURNALS))
)
def test_refusal_is_what_the_jinja_said(ansible_like, plan, replan, replanned, journal):
    v = dict(vllm_service_plan=plan, settings={"vllm_service_replan": replan}, replanned=replanned, journal=journal)
    old = ansible_like(OLD_REFUSAL, allowed=bool(ansible_like(OLD_ALLOWED, **v)), **v)
    assert ansible_like(NEW_REFUSAL, **v) is bool(old)


def test_only_a_planners_context_refused_in_this_start_is_re_planned(render):
    planned = {"argv": ["m"], "ledger": {"context_requested": False}}
    stated = {"argv": ["m"], "ledger": {"context_requested": True}}
    refusal = "{{ p | airgap.vllm.vllm_replan_refusal(j, replan=r, replanned=d) }}"
    assert render(refusal, p=planned, j=REFUSAL, r=True, d=False) is True
    assert render(refusal, p=stated, j=REFUSAL, r=True, d=False) is False  # the operator's context
    assert render(refusal, p=planned, j=REFUSAL, r=False, d=False) is False  # vllm_service_replan off
    assert render(refusal, p=planned, j=REFUSAL, r=True, d=True) is False  # a re-plan never re-plans again
    assert render(refusal, p=planned, j=BUSY, r=True, d=False) is False  # a busy card is no refusal
    assert render(refusal, p=planned, j=EARLIER, r=True, d=False) is False  # an earlier start's refusal
    assert render(refusal, p={}, j=REFUSAL, r=True, d=False) is False  # no plan
