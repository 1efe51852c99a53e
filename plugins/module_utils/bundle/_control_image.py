# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The control-node image the offline bundle may carry (issue 47): what to build or take, and whether an image will do.

At an all-Kylin site no machine may have a Python the bundle's ansible-core wheels fit (Kylin V10's is 3.7). The
bundle can then carry the control node itself: an image with a Python >= 3.10, ansible-core within the collection's
range (meta/runtime.yml's requires_ansible), this collection, and ssh. Its parts are stored, verified and loaded like
the engine image's (bundle_build's `docker save` by ID, `_bundle_pack`'s FAT32 parts, SHA256SUMS); the bundle's
control-node.sh loads it on any machine with Docker and runs site.yml from it.

Decisions here, each with one home:
- ``plan``: from the role's variables, whether an image goes in, which (the operator's, or one built here from a base
  image) and the manifest artifact (kind ``control``: the bundle role never stages it to a server).
- ``PROBE``, ``verdict``: what an image holds (run inside it, no network) and whether it will do: a base to build on
  needs a Python the bundle has wheels for, its venv module and ssh; a control-node image needs a Python >= 3.10,
  ansible-core in range, this collection's version and ssh.
- ``dockerfile``: the build from a base: a venv from the bundle's own wheels (``--no-index``: no network, the same
  ansible-core the wheels carry) and the collection tarball ``ansible-galaxy collection build`` made for the bundle.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.airgap.vllm.plugins.module_utils.common._version import dotted

CONTROL_KIND = "control"
CONTROL_NAME = "airgap-vllm-control"
MIN_PYTHON = (3, 10)
VENV = "/opt/airgap-vllm/venv"
COLLECTIONS = "/usr/share/ansible/collections"
LABEL = "org.airgap.vllm.control-node"

# Run inside an image with `sh -c` (no network): one line per fact; the Pythons newest first.
PROBE = r"""
for p in python3.13 python3.12 python3.11 python3.10 python3; do
  command -v "$p" >/dev/null 2>&1 || continue
  v=$("$p" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || continue
  if "$p" -c 'import venv, ensurepip' >/dev/null 2>&1; then m=venv; else m=novenv; fi
  echo "python $(command -v "$p") $v $m"
done
echo "ssh $(command -v ssh 2>/dev/null || echo none)"
echo "ansible-playbook $(ansible-playbook --version 2>/dev/null | head -n 1 || true)"
echo "collection $(ansible-galaxy collection list airgap.vllm 2>/dev/null | awk '$1 == "airgap.vllm" {print $2; exit}')"
""".strip()


class ControlImageError(ValueError):
    pass


