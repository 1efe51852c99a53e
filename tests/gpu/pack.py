"""Stage and pack what one device call carries (tests/gpu/prepare.sh runs it; tests/gpu/README.md).

DEST gets site-vllm.tar.xz (vLLM stripped for one architecture), site-deps.tar.xz (the wheels deps.py chose,
ansible-core), models.tar.xz
(make_models.py's directories), collection.tar.xz (this checkout's plugins, meta and galaxy.yml as
ansible_collections/airgap/vllm), harness/ (the scripts device.sh runs), MANIFEST.json and payload.sha256.
VLLM_LEFT_OUT says what is left out of vLLM's wheel on a Hopper card, and why
(../shared/reference/gpu-device-facts.md); PRUNE, which data files of the dependencies stay behind.
"""

import argparse
import fnmatch
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import make_models  # noqa: E402
import strip_fatbin  # noqa: E402

VLLM_LEFT_OUT = {
    "vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so": "FlashAttention 2: Hopper runs FlashAttention 3",
    "vllm/_moe_C_stable_libtorch.abi3.so": "MoE kernels, an optional import (kept with --with-moe)",
    "vllm/vllm-rs": "the Rust front end, only with VLLM_USE_RUST_FRONTEND",
    "vllm/third_party/deep_gemm/*": "DeepGEMM: FP8 block GEMMs then take the CUTLASS kernel",
    "vllm/third_party/fmha_sm100/*": "Blackwell attention",
}
STRIPPED = ("vllm/_C_stable_libtorch.abi3.so",)
# With --with-moe the MoE kernels travel too, stripped the same way, in an archive of their own (DEST-moe/
# add-moe.tar.xz, 12 MiB: with the base payload, 52 MiB, and the checkout a call would carry more than 64 MiB). A
# call that carries DEST-moe adds them to the base payload a warm machine holds (device.sh).
STRIPPED_MOE = "vllm/_moe_C_stable_libtorch.abi3.so"
PRUNE = (
    "*/__pycache__/*",
    "mistral_common/data/tekken_*.json",  # Mistral's tokenizers (34 MB): no Mistral model here
    "pycountry/locales/*",  # translations of country names
    "ansible_test/*",  # ansible-core's test runner
)
HARNESS = ("device.sh", "harness.py", "steps.yml", "cases.json", "check_env.py")
COLLECTION = ("plugins", "meta", "galaxy.yml")


def matches(name, patterns):
    return any(fnmatch.fnmatch(name, p) for p in patterns)


