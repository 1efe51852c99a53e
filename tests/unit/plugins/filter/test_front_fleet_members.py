"""airgap.vllm.front_fleet_members as vllm_front's vars/main.yml calls it (issue 41 item 3: the members' for-loop,
once Jinja, decided in _front.fleet_members). The Jinja it replaced is pinned here and rendered on the same inputs:
the filter gives what it gave."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections.abc import Mapping

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from jinja2 import ChainableUndefined
from jinja2.nativetypes import NativeEnvironment

from .conftest import load_filters

# roles/vllm_front/vars/main.yml before the filter, as YAML folded it.
OLD = yaml.safe_load(r"""
__vllm_front_fleet_members: >-
  {% if vllm_front_fleet_members | length > 0 %}{{ vllm_front_fleet_members }}{% else %}{% set out = [] %}
  {%- for h in groups['vllm_servers'] | default([]) %}{% set hv = hostvars[h] %}
  {%- set _ = out.append({'name': h, 'address': ((hv['vllm_front_addresses'] | default([]))
        + [((hv['ansible_facts'] | default({}))['default_ipv4'] | default({}))['address'] | default(hv['ansible_host'] | default(h))])
        | first}) %}
  {%- endfor %}{{ out }}{% endif %}
""")["__vllm_front_fleet_members"]
NEW = "{{ vllm_front_fleet_members | airgap.vllm.front_fleet_members(groups['vllm_servers'] | default([]), hostvars) }}"


class HostVars(Mapping):
    """Like Ansible's hostvars: a mapping by host name (KeyError for a variable a host does not have)."""

    def __init__(self, hosts):
        self._hosts = hosts

    def __getitem__(self, name):
        return self._hosts[name]

    def __iter__(self):
        return iter(self._hosts)

    def __len__(self):
        return len(self._hosts)


FACTS = {"default_ipv4": {"address": "10.0.0.21"}}
HOSTS = {
    "a": {"vllm_front_addresses": ["10.1.0.1", "10.1.0.2"], "ansible_facts": FACTS, "ansible_host": "a.lan"},
    "b": {"vllm_front_addresses": [], "ansible_facts": FACTS, "ansible_host": "b.lan"},
    "c": {"ansible_facts": {"default_ipv4": {}}, "ansible_host": "c.lan"},  # no default route
    "d": {"ansible_facts": {}, "ansible_host": "192.0.2.4"},  # facts not gathered
    "e": {},  # its name
    "f": {"ansible_facts": {"default_ipv4": {"address": ""}}, "ansible_host": "f.lan"},  # present, empty: taken
    "g": {"ansible_host": ""},
    "h": {"ansible_facts": None, "ansible_host": "h.lan"},
    "i": {"ansible_facts": {"default_ipv4": "odd"}, "ansible_host": "i.lan"},
    "j": {"vllm_front_addresses": ["fd00::7"]},
    "k": {"ansible_facts": {"default_ipv4": {"address": "10.0.0.31"}}},
}
GIVEN = [{"name": "m1.example", "address": "10.9.0.1"}]


@pytest.fixture(scope="module")
def ansible_like():
    env = NativeEnvironment(undefined=ChainableUndefined)
    env.filters.update(load_filters())
    return lambda expression, **variables: env.from_string(expression).render(**variables)


@pytest.mark.parametrize(
    "members,groups",
    [
        ([], {"vllm_servers": sorted(HOSTS)}),
        ([], {"vllm_servers": ["k", "a", "e"]}),  # the group's order
        ([], {"vllm_servers": []}),
        ([], {}),  # no group vllm_servers
        (GIVEN, {"vllm_servers": sorted(HOSTS)}),  # given: as it is
        (GIVEN, {}),
    ],
)
@pytest.mark.parametrize("wrap", [dict, HostVars])
def test_the_filter_gives_what_the_jinja_gave(ansible_like, members, groups, wrap):
    v = dict(vllm_front_fleet_members=members, groups=groups, hostvars=wrap(HOSTS))
    old = ansible_like(OLD, **v)
    assert ansible_like(NEW, **v) == old
    assert isinstance(old, list)


def test_each_member_at_the_first_address_that_is_there(render):
    got = render(NEW, vllm_front_fleet_members=[], groups={"vllm_servers": sorted(HOSTS)}, hostvars=HostVars(HOSTS))
    assert dict((m["name"], m["address"]) for m in got) == {
        "a": "10.1.0.1",
        "b": "10.0.0.21",
        "c": "c.lan",
        "d": "192.0.2.4",
        "e": "e",
        "f": "",
        "g": "",
        "h": "h.lan",
        "i": "i.lan",
        "j": "fd00::7",
        "k": "10.0.0.31",
    }
    assert [m["name"] for m in got] == sorted(HOSTS)


def test_addresses_that_are_no_list_fail_naming_the_host(render):
    with pytest.raises(AnsibleFilterError, match="vllm_front_addresses of host x must be a list"):
        render(
            NEW,
            vllm_front_fleet_members=[],
            groups={"vllm_servers": ["x"]},
            hostvars={"x": {"vllm_front_addresses": "10.0.0.1"}},
        )
