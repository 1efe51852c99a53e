#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_front_config
short_description: Write the front door's HAProxy configuration and its map files
version_added: 0.2.0
description:
  - Renders C(haproxy.cfg), one C(clients-<service>.map) per vLLM service (SHA-256 digests of the client keys with
    each client's name and limits, never a key), C(metrics-<service>.map) (metrics token digests) and C(engine.map)
    (each engine's own API key), all root-only (0600), from C(airgap.vllm.plugins.module_utils.front._front.render).
  - Services sharing one front port get one door routed by model, with C(clients-routed_<port>.map),
    C(models-routed_<port>.map) (served model name to service) and C(access-routed_<port>.map) (the models of each
    client), from C(airgap.vllm.plugins.module_utils.front._front_models).
  - Files of a service no longer listed are removed. Other files of the directory (the certificate) are left alone.
  - Reports RV(reload) - the running proxy must read the directory again - only when a file changed.
author:
  - airgap.vllm maintainers (@airgap-vllm)
options:
  dir:
    description: The configuration directory on the host.
    type: path
    required: true
  conf_dir:
    description: The same directory as the proxy sees it (the container's mount point; the host package - O(dir)).
    type: str
    default: /usr/local/etc/haproxy
  settings:
    description:
      - C(addresses), C(tls), C(max_body_bytes), C(queue_timeout), C(request_timeout), C(stream_timeout),
        C(hard_stop_after), C(metrics_sources), C(user), C(draining) (see the vllm_front role's variables).
    type: dict
    required: true
  services:
    description: The services (the C(services) of the airgap.vllm.front_inputs filter; key digests only).
    type: list
    elements: dict
    required: true
  engine_keys:
    description: Each service's engine API key ({service - key}); empty - the engine has no key.
    type: dict
    default: {}
  fleet:
    description:
      - Write a fleet balancer's configuration instead (inventory group vllm_front). C(members) is a list of
        C(name) (the name in the member's certificate) and C(address); C(check_interval) is in seconds. O(services)
        then gives each service's C(name), C(front_port) and C(member_port).
    type: dict
attributes:
  check_mode:
    support: full
    description: Reports which files would change; writes nothing.
  diff_mode:
    support: partial
    description: The C(haproxy.cfg) before and after (the map files hold digests and keys; only their names are reported).
  idempotent:
    support: full
    description: Unchanged content and modes leave the files untouched (changed=false, reload=false).
"""

EXAMPLES = r"""
- name: Write the front door configuration
  airgap.vllm.vllm_front_config:
    dir: /etc/airgap-vllm/front
    settings: {addresses: [10.20.0.15], tls: true}
    services: "{{ __inputs.services }}"
    engine_keys: "{{ __inputs.engine_keys }}"
  no_log: true
"""

RETURN = r"""
files:
  description: Names of the files written (or that would be) and removed.
  returned: always
  type: list
  elements: str
reload:
  description: The running proxy must reload its configuration.
  returned: always
  type: bool
fingerprint:
  description:
    - The digest the proxy's workers send in their X-Airgap-Front-Config response header; after a reload the role
      waits until /health carries it (empty for a fleet balancer).
  returned: always
  type: str
  sample: 3f2a9c0d1e4b5a67
services:
  description: Per service - name, front_port, engine_port, cap (total concurrency), clients (names), metrics_port.
  returned: always
  type: list
  elements: dict
"""

import os
import re
import stat

from ansible_collections.airgap.vllm.plugins.module_utils.common._files import read_text, write_atomic
from ansible_collections.airgap.vllm.plugins.module_utils.front._front import render, render_fleet
from ansible_collections.airgap.vllm.plugins.module_utils.front._front_haproxy import config_fingerprint
from ansible_collections.airgap.vllm.plugins.module_utils.front._front_settings import (
    FrontError,
    FrontPlanUnknown,
    plan_service,
)
from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module

_OURS = re.compile(r"\A(clients|metrics|models|access)-[A-Za-z0-9_.@-]+\.map\Z")


def _mode(path):
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None


@ansible_module(
    dict(
        dir=dict(type="path", required=True),
        conf_dir=dict(type="str", default="/usr/local/etc/haproxy"),
        settings=dict(type="dict", required=True),
        services=dict(type="list", elements="dict", required=True),
        engine_keys=dict(type="dict", default={}, no_log=True),
        fleet=dict(type="dict"),
    ),
    errors=(FrontError,),
)
def main(module):
    p = module.params
    try:
        planned = []
        if p["fleet"]:
            # A fleet balancer: haproxy.cfg only (the members check keys, routes and limits).
            files = {
                "haproxy.cfg": {
                    "content": render_fleet(
                        dict(
                            p["settings"],
                            conf_dir=p["conf_dir"],
                            services=p["services"],
                            members=p["fleet"].get("members"),
                            check_interval=p["fleet"].get("check_interval", 2),
                        )
                    ),
                    "mode": "0600",
                    "secret": False,
                }
            }
            planned = [
                {
                    "name": svc["name"],
                    "front_port": svc["front_port"],
                    "engine_port": None,
                    "cap": None,
                    "clients": [],
                    "metrics_port": 0,
                }
                for svc in p["services"]
            ]
        else:
            for svc in p["services"]:
                planned.append(plan_service(dict(svc, engine_key=(p["engine_keys"] or {}).get(svc.get("name"), ""))))
            files = render(dict(p["settings"], conf_dir=p["conf_dir"], services=planned))
    except FrontPlanUnknown as exc:
        # --check on a host the plan stage has not run on yet: the files cannot be rendered, a real run writes them.
        if module.check_mode:
            module.exit_json(
                changed=True,
                reload=False,
                files=[],
                services=[],
                fingerprint="",
                msg="would write the front door's files once the plan exists (%s)" % exc,
            )
        raise
    directory = p["dir"]
    changed_files, before_cfg = [], read_text(os.path.join(directory, "haproxy.cfg")) or ""
    for name in sorted(files):
        path = os.path.join(directory, name)
        want = files[name]
        if read_text(path) != want["content"] or _mode(path) != int(want["mode"], 8):
            changed_files.append(name)
    stale = []
    if os.path.isdir(directory):
        stale = sorted(n for n in os.listdir(directory) if _OURS.match(n) and n not in files)
    if not module.check_mode:
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o700)
        for name in changed_files:
            write_atomic(os.path.join(directory, name), files[name]["content"], mode=int(files[name]["mode"], 8))
        for name in stale:
            os.unlink(os.path.join(directory, name))
    summary = [
        {
            "name": s["name"],
            "front_port": s["front_port"],
            "engine_port": s["engine_port"],
            "cap": s["cap"],
            "clients": sorted(c["name"] for c in s["clients"]),
            "metrics_port": s["metrics_port"],
        }
        for s in planned
    ]
    changed = bool(changed_files or stale)
    result = dict(
        changed=changed,
        reload=changed,
        files=changed_files + stale,
        services=summary,
        fingerprint="" if p["fleet"] else config_fingerprint(files),
    )
    if module._diff and changed:
        result["diff"] = {
            "before": before_cfg,
            "after": files["haproxy.cfg"]["content"],
            "before_header": "haproxy.cfg",
            "after_header": "haproxy.cfg",
        }
    return result


if __name__ == "__main__":
    main()
