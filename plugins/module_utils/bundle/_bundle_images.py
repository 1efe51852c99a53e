# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which staged image artifact of the bundle is whose: the engine's (vllm_image) or the front door's (vllm_front).

The bundle role's fact ``bundle_staged`` maps each kind to a list of {name, version, path, sha256, size} in the
manifest's order (roles/bundle/templates/staged.j2). A bundle may carry the vLLM image and the HAProxy image both
(kind ``image``), in any order: each role selects its own by name, never by position.

- The front door's image is the artifact named ``haproxy`` (docs/bundle.md, tests/world/bundle-vars.yml).
- The engine's is the artifact named ``vllm-openai`` (the name docs/bundle.md gives it); a bundle without one
  gives the one image that is not the front door's, whatever its name; several candidates are refused, naming
  them and the variable that settles it (vllm_image_archive).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

FRONT_NAMES = ("haproxy",)
ENGINE_NAMES = ("vllm-openai",)
ROLES = ("engine", "front")


class BundleImageError(ValueError):
    pass


def _images(staged):
    images = (staged or {}).get("image") if isinstance(staged, dict) else None
    return [i for i in images if isinstance(i, dict)] if isinstance(images, list) else []


def select_image(staged, role):
    """The staged image artifact (a dict) of `role` ('engine' or 'front'), or {} when the bundle has none."""
    if role not in ROLES:
        raise BundleImageError("role must be one of %s, not %r" % (", ".join(ROLES), role))
    images = _images(staged)
    names = FRONT_NAMES if role == "front" else ENGINE_NAMES
    named = [i for i in images if str(i.get("name", "")) in names]
    if named:
        return named[0]
    if role == "front":
        return {}
    others = [i for i in images if str(i.get("name", "")) not in FRONT_NAMES]
    if len(others) > 1:
        raise BundleImageError(
            "the bundle holds %d images besides the front door's (%s) and none is named %s: set vllm_image_archive "
            "to the engine's staged tar, or name its artifact %s in bundle_build_artifacts"
            % (len(others), ", ".join(repr(str(i.get("name"))) for i in others), ENGINE_NAMES[0], ENGINE_NAMES[0])
        )
    return others[0] if others else {}
