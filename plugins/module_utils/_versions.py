# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What stays and what goes when a new model version or image takes over (one rule for both).

The serving version is never removed before its successor is proven: besides the version being
activated, the one it replaces (still serving until the new one is healthy, and what a rollback returns
to) always stays, and so do the `keep` most recently activated versions before the new one.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def record_activation(history, version, limit=50):
    """History (oldest first) with version as the newest; each version appears once."""
    out = [v for v in (history or []) if v != version]
    out.append(version)
    return out[-limit:]


def prunable(present, history, active, keep, replaced=None, protect=()):
    """The versions in `present` to remove, oldest first.

    present: versions that exist now; history: activation order, oldest first (may name versions that
    are gone); active: the version now activated; keep: how many previously activated versions stay;
    replaced: the version `active` replaces (stays: it serves until `active` is healthy);
    protect: versions that stay whatever else holds (e.g. the last known good one).
    """
    if keep is None or int(keep) < 0:
        raise ValueError("keep must be 0 or more, got %r" % (keep,))
    keep = int(keep)
    before = [v for v in (history or []) if v != active]
    kept = set(before[len(before) - keep:]) if keep else set()
    kept.add(active)
    if replaced:
        kept.add(replaced)
    kept.update(p for p in protect if p)
    order = {v: i for i, v in enumerate(history or [])}
    # Never activated (a failed candidate, a leftover import) goes first; then the oldest activations.
    doomed = [v for v in present if v not in kept]
    return sorted(doomed, key=lambda v: (v in order, order.get(v, -1), v))


def image_retention(previous, active, active_base, keep, protect=()):
    """Which images the vllm_image stage removes after activating `active`.

    previous: what the stage recorded last time ({"history": [ids], "bases": {id: base id},
    "facts": {"vllm_image_ref": id}}), or None; active: the image ID the unit runs now (derived or
    imported); active_base: the imported image it was derived from ("" when not derived); keep: previous
    images kept; protect: IDs that stay (the service's last good image).
    Returns {"history", "bases", "remove"}; remove lists derived images before the bases they came from.
    """
    previous = previous or {}
    history = [h for h in previous.get("history") or [] if isinstance(h, str)]
    bases = dict(previous.get("bases") or {})
    replaced = (previous.get("facts") or {}).get("vllm_image_ref") or None
    if active_base and active_base != active:
        bases[active] = active_base
    new_history = record_activation(history, active)
    doomed = prunable(new_history, new_history, active, keep, replaced=replaced, protect=protect)
    kept = [h for h in new_history if h not in doomed]
    in_use = set(kept) | set(bases.get(h) for h in kept if bases.get(h))
    remove = list(doomed)
    for ref in doomed:
        base = bases.get(ref)
        if base and base not in in_use and base not in remove:
            remove.append(base)
    remove = [r for r in remove if r not in in_use and r not in protect]
    derived_first = [r for r in remove if r in bases] + [r for r in remove if r not in bases]
    return {"history": kept, "bases": {k: v for k, v in bases.items() if k in kept},
            "remove": derived_first}
