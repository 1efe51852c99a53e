"""Fetch the Python wheels vLLM needs that the GPU machine's image lacks (tests/gpu/prepare.sh, issue 43).

The GPU machine reaches nothing, so what vLLM imports must travel. Its image already holds PyTorch 2.11.0 and
its CUDA libraries, transformers, tokenizers, numpy and the common libraries those pull in (PRESENT below; the
device README's package list and their own requirements). Some of vLLM 0.26.0's requirements are never imported
on a Hopper card with the harness's two FlashInfer switches (EXCLUDED, with the reason), or come only through
extras `vllm serve` does not import (DROPPED). The rest is resolved
here, breadth first, one `pip download --no-deps` per level for CPython 3.12 on manylinux x86_64, each
requirement's markers evaluated for that target; device.sh checks on the card that every requirement of vLLM is
then importable and says which is not.

Usage: python3 deps.py VLLM_WHEEL WHEEL_DIR   (writes WHEEL_DIR/deps.json: name, version, file, required by)
"""

import json
import os
import re
import subprocess
import sys
import zipfile

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

TARGET = dict(
    python_version="3.12",
    python_full_version="3.12.3",
    platform_system="Linux",
    platform_machine="x86_64",
    sys_platform="linux",
    os_name="posix",
    implementation_name="cpython",
    platform_python_implementation="CPython",
    platform_release="",
    platform_version="",
    implementation_version="3.12.3",
)
PLATFORMS = ["manylinux_2_%d_x86_64" % n for n in (17, 24, 27, 28, 31, 34, 35)] + [
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
    "linux_x86_64",
]

# Never imported on the H100 with VLLM_USE_FLASHINFER_SAMPLER=0 and --gdn-prefill-backend triton
# (../shared/reference/gpu-device-facts.md), or already in the image with the card's CUDA build.
EXCLUDED = {
    "torch": "in the image (2.11.0+cu130), the build vLLM 0.26.0 pins",
    "torchaudio": "in the image",
    "torchvision": "in the image",
    "triton": "in the image, with torch",
    "flashinfer-python": "VLLM_USE_FLASHINFER_SAMPLER=0, --gdn-prefill-backend triton",
    "flashinfer-cubin": "FlashInfer",
    "tilelang": "not on Hopper's dense/FP8-block paths",
    "nvidia-cutlass-dsl": "CuTe DSL kernels (Blackwell paths)",
    "quack-kernels": "CuTe DSL kernels",
    "tokenspeed-mla": "MLA models only",
    "humming-kernels": "not on Hopper's dense/FP8-block paths",
    "pynvvideocodec": "video input only",
    "torchcodec": "video input only",
    "fastsafetensors": "--load-format fastsafetensors only (the harness loads dummy weights)",
    "nvidia-cudnn-frontend": "not imported at serve",
    "nvtx": "profiling only",
    "opencv-python-headless": "video input only (vllm/multimodal/video.py guards the import)",
    "numba": "n-gram speculative decoding only (vllm/v1/spec_decode/ngram_proposer.py)",
    "llvmlite": "numba's",
}
# Pulled in by extras that `vllm serve` never imports: fastapi[standard]'s command-line tools, the OTLP gRPC
# exporter (vLLM imports its tracing exporters only with --otlp-traces-endpoint), pyjwt[crypto] (via mcp).
DROPPED = {
    "fastapi-cli": "fastapi's command line",
    "fastapi-cloud-cli": "fastapi's command line",
    "fastar": "fastapi cloud deploys",
    "grpcio": "OTLP tracing over gRPC only",
    "opentelemetry-exporter-otlp-proto-grpc": "OTLP tracing over gRPC only",
    "cryptography": "pyjwt's crypto extra (mcp)",
}
# Where the newest release of a package conflicts with a pin elsewhere in vLLM's tree (this resolver takes the
# newest that meets what it has seen, and does not backtrack; a conflict left stops it, naming both sides).
PINS = {
    "xgrammar": "<=0.2.7",  # 0.2.8 needs apache-tvm-ffi>=0.1.11; vLLM 0.26.0 pins apache-tvm-ffi==0.1.10
    "opentelemetry-api": "==1.45.2",  # opentelemetry-sdk 1.45.2 pins it
}
PRESENT = {
    # The device README (KINDS.md, nvidia-h100-x1 / nvidia-h200 pip list) and what those packages require.
    "numpy",
    "transformers",
    "tokenizers",
    "safetensors",
    "sentencepiece",
    "tiktoken",
    "huggingface-hub",
    "hf-xet",
    "pillow",
    "pyyaml",
    "requests",
    "urllib3",
    "idna",
    "certifi",
    "charset-normalizer",
    "tqdm",
    "filelock",
    "typing-extensions",
    "packaging",
    "regex",
    "fsspec",
    "jinja2",
    "markupsafe",
    "sympy",
    "mpmath",
    "networkx",
    "setuptools",
    "protobuf",
    "psutil",
}


