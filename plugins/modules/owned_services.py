#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: owned_services
short_description: Which vLLM services on a host are ours, by our marks on their units and containers
version_added: 0.2.0
description:
  - Reads the unit files in O(unit_dirs) and asks Docker for every container with its name and our label
    C(org.airgap.vllm.service), in one call; changes nothing.
  - A unit is ours when it carries our marker line (C(# org.airgap.vllm.service=<name> config_dir=<dir>)) or
    the description our template always wrote; a container is ours when it carries the label with the
    service's name. One that merely has the name is someone else's - named in RV(notes) and as a warning,
    never listed to remove.
  - Services are O(names) (state records, inventory) plus those found by our marks (RV(discovered)), so an
    uninstall finds a service whose state record is damaged.
  - Each name is checked by the collection's one service-name rule; a name that fails it is named in RV(problems).
extends_documentation_fragment:
  - airgap.vllm.attributes.read_only
author:
  - airgap.vllm maintainers (@airgap-vllm)
options:
  names:
    description: Services to look at besides those found by our marks.
    type: list
    elements: str
    default: []
  unit_dirs:
    description: Where our unit files are.
    type: list
    elements: path
    default: [/etc/systemd/system]
  docker_bin:
    description: The Docker CLI. When it is missing or fails, no container is listed and a warning (and RV(notes)) says so.
    type: str
    default: docker
"""

EXAMPLES = r"""
- name: Find our services on the host
  airgap.vllm.owned_services:
    names: [vllm, vllm-b]
  register: owned

- name: Remove only our containers
  ansible.builtin.command:
    argv: [docker, rm, -f, "{{ item }}"]
  loop: "{{ owned.services['vllm-b'].containers }}"
"""

RETURN = r"""
services:
  description:
    - By service name - C(unit) (its unit file), C(unit_ours) (the file carries our mark), C(unit_foreign) (a file
      with the name but not our mark), C(config_dir) (from our marker, else null), C(containers) (IDs carrying our
      label for it) and C(foreign_containers) (IDs with the name but not our label).
  returned: always
  type: dict
  sample: {vllm-b: {unit: /etc/systemd/system/vllm-b.service, unit_ours: true, unit_foreign: false,
           config_dir: /etc/airgap-vllm/vllm-b, containers: ["3f2a..."], foreign_containers: []}}
discovered:
  description: Services found by our marks on units or containers.
  returned: always
  type: list
  elements: str
problems:
  description: Names that are not service names (the one rule), left out of RV(services).
  returned: always
  type: list
  elements: str
notes:
  description: What looks like ours but is not (left alone), and what could not be read (each also a warning).
  returned: always
  type: list
  elements: str
"""

import os

from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module
from ansible_collections.airgap.vllm.plugins.module_utils.common._ownership import (
    CONTAINER_LABEL,
    parse_docker_ps,
    survey,
)


def read_units(unit_dirs):
    texts, problems = {}, []
    for directory in unit_dirs:
        try:
            names = sorted(os.listdir(directory))
        except (IOError, OSError) as exc:
            if getattr(exc, "errno", None) != 2:
                problems.append("cannot list %s: %s" % (directory, exc))
            continue
        for name in names:
            path = os.path.join(directory, name)
            if not name.endswith(".service") or not os.path.isfile(path):
                continue
            try:
                with open(path, "rb") as handle:
                    texts[path] = handle.read(1 << 20).decode("utf-8", "replace")
            except (IOError, OSError) as exc:
                problems.append("cannot read %s: %s" % (path, exc))
    return texts, problems


@ansible_module(
    dict(
        names=dict(type="list", elements="str", default=[]),
        unit_dirs=dict(type="list", elements="path", default=["/etc/systemd/system"]),
        docker_bin=dict(type="str", default="docker"),
    ),
)
def main(module):
    p = module.params
    texts, unreadable = read_units(p["unit_dirs"])
    rows = None
    docker = module.get_bin_path(p["docker_bin"]) if not os.path.isabs(p["docker_bin"]) else p["docker_bin"]
    if docker and os.path.exists(docker):
        fmt = '{{.ID}}\t{{.Names}}\t{{.Label "%s"}}' % CONTAINER_LABEL
        rc, out, err = module.run_command([docker, "ps", "--all", "--no-trunc", "--format", fmt])
        if rc == 0:
            rows = parse_docker_ps(out)
        else:
            unreadable.append("docker ps failed (rc %d): %s; containers were not looked at" % (rc, err.strip()))
    else:
        unreadable.append("%s not found: containers were not looked at" % p["docker_bin"])
    result = survey(p["names"], texts, rows)
    result["notes"] = unreadable + result["notes"]
    for note in result["notes"]:
        module.warn(note)
    return dict(changed=False, **result)


if __name__ == "__main__":
    main()
