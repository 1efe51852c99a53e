"""Bench 4 - image identity from a docker-save tar's headers vs `docker load` of the same tar.

Ours: airgap.vllm's _docker_archive.read_archive (what the docker_archive module runs): walk the tar
headers, read manifest.json / index.json and the config blob (its sha256 is the image ID), seek over
the layer bodies. Target: < 1 s whatever the archive size, in every layout (legacy, docker+oci written
by Docker >= 25, oci written by other tools). Archives are generated (bench/dockertar.py), layer bodies
as holes, so an 8 GiB archive costs no disk.

Against docker (when dockerd answers): an archive with valid layer digests is `docker load`ed (the
first-deployment cost), then import_archive with the real docker CLI must find it present and load
nothing - compared with `docker load` of the same tar again (what a playbook without the ID check
re-runs). Images are named airgap-bench/identity:<run>; only those are removed afterwards.
"""

import os
import subprocess
import sys
import uuid

import benchlib as B
import dockertar as T

B.import_collection()
from ansible_collections.airgap.vllm.plugins.module_utils.common import _docker as dk  # noqa: E402
from ansible_collections.airgap.vllm.plugins.module_utils.image import _docker_archive as DA  # noqa: E402

NAME = "identity"
REPO = "airgap-bench/identity"
LAYOUTS = ("legacy", "docker+oci", "oci")


