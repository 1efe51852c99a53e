# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which variables hold secrets, and their values redacted: the one home of the rule.

- SECRET_VARIABLES: the collection's variables whose values are secret (engine API keys, the container
  environment, the front door's client keys and metrics tokens). Any other variable or field whose name ends in
  key, token, secret or password (HF_TOKEN, ansible_become_password) is secret too (is_secret_name), unless its
  name says it holds a path, a digest or a count (a key file's path, a key's SHA-256, max_tokens).
- redact(): a secret variable's value with every secret in it replaced by REDACTED, its shape kept (the names of
  an environment and of the clients stay, so a summary still says what is set).
- redacted(): any structure (a resolved list of services with their settings) with what its secret names hold
  redacted.
- secret_values(): every secret string a variable holds, for a scan of logs (tests/secrets_scan.py) and tests.

Standard library only, no Ansible import: tests/secrets_scan.py loads this file by its path on a control node.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

SECRET_VARIABLES = frozenset(
    (
        "vllm_service_api_keys",
        "vllm_service_extra_env",
        "vllm_front_clients",
        "vllm_front_metrics_tokens",
    )
)
# Lists of per-service settings (airgap_vllm_services and the roles' copies of it): a service may set its own keys.
SECRET_CARRIERS = frozenset(("airgap_vllm_services", "vllm_service_instances", "vllm_plan_instances"))
# Entries of a secret variable that are not secret, by name: the CPU engine's KV cache size (read by the report).
PUBLIC_FIELDS = {"vllm_service_extra_env": ("VLLM_CPU_KVCACHE_SPACE",)}
# Named like a secret, hold none: paths of key files, a key's digest, token counts.
NOT_SECRET_VARIABLES = frozenset(
    (
        "vllm_service_api_keys_container_path",
        "vllm_front_tls_key",
        "nvidia_toolkit_gpg_key",
    )
)
# A name that may hold a secret, for hiding a value in a message (broad: better one value too many hidden).
SECRET_WORDS = re.compile(r"key|token|secret|passw", re.I)
# A name that holds a secret: its last word says so (HF_TOKEN, registry_password, api_keys, ansible_ssh_pass), not
# a word inside it (attn_bytes_per_token_per_layer, tokenizer).
SECRET_NAME = re.compile(r"(?:^|_)(?:api_?)?(?:keys?|tokens?|secrets?|passwords?|passwd|pass)$", re.I)
NOT_SECRET_SUFFIX = re.compile(r"(_path|_paths|_dir|_file|_files|_sha256|_container_path|_tokens|_len|_size)$", re.I)
# Fields of a secret variable's records that name or limit, never hold, the secret (a client's name and limits).
LABEL_FIELDS = frozenset(("name", "max_concurrent", "rate_per_minute", "key_sha256"))
REDACTED = "(hidden)"


def is_secret_name(name):
    """Whether a variable (or a field of one) named so holds a secret."""
    name = str(name)
    if name in SECRET_VARIABLES:
        return True
    if name in NOT_SECRET_VARIABLES or NOT_SECRET_SUFFIX.search(name):
        return False
    return bool(SECRET_NAME.search(name))


def _public_field(field, public=()):
    return (
        field in LABEL_FIELDS or field in public or (NOT_SECRET_SUFFIX.search(field) and field not in SECRET_VARIABLES)
    )


def _walk(value, secret, label, public=()):
    """Yield (path, leaf) for the secret leaves of value; secret: the value is under a secret name."""
    if isinstance(value, dict):
        for key in sorted(value, key=str):
            field = str(key)
            if _public_field(field, public):
                continue
            child = "%s.%s" % (label, field) if label else field
            yield from _walk(value[key], secret or is_secret_name(field), child, PUBLIC_FIELDS.get(field, ()))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _walk(item, secret, "%s[%d]" % (label, index))
    elif secret and value is not None and not isinstance(value, bool):
        yield label, value


def secret_values(name, value):
    """[(where, value)] of every secret scalar held by the variable `name` (its records' names and limits left
    out): all of a secret variable's values, and what any field named like a secret holds at any depth."""
    return list(_walk(value, is_secret_name(name), str(name), PUBLIC_FIELDS.get(str(name), ())))


def _redact(value, secret, public=()):
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            field = str(key)
            if _public_field(field, public):
                out[key] = item
            else:
                out[key] = _redact(item, secret or is_secret_name(field), PUBLIC_FIELDS.get(field, ()))
        return out
    if isinstance(value, (list, tuple)):
        return [_redact(item, secret) for item in value]
    if secret and value is not None and not isinstance(value, bool):
        return REDACTED
    return value


def redact(name, value):
    """value with every secret it holds (as secret_values finds them) replaced by REDACTED; an empty list or
    mapping stays empty (nothing is set), names and limits stay."""
    return _redact(value, is_secret_name(name), PUBLIC_FIELDS.get(str(name), ()))


def redacted(value):
    """Any structure with what it holds under a secret name (at any depth) redacted, as redact() does."""
    return _redact(value, False)


def redact_vars(variables):
    """{name: value} with every variable's secrets redacted (redact)."""
    return dict((name, redact(name, value)) for name, value in (variables or {}).items())


def secret_vars(variables):
    """{name: value} of the variables named as secrets (empty ones too) or holding any (secret_values), as given."""
    return dict(
        (name, value) for name, value in (variables or {}).items() if is_secret_name(name) or secret_values(name, value)
    )
