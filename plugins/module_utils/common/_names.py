# -*- coding: utf-8 -*-
# Copyright (c) airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one rule for the names we give things on a host (a service is a systemd unit, a container, a
configuration directory and a state-file suffix at once). Every reader of a service name asks here."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.airgap.vllm.plugins.module_utils.driver._fabric_manager import UNIT as FABRIC_MANAGER_UNIT

# Letters, digits, '-', '_', '.', starting with a letter or digit, at most 63 characters; \A..\Z so a
# trailing newline does not pass (Python's '$' matches before a final '\n').
SERVICE_NAME_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.-]{0,62}\Z")

# Units and containers of the host itself that a service of ours must never be named after: the role would
# overwrite /etc/systemd/system/<name>.service and `docker rm -f <name>` at uninstall.
RESERVED_SERVICE_NAMES = frozenset(
    [
        "auditd",
        "chronyd",
        "containerd",
        "crond",
        "dbus",
        "dbus-broker",
        "docker",
        "firewalld",
        "getty",
        "haproxy",
        "irqbalance",
        "kdump",
        "network",
        "networkmanager",
        "nginx",
        "nvidia-persistenced",
        "polkit",
        "rsyslog",
        "sshd",
        "ssh",
        "sudo",
        "systemd",
        "systemd-journald",
        "systemd-logind",
        "systemd-networkd",
        "systemd-resolved",
        "systemd-timesyncd",
        "systemd-udevd",
        "tuned",
        "udev",
        "init",
        "emergency",
        "rescue",
        "default",
        "multi-user",
        "graphical",
        "reboot",
        "shutdown",
        "poweroff",
        "halt",
        "kexec",
        "basic",
        "sysinit",
        "local-fs",
        "remote-fs",
        "network-online",
        # Ours, but not a vLLM service's: the front door's unit and configuration directory (roles/vllm_front).
        "front",
        "vllm-front",
        "observe",
        # Fabric Manager's unit (plugins/module_utils/driver/_fabric_manager.py, its one spelling).
        FABRIC_MANAGER_UNIT[: -len(".service")],
    ]
)


def service_name_problem(name):
    """None when `name` may name one of our services, else why not (one line, for an operator)."""
    if not isinstance(name, str):
        return "wants a string, got %s" % type(name).__name__
    if not SERVICE_NAME_RE.match(name):
        return (
            "%r is not a service name: 1-63 letters, digits, '-', '_' or '.', starting with a letter or "
            "digit (it names a systemd unit, a container and a directory)" % (name,)
        )
    if name in (".", "..") or name.endswith((".service", ".socket", ".target", ".timer", ".mount")):
        return "%r is not a service name: it reads as a path or a systemd unit type" % (name,)
    if name.lower() in RESERVED_SERVICE_NAMES or name.lower().startswith(("systemd-", "dbus-", "docker-")):
        return "%r is a unit or container of the host itself; pick another name (e.g. vllm-%s)" % (name, name)
    return None


def is_service_name(name):
    return service_name_problem(name) is None