def cli(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    return p.returncode, p.stdout, p.stderr


def docker_server_version():
    """'20.10.24' or None when the docker CLI or daemon is not there."""
    try:
        rc, out, _err = cli(["docker", "version", "--format", "{{.Server.Version}}"])
    except OSError:
        return None
    return out.strip() if rc == 0 and out.strip() else None


def major(version):
    try:
        return int(version.split(".")[0])
    except (ValueError, AttributeError):
        return 0


def header_read_seconds(path, repeats):
    times = []
    for _rep in range(repeats):
        B.drop_cache([path])
        secs, info = B.timed(lambda: DA.read_archive(path))
        times.append(secs)
    return B.median(times), info


def headers(d, sizes, repeats):
    for layout in LAYOUTS:
        per_size = []
        for size in sizes:
            path = os.path.join(d, "headers.tar")
            built = T.build(path, layout, T.layer_split(size, 24), REPO, "headers", uuid.uuid4().hex)
            secs, info = header_read_seconds(path, repeats)
            assert info["images"][0]["image_id"] == built["image_id"], (info, built)
            per_size.append((built["size"], secs, info["bytes_read"]))
            os.unlink(path)
        (s0, t0, _b0), (s1, t1, b1) = per_size[0], per_size[-1]
        print(
            "  %-10s header read: %s archive %.2f ms, %s archive %.2f ms (read %s of it), 24 layers"
            % (layout, B.human(s0), t0 * 1000, B.human(s1), t1 * 1000, B.human(b1))
        )
        key = layout.replace("+", "_")
        B.result(
            NAME,
            "header_read_%s" % key,
            t1,
            "image ID of a %s %s archive from its headers (median of %d)" % (B.human(s1), layout, repeats),
            target="< 1",
            unit="s",
            detail="read %s" % B.human(b1),
        )
        B.result(
            NAME,
            "size_dependence_%s" % key,
            B.ratio(t1, t0),
            "header read time %s / %s archive" % (B.human(s1), B.human(s0)),
            target="<= 3",
        )


def against_docker(d, load_size, repeats, version):
    run_id = uuid.uuid4().hex[:12]
    docker = dk.DockerCli(run=cli)
    for layout in LAYOUTS:
        key = layout.replace("+", "_")
        if layout == "oci" and major(version) < 25:
            B.skipped(
                NAME,
                "%s_vs_docker_load" % key,
                "dockerd %s cannot load an OCI-only archive (Docker >= 25 can)" % version,
            )
            continue
        tag = "%s-%s" % (key.replace("_", "-"), run_id)
        ref = "%s:%s" % (REPO, tag)
        path = os.path.join(d, "load.tar")
        t_build, built = B.timed(
            lambda: T.build(path, layout, [load_size, 1 * B.MIB], REPO, tag, run_id, real_digests=True)
        )
        try:
            t_id, info = header_read_seconds(path, repeats)
            assert info["images"][0]["image_id"] == built["image_id"]
            B.drop_cache([path])
            t_load = B.timed(lambda: B.run_quiet(["docker", "load", "--input", path]))[0]
            present = docker.image_id(ref)
            assert present == built["image_id"], "docker says %s is %s, the headers said %s" % (
                ref,
                present,
                built["image_id"],
            )
            # Re-run: the module's path (import_archive, real docker CLI) vs docker load again.
            t_present, res = B.timed(lambda: DA.import_archive(path, docker, tag=ref))
            assert res["loaded"] is False and res["changed"] is False, res
            B.drop_cache([path])
            t_reload = B.timed(lambda: B.run_quiet(["docker", "load", "--input", path]))[0]
        finally:
            cli(["docker", "rmi", "--force", ref])
            os.unlink(path)
        print(
            "  %-10s %s archive (generated in %.1f s): header read %.1f ms, docker load %.2f s; "
            "already present: import_archive %.0f ms (no load), docker load again %.2f s"
            % (layout, B.human(built["size"]), t_build, t_id * 1000, t_load, t_present * 1000, t_reload)
        )
        sz = "%s %s archive" % (B.human(built["size"]), layout)
        B.result(
            NAME,
            "%s_vs_docker_load" % key,
            B.ratio(t_id, t_load),
            "header read time / docker load time, " + sz,
            target="<= 0.01",
            detail="%.1f ms vs %.2f s" % (t_id * 1000, t_load),
        )
        B.result(
            NAME,
            "%s_present_vs_docker_load" % key,
            B.ratio(t_present, t_reload),
            "image already present: import_archive (inspect by ID, no load) / docker load again, " + sz,
            target="<= 0.05",
            detail="%.0f ms vs %.2f s" % (t_present * 1000, t_reload),
        )


def docker_save_roundtrip(d, run_id):
    """docker's own `docker save` output, read by our headers, names the ID docker reports."""
    ref = "%s:save-%s" % (REPO, run_id)
    src = os.path.join(d, "src.tar")
    saved = os.path.join(d, "saved.tar")
    T.build(src, "legacy", [64 * 1024], REPO, "save-%s" % run_id, run_id, real_digests=True)
    try:
        B.run_quiet(["docker", "load", "--input", src])
        B.run_quiet(["docker", "save", "--output", saved, ref])
        info = DA.read_archive(saved)
        want = dk.DockerCli(run=cli).image_id(ref)
        ok = info["images"][0]["image_id"] == want and ref in info["images"][0]["repo_tags"]
        print(
            "  docker save of %s (layout %s): header read gives %s, docker says %s"
            % (ref, info["layout"], info["images"][0]["image_id"][:19], (want or "")[:19])
        )
        if not ok:
            raise AssertionError("header read of a real docker save disagrees with docker: %s vs %s" % (info, want))
    finally:
        cli(["docker", "rmi", "--force", ref])
        for p in (src, saved):
            if os.path.exists(p):
                os.unlink(p)


def main():
    small = B.small()
    sizes = [64 * B.MIB, 8 * B.GIB]  # holes: the 8 GiB archive costs no disk even in CI mode
    repeats = 3 if small else 7
    load_size = 8 * B.MIB if small else int(float(os.environ.get("AIRGAP_BENCH_LOAD_GIB", "8")) * B.GIB)
    d = B.scratch(NAME)
    try:
        headers(d, sizes, repeats)
        version = docker_server_version()
        if not version:
            B.skipped(
                NAME,
                "vs_docker_load",
                "docker is not running here (docker version failed): the docker load comparison needs dockerd",
            )
            return 0
        print("  dockerd %s; docker load comparison at %s per archive" % (version, B.human(load_size)))
        # docker load writes the layers out: room for them under /var/lib/docker too.
        B.need_space(
            "/var/lib/docker" if os.path.isdir("/var/lib/docker") else d, 2 * load_size, slack=0 if small else B.GIB
        )
        against_docker(d, load_size, repeats, version)
        docker_save_roundtrip(d, uuid.uuid4().hex[:12])
    finally:
        B.cleanup(d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
