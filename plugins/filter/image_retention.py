# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which earlier vLLM images go after an upgrade (module_utils/common/_versions.py image_retention)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: image_retention
short_description: Which earlier vLLM images go after an upgrade
description:
  - Given what the vllm_image stage recorded last time, the image ID the unit runs now and its base,
    returns the new history and the images to remove. The image the new one replaces always stays (it
    serves until the new one is proven, and a rollback returns to it); so do O(keep) earlier ones and the
    IDs in O(protect). Derived images come before the bases they were built from.
  - Only what the record names as a full image ID (C(sha256:<64 hex>)) may be removed - never a name, a tag
    or a short prefix that could match someone else's image. A record that is not the shape the stage writes
    removes nothing; the result's C(held) says what was kept and why.
options:
  _input:
    description: The vllm_image stage's recorded state (C(history), C(bases), C(facts.vllm_image_ref)), or none.
    type: dict
    required: true
  active:
    description: Image ID the unit runs now.
    type: str
    required: true
  active_base:
    description: Imported image the active one was derived from (empty when not derived).
    type: str
  keep:
    description: Earlier images kept.
    type: int
  protect:
    description: Image IDs that stay whatever else holds.
    type: list
    elements: str
'''

EXAMPLES = r'''
retention: "{{ state.stages.image | default({}) | airgap.vllm.image_retention(vllm_image_ref, base_id, 1) }}"
'''

RETURN = r'''
_value:
  description: >-
    C(history) (IDs, oldest first), C(bases) ({derived ID, base ID}), C(remove) (IDs, in removal order) and
    C(held) (why entries of the record were kept or dropped instead of removed).
  type: dict
'''

from ansible_collections.airgap.vllm.plugins.module_utils.common._versions import image_retention


def _image_retention(previous, active, active_base="", keep=1, protect=None):
    return image_retention(previous, active, active_base or "", int(keep), [p for p in (protect or []) if p])


class FilterModule(object):
    def filters(self):
        return {'image_retention': _image_retention}
