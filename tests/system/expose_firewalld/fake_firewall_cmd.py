"""A stand-in for firewall-cmd and firewall-offline-cmd (test only, never shipped in a role): what tasks/expose_removal.yml calls, answered the way
firewalld 0.8/0.9 answers it (exit codes: 0 yes / 1 no for --query-*, 252 not running, 112 INVALID_ZONE,
122 INVALID_RULE, 2 for an option it does not know). Every call is logged as one JSON line."""

import json
import os
import re
import sys

STATE = "/etc/fake-firewalld/state.json"
LOG = "/var/log/fake-firewall-cmd.log"
RULE = re.compile(r'^rule family="ipv[46]" source address="[0-9a-fA-F.:/]+" port port="\d+" protocol="tcp" accept$')

args = sys.argv[1:]
# firewall-offline-cmd is this script with --offline first: the permanent configuration, firewalld running or not.
offline = bool(args) and args[0] == "--offline"
if offline:
    args = args[1:]
with open(LOG, "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\n")
with open(STATE) as f:
    state = json.load(f)


def done(rc, out="", err=""):
    if out:
        print(out)
    if err:
        print(err, file=sys.stderr)
    sys.exit(rc)


if args == ["--state"]:
    done(0, "running") if state["running"] else done(252, "not running")
if not state["running"] and not offline:
    done(252, err="FirewallD is not running")
if args == ["--get-default-zone"]:
    done(0, state["default_zone"])
if args == ["--get-active-zones"]:
    lines = []
    for zone, ifaces in sorted(state["interfaces"].items()):
        lines += [zone, "  interfaces: " + " ".join(ifaces)]
    done(0, "\n".join(lines))
layer = "permanent" if offline else "runtime"
if args and args[0] == "--permanent" and not offline:
    layer, args = "permanent", args[1:]
if len(args) != 2 or not args[0].startswith("--zone="):
    done(2, err="usage: unknown or unsupported arguments %r" % (sys.argv[1:],))
zone = args[0].split("=", 1)[1]
verb, _sep, rule = args[1][2:].partition("=")
if zone not in state["zones"]:
    done(112, err="Error: INVALID_ZONE: %s" % zone)
if not RULE.match(rule):
    done(122, err="Error: INVALID_RULE: %s" % rule)
rules = state["rules"][layer].setdefault(zone, [])
if verb == "query-rich-rule":
    done(0, "yes") if rule in rules else done(1, "no")
if verb == "add-rich-rule":
    if rule in rules:
        done(0, err="Warning: ALREADY_ENABLED: rule '%s' already in '%s'" % (rule, zone))
    rules.append(rule)
elif verb == "remove-rich-rule":
    if rule not in rules:
        done(0, err="Warning: NOT_ENABLED: '%s' not in '%s'" % (rule, zone))
    rules.remove(rule)
else:
    done(2, err="usage: unknown option --%s" % verb)
tmp = STATE + ".tmp"
with open(tmp, "w") as f:
    json.dump(state, f)
os.rename(tmp, STATE)
done(0, "success")
