#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_source_patch
short_description: Apply named, idempotent source patches to a vLLM package tree
version_added: 0.1.0
description:
  - Applies patches from a small built-in catalogue to files of a C(vllm) Python package directory
    (typically a copy taken out of the vLLM image with C(docker cp); see the R(airgap.vllm.vllm_image,
    ansible_collections.airgap.vllm.vllm_image_role) role).
  - C(madvise_populate_write) wraps every C(<obj>.madvise(<MADV_POPULATE_WRITE name>, ...)) call statement
    of C(v1/kv_offload/cpu/shared_offload_region.py) and
    C(distributed/ec_transfer/ec_connector/cpu/ec_shared_region.py) in a C(try) that swallows only
    C(OSError) with errno C(EINVAL) (kernels older than 5.14), logs a warning once and re-raises anything
    else. Single- and multi-line calls are found by tokenizing the source, not by line numbers.
  - Per file the outcome is C(patched), C(already_patched) (our marker is present and every call is guarded),
    or C(upstream_fixed) (the vLLM release guards the calls itself; the file is left alone, byte for byte).
    vLLM 0.28.0 and later moved the call into a helper (C(_madvise_populate_write)) that its caller
    (C(_get_populate_write_fn)) probes inside C(try/except OSError), falling back to touching one byte per
    page; such a file is C(upstream_fixed). A handler that only logs and re-raises is not a fix.
  - When a write fails after other files were written, the task fails with C(changed=true) and RV(written).
  - A file with neither the expected calls nor a known fix fails with C(anchor_not_found), naming the file and
    what was expected; nothing is written unless every file of every requested patch can be patched.
  - Validation before writing. The patched text is re-tokenized and re-checked. When the Python running the module
    can parse the original source, the result must parse with C(ast) too and an C(ast) walk must find every call
    guarded (RV(files[].validation=ast)). When the source uses syntax newer than the running Python (the module runs
    on the target's Python 3.7, the code on the image's 3.12), only the token check is possible
    (RV(files[].validation=tokens)) and the caller must compile the result with the interpreter that runs it; the
    vllm_image role always does this with the image's python3.
  - Files are replaced atomically (write to a temporary file beside it, then rename), keeping their mode.
  - Without O(root), nothing is read or written; the module only returns the catalogue (which files each patch
    needs), so that a caller can copy exactly those files out of an image.
options:
  root:
    description:
      - The C(vllm) package directory (the one holding C(__init__.py)), or a copy of it holding at least the files
        of the requested patches at their package-relative paths.
    type: path
  patches:
    description:
      - Names of catalogue patches to apply.
    type: list
    elements: str
    choices: [madvise_populate_write]
    default: [madvise_populate_write]
  kv_offloading:
    description:
      - Whether the service offloads KV to host memory (native offload or the EC CPU connector). When given, the
        module also says whether the image needs C(madvise_populate_write) (RV(madvise_patch_needed)), by the same
        rule as the launch planner's C(needs_madvise_patch) (see O(kernel_release)).
    type: bool
  kernel_release:
    description:
      - Kernel release the containers run on (C(uname -r) of the host), read with O(kv_offloading).
      - The patch is needed with KV offload on a kernel older than 5.14. A release whose C(<major>.<minor>)
        cannot be read counts as old (patched), as the patch is harmless on a new kernel and a missing one fatal on
        an old one.
    type: str
attributes:
  check_mode:
    support: full
    description: Plans every file and reports what would change; writes nothing.
  diff_mode:
    support: full
    description: One before/after entry per file that is (or would be) patched.
  idempotent:
    support: full
    description: A patched file carries a marker; a second run reports C(already_patched) and changes nothing.
  platform:
    support: full
    platforms: posix
    description: Any POSIX host with Python 3.7 or later.
author:
  - airgap.vllm maintainers (@airgap-vllm)
notes:
  - Pure standard library; runs on Python 3.7 and later and never touches the network.
"""

EXAMPLES = r"""
- name: Guard MADV_POPULATE_WRITE in a copy of the vllm package taken from the image
  airgap.vllm.vllm_source_patch:
    root: /var/tmp/vllm-patch/vllm
    patches: [madvise_populate_write]
  register: vllm_patch

- name: Ask which files a patch needs (reads and writes nothing)
  airgap.vllm.vllm_source_patch:
    patches: [madvise_populate_write]
  register: vllm_patch_catalogue

- name: Ask whether this host's image needs the madvise patch (reads and writes nothing)
  airgap.vllm.vllm_source_patch:
    patches: [madvise_populate_write]
    kv_offloading: true
    kernel_release: "{{ ansible_facts['kernel'] }}"
  register: vllm_patch_decision
