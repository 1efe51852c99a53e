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

import re

# What image retention may hand to `docker image rm --force`: a full image ID, never a name or a tag (a record
# carrying "ubuntu:22.04" must not remove that image), nor a short prefix that could match someone else's.
IMAGE_ID_RE = re.compile(r"\A(sha256:)?[0-9a-f]{64}\Z")


def is_image_id(value):
    return isinstance(value, str) and bool(IMAGE_ID_RE.match(value))


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
    kept = set(before[len(before) - keep :]) if keep else set()
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
    Returns {"history", "bases", "remove", "held"}; remove lists derived images before the bases they came
    from. Only what our record names as a full image ID may go: a record that is not the shape we write
    removes nothing, and an entry that is not an image ID is dropped from the record, never removed; "held"
    says why (fails safe: keep, don't delete).
    """
    held = []
    if previous is not None and not isinstance(previous, dict):
        previous, held = None, ["the image record is not a mapping: nothing removed"]
    previous = previous or {}
    raw_history = previous.get("history") or []
    raw_bases = previous.get("bases") or {}
    if not isinstance(raw_history, list) or not isinstance(raw_bases, dict):
        held.append("the image record's history/bases are not the shape we write: nothing removed")
        return {
            "history": [active],
            "bases": {active: active_base} if active_base and active_base != active else {},
            "remove": [],
            "held": held,
        }
    history = [h for h in raw_history if is_image_id(h)]
    bases = dict((k, v) for k, v in raw_bases.items() if is_image_id(k) and is_image_id(v))
    for h in raw_history:
        if not is_image_id(h):
            held.append("%r in the image record is not an image ID: dropped from the record, not removed" % (h,))
    for k, v in raw_bases.items():
        if not (is_image_id(k) and is_image_id(v)):
            held.append(
                "%r -> %r in the image record's bases is not a pair of image IDs: dropped, not removed" % (k, v)
            )
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
    remove = [r for r in remove if r not in in_use and r not in protect and is_image_id(r)]
    derived_first = [r for r in remove if r in bases] + [r for r in remove if r not in bases]
    return {
        "history": kept,
        "bases": {k: v for k, v in bases.items() if k in kept},
        "remove": derived_first,
        "held": held,
    }
