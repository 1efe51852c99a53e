# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which host of a rollout is on which driver (issue 29, item 3): one line per host of the play.

site.yml's rollout play runs in serial batches and stops at the first failed host: Ansible then runs no
later play, so the summary is taken at the end of each batch (the rollout's `always` section) and shown by
the batch the rollout ends with - the last one, or the first with a failed host.

Per host, from its variables (hostvars) in this run:
  __airgap_vllm_driver_now       nvml_info read at the end of its batch (absent: its batch never ran)
  __airgap_vllm_rollout_done     set by the last task of the rollout (absent in its batch: the host failed)
  __airgap_vllm_rollout_failure  set by the rollout's rescue: {task, msg} of the failed task
  __nvidia_driver_installer      the driver stage's installer run (changed: a .run was installed in this run)
  __nvidia_driver_previous_version  the driver it replaced, when the stage knew it
Hosts the rollout did not reach are read once, by the batch that ends it (nvml_info results of a loop).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def _get(host_vars, key):
    try:
        return host_vars.get(key) if host_vars is not None else None
    except Exception:  # an undefined or untemplatable value counts as absent
        return None


def _driver(read):
    """(version or None, words) from one nvml_info result."""
    if not isinstance(read, dict) or read.get('skipped'):
        return None, 'driver unknown (not read)'
    if read.get('unreachable'):
        return None, 'driver unknown (unreachable)'
    version = read.get('driver_version') or None
    state = read.get('nvml_state') or 'error'
    if version and state == 'ok':
        return version, 'driver %s' % version
    if version:
        return version, 'driver %s (NVML %s)' % (version, state)
    if read.get('failed') and not read.get('nvml_state'):
        return None, 'driver unknown (%s)' % (read.get('msg') or 'read failed')
    return None, 'no driver loaded (NVML %s)' % state


def fleet_driver_summary(hosts_all, batch, hostvars, unreached_reads=None):
    """{"ends_here", "unreached", "hosts", "lines"} for the hosts of the play.

    hosts_all: ansible_play_hosts_all (the play's order); batch: ansible_play_batch; hostvars: the play's
    hostvars (any mapping host -> mapping); unreached_reads: the results of reading the hosts not reached
    (a loop's results, each with `item` the host), once they are read.

    ends_here: a host of this batch failed (the rollout stops) or every host of the play has been reached.
    """
    hosts_all = list(hosts_all or [])
    batch = list(batch or [])
    hostvars = hostvars or {}
    reads = {}
    for result in (unreached_reads or []):
        if isinstance(result, dict) and result.get('item') is not None:
            reads[result['item']] = result

    def host_vars(host):
        try:
            return hostvars[host]
        except (KeyError, IndexError, TypeError):
            return None

    reached = [h for h in hosts_all if h in batch or _get(host_vars(h), '__airgap_vllm_driver_now') is not None]
    # Earlier batches all passed (a failed one stops the rollout), so a failed host is one of this batch.
    failed = [h for h in reached if _get(host_vars(h), '__airgap_vllm_rollout_failure')
              or not _get(host_vars(h), '__airgap_vllm_rollout_done')]
    unreached = [h for h in hosts_all if h not in reached]
    ends_here = bool(failed) or not unreached

    hosts = {}
    lines = []
    for host in hosts_all:
        hv = host_vars(host)
        if host in reached:
            version, words = _driver(_get(hv, '__airgap_vllm_driver_now'))
            installer = _get(hv, '__nvidia_driver_installer')
            previous = _get(hv, '__nvidia_driver_previous_version') or None
            installed = isinstance(installer, dict) and bool(installer.get('changed')) and not installer.get('skipped')
            changed = installed and version is not None and version != previous
            failure = _get(hv, '__airgap_vllm_rollout_failure')
            if failure or not _get(hv, '__airgap_vllm_rollout_done'):
                outcome = 'failed'
                task = failure.get('task') if isinstance(failure, dict) else ''
                note = 'failed in this run' + (' (%s)' % task if task else '') + (
                    ', changed from %s' % previous if changed and previous else
                    ', changed' if changed else ', driver unchanged')
            elif changed:
                outcome = 'changed'
                note = 'changed in this run' + (' (was %s)' % previous if previous else '')
            else:
                outcome = 'unchanged'
                note = 'unchanged'
        else:
            version, words = _driver(reads.get(host))
            changed = False
            outcome = 'not reached'
            note = 'not reached (the rollout stopped before its batch)'
        hosts[host] = {'driver_version': version, 'outcome': outcome, 'changed': changed}
        lines.append('%s: %s, %s' % (host, words, note))
    return {'ends_here': ends_here, 'unreached': unreached, 'hosts': hosts, 'lines': lines}
