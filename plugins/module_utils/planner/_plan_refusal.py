# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What follows when vLLM refuses a plan: whether it may be re-planned from vLLM's own numbers, and a refused plan
noted so that it is not deployed again.

Pure functions, stdlib only, Python 3.7-clean.

- ``replan_allowed()``: re-plan only a context the planner chose itself (``max``, from its estimate), never one the
  operator stated, and only with ``vllm_service_replan`` on;
- ``replan_refusal()``: a failed start is re-planned once from vLLM's refusal (allowed, not re-planned already, the
  journal of the start holds vLLM's refusal);
- ``plan_fingerprint()``, ``refusal_record()``, ``refused_plan_check()``: a refused plan noted in the last good
  record, and refused before anything is touched the next time.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json

from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_confirm_parse import (
    parse_journal,
    refusal_cause,
)

# --- may vLLM's numbers re-plan it -----------------------------------------------------------------


def replan_allowed(plan_result, replan=True):
    """Whether a start of this plan may be re-planned from the engine's own numbers (vllm_service's confirm.yml: a
    smaller pool than promised; start.yml: a refusal): ``replan`` (C(vllm_service_replan)) on, a plan, and a context
    the planner chose itself - a context the operator stated (its ledger's ``context_requested``, true when the
    ledger does not say) is theirs, and a refusal of it fails with vLLM's own numbers instead."""
    if not replan or not plan_result:
        return False
    ledger = plan_result.get("ledger") if isinstance(plan_result, dict) else None
    requested = ledger.get("context_requested", True) if isinstance(ledger, dict) else True
    return not requested


def replan_refusal(plan_result, journal_text, replan=True, replanned=False):
    """Whether a failed start is re-planned once from vLLM's refusal: re-planning allowed (``replan_allowed``), this
    start not itself a re-plan (``replanned``: a re-plan never re-plans again), and vLLM refused the context in the
    journal of this start (``parse_journal``'s ``refusal``; a broken image or a busy card is no refusal)."""
    if not replan_allowed(plan_result, replan) or replanned:
        return False
    return parse_journal(journal_text or "")["refusal"] is not None


# --- a refused plan is not deployed again ----------------------------------------------------------

# What of a plan reaches the unit: the service role runs exactly these.
FINGERPRINT_KEYS = ("argv", "docker_options", "env")


def plan_fingerprint(plan_result):
    """sha256 of what a plan puts into the unit (argv, Docker options, environment): equal plans, equal
    fingerprints, whichever run computed them. None without a plan."""
    if not isinstance(plan_result, dict) or not plan_result.get("argv"):
        return None
    body = dict((k, plan_result.get(k) or ([] if k != "env" else {})) for k in FINGERPRINT_KEYS)
    return hashlib.sha256(
        json.dumps(body, sort_keys=True, separators=(",", ":"), default=str).encode("utf-8")
    ).hexdigest()


def refusal_record(plan_result, journal_text, last_record):
    """The service's record after a rollback, with the refused plan noted (``refused_plan``), so that the
    same plan is not deployed again from an unchanged inventory; None when there is nothing to note: no
    last good record to roll back to, vLLM refused nothing of the plan (a broken image, a busy card), or
    the refused plan is the one the last good configuration runs."""
    if not isinstance(last_record, dict) or not last_record.get("name"):
        return None
    fingerprint = plan_fingerprint(plan_result)
    cause = refusal_cause(parse_journal(journal_text))
    if not fingerprint or not cause or fingerprint == last_record.get("plan_fingerprint"):
        return None
    ledger = (plan_result or {}).get("ledger") or {}
    record = dict(last_record)
    record["refused_plan"] = {
        "fingerprint": fingerprint,
        "cause": cause,
        "max_model_len": ledger.get("max_model_len"),
        "concurrency": ledger.get("concurrency"),
    }
    return record


def refused_plan_check(plan_result, service_record, service_name="vllm", retry=False):
    """Is this plan one vLLM already refused on this host ({refused, msg})? A refused plan from an unchanged
    inventory fails again the same way, after taking the running service down for minutes: refuse it before
    anything is touched, naming the refusal and what to change. ``retry`` deploys it anyway."""
    refused = (service_record or {}).get("refused_plan") if isinstance(service_record, dict) else None
    fingerprint = plan_fingerprint(plan_result)
    if retry or not isinstance(refused, dict) or not fingerprint or refused.get("fingerprint") != fingerprint:
        return {"refused": False, "msg": "", "fingerprint": fingerprint}
    what = ""
    if refused.get("max_model_len"):
        what = " (context %s x %s requests)" % (refused["max_model_len"], refused.get("concurrency") or 1)
    cause = refused.get("cause") or "it did not start"
    if cause.startswith("its argument parser refused"):
        change = (
            "Change the inventory so that the argv differs (the flag in vllm_plan_extra_args, or an image "
            "whose vLLM release takes it) and run the plan and service stages again (ansible-playbook "
            "site.yml --tags plan,service)."
        )
    else:
        change = (
            "Change the inventory so that the plan differs (a smaller vllm_plan_context, a lower "
            "vllm_plan_concurrency, vllm_plan_kv_cache_dtype fp8, more GPUs) and run the plan and service "
            "stages again (ansible-playbook site.yml --tags plan,service), or, once more memory is free, "
            "retry it as it is with -e airgap_vllm_retry_refused_plan=true."
        )
    msg = (
        "vLLM refused this plan%s for %s on this host before: %s. The last good configuration was "
        "rolled back and keeps serving; nothing was changed. %s" % (what, service_name, cause, change)
    )
    return {"refused": True, "msg": msg, "fingerprint": fingerprint}
