"""Filters are tested the way the roles call them: by FQCN in a Jinja expression, through the plugin's FilterModule.

(Ansible's plugin loader cannot be used here: the unit tests import the collection as a plain package,
and its collection finder then refuses the FQCN.)"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib
import os

import pytest
import yaml

FILTER_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "plugins", "filter"))
PLUGINS = sorted(f[:-3] for f in os.listdir(FILTER_DIR) if f.endswith(".py") and not f.startswith("_"))


def load_filters():
    """{FQCN: function} from every plugins/filter/*.py, checked against its DOCUMENTATION."""
    out = {}
    for name in PLUGINS:
        plugin = importlib.import_module("ansible_collections.airgap.vllm.plugins.filter." + name)
        doc = yaml.safe_load(plugin.DOCUMENTATION)
        filters = plugin.FilterModule().filters()
        assert doc["name"] in filters, "%s documents %s but registers %s" % (name, doc["name"], sorted(filters))
        for key, func in filters.items():
            out["airgap.vllm." + key] = func
    return out


@pytest.fixture(scope="session")
def render():
    """render(expression, **variables) -> the value, native types as a role's set_fact gets them."""
    from jinja2.nativetypes import NativeEnvironment

    env = NativeEnvironment()
    env.filters.update(load_filters())

    def run(expression, **variables):
        return env.from_string(expression).render(**variables)

    return run
