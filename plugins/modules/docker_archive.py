#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: docker_archive
short_description: Import a docker-save archive by image ID, without reading its body
version_added: 0.1.0
description:
  - Reads the image ID(s) and RepoTags of a C(docker save) archive by walking its tar headers only
    (seconds for a multi-GB archive) - C(manifest.json) of the legacy layout, or C(index.json) of the
    OCI layout that Docker 25 and later (and other tools) write.
  - Compares the image ID with C(docker image inspect) and runs C(docker load) only when that ID is
    absent, so a re-run never re-loads gigabytes. Unlike a load keyed by name, a different image
    under the same tag is noticed.
  - Makes the archive's own RepoTags and O(tag) point at the image (C(docker tag)).
  - Uses the Docker CLI only; the Python Docker SDK is not needed on the target.
author:
  - airgap.vllm maintainers (@airgap-vllm)
options:
  path:
    description:
      - Path of the C(docker save) tar on the target. Uncompressed tars are read by headers only;
        a gzip-compressed tar is accepted but must be read in full.
    type: path
    required: true
  tag:
    description:
      - Reference (C(repo:tag)) to point at the archive's image after the import.
      - Needs an archive that holds exactly one image.
    type: str
  docker_bin:
    description: Docker CLI to run.
    type: str
    default: docker
  platform:
    description: Platform (C(os/arch)) to pick from a multi-platform OCI index.
    type: str
    default: linux/amd64
  derived:
    description:
      - An image derived from the archive's earlier (an image ID or reference). Its labels are read and
        RV(derived) says whether it is still current for this archive (read only; nothing is built here).
    type: str
  derived_labels:
    description: Labels O(derived) must carry with these values to be current.
    type: dict
    default: {}
  derived_base_label:
    description: Label of O(derived) that must name the archive's image ID.
    type: str
    default: org.airgap.vllm.base-image-id
  hint:
    description:
      - What the caller advises when the import fails, after the cause (the archive is not a file, Docker does not
        answer, or the import's own error), all in one failure message.
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    description: Reads the archive and queries Docker; reports what would be loaded and tagged without doing it.
  diff_mode:
    support: full
    description: Before/after image ID and tags.
  idempotent:
    support: full
    description: Loads only when the image ID is absent; tags only when a tag points elsewhere.
requirements:
  - Docker CLI on the target.
notes:
  - The image ID is the sha256 of the image config blob; this module hashes that small blob
    rather than trusting its file name.
seealso:
  - module: airgap.vllm.bundle_verify
"""

EXAMPLES = r"""
- name: Import the vLLM image from the staged bundle
  airgap.vllm.docker_archive:
    path: /var/lib/airgap-vllm/bundle/artifacts/vllm-openai-v0.27.1.tar
    tag: vllm/vllm-openai:v0.27.1
  register: vllm_image

- name: Show the image ID the service will run
  ansible.builtin.debug:
    msg: "{{ vllm_image.image_id }}"
"""

RETURN = r"""
image_id:
  description: Image ID (config digest) of the archive's first image.
  returned: success
  type: str
  sample: sha256:5d41402abc4b2a76b9719d911017c592ae8e1c6a5e1b0e6c0b1f5c6f7a8b9c0d
repo_tags:
  description: Tags that point at the image(s) after the run (archive RepoTags plus O(tag)).
  returned: success
  type: list
  elements: str
  sample: [vllm/vllm-openai:v0.27.1]
loaded:
  description: Whether C(docker load) ran (in check mode, whether it would run).
  returned: success
  type: bool
tagged:
  description: References that were (or in check mode would be) pointed at the image with C(docker tag).
  returned: success
  type: list
  elements: str
images:
  description: Every image in the archive.
  returned: success
  type: list
  elements: dict
  contains:
    image_id:
      description: Config digest.
      type: str
    repo_tags:
      description: RepoTags recorded in the archive.
      type: list
      elements: str
layout:
  description: Archive layout found (V(docker), V(docker+oci), V(oci)).
  returned: success
  type: str
archive_bytes_read:
  description: Bytes read from the archive to identify it (headers and small JSON members only).
  returned: success
  type: int
derived:
  description: The O(derived) image, null when absent (or O(derived) not given).
  returned: success
  type: dict
  contains:
    image_id: {description: "Its ID.", type: str}
    labels: {description: "Its labels.", type: dict}
    current: {description: "It names this archive's image as its base and carries every O(derived_labels).",
              type: bool}
"""

from ansible_collections.airgap.vllm.plugins.module_utils.common._docker import DockerCli, DockerError
from ansible_collections.airgap.vllm.plugins.module_utils.image._docker_archive import (
    ArchiveError,
    daemon_error,
    derived_image,
    failure_message,
    import_archive,
)
from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module


@ansible_module(
    dict(
        path=dict(type="path", required=True),
        tag=dict(type="str"),
        docker_bin=dict(type="str", default="docker"),
        platform=dict(type="str", default="linux/amd64"),
        derived=dict(type="str"),
        derived_labels=dict(type="dict", default={}),
        derived_base_label=dict(type="str", default="org.airgap.vllm.base-image-id"),
        hint=dict(type="str", default=""),
    ),
)
def main(module):
    p = module.params
    docker_bin = module.get_bin_path(p["docker_bin"], required=True)
    docker = DockerCli(docker_bin)
    # Its own failure: one message with the cause, the daemon's state and the hint (one fatal line, issue 42).
    try:
        result = import_archive(p["path"], docker, tag=p["tag"], check_mode=module.check_mode, platform=p["platform"])
        result["derived"] = derived_image(
            docker, p["derived"], result["image_id"], p["derived_labels"], p["derived_base_label"]
        )
    except ArchiveError as e:
        module.fail_json(msg=failure_message(p["path"], e, hint=p["hint"]))
    except DockerError as e:
        module.fail_json(
            msg=failure_message(p["path"], e, daemon_error(docker), p["hint"]),
            cmd=e.cmd,
            rc=e.rc,
            stdout=e.stdout,
            stderr=e.stderr,
        )
    for warning in result.pop("warnings", []):
        module.warn(warning)
    if module._diff:
        result["diff"] = {
            "before": {
                "image_present": not result["loaded"],
                "tags": sorted(set(result["repo_tags"]) - set(result["tagged"])),
            },
            "after": {"image_present": True, "image_id": result["image_id"], "tags": sorted(result["repo_tags"])},
        }
    return result


if __name__ == "__main__":
    main()
