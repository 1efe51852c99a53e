#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: unit_health_wait
short_description: Wait for a systemd unit's HTTP health endpoint, giving up as soon as the unit's process dies
version_added: 0.1.0
description:
  - Polls O(url) until it answers HTTP 200, like M(ansible.builtin.uri) with C(until), and reads
    C(systemctl show) for O(unit) between polls.
  - Fails at once, naming the unit's state and exit status, when the unit is failed or stopped, is
    waiting to be restarted (C(SubState=auto-restart)), or has been restarted since the wait began.
    A C(Restart=on-failure) service whose container exits at start-up (vLLM refusing its flags, say)
    would otherwise keep the play waiting for the whole O(timeout).
  - Read-only; never reaches anything but O(url), which is meant to be a loopback address.
options:
  unit:
    description: systemd unit whose process serves O(url).
    type: str
    required: true
  url:
    description: Health URL; only HTTP 200 counts as healthy.
    type: str
    required: true
  timeout:
    description: Seconds to wait in all.
    type: int
    default: 900
  interval:
    description: Seconds between polls.
    type: int
    default: 5
  read_url:
    description:
      - Once healthy, read this URL too (the engine's C(/metrics), say) and return its body as RV(content), so one
        task both waits and reads; anything but HTTP 200 there fails.
    type: str
extends_documentation_fragment:
  - airgap.vllm.attributes.read_only
author:
  - airgap.vllm maintainers (@airgap-vllm)
'''

EXAMPLES = r'''
- name: Wait for the engine, or stop waiting when its container dies
  airgap.vllm.unit_health_wait:
    unit: vllm
    url: http://127.0.0.1:8000/health
    timeout: 900

- name: Wait for the engine, then read its /metrics in the same task
  airgap.vllm.unit_health_wait:
    unit: vllm
    url: http://127.0.0.1:8000/health
    read_url: http://127.0.0.1:8000/metrics
  register: __metrics  # __metrics.content
'''

RETURN = r'''
status: {description: "Last HTTP status of O(url) (null when nothing answered).", returned: always, type: int, sample: 200}
elapsed: {description: "Seconds waited.", returned: always, type: int, sample: 143}
polls: {description: "Number of polls.", returned: always, type: int, sample: 29}
content:
  description: Body of O(read_url).
  returned: when O(read_url) is set and the unit became healthy
  type: str
unit_state:
  description: The unit's C(systemctl show) properties at the last poll.
  returned: always
  type: dict
  sample: {ActiveState: active, SubState: running, NRestarts: "0", Result: success}
'''

import time

from ansible.module_utils.six.moves.urllib.error import HTTPError
from ansible.module_utils.urls import open_url
from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module
from ansible_collections.airgap.vllm.plugins.module_utils.common._unit_wait import (
    SHOW_PROPERTIES,
    parse_show,
    restarts,
    unit_gave_up,
)


def unit_state(module, systemctl, unit):
    argv = [systemctl, 'show', unit]
    for prop in SHOW_PROPERTIES:
        argv += ['-p', prop]
    rc, out, err = module.run_command(argv)
    if rc != 0:
        module.fail_json(msg='systemctl show %s failed: %s' % (unit, (err or out).strip()))
    return parse_show(out)


def http_status(url):
    try:
        return open_url(url, method='GET', timeout=5, validate_certs=False, use_proxy=False).getcode()
    except HTTPError as e:
        return e.code
    except Exception:  # connection refused / reset / timed out: not listening yet
        return None


def read_body(url):
    """(status, body text) of a GET; status None when nothing answered."""
    try:
        response = open_url(url, method='GET', timeout=30, validate_certs=False, use_proxy=False)
        return response.getcode(), response.read().decode('utf-8', 'replace')
    except HTTPError as e:
        return e.code, ''
    except Exception as e:  # connection refused / reset / timed out
        return None, str(e)


@ansible_module(
    dict(
        unit=dict(type='str', required=True),
        url=dict(type='str', required=True),
        timeout=dict(type='int', default=900),
        interval=dict(type='int', default=5),
        read_url=dict(type='str'),
    ),
)
def main(module):
    p = module.params
    systemctl = module.get_bin_path('systemctl', required=True)
    start = time.time()
    props = unit_state(module, systemctl, p['unit'])
    baseline = restarts(props)
    status, polls = None, 0

    def report():
        return dict(changed=False, status=status, elapsed=int(time.time() - start), polls=polls, unit_state=props)

    while True:
        polls += 1
        reason = unit_gave_up(props, baseline)
        if reason:
            module.fail_json(msg='%s will not answer %s: %s' % (p['unit'], p['url'], reason), **report())
        status = http_status(p['url'])
        if status == 200:
            result = report()
            if p['read_url']:
                read_status, result['content'] = read_body(p['read_url'])
                if read_status != 200:
                    module.fail_json(
                        msg='%s is healthy but %s answered %s: %s'
                        % (p['unit'], p['read_url'], read_status, result.pop('content')[:500]),
                        **result,
                    )
            module.exit_json(**result)
        if time.time() - start >= p['timeout']:
            module.fail_json(
                msg='%s did not answer HTTP 200 within %ds (last status: %s)' % (p['url'], p['timeout'], status),
                **report(),
            )
        time.sleep(max(1, p['interval']))
        props = unit_state(module, systemctl, p['unit'])


if __name__ == '__main__':
    main()