def _py(text):
    """'3.11' -> (3, 11); None for anything else."""
    m = re.match(r"^(\d+)\.(\d+)$", str(text or "").strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def plan(enabled, source="", base="", version="", wheels=True, wheel_pythons=()):
    """What bundle_build does about the control-node image.

    Returns {enabled, build (bool), image (the name:tag `docker save` saves), source, base, tag (the tag a build
    gives), artifact (the manifest artifact, or None), problems ([why not, each with what to set])}.
    """
    source = str(source or "").strip()
    base = str(base or "").strip()
    version = str(version or "").strip()
    tag = "%s:%s" % (CONTROL_NAME, version or "latest")
    out = dict(
        enabled=bool(enabled), build=False, image="", source=source, base=base, tag=tag, artifact=None, problems=[]
    )
    if not enabled:
        return out
    problems = out["problems"]
    if source and base:
        problems.append(
            "bundle_build_control_image_source (%s) and bundle_build_control_image_base (%s) are both set: give the "
            "image to take, or the base to build one from, not both" % (source, base)
        )
    elif not source and not base:
        problems.append(
            "bundle_build_control_image is true but neither bundle_build_control_image_source (an image here with "
            "ansible-core and this collection, e.g. the one ansible-builder builds from execution-environment.yml) "
            "nor bundle_build_control_image_base (a local image with Python >= 3.10, its venv module and ssh, to "
            "build one from) is set"
        )
    if base and not source:
        out["build"] = True
        if not wheels:
            problems.append(
                "building the control-node image installs ansible-core from the bundle's wheels: set "
                "bundle_build_wheels true (or give a ready image in bundle_build_control_image_source)"
            )
        bad = [str(p) for p in wheel_pythons or () if _py(p) is None]
        if bad:
            problems.append("bundle_build_wheels_pythons: %s is not X.Y" % ", ".join(bad))
    out["image"] = source or tag
    if not problems:
        out["artifact"] = dict(kind=CONTROL_KIND, name=CONTROL_NAME, version=version or "latest", image=out["image"])
    return out


def parse_probe(text):
    """PROBE's output -> {pythons: [{path, version, venv}], ssh, ansible_core, collection}."""
    facts = dict(pythons=[], ssh="", ansible_core="", collection="")
    for line in str(text or "").splitlines():
        bits = line.split()
        if not bits:
            continue
        if bits[0] == "python" and len(bits) == 4 and _py(bits[2]):
            if not any(p["version"] == bits[2] for p in facts["pythons"]):
                facts["pythons"].append(dict(path=bits[1], version=bits[2], venv=bits[3] == "venv"))
        elif bits[0] == "ssh" and len(bits) == 2 and bits[1] != "none":
            facts["ssh"] = bits[1]
        elif bits[0] == "ansible-playbook":
            m = re.search(r"\[core (\d+\.\d+\.\d+)", line)
            facts["ansible_core"] = m.group(1) if m else ""
        elif bits[0] == "collection" and len(bits) == 2:
            facts["collection"] = bits[1]
    return facts


def in_range(version, spec):
    """Whether the dotted version meets every clause of a comma-separated specifier ('>=2.16.0,<2.18.0')."""
    have = dotted(version)
    if not have:
        return False
    for clause in str(spec or "").split(","):
        m = re.match(r"^\s*(>=|<=|==|!=|>|<)\s*([0-9][0-9.]*)\s*$", clause)
        if not m:
            if clause.strip():
                raise ControlImageError("cannot read the version clause %r of %r" % (clause, spec))
            continue
        want = dotted(m.group(2))
        width = max(len(have), len(want))
        a, b = have + (0,) * (width - len(have)), want + (0,) * (width - len(want))
        ok = {">=": a >= b, "<=": a <= b, "==": a == b, "!=": a != b, ">": a > b, "<": a < b}[m.group(1)]
        if not ok:
            return False
    return True


def verdict(text, role, image="", requires_ansible="", collection_version="", wheel_pythons=()):
    """Whether the image PROBE looked into will do, as {image, role, python (the chosen X.Y), python_path, ssh,
    ansible_core, collection, problems}.

    role 'base': an image to build on (the newest Python >= 3.10 that the bundle has wheels for, with venv; ssh);
    role 'control': a control-node image (a Python >= 3.10, ansible-core within requires_ansible, this collection's
    version installed, ssh)."""
    if role not in ("base", "control"):
        raise ControlImageError("role must be base or control, not %r" % (role,))
    facts = parse_probe(text)
    out = dict(
        image=image,
        role=role,
        python="",
        python_path="",
        ssh=facts["ssh"],
        ansible_core=facts["ansible_core"],
        collection=facts["collection"],
        problems=[],
    )
    problems = out["problems"]
    new = [p for p in facts["pythons"] if _py(p["version"]) >= MIN_PYTHON]
    found = ", ".join("%s (%s)" % (p["path"], p["version"]) for p in facts["pythons"]) or "none"
    need = "%d.%d" % MIN_PYTHON
    if role == "base":
        wanted = [str(p) for p in wheel_pythons or ()]
        fits = [p for p in new if p["version"] in wanted]
        usable = [p for p in fits if p["venv"]]
        if usable:
            out["python"], out["python_path"] = usable[0]["version"], usable[0]["path"]
        elif fits:
            problems.append(
                "%s: Python %s has no venv/ensurepip module (Debian: python3-venv): install it in the base image"
                % (image, fits[0]["version"])
            )
        else:
            problems.append(
                "%s has no Python >= %s that the bundle has wheels for (bundle_build_wheels_pythons: %s; found: %s)"
                % (image, need, ", ".join(wanted) or "none", found)
            )
    else:
        if new:
            out["python"], out["python_path"] = new[0]["version"], new[0]["path"]
        else:
            problems.append("%s has no Python >= %s (found: %s)" % (image, need, found))
        if not facts["ansible_core"]:
            problems.append("%s has no ansible-playbook on its PATH" % image)
        elif requires_ansible and not in_range(facts["ansible_core"], requires_ansible):
            problems.append(
                "%s has ansible-core %s; this collection needs %s" % (image, facts["ansible_core"], requires_ansible)
            )
        if not facts["collection"]:
            problems.append("%s does not have the collection airgap.vllm installed" % image)
        elif collection_version and facts["collection"] != str(collection_version):
            problems.append(
                "%s has airgap.vllm %s; this bundle carries %s: build the image again with this collection"
                % (image, facts["collection"], collection_version)
            )
    if not facts["ssh"]:
        problems.append("%s has no ssh client (the control node reaches the servers over SSH)" % image)
    return out


def dockerfile(base, python_path, python, requirements, tarball, version=""):
    """The Dockerfile that makes a control-node image from `base`: wheels/ and the collection tarball in the context."""
    if not (base and python_path and _py(python) and tarball and requirements):
        raise ControlImageError("dockerfile needs a base, its Python (path and X.Y), requirements and a tarball")
    reqs = " ".join("'%s'" % str(r).replace("'", "") for r in requirements)
    return "\n".join(
        [
            "# Written by airgap.vllm's bundle_build (module_utils/bundle/_control_image.py): the bundle's control node.",
            "FROM %s" % base,
            "COPY wheels/ /tmp/airgap-vllm-build/wheels/",
            "COPY %s /tmp/airgap-vllm-build/" % tarball,
            "RUN %s -m venv %s \\" % (python_path, VENV),
            " && %s/bin/python -m pip install --no-index --no-cache-dir --disable-pip-version-check \\" % VENV,
            "      --find-links /tmp/airgap-vllm-build/wheels %s \\" % reqs,
            " && %s/bin/ansible-galaxy collection install --offline -p %s /tmp/airgap-vllm-build/%s \\"
            % (VENV, COLLECTIONS, tarball),
            " && rm -rf /tmp/airgap-vllm-build",
            "ENV PATH=%s/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" % VENV,
            'LABEL %s="%s" %s.python="%s"' % (LABEL, version, LABEL, python),
            "WORKDIR /",
            'CMD ["ansible-playbook", "--version"]',
            "",
        ]
    )
