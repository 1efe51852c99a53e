#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: bundle_peer_serve
short_description: Serve the staged bundle read-only to the peers of a site, until told to stop
version_added: 0.2.0
description:
  - Runs a temporary read-only HTTP server on the seed host of a site so that its other hosts can fetch the
    staged bundle with M(airgap.vllm.bundle_peer_fetch) over the site LAN.
  - Serves only the files the manifest lists, only below a random O(token) path, only GET and HEAD, with
    byte ranges (so a peer resumes a cut copy), bound to one address (O(bind), the seed's LAN address).
  - Meant to run with C(async) and C(poll 0). It stops when O(stop_file) appears (the role creates it in an
    C(always) section) or after O(max_seconds); C(async) bounds it too. A server left by an interrupted
    run (its pid in O(pid_file)) is stopped before a new one starts.
  - Returns what it sent to whom (bytes and requests per client address).
author:
  - airgap.vllm maintainers (@airgap-vllm)
options:
  bind:
    description: Address to listen on (the seed's LAN address; never 0.0.0.0 unless you mean it).
    type: str
    required: true
  port:
    description: TCP port to listen on.
    type: int
    default: 8477
  token:
    description: Random path segment (16-128 of C([A-Za-z0-9_-])) the files are served under (not logged).
    type: str
    required: true
  root:
    description: The seed's staging directory.
    type: path
    required: true
  artifacts:
    description: The manifest's C(artifacts) list; only these paths are served, each only at its manifest size.
    type: list
    elements: dict
    required: true
  stop_file:
    description: The server stops when this file exists (removed at start).
    type: path
    default: /run/airgap-vllm-peer/stop
  pid_file:
    description: Where the server records its pid, to stop a server left over from an interrupted run.
    type: path
    default: /run/airgap-vllm-peer/serve.pid
  max_seconds:
    description: The server stops after this many seconds whatever happens.
    type: int
    default: 21600
  log_path:
    description: Request log on the seed (client, file, status, range, bytes; never the token), mode 0600.
    type: path
    default: /var/log/airgap-vllm-peer-serve.log
attributes:
  check_mode:
    support: full
    description: Starts nothing in check mode.
  diff_mode:
    support: none
    description: Nothing to show as a diff.
  idempotent:
    support: none
    description: Serves until stopped; it changes nothing on the host but its log and pid file.
seealso:
  - module: airgap.vllm.bundle_peer_fetch
"""

EXAMPLES = r"""
- name: Serve the staged bundle to the site's peers
  airgap.vllm.bundle_peer_serve:
    bind: 10.20.0.11
    token: "{{ lookup('ansible.builtin.password', '/dev/null', chars=['ascii_letters', 'digits'], length=40) }}"
    root: /var/lib/airgap-vllm/bundle
    artifacts: "{{ manifest.artifacts }}"
  async: 21600
  poll: 0
  register: server
"""

RETURN = r"""
stopped_by:
  description: V(stop_file) or V(max_seconds).
  returned: success
  type: str
requests:
  description: Requests answered.
  returned: success
  type: int
bytes_sent:
  description: Bytes sent to all peers.
  returned: success
  type: int
clients:
  description: Per client address, C(requests), C(bytes_sent) and C(errors).
  returned: success
  type: dict
served_seconds:
  description: How long the server ran.
  returned: success
  type: float
"""

import os
import signal
import time

from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_manifest import BundleError
from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module
from ansible_collections.airgap.vllm.plugins.module_utils.bundle._peer_fetch import make_server, serve_until


def _stop_leftover(pid_file):
    """Stop a server an interrupted run left running (only if the pid is still one of ours)."""
    try:
        with open(pid_file) as f:
            pid = int(f.read().strip())
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmdline = f.read()
    except (IOError, OSError, ValueError):
        return False
    if pid == os.getpid() or b"bundle_peer_serve" not in cmdline:
        return False
    os.kill(pid, signal.SIGTERM)
    for dummy in range(50):
        if not os.path.exists("/proc/%d" % pid):
            break
        time.sleep(0.1)
    return True


@ansible_module(
    dict(
        bind=dict(type="str", required=True),
        port=dict(type="int", default=8477),
        token=dict(type="str", required=True, no_log=True),
        root=dict(type="path", required=True),
        artifacts=dict(type="list", elements="dict", required=True),
        stop_file=dict(type="path", default="/run/airgap-vllm-peer/stop"),
        pid_file=dict(type="path", default="/run/airgap-vllm-peer/serve.pid"),
        max_seconds=dict(type="int", default=21600),
        log_path=dict(type="path", default="/var/log/airgap-vllm-peer-serve.log"),
    ),
    errors=(BundleError,),
)
def main(module):
    p = module.params
    if module.check_mode:
        module.exit_json(
            changed=False, stopped_by="check_mode", requests=0, bytes_sent=0, clients={}, served_seconds=0.0
        )
    for d in set(os.path.dirname(x) for x in (p["stop_file"], p["pid_file"])):
        if d and not os.path.isdir(d):
            os.makedirs(d, 0o700)
    stopped_leftover = _stop_leftover(p["pid_file"])
    if os.path.exists(p["stop_file"]):
        os.unlink(p["stop_file"])
    server = make_server(p["bind"], p["port"], p["token"], p["root"], p["artifacts"], log_path=p["log_path"])
    with open(p["pid_file"], "w") as f:
        f.write("%d\n" % os.getpid())
    try:
        dummy, stats = serve_until(server, p["stop_file"], p["max_seconds"])
    finally:
        for path in (p["pid_file"], p["stop_file"]):
            if os.path.exists(path):
                os.unlink(path)
    return dict(changed=False, stopped_leftover=stopped_leftover, **stats)


if __name__ == "__main__":
    main()
