"""What the device machine has, before any case (device.sh runs it): Python, torch and its CUDA, the card, the
ansible-core the harness carries, and every requirement of the carried vLLM, satisfied or not (a requirement
the image lacks and the harness left out on purpose is named with the reason from deps.json)."""

import importlib.metadata as md
import json
import os
import sys
import time

from packaging.requirements import Requirement
from packaging.version import Version


def main(site):
    t0 = time.time()
    out = dict(python=sys.version.split()[0], executable=sys.executable)
    try:
        import torch

        out.update(
            torch=torch.__version__,
            cuda=torch.version.cuda,
            gpu=torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            cuda_total_bytes=torch.cuda.mem_get_info()[1] if torch.cuda.is_available() else None,
        )
    except Exception as exc:  # a broken image is what this reports
        out["torch_error"] = str(exc)
    try:
        out["ansible_core"] = md.version("ansible-core")
    except md.PackageNotFoundError:
        out["ansible_core"] = None
    deps = {}
    dj = os.path.join(site, "deps.json")
    if os.path.isfile(dj):
        with open(dj) as fh:
            deps = json.load(fh)
    why = dict(deps.get("excluded", {}), **deps.get("dropped", {}))
    missing, unsatisfied = [], []
    for line in md.metadata("vllm").get_all("Requires-Dist") or []:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        try:
            have = md.version(req.name)
        except md.PackageNotFoundError:
            missing.append("%s (%s)" % (req.name, why.get(req.name.lower().replace("_", "-"), "NOT CARRIED")))
            continue
        if req.specifier and not req.specifier.contains(Version(have), prereleases=True):
            unsatisfied.append("%s %s: %s installed" % (req.name, req.specifier, have))
    out.update(vllm=md.version("vllm"), missing=missing, unsatisfied=unsatisfied)
    out["check_seconds"] = round(time.time() - t0, 1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/gpu/site")
