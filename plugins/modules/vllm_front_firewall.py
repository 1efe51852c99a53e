#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_front_firewall
short_description: Open exactly the front door's ports to the named sources in firewalld
version_added: 0.2.0
description:
  - For each port of O(ports), one firewalld rich rule per source of O(sources) in the zone of O(address) (runtime and
    permanent), by the same plan as the service's former metrics exposure - C(plan) of C(module_utils/front/_expose.py), the
    one home of the firewalld rules. Read-only questions first, then only the changes needed.
  - The rules this module added are recorded in O(record_file); a port no longer listed (or O(ports) empty) has
    exactly those rules removed, and the record goes with the last one.
  - The proxy runs with the host's network (C(--network host)), so Docker publishes nothing and adds no DNAT rule for it;
    so firewalld's zone rules alone decide who reaches the ports.
author:
  - airgap.vllm maintainers (@airgap-vllm)
options:
  ports:
    description: The TCP ports to open (front and metrics listeners); empty - remove what was recorded.
    type: list
    elements: int
    default: []
  metrics_ports:
    description: The metrics listeners' ports, opened to O(metrics_sources) (empty - to O(sources)).
    type: list
    elements: int
    default: []
  metrics_sources:
    description: Prometheus servers' addresses or networks (CIDR) accepted on O(metrics_ports).
    type: list
    elements: str
    default: []
  address:
    description: The front address whose interface's zone takes the rules (a wildcard - firewalld's default zone).
    type: str
    default: 0.0.0.0
  sources:
    description: Client addresses or networks (CIDR) accepted on the ports.
    type: list
    elements: str
    default: []
  firewalld:
    description: V(auto) - when firewalld runs; V(always) - fail when it does not; V(never) - change nothing.
    type: str
    choices: [auto, always, never]
    default: auto
  zone:
    description: The zone; empty - the zone of O(address)'s interface, else the default zone.
    type: str
    default: ""
  record_file:
    description: Where the rules this module added are recorded.
    type: path
    required: true
attributes:
  check_mode:
    support: full
    description: Runs the read-only firewall-cmd queries and reports the changes it would make.
  diff_mode:
    support: none
    description: The summary lists each rule added or removed.
  idempotent:
    support: full
    description: Rules already present are not added again.
"""

EXAMPLES = r"""
- name: Open the front door's ports to the site's clients
  airgap.vllm.vllm_front_firewall:
    ports: [8443]
    address: 10.20.0.15
    sources: [10.20.0.0/24]
    record_file: /var/lib/airgap-vllm/state/front-firewalld.json
"""

RETURN = r"""
firewalld:
  description: managed, not running, off.
  returned: always
  type: str
summary:
  description: One sentence per rule added or removed (or that would be).
  returned: always
  type: list
  elements: str
warnings_text:
  description: What the firewall does not do on this host.
  returned: always
  type: list
  elements: str
"""

import json
import os

from ansible_collections.airgap.vllm.plugins.module_utils.front._expose import ExposeError, plan
from ansible_collections.airgap.vllm.plugins.module_utils.common._files import read_text, write_atomic
from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module

RECORD_VERSION = 1


def _records(text):
    try:
        data = json.loads(text or "")
    except ValueError:
        return {}
    ports = data.get("ports") if isinstance(data, dict) else None
    return dict((int(k), v) for k, v in ports.items()) if isinstance(ports, dict) else {}


def _ask(module, argv):
    """A read-only command; a missing firewall-cmd (no firewalld installed) answers like a stopped firewalld."""
    if module.get_bin_path(argv[0]) is None:
        return 127, "", "%s: not installed" % argv[0]
    return module.run_command(argv)


@ansible_module(
    dict(
        ports=dict(type="list", elements="int", default=[]),
        metrics_ports=dict(type="list", elements="int", default=[]),
        metrics_sources=dict(type="list", elements="str", default=[]),
        address=dict(type="str", default="0.0.0.0"),
        sources=dict(type="list", elements="str", default=[]),
        firewalld=dict(type="str", choices=["auto", "always", "never"], default="auto"),
        zone=dict(type="str", default=""),
        record_file=dict(type="path", required=True),
    ),
)
def main(module):
    p = module.params
    old_text = read_text(p["record_file"]) or ""
    records = _records(old_text)
    observed, summary, warnings, new_records, state = [], [], [], {}, "off"
    try:
        wanted = dict((port, p["sources"]) for port in p["ports"])
        wanted.update((port, p["metrics_sources"] or p["sources"]) for port in p["metrics_ports"])
        for port in sorted(set(wanted) | set(records)):
            settings = dict(
                expose=port in wanted,
                address=p["address"],
                port=port,
                sources=wanted.get(port, []),
                firewalld=p["firewalld"],
                zone=p["zone"],
                service="front",
                host="",
                record=records.get(port) or "",
                # --network host: Docker publishes nothing for the proxy, no DNAT bypasses firewalld.
                daemon_json={"iptables": False},
            )
            for _round in range(5):
                result = plan(settings, observed)
                if not result["reads"]:
                    break
                for read in result["reads"]:
                    rc, out, err = _ask(module, read["argv"])
                    observed.append({"item": read, "rc": rc, "stdout": out, "stderr": err})
            if result["reads"]:
                module.fail_json(msg="the firewalld plan still asks %s (a bug)" % [r["argv"] for r in result["reads"]])
            if result["firewalld"] != "off":
                state = result["firewalld"]
            for argv in result["actions"]:
                if not module.check_mode:
                    rc, out, err = module.run_command(argv)
                    if rc != 0:
                        module.fail_json(msg="%s failed (rc %s): %s" % (" ".join(argv), rc, (err or out).strip()))
            summary += ["port %d: %s" % (port, s) for s in result["summary"]]
            warnings += [
                w.replace("vllm_service_metrics_", "vllm_front_")
                for w in result["warnings"]
                if w.replace("vllm_service_metrics_", "vllm_front_") not in warnings
            ]
            if result["record"]:
                new_records[port] = result["record_text"]
    except ExposeError as exc:
        module.fail_json(msg=str(exc).replace("vllm_service_metrics_", "vllm_front_"))
    new_text = (
        json.dumps(
            {"version": RECORD_VERSION, "ports": dict((str(k), v) for k, v in sorted(new_records.items()))},
            indent=1,
            sort_keys=True,
        )
        + "\n"
        if new_records
        else ""
    )
    changed = bool(summary) or new_text != old_text
    if not module.check_mode and new_text != old_text:
        if new_text:
            write_atomic(p["record_file"], new_text, mode=0o644, makedirs=0o755)
        elif os.path.exists(p["record_file"]):
            os.unlink(p["record_file"])
    return dict(changed=changed, firewalld=state, summary=summary, warnings_text=warnings)


if __name__ == "__main__":
    main()
