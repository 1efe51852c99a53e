"""Scan logs for the secrets an inventory configures; name the variable of each hit, never its value.

Usage:
  python3 tests/secrets_scan.py [--inventory DIR] [--secret-file FILE ...] [LOG ...]
  ansible-playbook site.yml -vvv 2>&1 | python3 tests/secrets_scan.py -

The secrets are read from the inventory's group_vars/ and host_vars/ (files and directories of files, YAML) and the
inline vars of its hosts file(s): every value the collection's rule calls secret (plugins/module_utils/common/_secrets.py:
vllm_service_api_keys, vllm_service_extra_env's values, the front door's client keys and metrics tokens, and any
variable or field whose name ends in key, token, secret or password - HF_TOKEN, ansible_become_password - at any
depth, airgap_vllm_services included).
--secret-file adds values of your own, one a line (a registry password, an SSH key's passphrase), named after the
file and the line. Each value is looked for as written, base64-encoded (at its three alignments) and JSON- or
URL-escaped.

Not scanned for (and why):
- values shorter than 8 characters (an environment value "1", a port): they would match everywhere; a real key,
  token or password is longer;
- values holding Jinja ("{{ ... }}"): the inventory does not know what they become;
- ansible-vault encrypted values: they cannot be read here; pass their plain text with --secret-file.

Exit status: 0 no hit; 1 a hit (each printed as "LOG:LINE: VARIABLE (form)"); 2 bad usage (no inventory, an
unreadable file).
"""

from __future__ import absolute_import, division, print_function

import argparse
import base64
import glob
import importlib.util
import json
import os
import sys

from urllib.parse import quote

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIN_LENGTH = 8


def _load_rule():
    """plugins/module_utils/common/_secrets.py by its path (standard library only: no collection on sys.path needed)."""
    path = os.path.join(ROOT, "plugins", "module_utils", "common", "_secrets.py")
    spec = importlib.util.spec_from_file_location("_airgap_vllm_secrets", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SECRETS = _load_rule()


class _Loader(yaml.SafeLoader):
    """Safe YAML that reads an inventory: a !vault value cannot be read (None), other tags give their text."""


def _tagged(loader, suffix, node):
    if suffix == "vault":
        return None
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_mapping(node, deep=True)


_Loader.add_multi_constructor("!", _tagged)


class UsageError(Exception):
    pass


def _var_files(inventory):
    out = []
    for kind in ("group_vars", "host_vars"):
        base = os.path.join(inventory, kind)
        for path in sorted(glob.glob(os.path.join(base, "*"))):
            if os.path.isdir(path):
                out.extend(sorted(p for p in glob.glob(os.path.join(path, "**", "*"), recursive=True) if _yaml(p)))
            elif _yaml(path) or "." not in os.path.basename(path):
                out.append(path)
    return out


def _yaml(path):
    return os.path.isfile(path) and path.endswith((".yml", ".yaml", ".json"))


def _hosts_vars(node):
    """The vars: mappings of a YAML inventory (groups, children, hosts)."""
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key == "vars" and isinstance(value, dict):
            yield value
        elif key == "hosts" and isinstance(value, dict):
            for host_vars in value.values():
                if isinstance(host_vars, dict):
                    yield host_vars
        elif isinstance(value, dict):
            yield from _hosts_vars(value)


def _read_yaml(path):
    try:
        with open(path) as handle:
            return yaml.load(handle, Loader=_Loader)
    except (OSError, IOError, yaml.YAMLError) as exc:
        raise UsageError("cannot read %s: %s" % (path, exc))


def inventory_secrets(inventory):
    """{value: variable path} of every secret the inventory configures (values of MIN_LENGTH or more, no Jinja)."""
    if not os.path.isdir(inventory):
        raise UsageError("%s is not an inventory directory" % inventory)
    mappings = []
    for path in _var_files(inventory):
        data = _read_yaml(path)
        if isinstance(data, dict):
            mappings.append(data)
    for path in sorted(glob.glob(os.path.join(inventory, "*.yml")) + glob.glob(os.path.join(inventory, "*.yaml"))):
        mappings.extend(_hosts_vars(_read_yaml(path)))
    found = {}
    for data in mappings:
        for name, value in data.items():
            for where, secret in SECRETS.secret_values(name, value):
                text = str(secret)
                if len(text) >= MIN_LENGTH and "{{" not in text and "{%" not in text:
                    found.setdefault(text, where)
    return found


def file_secrets(paths):
    found = {}
    for path in paths:
        try:
            with open(path) as handle:
                lines = handle.read().splitlines()
        except (OSError, IOError) as exc:
            raise UsageError("cannot read %s: %s" % (path, exc))
        for number, line in enumerate(lines, 1):
            value = line.strip()
            if len(value) >= MIN_LENGTH:
                found.setdefault(value, "%s:%d" % (os.path.basename(path), number))
    return found


def forms(value):
    """(form name, text) of every way a log may spell the value."""
    raw = value.encode("utf-8")
    out = [("as written", value)]
    escaped = json.dumps(value)[1:-1]
    if escaped != value:
        out.append(("JSON-escaped", escaped))
    quoted = quote(value, safe="")
    if quoted != value:
        out.append(("URL-escaped", quoted))
    # base64 of the value inside a longer encoded text, at each of its three alignments: the characters only the
    # value's own bytes decide (the 4-character groups it shares with what is around it left out).
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode("ascii")
        start = 4 if shift else 0
        end = len(encoded) - 4 if (shift + len(raw)) % 3 else len(encoded)
        core = encoded[start:end]
        if len(core) >= MIN_LENGTH:
            out.append(("base64", core))
    return out


def scan(secrets, logs):
    """[(log name, line number, variable, form)] of every hit, in log order."""
    patterns = [(text, where, form) for value, where in sorted(secrets.items()) for form, text in forms(value)]
    hits = []
    for name, handle in logs:
        for number, line in enumerate(handle, 1):
            seen = set()
            for text, where, form in patterns:
                if text in line and where not in seen:
                    seen.add(where)
                    hits.append((name, number, where, form))
    return hits


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--inventory", "-i", default=os.path.join(ROOT, "inventories", "simulated"))
    parser.add_argument("--secret-file", action="append", default=[], help="more values, one a line")
    parser.add_argument("logs", nargs="*", help="log files; none or '-': standard input")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code in (0, None) else 2
    try:
        secrets = inventory_secrets(args.inventory)
        secrets.update((k, v) for k, v in file_secrets(args.secret_file).items() if k not in secrets)
        logs = []
        for path in args.logs or ["-"]:
            if path == "-":
                logs.append(("<stdin>", sys.stdin))
            else:
                try:
                    logs.append((path, open(path, errors="replace")))
                except (OSError, IOError) as exc:
                    raise UsageError("cannot read %s: %s" % (path, exc))
    except UsageError as exc:
        sys.stderr.write("secrets_scan: %s\n" % exc)
        return 2
    if not secrets:
        sys.stderr.write(
            "secrets_scan: no secret of %d or more characters configured in %s\n" % (MIN_LENGTH, args.inventory)
        )
    hits = scan(secrets, logs)
    for name, number, where, form in hits:
        print("%s:%d: %s (%s)" % (name, number, where, form))
    print(
        "secrets_scan: %d secret value(s) from %s looked for; %s"
        % (len(secrets), args.inventory, "%d hit(s)" % len(hits) if hits else "none found"),
        file=sys.stderr,
    )
    return 1 if hits else 0


if __name__ == "__main__":
    sys.exit(main())
