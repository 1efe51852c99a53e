"""airgap.vllm.front_inputs's client_keys as vllm_front's verify.yml reads them (issue 41 item 3: the first client key
of a service, once dug out again in Jinja, now resolved where front_inputs resolves the rest of a service's front
door). The Jinja it replaced is pinned here and rendered on the same inputs: the filter gives what it gave."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from jinja2 import ChainableUndefined
from jinja2.nativetypes import NativeEnvironment

from .conftest import load_filters

# preflight.yml (the host's values as query('ansible.builtin.vars', ...) gives them) and verify.yml, today.
INPUTS = "{{ services | airgap.vllm.front_inputs(host_values, {}) }}"
NEW = "{{ inputs.client_keys[svc.name] }}"
# verify.yml before (its task var __vllm_front_client_key).
OLD = (
    "{{ (((services | selectattr('name', 'equalto', svc.name) | first).settings.vllm_front_clients"
    " | default(vllm_front_clients)) | selectattr('key', 'defined') | map(attribute='key') | select | list + [''])"
    " | first }}"
)

K1, K2, K3 = "k1-0123456789abcdef", "k2-0123456789abcdef", "k3-0123456789abcdef"
SHA = "a" * 64
HOST_CLIENTS = [{"name": "h1", "key_sha256": SHA}, {"name": "h2", "key": K3}]
SERVICES = [
    {
        "name": "own",
        "port": 8000,
        "settings": {"vllm_front_clients": [{"name": "c1", "key": K1}, {"name": "c2", "key": K2}]},
    },
    {"name": "inherits", "port": 8001, "settings": {}},
    {"name": "hashes", "port": 8002, "settings": {"vllm_front_clients": [{"name": "c", "key_sha256": SHA}]}},
    {"name": "none", "port": 8003, "settings": {"vllm_front_clients": []}},  # its own: none, not the host's
    {
        "name": "blank-first",
        "port": 8004,
        "settings": {
            "vllm_front_clients": [{"name": "a", "key": ""}, {"name": "b", "key": None}, {"name": "c", "key": K2}]
        },
    },
]


@pytest.fixture(scope="module")
def ansible_like():
    env = NativeEnvironment(undefined=ChainableUndefined)
    env.filters.update(load_filters())
    return lambda expression, **variables: env.from_string(expression).render(**variables)


def _host(clients):
    return {"vllm_front_port": 9000, "vllm_front_clients": clients, "vllm_service_api_keys": ["engine-key-0123456789"]}


@pytest.mark.parametrize(
    "host_clients", [HOST_CLIENTS, [], [{"name": "h", "key_sha256": SHA}], [{"name": "h", "key": K3}]]
)
def test_each_service_s_key_is_what_the_jinja_dug_out(ansible_like, host_clients):
    inputs = ansible_like(INPUTS, services=SERVICES, host_values=_host(host_clients))
    for svc in inputs["services"]:
        old = ansible_like(OLD, services=SERVICES, svc=svc, vllm_front_clients=host_clients)
        assert ansible_like(NEW, inputs=inputs, svc=svc) == old, svc["name"]


def test_the_first_key_its_own_clients_else_the_hosts(render):
    keys = render(INPUTS, services=SERVICES, host_values=_host(HOST_CLIENTS))["client_keys"]
    assert keys == {"own": K1, "inherits": K3, "hashes": "", "none": "", "blank-first": K2}


def test_the_keys_stay_apart_from_what_travels(render):
    inputs = render(INPUTS, services=SERVICES, host_values=_host(HOST_CLIENTS))
    assert set(inputs) == {"services", "engine_keys", "client_keys"}
    for key in (K1, K2, K3):
        assert key not in repr(inputs["services"])
