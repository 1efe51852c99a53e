#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: owned_paths
short_description: Remove paths only when they are ours (resolved, strictly below one of our roots)
version_added: 0.2.0
description:
  - The one way the collection's uninstall and retention remove a file or a directory on a host.
  - Each path of O(paths) is resolved (the real path of its parent plus its own name, so a link itself
    goes, never what it points at) and must lie strictly below one of O(roots); it may not be a root itself,
    hold C(.) or C(..), or be a directory of the system. A root that is a directory of the system (C(/),
    C(/etc), C(/var/lib) ...) does not count.
  - When any path is refused, nothing is removed and the module fails naming each one.
  - With O(marker), a path without our mark (a directory without the file O(marker), a file without the text
    O(marker)) is left in place and named in RV(not_ours) instead (a warning, not a failure).
  - With O(state=empty), each path is a directory removed only when it is empty; it may then be one of
    O(roots) itself (the collection's directory goes with its last service), still never a system directory.
author:
  - airgap.vllm maintainers (@airgap-vllm)
options:
  paths:
    description: Files, links or directories to remove; those already absent are listed in RV(absent).
    type: list
    elements: str
    required: true
  roots:
    description: Our directories (from settings, never from a record on the host); every path must lie below one.
    type: list
    elements: str
    required: true
  marker:
    description: The file a directory must hold, or the text a file must contain, to count as ours.
    type: str
  gone:
    description:
      - With O(state=empty), entries about to be removed by an earlier task (in check mode still there) - they
        do not count, so check mode reports what a real run would remove.
    type: list
    elements: str
    default: []
  state:
    description: V(absent) removes each path (a directory with everything in it); V(empty) removes empty directories only.
    type: str
    choices: [absent, empty]
    default: absent
attributes:
  check_mode:
    support: full
    description: Checks and reports what it would remove; removes nothing.
  diff_mode:
    support: none
    description: Paths only, in RV(removed).
  idempotent:
    support: full
    description: A path already gone is reported absent, unchanged.
"""

EXAMPLES = r"""
- name: Remove a service's configuration directory, only below the configuration root
  airgap.vllm.owned_paths:
    paths: [/etc/airgap-vllm/vllm-b]
    roots: [/etc/airgap-vllm]

- name: Remove our unit file only when it carries our marker line
  airgap.vllm.owned_paths:
    paths: [/etc/systemd/system/vllm-b.service]
    roots: [/etc/systemd/system]
    marker: "# org.airgap.vllm.service="

- name: The collection's directory goes once empty (the service's own counts as gone, also in check mode)
  airgap.vllm.owned_paths:
    paths: [/etc/airgap-vllm]
    roots: [/etc/airgap-vllm]
    gone: [/etc/airgap-vllm/vllm-b]
    state: empty
"""

RETURN = r"""
removed:
  description: Paths removed (or that would be, in check mode).
  returned: success
  type: list
  elements: str
  sample: [/etc/airgap-vllm/vllm-b]
absent:
  description: Paths that were not there.
  returned: success
  type: list
  elements: str
not_ours:
  description: Paths left in place because they lack O(marker), or (O(state=empty)) are not empty.
  returned: success
  type: list
  elements: str
refused:
  description: Paths refused, each with the reason (the module fails when there is any).
  returned: failure
  type: list
  elements: dict
"""

import os

from ansible_collections.airgap.vllm.plugins.module_utils.common._files import remove_tree
from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module
from ansible_collections.airgap.vllm.plugins.module_utils.common._ownership import owned_path_problem, root_problem


def _has_marker(path, marker):
    if os.path.isdir(path) and not os.path.islink(path):
        return os.path.lexists(os.path.join(path, marker))
    try:
        with open(path, "rb") as handle:
            return marker.encode("utf-8") in handle.read(1 << 20)
    except (IOError, OSError):
        return False


@ansible_module(
    dict(
        paths=dict(type="list", elements="str", required=True),
        roots=dict(type="list", elements="str", required=True),
        marker=dict(type="str"),
        state=dict(type="str", choices=["absent", "empty"], default="absent"),
        gone=dict(type="list", elements="str", default=[]),
    ),
)
def main(module):
    p = module.params
    empty = p["state"] == "empty"
    refused = []
    for path in p["paths"]:
        problem = owned_path_problem(path, p["roots"])
        if problem and empty and isinstance(path, str) and path.rstrip("/") in [r.rstrip("/") for r in p["roots"]]:
            problem = root_problem(path)  # an empty root of ours may go, a system directory never
        if problem:
            refused.append(dict(path=path, reason=problem))
    if refused:
        module.fail_json(msg="Nothing was removed: " + "; ".join(r["reason"] for r in refused), refused=refused)
    removed, absent, not_ours = [], [], []
    for path in p["paths"]:
        if not os.path.lexists(path):
            absent.append(path)
        elif empty:
            gone = set(x.rstrip("/") for x in p["gone"]) if module.check_mode else set()
            if (
                not os.path.isdir(path)
                or os.path.islink(path)
                or [e for e in os.listdir(path) if os.path.join(path.rstrip("/"), e) not in gone]
            ):
                not_ours.append(path)
            else:
                removed.append(path)
                if not module.check_mode:
                    os.rmdir(path)
        elif p["marker"] and not _has_marker(path, p["marker"]):
            not_ours.append(path)
            module.warn("%s does not carry our mark (%s): left in place" % (path, p["marker"]))
        else:
            removed.append(path)
            if not module.check_mode:
                try:
                    remove_tree(path)
                except (IOError, OSError) as exc:
                    module.fail_json(msg="cannot remove %s: %s" % (path, exc), removed_before=removed[:-1])
    return dict(changed=bool(removed), removed=removed, absent=absent, not_ours=not_ours)


if __name__ == "__main__":
    main()
