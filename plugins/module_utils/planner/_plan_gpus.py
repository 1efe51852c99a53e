# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which GPUs a launch plan is for, and the tensor parallelism that follows from them.

Pure, stdlib only, Python 3.7-clean.

- No selection: the first ``gpu_count`` GPUs NVML lists, handed to the container as ``--gpus all``
  (what the collection always did).
- A selection (``vllm_plan_gpus``): NVML indexes ("0") or UUIDs ("GPU-..."), each naming one GPU of
  the inventory (airgap.vllm.nvml_info's ``gpus``) once. The budget is the smallest selected card,
  tensor parallel is the number selected unless given, and a tensor parallel larger than the
  selection is refused (vLLM would fail to find its ranks' devices).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_common import TargetsError

GPU_ID = re.compile(r"^(?:[0-9]+|GPU-[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12})\Z")


def _describe(card):
    return "%s (%s, %s)" % (card.get("index"), card.get("uuid"), card.get("name"))


def _resolve(gid, inventory):
    for card in inventory:
        if gid == str(card.get("index")) or gid.lower() == str(card.get("uuid") or "").lower():
            return card
    raise TargetsError(
        "vllm_plan_gpus names GPU %s, which NVML does not list; GPUs here: %s"
        % (gid, "; ".join(_describe(c) for c in inventory) or "none")
    )


def select_gpus(selection=None, inventory=None, gpu_count=1):
    """{'ids': the selection as given ([] without one), 'cards': inventory entries planned for,
    'count': how many GPUs}. ``inventory`` None: no NVML facts (the cards are then unknown)."""
    ids = []
    for i, raw in enumerate(selection or []):
        gid = str(raw).strip() if isinstance(raw, (str, int)) and not isinstance(raw, bool) else None
        if gid is None or not GPU_ID.match(gid):
            raise TargetsError(
                "vllm_plan_gpus[%d] %r: give an NVML index such as \"0\" or a GPU UUID such as "
                "GPU-5f3e3c1e-8a2b-4c59-9e57-1b0c6a7d2e41 (nvidia-smi -L)" % (i, raw)
            )
        if gid.lower() in [g.lower() for g in ids]:
            raise TargetsError("vllm_plan_gpus names GPU %s twice" % gid)
        ids.append(gid)
    cards = None
    if inventory is not None:
        inventory = list(inventory)
        if ids:
            cards = [_resolve(gid, inventory) for gid in ids]
            seen = {}
            for gid, card in zip(ids, cards):
                other = seen.setdefault(id(card), gid)
                if other != gid:
                    raise TargetsError(
                        "vllm_plan_gpus names GPU %s twice (as %s and %s)" % (card.get("index"), other, gid)
                    )
        else:
            count = int(gpu_count or 1)
            if len(inventory) < count:
                raise TargetsError(
                    "gpu_count %d: NVML lists %d GPU(s): %s"
                    % (count, len(inventory), "; ".join(_describe(c) for c in inventory))
                )
            cards = inventory[:count]
    return {"ids": ids, "cards": cards, "count": len(ids) if ids else int(gpu_count or 1)}


def tensor_parallel(requested, selected):
    """Tensor parallel for ``selected`` GPUs: ``requested`` (if given) must fit them."""
    if not requested:
        return selected
    try:
        tp = int(requested)
    except (TypeError, ValueError):
        raise TargetsError("tensor_parallel_size %r is not an integer" % (requested,))
    if tp < 1:
        raise TargetsError("tensor_parallel_size must be >= 1, got %d" % tp)
    if tp > selected:
        raise TargetsError(
            "tensor_parallel_size %d does not fit the %d GPU(s) planned for "
            "(vllm_plan_gpus / gpu_count): select at least %d GPUs or lower it" % (tp, selected, tp)
        )
    return tp
