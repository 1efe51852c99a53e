# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What Docker's daemon.json should become for the nvidia runtime (module_utils/driver/_docker_daemon.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: toolkit_daemon_plan
short_description: What Docker's daemon.json should become for the nvidia runtime, and what is left to do
description:
  - Called by the nvidia_toolkit role (tasks/probe.yml with the probe's readings; tasks/uninstall.yml with
    O(remove)) on the text of daemon.json. An absent, empty or blank file is an empty object.
  - Without O(remove), C(after) is what C(nvidia-ctk runtime configure --runtime=docker) writes - every key kept,
    C(runtimes.nvidia) set to C(args) V([]) and C(path) V(nvidia-container-runtime) (an entry already there is
    replaced), and C(default-runtime) V(nvidia) with O(set_as_default). With O(remove), C(after) has
    C(runtimes.nvidia) taken out (C(runtimes) gone once empty) and C(default-runtime) taken out when it was V(nvidia).
  - A file that is not JSON, whose top level is not an object or whose C(runtimes) is not one is not an Ansible
    error but C(error), the message to fail with (nothing is to be changed then).
options:
  _input:
    description: Text of daemon.json; null (or empty) when the file is absent.
    type: str
    required: true
  set_as_default:
    description: Also make C(nvidia) Docker's default runtime (C(--set-as-default)).
    type: bool
    default: false
  docker:
    description: The C(docker) facts of airgap.vllm.host_info (C(running), C(runtimes)).
    type: dict
    default: {}
  rpms:
    description: The C(rpms) of airgap.vllm.host_info (installed version-releases of each package).
    type: dict
    default: {}
  packages:
    description: The toolkit packages that must be installed at O(version).
    type: list
    elements: str
    default: []
  version:
    description: The version-release the packages must be at.
    type: str
    default: ''
  path:
    description: Path of daemon.json (in the nvidia-ctk command line and the error message).
    type: str
    default: /etc/docker/daemon.json
  remove:
    description: Plan the uninstall (the nvidia runtime taken out) instead.
    type: bool
    default: false
'''

EXAMPLES = r'''
plan: >-
  {{ probe.files['/etc/docker/daemon.json']
     | airgap.vllm.toolkit_daemon_plan(set_as_default=false, docker=probe.docker, rpms=probe.rpms,
                                      packages=['nvidia-container-toolkit'], version='1.17.8-1') }}
removal: "{{ slurped.content | default('') | b64decode | airgap.vllm.toolkit_daemon_plan(remove=true) }}"
'''

RETURN = r'''
_value:
  description:
    - C(before) and C(after) (daemon.json's data now and as it should become; empty on error), C(differs) (they
      differ, so the file is to be written), C(converged) (the packages at the version, nothing to change and the
      running daemon lists the runtime), C(restart) (nothing to change but the daemon does not list the runtime),
      C(argv) (the nvidia-ctk command that writes C(after)), C(rpms_wrong) (the packages not at the version) and
      C(error) (empty, or the message to fail with). With O(remove) only C(before), C(after), C(differs) and C(error)
      are meant (C(converged) and C(restart) false, C(argv) empty).
  type: dict
'''

from ansible_collections.airgap.vllm.plugins.module_utils.driver._docker_daemon import plan


def toolkit_daemon_plan(
    daemon_json,
    set_as_default=False,
    docker=None,
    rpms=None,
    packages=None,
    version='',
    path='/etc/docker/daemon.json',
    remove=False,
):
    return plan(
        daemon_json,
        set_as_default=bool(set_as_default),
        docker=docker or {},
        rpms=rpms or {},
        packages=list(packages or []),
        version=version or '',
        path=path,
        remove=bool(remove),
    )


class FilterModule(object):
    def filters(self):
        return {'toolkit_daemon_plan': toolkit_daemon_plan}
