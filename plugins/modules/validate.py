#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: validate
short_description: Check every role's variables and the rules between roles before anything changes a host
version_added: 0.1.0
description:
  - Checks the variables set for the host (inventory, play, extra vars) against each role's
    C(meta/argument_specs.yml), with the same type conversions as the role's own check, and fails
    once with one short line per problem - the variable, what it got, what it wants.
  - Then the rules no single role can check - the controller-side bundle holds every file its
    manifest lists and what the enabled stages install (the driver version the nvidia_driver role installs),
    the driver to install is one preflight accepts, preflight checks the service's port, the model
    is imported the way it is served, inventory entries on one machine share no port, container
    name or GPU.
  - Then (O(check_connection)) that the host answers; a docker-connection host whose container is
    stopped or missing is named as such.
  - Role-prefixed variables no role reads are warned about, with the option probably meant.
  - Runs on the controller (an action plugin); changes nothing anywhere.
author:
  - airgap.vllm maintainers (@airgap-vllm)
options:
  roles:
    description: Roles of this collection whose variables are checked; default O(stages), else all of them.
    type: list
    elements: str
  stages:
    description:
      - Roles the playbook runs; the cross-role rules and the bundle's contents are checked for these.
      - Default O(roles).
    type: list
    elements: str
  skip:
    description: Variables the playbook wires itself (from facts of earlier stages); not checked.
    type: list
    elements: str
    default: []
  manage_driver:
    description: Whether the nvidia_driver stage installs the driver (so the bundle must carry it).
    type: bool
    default: true
  hints:
    description:
      - What to do, appended to a problem - by variable (for example C(bundle_path)), and C(connection)
        for an unreachable host. Inventories set it through C(airgap_vllm_validate_hints).
    type: dict
    default: {}
  check_connection:
    description: Also prove the host answers (M(ansible.builtin.ping)).
    type: bool
    default: true
extends_documentation_fragment:
  - airgap.vllm.attributes.read_only
attributes:
  action:
    support: full
    description: Runs on the controller; only the connection check touches the host.
notes:
  - C(playbooks/validate.yml) runs it on all hosts at once with C(any_errors_fatal), and is the first
    play of C(site.yml); import it (or call this action) at the top of a fleet playbook.
seealso:
  - module: airgap.vllm.vllm_launch_plan
"""

EXAMPLES = r"""
- name: Check the settings of the roles this fleet playbook uses
  airgap.vllm.validate:
    stages: [preflight, gpu_free]

- name: As site.yml does it (the variables it wires itself are skipped)
  airgap.vllm.validate:
    skip: [vllm_plan_model_dir, vllm_service_image, vllm_service_model_dir]
    hints: "{{ airgap_vllm_validate_hints | default({}) }}"
"""

RETURN = r"""
msg:
  description: One heading line and one line per problem, or a one-line summary when all is well.
  returned: always
  type: str
  sample: "1 problem in the settings of gpu-node-01 (nothing was changed):\n- vllm_plan_concurrency: got 'abc' (a string); wants an integer"
roles:
  description: The roles whose variables were checked.
  returned: always
  type: list
  elements: str
"""

from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module


@ansible_module(
    dict(
        roles=dict(type="list", elements="str"),
        stages=dict(type="list", elements="str"),
        skip=dict(type="list", elements="str", default=[]),
        manage_driver=dict(type="bool", default=True),
        hints=dict(type="dict", default={}),
        check_connection=dict(type="bool", default=True),
    ),
)
def main(module):
    module.fail_json(msg="airgap.vllm.validate runs on the controller (its action plugin); it was called as a module")


if __name__ == "__main__":
    main()
