# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host's vLLM services as preflight sees them (airgap_vllm_services, or the one service of the host's own
variables): each one's name, port, GPUs and gpu_memory_utilization, checked and normalised, so that the port and
free-memory checks of _preflight.py judge every service of the host, not only the first."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


# What one entry of preflight_services may hold (gpu_memory_utilization optional: the role's by default).
SERVICE_KEYS = ('name', 'port', 'gpus', 'gpu_memory_utilization')


# ---------------------------------------------------------------------------------------- services
def _gpu_list(value, where):
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        items = value
    elif isinstance(value, (str, int)) and not isinstance(value, bool):
        items = [value]
    else:
        raise ValueError('%s.gpus must be a list of NVML indexes or UUIDs, got %r' % (where, value))
    out = []
    for g in items:
        key = str(g).strip()
        if isinstance(g, bool) or not key or not isinstance(g, (str, int)):
            raise ValueError('%s.gpus holds %r: wants an NVML index ("0") or UUID ("GPU-...")' % (where, g))
        if key not in out:
            out.append(key)
    return out


def service_list(settings):
    """The services this pass checks: [{'name', 'port', 'gpus'}], in order.

    ``settings['services']`` (the role's preflight_services) wins when not empty: each entry a mapping with
    ``name`` (container and unit), ``port`` (host TCP port), ``gpus`` (indexes or UUIDs, empty = all) and
    optionally ``gpu_memory_utilization`` (the service's own, kept only when set); names and ports must be
    unique. Empty or absent: the one service of ``service_container_name``,
    ``port`` and ``gpus``, exactly as before services existed. Raises ValueError on a malformed list.
    """
    services = settings.get('services')
    if not services:
        return [
            {
                'name': settings.get('service_container_name'),
                'port': settings.get('port'),
                'gpus': _gpu_list(settings.get('gpus'), 'preflight_gpus'),
            }
        ]
    if not isinstance(services, (list, tuple)):
        raise ValueError('preflight_services must be a list of {name, port, gpus} mappings, got %r' % (services,))
    out, names, ports = [], {}, {}
    for index, service in enumerate(services):
        where = 'preflight_services[%d]' % index
        if not isinstance(service, dict):
            raise ValueError('%s must be a mapping {name, port, gpus}, got %r' % (where, service))
        unknown = sorted(str(k) for k in service if k not in SERVICE_KEYS)
        if unknown:
            raise ValueError('%s has %s; a service takes %s' % (where, ', '.join(unknown), ', '.join(SERVICE_KEYS)))
        name = service.get('name')
        if not isinstance(name, str) or not name.strip():
            raise ValueError('%s.name must be the service\'s container name, got %r' % (where, name))
        port = service.get('port')
        try:
            number = int(str(port).strip()) if not isinstance(port, bool) else None
        except ValueError:
            number = None
        if number is None or not 0 < number < 65536:
            raise ValueError('%s.port must be a TCP port (1-65535), got %r' % (where, port))
        if name in names:
            raise ValueError('%s.name %s is also preflight_services[%d].name' % (where, name, names[name]))
        if number in ports:
            raise ValueError('%s.port %d is also preflight_services[%d].port' % (where, number, ports[number]))
        names[name], ports[number] = index, index
        entry = {'name': name, 'port': number, 'gpus': _gpu_list(service.get('gpus'), where)}
        if service.get('gpu_memory_utilization') is not None:
            entry['gpu_memory_utilization'] = _fraction(
                service['gpu_memory_utilization'], where + '.gpu_memory_utilization'
            )
        out.append(entry)
    return out


def _fraction(value, where):
    try:
        number = float(str(value).strip()) if not isinstance(value, bool) else None
    except ValueError:
        number = None
    if number is None or not 0 < number <= 1:
        raise ValueError('%s must be above 0 and at most 1, got %r' % (where, value))
    return number
