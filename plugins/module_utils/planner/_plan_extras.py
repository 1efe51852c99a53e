# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The operator's escape hatches, merged after the plan: extra vLLM arguments and docker options.

Pure, stdlib only, Python 3.7-clean. merge_extras() takes a finished plan and returns it with
``vllm_plan_extra_args`` appended to the argv and ``vllm_plan_extra_docker_options`` to the
container options, under these guard rails:

- One word per item; no control character (newline, carriage return, NUL, any other C0 or C1
  control, DEL: a unit file line or an env file would be split by them); no empty item.
- A duplicate of a planned option is refused, naming it, unless it is listed in
  ``vllm_plan_override_flags``: then the extra value replaces the planned one (and a warning says
  when the memory ledger was computed with the planned value). vLLM reads ``_`` as ``-`` and
  ``--no-X`` sets the same value as ``--X``, so those spellings are duplicates too; an abbreviation
  of a planned option (argparse's allow_abbrev) must be written in full.
- vLLM arguments: long options only (``-tp`` and the like are refused: write the long name); no
  positional argument (the model path is planned); no API key in any spelling vLLM accepts (the
  keys belong in ``vllm_service_api_keys``, a root-only file) - the same rule as vllm_service's
  guard (_service_guard.api_key_args); no ``--config`` (the service owns it: the API keys file).
- Docker options: ``--log-opt``/``--security-opt``/``--env``/... are duplicates only when they set
  the same key (``--log-opt max-size=...`` twice). Which options and values the container may have
  at all (the allowlist of _container_allowlist: no capabilities, host mounts or namespaces, ...)
  is decided by airgap.vllm.vllm_service_guard, which sees the merged options together with the
  opt-ins that may allow them (``vllm_service_allow_docker_options``, ``vllm_service_expose_to_network``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.airgap.vllm.plugins.module_utils.service import _container_allowlist as _allowlist
from ansible_collections.airgap.vllm.plugins.module_utils.service._container_allowlist import control_char
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_common import TargetsError
from ansible_collections.airgap.vllm.plugins.module_utils.service._service_guard import api_key_args

ARGS_VAR = "vllm_plan_extra_args"
DOCKER_VAR = "vllm_plan_extra_docker_options"
OVERRIDE_VAR = "vllm_plan_override_flags"
KEYS_VAR = "vllm_service_api_keys"
# Options the memory ledger is computed with: overriding one makes the ledger describe another launch.
LEDGER_FLAGS = frozenset(
    (
        "--max-model-len",
        "--max-num-seqs",
        "--gpu-memory-utilization",
        "--kv-cache-dtype",
        "--tensor-parallel-size",
        "--kv-cache-memory-bytes",
        "--max-num-batched-tokens",
        "--speculative-config",
        "--kv-offloading-size",
        "--enforce-eager",
        "--enable-prefix-caching",
        "--language-model-only",
        "--mm-processor-kwargs",
    )
)
# Options the service sets itself.
SERVICE_OWNED = {"--config": "the service passes its API keys file with --config (vllm_service_api_keys)"}
# docker run options that may repeat; for these, the key before '=' (or ':') tells duplicates apart.
DOCKER_KEYED = frozenset(("--log-opt", "--security-opt", "--sysctl", "--ulimit", "--label", "--env", "--storage-opt"))
DOCKER_REPEATABLE = frozenset(
    (
        "--volume",
        "--mount",
        "--device",
        "--tmpfs",
        "--cap-add",
        "--cap-drop",
        "--add-host",
        "--dns",
        "--dns-option",
        "--dns-search",
        "--group-add",
        "--device-cgroup-rule",
        "--env-file",
        "--label-file",
        "--expose",
        "--publish",
        "--link",
        "--attach",
    )
)
# Shorthands and the options that take no value: Docker 20.10's own (_container_allowlist, the one table).
DOCKER_SHORT = dict(_allowlist.DOCKER_SHORT)
DOCKER_SHORT.update(_allowlist.DOCKER_ALIASES)
DOCKER_BOOLEAN = _allowlist.DOCKER_BOOLEAN


def _words(items, var):
    if items is None:
        return []
    if not isinstance(items, (list, tuple)):
        raise TargetsError("%s must be a list of strings, one argument per item; got %r" % (var, items))
    out = []
    for i, item in enumerate(items):
        if isinstance(item, bool) or not isinstance(item, (str, int, float)):
            raise TargetsError("%s[%d] %r: give a string (one argument per item)" % (var, i, item))
        word = str(item)
        if not word:
            raise TargetsError("%s[%d] is empty: drop it" % (var, i))
        bad = control_char(word)
        if bad:
            names = {"U+000A": "a newline", "U+000D": "a carriage return", "U+0000": "a NUL"}
            raise TargetsError(
                "%s[%d] holds %s: one argument per item, no control characters (it "
                "would split the unit file's command line)" % (var, i, names.get(bad, bad))
            )
        out.append(word)
    return out


def vllm_key(word):
    """'--kv_cache_dtype=fp8' -> '--kv-cache-dtype'; '--no-enable-prefix-caching' -> '--enable-prefix-caching'."""
    name = word.split("=", 1)[0].replace("_", "-")
    if name.startswith("--no-"):
        name = "--" + name[len("--no-") :]
    return name


def vllm_groups(words, var=ARGS_VAR, first=0):
    """[(key, [words], index)]: each long option with the values after it."""
    groups = []
    for i, word in enumerate(words):
        if word == "--":
            raise TargetsError(
                "%s[%d] '--' ends vLLM's options: nothing may follow the planned ones" % (var, i + first)
            )
        if word.startswith("--"):
            groups.append((vllm_key(word), [word], i + first))
        elif word.startswith("-") and len(word) > 1 and not word[1:2].isdigit() and word[1:2] != ".":
            raise TargetsError(
                "%s[%d] %r: write the long option name (e.g. --tensor-parallel-size, not -tp), "
                "so that a duplicate of a planned option can be seen" % (var, i + first, word)
            )
        elif groups:
            groups[-1][1].append(word)
        else:
            raise TargetsError(
                "%s[%d] %r is a positional argument: the model path is planned "
                "(vllm_plan_model_dir); give options only" % (var, i + first, word)
            )
    return groups


def _docker_key(name, value):
    if name in DOCKER_KEYED and value is not None:
        sub = value.split("=", 1)[0]
        if name == "--security-opt":
            sub = sub.split(":", 1)[0]
        return "%s %s" % (name, sub)
    if name in DOCKER_REPEATABLE:
        return "%s %s" % (name, value)
    return name


def docker_groups(words, var=DOCKER_VAR):
    """[(key, name, [words])] of docker run options (long or short, '=' or separate value)."""
    groups, i = [], 0
    while i < len(words):
        word = words[i]
        if not word.startswith("-") or word == "-":
            raise TargetsError(
                "%s[%d] %r is not an option: the image and the command are the service's" % (var, i, word)
            )
        name, eq, value = word.partition("=")
        name = DOCKER_SHORT.get(name, name)
        if eq:
            group = [word]
        elif name in DOCKER_BOOLEAN or i + 1 >= len(words) or words[i + 1].startswith("-"):
            group, value = [word], None
        else:
            group, value = [word, words[i + 1]], words[i + 1]
            i += 1
        groups.append((_docker_key(name, value), name, group))
        i += 1
    return groups


def _override_names(items):
    names = []
    for i, word in enumerate(_words(items, OVERRIDE_VAR)):
        if not word.startswith("-"):
            raise TargetsError(
                "%s[%d] %r: give the option as written on the command line, e.g. --max-num-seqs"
                % (OVERRIDE_VAR, i, word)
            )
        names.append(vllm_key(word) if word.startswith("--") else word)
    return names


def _merge_argv(flags, extra, overrides, warnings, used):
    """New flags list: planned entries (less what is overridden) + one entry per extra option."""
    planned = []  # (key, entry index, [words])
    for n, entry in enumerate(flags):
        args = entry["args"][1:] if n == 0 else entry["args"]
        for key, words, _i in vllm_groups(args, "planned argv"):
            planned.append((key, n, words))
    planned_keys = dict((key, words) for key, _n, words in planned)
    for i, word, _values in api_key_args(extra):
        raise TargetsError(
            "%s[%d] %s puts an API key on the command line (visible in ps, the unit file and the "
            "journal): remove it and list the keys in %s (a root-only file read with --config)"
            % (ARGS_VAR, i, word.split("=", 1)[0], KEYS_VAR)
        )
    groups = vllm_groups(extra)
    seen = {}
    drop = set()
    out_extra = []
    for key, words, i in groups:
        if key in SERVICE_OWNED:
            raise TargetsError("%s[%d] %s: %s" % (ARGS_VAR, i, words[0], SERVICE_OWNED[key]))
        if key in seen:
            raise TargetsError(
                "%s[%d] %s repeats %s[%d]: give each option once" % (ARGS_VAR, i, words[0], ARGS_VAR, seen[key])
            )
        seen[key] = i
        abbreviated = [k for k in planned_keys if k != key and k.startswith(key)]
        if key not in planned_keys and abbreviated:
            raise TargetsError(
                "%s[%d] %s abbreviates the planned %s (vLLM accepts abbreviations): write the option "
                "in full" % (ARGS_VAR, i, words[0], ", ".join(sorted(abbreviated)))
            )
        reason = "%s[%d]" % (ARGS_VAR, i)
        if key in planned_keys:
            if key not in overrides:
                raise TargetsError(
                    "%s[%d] %s duplicates the planned %s: refused, as the plan sets it (see the plan's flags "
                    "for why). To replace the planned value, add %s to %s"
                    % (ARGS_VAR, i, words[0], " ".join(planned_keys[key]), key, OVERRIDE_VAR)
                )
            used.add(key)
            drop.add(key)
            reason += ", overriding the planned %s" % " ".join(planned_keys[key])
            if key in LEDGER_FLAGS:
                warnings.append(
                    "%s overrides the planned %s with %s: the memory ledger was computed with the "
                    "planned value and does not describe this launch"
                    % (ARGS_VAR, " ".join(planned_keys[key]), " ".join(words))
                )
        out_extra.append({"args": list(words), "reason": reason})
    new_flags = []
    for n, entry in enumerate(flags):
        if n == 0:
            head, args = entry["args"][:1], entry["args"][1:]
        else:
            head, args = [], entry["args"]
        kept = [w for key, words, _i in vllm_groups(args, "planned argv") if key not in drop for w in words]
        if head or kept:
            new_flags.append(dict(entry, args=head + kept))
    return new_flags + out_extra


def _merge_docker(options, reasons, extra, overrides, used):
    planned = docker_groups(options, "planned docker options")
    planned_keys = dict((key, words) for key, _name, words in planned)
    seen, drop = {}, set()
    added, new_reasons = [], {}
    for key, name, words in docker_groups(extra):
        if key in seen:
            raise TargetsError("%s: %s repeats %s: give each option once" % (DOCKER_VAR, " ".join(words), seen[key]))
        seen[key] = " ".join(words)
        why = DOCKER_VAR
        if key in planned_keys:
            if name not in overrides:
                raise TargetsError(
                    "%s: %s duplicates the planned %s: refused, as the plan sets it (see the plan's "
                    "docker_option_reasons). To replace the planned value, add %s to %s"
                    % (DOCKER_VAR, " ".join(words), " ".join(planned_keys[key]), name, OVERRIDE_VAR)
                )
            used.add(name)
            drop.add(key)
            why += ", overriding the planned %s" % " ".join(planned_keys[key])
        added += words
        new_reasons[" ".join(words)] = why
    kept, kept_reasons = [], {}
    for key, _name, words in planned:
        if key in drop:
            continue
        kept += words
    for label, why in reasons.items():
        if not any(label == " ".join(planned_keys[k]) for k in drop):
            kept_reasons[label] = why
    kept_reasons.update(new_reasons)
    return kept + added, kept_reasons


def merge_extras(result, extra_args=None, extra_docker_options=None, override_flags=None):
    """The plan ``result`` with the operator's extras merged in (a new dict; ``result`` is not changed)."""
    extra = _words(extra_args, ARGS_VAR)
    extra_docker = _words(extra_docker_options, DOCKER_VAR)
    overrides = _override_names(override_flags)
    out = dict(result)
    warnings = list(result.get("warnings") or [])
    used = set()
    flags = _merge_argv(result["flags"], extra, set(overrides), warnings, used)
    out["flags"] = flags
    out["argv"] = [a for f in flags for a in f["args"]]
    out["docker_options"], out["docker_option_reasons"] = _merge_docker(
        list(result["docker_options"]), dict(result["docker_option_reasons"]), extra_docker, set(overrides), used
    )
    for name in overrides:
        if name not in used:
            warnings.append("%s names %s, which no extra argument overrides: drop it" % (OVERRIDE_VAR, name))
    out["warnings"] = warnings
    out["extras"] = {"args": extra, "docker_options": extra_docker, "overridden": sorted(used)}
    return out
