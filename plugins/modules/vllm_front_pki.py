#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_front_pki
short_description: Site CA and the host's front door certificate, made on the control node
version_added: 0.2.0
description:
  - An action plugin - everything happens on the control node, never on the host or the bundle medium.
  - Makes a site CA (EC P-384, 10 years) once in O(dir) (0700; keys 0600) and, per host, a server certificate
    (EC P-256, at most 397 days) signed by it, with the host's front addresses and names (O(names) and the inventory
    host name) as subject alternative names.
  - Makes the certificate again when it is missing, expires within O(renew_days), names other addresses, or was signed
    by another CA - so renewal and rotation are a re-run. Needs the C(cryptography) package ansible-core depends on.
  - The site CA is made once per site. When the host already serves the certificate of a CA (O(host_ca)) that O(dir)
    does not hold (a second clone or control node, a lost directory), it fails with what to do, instead of making a new
    CA that the site's clients do not trust; O(replace_ca) makes a new one on purpose (the old files are kept, renamed).
author:
  - airgap.vllm maintainers (@airgap-vllm)
options:
  dir:
    description: The controller directory of the CA and the certificates.
    type: str
    default: ~/.airgap-vllm/pki
  host:
    description: The host the certificate is for (its file names; also a DNS name in the certificate).
    type: str
  names:
    description: IP addresses and DNS names clients use to reach the host.
    type: list
    elements: str
    default: []
  renew_days:
    description: Make a new certificate when the current one expires within this many days.
    type: int
    default: 30
  host_ca:
    description: The CA certificate the host's front door has now, base64 (C(ansible.builtin.slurp)'s content); empty
      when it has none.
    type: str
    default: ""
  replace_ca:
    description: Make a new site CA even though the host serves another one (every client must get the new CA).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Says whether a certificate would be made, and why; writes nothing.
  diff_mode:
    support: none
    description: Key material has no diff.
  idempotent:
    support: full
    description: A valid certificate with the wanted names is left alone.
"""

EXAMPLES = r"""
- name: Site CA and this host's certificate
  airgap.vllm.vllm_front_pki:
    names: [10.20.0.15, gpu1.site.example]
  delegate_to: localhost
"""

RETURN = r"""
ca_cert:
  description: Controller path of the site CA certificate (hand it to clients).
  returned: always
  type: str
cert:
  description: Controller path of the host's certificate.
  returned: always
  type: str
key:
  description: Controller path of the host's private key (0600).
  returned: always
  type: str
reason:
  description: Why a certificate was (or would be) made; null when none was.
  returned: always
  type: str
ca_sha256:
  description: SHA-256 fingerprint of the site CA certificate (AA:BB:...), as clients show it.
  returned: when the CA exists
  type: str
not_after:
  description: Expiry of the host's certificate (UTC, ISO 8601).
  returned: when known
  type: str
names:
  description: The names in the certificate.
  returned: always
  type: list
  elements: str
"""