"""

RETURN = r"""
files:
  description: One entry per file of every requested patch (empty without O(root)).
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: Absolute path of the file.
      type: str
      sample: /var/tmp/vllm-patch/vllm/v1/kv_offload/cpu/shared_offload_region.py
    relpath:
      description: Path inside the vllm package.
      type: str
      sample: v1/kv_offload/cpu/shared_offload_region.py
    patch:
      description: Patch name and revision.
      type: str
      sample: madvise_populate_write@r1
    state:
      description: What was (or, in check mode, would be) done.
      type: str
      sample: patched
      choices: [patched, already_patched, upstream_fixed]
    sites:
      description: First line of every matching call in the original file.
      type: list
      elements: int
      sample: [100, 111]
    patched_sites:
      description: Lines (in the original file) of the calls that were wrapped.
      type: list
      elements: int
      sample: [100, 111]
    validation:
      description: How the result was checked here (C(ast), C(tokens), or C(none) when nothing changed).
      type: str
      sample: ast
fingerprint:
  description: SHA-256 over the patch revisions and the resulting file contents; names the derived image.
  returned: when O(root) is given
  type: str
  sample: 81b5c9f4cba84d98fdaeed385c379592d9bb56be03424c2d79230241f4e51e4e
patches:
  description: The requested patches with their revisions.
  returned: always
  type: list
  elements: str
  sample: [madvise_populate_write@r1]
catalogue:
  description: The requested catalogue entries (name, revision, files, description).
  returned: always
  type: list
  elements: dict
upstream_fixed:
  description: Every file of the requested patches already carries upstream's fix (state C(upstream_fixed)
    everywhere), so the release needs no patched image, whatever the kernel.
  returned: when O(root) is given
  type: bool
  sample: false
madvise_patch_needed:
  description: Whether the image needs C(madvise_populate_write) (KV offload on a kernel older than 5.14, or one
    whose version cannot be read).
  returned: when O(kv_offloading) is given
  type: bool
  sample: true
madvise_patch_reason:
  description: Why RV(madvise_patch_needed) is what it is.
  returned: when O(kv_offloading) is given
  type: str
  sample: "KV offload on kernel 4.19 < 5.14: madvise(MADV_POPULATE_WRITE) answers EINVAL"
written:
  description: On a failure part-way through writing, the files already patched (then C(changed) is true).
  returned: failure
  type: list
  elements: str
state:
  description: On failure, C(anchor_not_found) when a file lacks both the expected calls and a known fix.
  returned: failure
  type: str
  sample: anchor_not_found
file:
  description: On C(anchor_not_found), the file that lacks the expected calls.
  returned: failure
  type: str
expected:
  description: On C(anchor_not_found), what the patch looked for.
  returned: failure
  type: str
"""

import os

from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module
from ansible_collections.airgap.vllm.plugins.module_utils.image._source_analysis import SourcePatchError
from ansible_collections.airgap.vllm.plugins.module_utils.image._source_patch import (
    CATALOGUE,
    STATE_PATCHED,
    AnchorNotFoundError,
    PartialWriteError,
    apply_tree,
    fingerprint,
    get_patch,
    madvise_patch_decision,
    plan_tree,
    upstream_fixed,
)


@ansible_module(
    dict(
        root=dict(type="path"),
        patches=dict(type="list", elements="str", choices=sorted(CATALOGUE), default=["madvise_populate_write"]),
        kv_offloading=dict(type="bool"),
        kernel_release=dict(type="str"),
    ),
)
def main(module):
    root = module.params["root"]
    specs = [get_patch(name) for name in module.params["patches"]]
    result = dict(changed=False, files=[], patches=[s.ident for s in specs], catalogue=[s.as_dict() for s in specs])
    if module.params["kv_offloading"] is not None:
        needed, why = madvise_patch_decision(module.params["kv_offloading"], module.params["kernel_release"])
        result.update(madvise_patch_needed=needed, madvise_patch_reason=why)
    if root is None:
        module.exit_json(**result)
    if not os.path.isdir(root):
        module.fail_json(msg="root %s is not a directory" % root, **result)

    try:
        planned = plan_tree(root, module.params["patches"])
        if not module.check_mode:
            apply_tree(planned)
    except AnchorNotFoundError as exc:
        module.fail_json(msg=str(exc), state=exc.state, file=exc.path, expected=exc.expected, **result)
    except PartialWriteError as exc:
        # Files written before the failure are patched on disk: that is a change.
        result.update(changed=bool(exc.written), written=exc.written)
        module.fail_json(msg=str(exc), **result)
    except (SourcePatchError, OSError, UnicodeDecodeError) as exc:
        module.fail_json(msg=str(exc), **result)

    changed_items = [p for p in planned if p["state"] == STATE_PATCHED]
    result["changed"] = bool(changed_items)
    result["fingerprint"] = fingerprint(planned)
    result["upstream_fixed"] = upstream_fixed(planned)
    result["files"] = [dict((k, v) for k, v in p.items() if k not in ("before", "after")) for p in planned]
    if module._diff and changed_items:
        result["diff"] = [
            dict(before_header=p["path"], after_header=p["path"], before=p["before"], after=p["after"])
            for p in changed_items
        ]
    return result


if __name__ == "__main__":
    main()