def unzip(wheel, dest, skip=(), replace=None):
    """Extract a wheel's members into dest, leaving out the `skip` patterns; `replace` maps a member to new bytes."""
    n = 0
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            name = info.filename
            if name.endswith("/") or matches(name, skip) or matches(name, PRUNE):
                continue
            path = os.path.join(dest, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if replace and name in replace:
                data = replace[name]
            else:
                data = z.read(info)
            with open(path, "wb") as fh:
                fh.write(data)
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                os.chmod(path, mode)
            n += 1
    return n


def tar_xz(src_parent, names, dest):
    """tar -C src_parent names | xz -9 (two threads) > dest"""
    tar = subprocess.Popen(["tar", "-C", src_parent, "--sort=name", "-cf", "-"] + names, stdout=subprocess.PIPE)
    with open(dest, "wb") as fh:
        xz = subprocess.run(["xz", "-9", "-T2"], stdin=tar.stdout, stdout=fh, check=False)
    tar.stdout.close()
    if tar.wait() or xz.returncode:
        raise SystemExit("packing %s failed" % dest)
    return os.path.getsize(dest)


def cached_archive(a, name, key, fill):
    """DEST/name.tar.xz of a folder site/ that fill(site) writes, from the cache when the key is the same."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]
    cache = os.path.join(os.path.dirname(a.stage), "%s-%s.tar.xz" % (name, digest))
    if not os.path.isfile(cache):
        for old in os.listdir(os.path.dirname(a.stage)):
            if old.startswith(name + "-") and old.endswith(".tar.xz"):
                os.remove(os.path.join(os.path.dirname(a.stage), old))
        part = os.path.join(a.stage, name)
        os.makedirs(os.path.join(part, "site"))
        fill(os.path.join(part, "site"))
        tar_xz(part, ["site"], cache + ".part")
        os.rename(cache + ".part", cache)
    else:
        print("%s: from the cache (%s)" % (name, os.path.basename(cache)))
    shutil.copyfile(cache, os.path.join(a.dest, name + ".tar.xz"))
    return os.path.getsize(cache)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def pack_moe(a, manifest):
    """DEST-moe: add-moe.tar.xz (the stripped MoE kernels), the harness, the base payload's hash and manifest."""
    dest = a.dest.rstrip("/") + "-moe"
    if os.path.isdir(dest):
        shutil.rmtree(dest)
    site = os.path.join(a.stage, "moe", "site")
    path = os.path.join(site, STRIPPED_MOE)
    os.makedirs(os.path.dirname(path))
    with zipfile.ZipFile(a.vllm_wheel) as z:
        data, tally = strip_fatbin.strip_elf(z.read(STRIPPED_MOE), a.arch)
    with open(path, "wb") as fh:
        fh.write(data)
    os.chmod(path, 0o755)
    os.makedirs(dest)
    size = tar_xz(os.path.dirname(site), ["site"], os.path.join(dest, "add-moe.tar.xz"))
    shutil.copytree(os.path.join(a.dest, "harness"), os.path.join(dest, "harness"))
    for name in ("payload.sha256", "MANIFEST.json"):
        shutil.copyfile(os.path.join(a.dest, name), os.path.join(dest, name))
    with open(os.path.join(dest, "MANIFEST-moe.json"), "w") as fh:
        json.dump(dict(added=STRIPPED_MOE, stripped=tally, size=size, base=manifest["collection_commit"]), fh, indent=1)
    print(
        "%-20s %6.1f MiB (%s: carried alone, onto a warm machine's base payload)"
        % ("add-moe.tar.xz", size / 1048576.0, dest)
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description="stage and pack the GPU harness's payload")
    ap.add_argument("--vllm-wheel", required=True)
    ap.add_argument("--wheels", required=True, help="the folder deps.py filled (deps.json inside)")
    ap.add_argument("--extra-wheel", action="append", default=[], help="another wheel for the site (ansible-core)")
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--with-moe", action="store_true")
    ap.add_argument("--root", default=os.path.abspath(os.path.join(HERE, "..", "..")))
    ap.add_argument("--stage", required=True)
    ap.add_argument("--dest", required=True)
    a = ap.parse_args(argv)

    if os.path.isdir(a.stage):
        shutil.rmtree(a.stage)
    os.makedirs(a.stage)
    os.makedirs(a.dest, exist_ok=True)
    for old in os.listdir(a.dest):
        p = os.path.join(a.dest, old)
        if os.path.isdir(p):
            shutil.rmtree(p)
        else:
            os.remove(p)
    sizes = {}

    # The dependencies and vLLM go in two archives, each kept in the cache under the hash of what made it:
    # a change to one repacks only that one (xz -9 of vLLM's 370 MB takes minutes on two cores).
    with open(os.path.join(a.wheels, "deps.json")) as fh:
        deps = json.load(fh)
    wheels = [os.path.join(a.wheels, row["file"]) for row in deps["wheels"]] + list(a.extra_wheel)

    def fill_deps(site):
        for w in wheels:
            unzip(w, site)
        shutil.copyfile(os.path.join(a.wheels, "deps.json"), os.path.join(site, "deps.json"))

    key = [os.path.basename(w) for w in wheels] + list(PRUNE)
    sizes["site-deps.tar.xz"] = cached_archive(a, "site-deps", key, fill_deps)

    skip = list(VLLM_LEFT_OUT)
    tallies = {}

    def fill_vllm(site):
        replace = {}
        with zipfile.ZipFile(a.vllm_wheel) as z:
            for member in STRIPPED:
                data, tallies[member] = strip_fatbin.strip_elf(z.read(member), a.arch)
                replace[member] = data
        n = unzip(a.vllm_wheel, site, skip=skip, replace=replace)
        print("vllm: %d files; stripped to sm_%d: %s" % (n, a.arch, json.dumps(tallies)))
        with open(os.path.join(site, "vllm-strip.json"), "w") as fh:
            json.dump(tallies, fh)

    key = [os.path.basename(a.vllm_wheel), a.arch, skip, list(PRUNE), sha256(strip_fatbin.__file__)]
    sizes["site-vllm.tar.xz"] = cached_archive(a, "site-vllm", key, fill_vllm)
    with tarfile.open(os.path.join(a.dest, "site-vllm.tar.xz")) as t:
        member = t.extractfile("site/vllm-strip.json")
        tallies = json.load(member) if member else {}

    models = os.path.join(a.stage, "models")
    make_models.make(models, os.path.join(a.root, "tests", "fixtures", "models"))

    coll = os.path.join(a.stage, "collections", "ansible_collections", "airgap", "vllm")
    os.makedirs(coll)
    for name in COLLECTION:
        src = os.path.join(a.root, name)
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(coll, name), ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copyfile(src, os.path.join(coll, name))

    sizes["models.tar.xz"] = tar_xz(a.stage, ["models"], os.path.join(a.dest, "models.tar.xz"))
    sizes["collection.tar.xz"] = tar_xz(a.stage, ["collections"], os.path.join(a.dest, "collection.tar.xz"))

    os.makedirs(os.path.join(a.dest, "harness"))
    for name in HARNESS:
        shutil.copy2(os.path.join(HERE, name), os.path.join(a.dest, "harness", name))

    h = hashlib.sha256()
    for name in sorted(sizes):
        h.update(sha256(os.path.join(a.dest, name)).encode())
    with open(os.path.join(a.dest, "payload.sha256"), "w") as fh:
        fh.write(h.hexdigest() + "\n")

    def git(*args):
        r = subprocess.run(["git", "-C", a.root] + list(args), capture_output=True, text=True, check=False)
        return r.stdout.strip()

    manifest = dict(
        collection_commit=git("rev-parse", "HEAD"),
        collection_dirty=bool(git("status", "--porcelain", "--", *COLLECTION)),
        vllm_wheel=os.path.basename(a.vllm_wheel),
        arch=a.arch,
        with_moe=a.with_moe,
        stripped=tallies,
        left_out=VLLM_LEFT_OUT,
        pruned=PRUNE,
        extra_wheels=[os.path.basename(w) for w in a.extra_wheel],
        wheels=len(deps["wheels"]),
        sizes=sizes,
    )
    with open(os.path.join(a.dest, "MANIFEST.json"), "w") as fh:
        json.dump(manifest, fh, indent=1)
    if a.with_moe:
        pack_moe(a, manifest)
    total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _d, fs in os.walk(a.dest) for f in fs)
    for k, v in sorted(sizes.items()):
        print("%-20s %6.1f MiB" % (k, v / 1048576.0))
    print("%-20s %6.1f MiB (the device tool carries 64 MiB a call with the checkout)" % ("total", total / 1048576.0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
