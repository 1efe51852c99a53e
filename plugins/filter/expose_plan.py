# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The firewalld rich-rule plan of module_utils/front/_expose.py (the vllm_service role removes the retired metrics exposure's rules with it)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: expose_plan
short_description: Plan firewalld rich rules for a port (the retired metrics exposure's removal)
description:
  - Called once per round of observations by the vllm_service role (tasks/expose_removal.yml, with C(expose) false -
    the rules the retired whole-port metrics exposure recorded on a host are removed, by firewall-offline-cmd while
    firewalld is stopped); returns the read-only commands still to run (C(reads)), then the firewall-cmd calls that add
    or remove the rich rules (C(actions)), the record of the rules added, a file_sd target group and the warnings.
  - Fails (an Ansible error naming the setting) for refused settings and for a firewall-cmd that answers unexpectedly.
options:
  _input:
    description:
      - C(expose), C(address), C(port), C(sources), C(firewalld) (auto, always, never), C(zone), C(service), C(host),
        C(record) (text of the host's record, empty if none) and C(daemon_json) (text of /etc/docker/daemon.json).
    type: dict
    required: true
  observed:
    description: Registered results of the earlier C(reads) (each loop item carries its C(key)).
    type: list
    elements: dict
    default: []
'''

EXAMPLES = r'''
plan: "{{ settings | airgap.vllm.expose_plan(first_reads.results + second_reads.results) }}"
'''

RETURN = r'''
_value:
  description:
    - C(reads) (C(key), C(argv)), C(firewalld) (managed, not running, off, unknown), C(zone), C(rules), C(actions)
      (argv lists), C(record), C(record_text), C(scrape), C(summary), C(warnings).
  type: dict
'''

from ansible_collections.airgap.vllm.plugins.module_utils.front._expose import ExposeError, plan
from ansible_collections.airgap.vllm.plugins.plugin_utils._filter import filter_errors


@filter_errors(ExposeError)
def _expose_plan(settings, observed=None):
    return plan(settings, observed or [])


class FilterModule(object):
    def filters(self):
        return {'expose_plan': _expose_plan}