def evaluate(marker, extras):
    if marker is None:
        return True
    m = Marker(str(marker))
    return any(m.evaluate(dict(TARGET, extra=e)) for e in (extras or {""}))


def requires(wheel):
    with zipfile.ZipFile(wheel) as z:
        meta = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")][0]
        text = z.read(meta).decode("utf-8")
    return [
        Requirement(line.split(":", 1)[1].strip()) for line in text.splitlines() if line.startswith("Requires-Dist:")
    ]


def wheel_name_version(path):
    base = os.path.basename(path)
    parts = base[:-4].split("-")
    return canonicalize_name(parts[0]), Version(parts[1])


def download(reqs, dest):
    """pip download --no-deps of these requirement strings for the target; returns {name: wheel path}."""
    if not reqs:
        return {}
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.12"]
    cmd += ["--implementation", "cp", "--abi", "cp312", "--abi", "abi3", "--abi", "none"]
    for p in PLATFORMS:
        cmd += ["--platform", p]
    cmd += ["-d", dest] + sorted(reqs)
    env = dict(os.environ, PIP_CONSTRAINT="", PIP_DISABLE_PIP_VERSION_CHECK="1")
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if res.returncode:
        sys.stderr.write(res.stdout[-3000:] + res.stderr[-3000:])
        raise SystemExit("pip download failed for %s" % " ".join(sorted(reqs)))
    out = {}
    for m in re.finditer(r"(?:Saved|File was already downloaded) (\S+\.whl)", res.stdout):
        path = m.group(1)
        if not os.path.isabs(path):
            path = os.path.join(dest, os.path.basename(path))
        out[wheel_name_version(path)[0]] = path
    return out


def resolve(vllm_wheel, dest):
    os.makedirs(dest, exist_ok=True)
    chosen = {}  # name -> dict(file, version, by)
    wanted = {}  # name -> (Requirement list, extras, parents)
    level = [(r, "vllm") for r in requires(vllm_wheel) if evaluate(r.marker, {""})]
    while level:
        batch = {}
        for req, parent in level:
            name = canonicalize_name(req.name)
            if name in EXCLUDED or name in PRESENT or name in DROPPED:
                continue
            w = wanted.setdefault(name, dict(reqs=[], extras=set(), by=set()))
            w["reqs"].append(req)
            w["by"].add(parent)
            new_extras = set(req.extras) - w["extras"]
            w["extras"] |= set(req.extras)
            if name in chosen:
                if not req.specifier.contains(chosen[name]["version"], prereleases=True):
                    print(
                        "warning: %s %s wanted by %s, %s chosen"
                        % (name, req.specifier, parent, chosen[name]["version"])
                    )
                if not new_extras:
                    continue
            batch[name] = req
        files = download([_pinned(n, wanted[n]["reqs"]) for n in batch], dest)
        nxt = []
        for name in batch:
            path = files.get(name) or chosen.get(name, {}).get("file")
            if not path:
                raise SystemExit("no wheel for %s" % name)
            chosen[name] = dict(file=path, version=wheel_name_version(path)[1], by=sorted(wanted[name]["by"]))
            extras = {""} | wanted[name]["extras"]
            for r in requires(path):
                if evaluate(r.marker, extras):
                    nxt.append((r, name))
        level = nxt
    conflicts = [
        "%s %s (wanted by %s): %s chosen" % (n, r.specifier, ", ".join(sorted(wanted[n]["by"])), c["version"])
        for n, c in chosen.items()
        for r in wanted[n]["reqs"]
        if not r.specifier.contains(c["version"], prereleases=True)
    ]
    if conflicts:
        raise SystemExit("conflicts (add a pin to PINS):\n  " + "\n  ".join(conflicts))
    return chosen


def _pinned(name, reqs):
    specs = [str(s) for r in reqs for s in r.specifier]
    if name in PINS:
        specs.append(PINS[name])
    return name + ",".join(specs)


def main(argv):
    vllm_wheel, dest = argv[1], argv[2]
    chosen = resolve(vllm_wheel, dest)
    rows = [
        dict(
            name=n,
            version=str(c["version"]),
            file=os.path.basename(c["file"]),
            by=c["by"],
            bytes=os.path.getsize(c["file"]),
        )
        for n, c in sorted(chosen.items())
    ]
    with open(os.path.join(dest, "deps.json"), "w") as fh:
        json.dump(dict(wheels=rows, excluded=EXCLUDED, dropped=DROPPED, present=sorted(PRESENT)), fh, indent=1)
    total = sum(r["bytes"] for r in rows)
    for r in sorted(rows, key=lambda r: -r["bytes"]):
        print("%-40s %-12s %8.2f MB  (%s)" % (r["name"], r["version"], r["bytes"] / 1e6, ", ".join(r["by"])))
    print("%d wheels, %.1f MB" % (len(rows), total / 1e6))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
