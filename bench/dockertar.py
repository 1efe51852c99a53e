"""docker-save-shaped tars for bench `identity`: legacy (Docker <= 24), docker+oci (Docker >= 25 writes
both manifest.json and index.json) and oci (index.json only, as other tools write).

Layer bodies are zeros written as holes (sparse files), so an 8 GiB archive takes no time and almost no
disk to make. With `real_digests=True` every layer blob is a valid tar whose sha256 is computed (8 GiB of
zeros hashed in memory), so `docker load` accepts the archive; otherwise layer digests are labels
(enough for airgap.vllm's header read, which only hashes the small config blob).
"""

import hashlib
import json
import os
import tarfile

BLOCK = 512
ZERO = bytes(8 * 1024 * 1024)


def _header(name, size, mode=0o644):
    info = tarfile.TarInfo(name)
    info.size = size
    info.mode = mode
    info.mtime = 0
    info.uname = info.gname = "root"
    return info.tobuf(format=tarfile.GNU_FORMAT)


def _pad(n):
    return (-n) % BLOCK


def tar_pieces(members):
    """A tar as pieces: bytes, or int (that many zero bytes). members: (name, bytes | int | pieces-list)."""
    out = []
    for name, body in members:
        pieces = body if isinstance(body, list) else [body]
        size = sum(p if isinstance(p, int) else len(p) for p in pieces)
        out.append(_header(name, size))
        out.extend(pieces)
        if _pad(size):
            out.append(_pad(size))
    out.append(2 * BLOCK)
    return out


def pieces_size(pieces):
    return sum(p if isinstance(p, int) else len(p) for p in pieces)


def pieces_sha256(pieces):
    h = hashlib.sha256()
    for p in pieces:
        if isinstance(p, int):
            while p > 0:
                n = min(p, len(ZERO))
                h.update(ZERO[:n])
                p -= n
        else:
            h.update(p)
    return h.hexdigest()


def write_pieces(path, pieces):
    """Write the pieces; zero runs become holes. Returns the file size."""
    with open(path, "wb") as f:
        for p in pieces:
            if isinstance(p, int):
                f.seek(p, os.SEEK_CUR)
            else:
                f.write(p)
        f.truncate()
    return os.path.getsize(path)


def _blob_json(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def image_pieces(layout, layer_sizes, repo, tag, nonce, real_digests=False):
    """(pieces of the whole archive, expected image ID 'sha256:<hex>')."""
    if layout not in ("legacy", "docker+oci", "oci"):
        raise ValueError("layout %r" % layout)
    layers = []
    for i, size in enumerate(layer_sizes):
        # Every layer holds a small file naming the run (unique digests: a load is never a no-op) and a
        # big file of zeros.
        body = tar_pieces(
            [("airgap-bench/nonce-%d" % i, ("%s %d\n" % (nonce, i)).encode()), ("airgap-bench/big-%d.bin" % i, size)]
        )
        if real_digests:
            digest = pieces_sha256(body)
        else:
            digest = hashlib.sha256(("fake-layer %s %d %d" % (nonce, i, size)).encode()).hexdigest()
        layers.append((digest, body))
    config = _blob_json(
        {
            "architecture": "amd64",
            "os": "linux",
            "created": "2026-11-30T00:00:00Z",
            "config": {"Cmd": ["/bin/true"], "Labels": {"airgap-bench.nonce": nonce}},
            "rootfs": {"type": "layers", "diff_ids": ["sha256:" + d for d, _b in layers]},
            "history": [
                {"created": "2026-11-30T00:00:00Z", "created_by": "airgap-bench layer %d" % i}
                for i in range(len(layers))
            ],
        }
    )
    config_hex = hashlib.sha256(config).hexdigest()
    ref = "%s:%s" % (repo, tag)
    members = []
    if layout == "legacy":
        for digest, body in layers:
            members.append(("%s/VERSION" % digest, b"1.0"))
            members.append(("%s/json" % digest, _blob_json({"id": digest})))
            members.append(("%s/layer.tar" % digest, body))
        members.append(("%s.json" % config_hex, config))
        entry = {
            "Config": "%s.json" % config_hex,
            "RepoTags": [ref],
            "Layers": ["%s/layer.tar" % d for d, _b in layers],
        }
        members.append(("manifest.json", _blob_json([entry])))
        members.append(("repositories", _blob_json({repo: {tag: layers[-1][0]}})))
        return tar_pieces(members), "sha256:" + config_hex
    manifest = _blob_json(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": "sha256:" + config_hex,
                "size": len(config),
            },
            "layers": [
                {"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": "sha256:" + d, "size": pieces_size(b)}
                for d, b in layers
            ],
        }
    )
    manifest_hex = hashlib.sha256(manifest).hexdigest()
    index = _blob_json(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": "sha256:" + manifest_hex,
                    "size": len(manifest),
                    "annotations": {
                        "io.containerd.image.name": "docker.io/" + ref,
                        "org.opencontainers.image.ref.name": tag,
                    },
                }
            ],
        }
    )
    members.append(("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'))
    for digest, body in layers:
        members.append(("blobs/sha256/" + digest, body))
    members.append(("blobs/sha256/" + config_hex, config))
    members.append(("blobs/sha256/" + manifest_hex, manifest))
    members.append(("index.json", index))
    if layout == "docker+oci":
        entry = {
            "Config": "blobs/sha256/" + config_hex,
            "RepoTags": [ref],
            "Layers": ["blobs/sha256/" + d for d, _b in layers],
        }
        members.append(("manifest.json", _blob_json([entry])))
    return tar_pieces(members), "sha256:" + config_hex


def build(path, layout, layer_sizes, repo, tag, nonce, real_digests=False):
    """Write the archive; returns {'path', 'size', 'image_id', 'layout'}."""
    pieces, image_id = image_pieces(layout, layer_sizes, repo, tag, nonce, real_digests)
    size = write_pieces(path, pieces)
    return {"path": path, "size": size, "image_id": image_id, "layout": layout}


def layer_split(total, n):
    """n layer sizes summing to about `total`, shaped like a vLLM image: one big, the rest small-ish."""
    if n == 1:
        return [total]
    big = total * 3 // 4
    rest = (total - big) // (n - 1)
    return [big] + [rest] * (n - 1)
