"""Read single files out of vLLM's PyPI wheels without downloading the wheels.

A vLLM wheel is ~300 MB; the source patch needs two small .py files from it. A wheel is a zip:
its central directory sits at the end, so with HTTP Range requests we read the end of the file
(end-of-central-directory record), then the central directory, then only the local header and the
deflate data of each member we want, plus the wheel's RECORD file, whose sha256 of every member is
checked before a file is used. Extracted files are cached under
``${AIRGAP_CACHE:-~/.cache/airgap-vllm}/wheel-files/<version>/`` (outside the repository) and are
re-checked against the cached RECORD on every use. When the server ignores Range (answers 200),
the whole wheel is downloaded once into ``.../wheels/`` and read locally.
"""

import base64
import hashlib
import json
import os
import struct
import urllib.error
import urllib.parse
import urllib.request
import zipfile
import zlib

PYPI = "https://pypi.org/pypi/%s/json"
PYPI_VERSION = "https://pypi.org/pypi/%s/%s/json"
TIMEOUT = 60


class Unreachable(Exception):
    """PyPI (or its file host) could not be reached: the caller skips loudly."""


def cache_root():
    return os.environ.get("AIRGAP_CACHE") or os.path.expanduser("~/.cache/airgap-vllm")


def _get(url, headers=None):
    req = urllib.request.Request(url, headers=dict(headers or {}, **{"User-Agent": "airgap-vllm-tests"}))
    try:
        resp = urllib.request.urlopen(req, timeout=TIMEOUT)
        return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError:
        raise
    except (urllib.error.URLError, OSError) as exc:
        raise Unreachable("%s: %s" % (url, exc))


def wheel_info(project, version):
    """(url, filename, sha256) of the release's x86_64 (else first) wheel, from the PyPI JSON API."""
    files = None
    try:
        files = json.loads(_get(PYPI_VERSION % (project, version))[2].decode("utf-8"))["urls"]
        base = PYPI_VERSION % (project, version)
    except urllib.error.HTTPError:
        base = PYPI % project
        data = json.loads(_get(base)[2].decode("utf-8"))
        files = data["releases"].get(version)
        if not files:
            raise LookupError("PyPI lists no release %s %s" % (project, version))
    wheels = [f for f in files if f["packagetype"] == "bdist_wheel"]
    wheels.sort(key=lambda f: "x86_64" not in f["filename"])
    if not wheels:
        raise LookupError("%s %s has no wheel on PyPI" % (project, version))
    w = wheels[0]
    return urllib.parse.urljoin(base, w["url"]), w["filename"], w["digests"]["sha256"], w["size"]


class RangeZip(object):
    """The members of a remote zip, read by HTTP range (or from a local copy when Range is refused)."""

    def __init__(self, url, size, fallback_path, sha256):
        self.url = url
        self.size = size
        self.fallback_path = fallback_path
        self.sha256 = sha256
        self.local = None
        self.ranges = 0
        self.range_bytes = 0
        self.members = self._central_directory()

    def _range(self, start, end):
        """Bytes [start, end) of the wheel."""
        if self.local is None:
            status, headers, body = _get(self.url, {"Range": "bytes=%d-%d" % (start, end - 1)})
            if status == 206:
                self.ranges += 1
                self.range_bytes += len(body)
                return body
            self._download(body if status == 200 else None)
        with open(self.local, "rb") as f:
            f.seek(start)
            return f.read(end - start)

    def _download(self, body):
        """Range refused: keep (or fetch) the whole wheel in the cache and read it locally."""
        path = self.fallback_path
        if not (os.path.exists(path) and _sha256_file(path) == self.sha256):
            if body is None:
                body = _get(self.url)[2]
            if hashlib.sha256(body).hexdigest() != self.sha256:
                raise AssertionError("%s: downloaded wheel does not match PyPI's sha256" % self.url)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path + ".tmp", "wb") as f:
                f.write(body)
            os.rename(path + ".tmp", path)
        self.local = path

    def _central_directory(self):
        tail_len = min(self.size, 65536 + 22)
        tail = self._range(self.size - tail_len, self.size)
        eocd = tail.rfind(b"PK\x05\x06")
        if eocd < 0:
            raise AssertionError("%s: no end-of-central-directory record" % self.url)
        (_sig, _d, _dcd, _n_here, n_total, cd_size, cd_offset, _clen) = struct.unpack(
            "<IHHHHIIH", tail[eocd : eocd + 22]
        )
        if cd_offset == 0xFFFFFFFF or n_total == 0xFFFF:  # zip64
            loc = tail.rfind(b"PK\x06\x07", 0, eocd)
            (_s, _disk, z64_off, _disks) = struct.unpack("<IIQI", tail[loc : loc + 20])
            rec = self._range(z64_off, z64_off + 56)
            (_s, _sz, _v1, _v2, _d1, _d2, _n1, n_total, cd_size, cd_offset) = struct.unpack("<IQHHIIQQQQ", rec)
        cd = self._range(cd_offset, cd_offset + cd_size)
        members = {}
        pos = 0
        for _index in range(n_total):
            (sig, _vm, _vn, _flags, method, _t, _dt, crc, csize, usize, nlen, xlen, clen, _dn, _ia, _ea, off) = (
                struct.unpack("<IHHHHHHIIIHHHHHII", cd[pos : pos + 46])
            )
            if sig != 0x02014B50:
                raise AssertionError("%s: bad central directory entry at %d" % (self.url, pos))
            name = cd[pos + 46 : pos + 46 + nlen].decode("utf-8")
            extra = cd[pos + 46 + nlen : pos + 46 + nlen + xlen]
            if 0xFFFFFFFF in (csize, usize, off):
                vals = _zip64_extra(extra)
                if usize == 0xFFFFFFFF:
                    usize = vals.pop(0)
                if csize == 0xFFFFFFFF:
                    csize = vals.pop(0)
                if off == 0xFFFFFFFF:
                    off = vals.pop(0)
            members[name] = (method, crc, csize, usize, off)
            pos += 46 + nlen + xlen + clen
        return members

    def read(self, name):
        method, crc, csize, usize, off = self.members[name]
        head = self._range(off, off + 30)
        (sig, _v, _f, _m, _t, _d, _c, _cs, _us, nlen, xlen) = struct.unpack("<IHHHHHIIIHH", head)
        if sig != 0x04034B50:
            raise AssertionError("%s: bad local header for %s" % (self.url, name))
        start = off + 30 + nlen + xlen
        raw = self._range(start, start + csize)
        if method == zipfile.ZIP_DEFLATED:
            data = zlib.decompressobj(-15).decompress(raw)
        elif method == zipfile.ZIP_STORED:
            data = raw
        else:
            raise AssertionError("%s: %s uses compression method %d" % (self.url, name, method))
        if len(data) != usize or zlib.crc32(data) & 0xFFFFFFFF != crc:
            raise AssertionError("%s: %s failed its zip CRC/size check" % (self.url, name))
        return data


def _zip64_extra(extra):
    pos = 0
    while pos + 4 <= len(extra):
        hid, hlen = struct.unpack("<HH", extra[pos : pos + 4])
        if hid == 1:
            return list(struct.unpack("<%dQ" % (hlen // 8), extra[pos + 4 : pos + 4 + hlen]))
        pos += 4 + hlen
    return []


def _sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def parse_record(text):
    """RECORD lines `path,sha256=<urlsafe b64, no padding>,size` -> {path: hex sha256}."""
    out = {}
    for line in text.splitlines():
        parts = line.rsplit(",", 2)
        if len(parts) == 3 and parts[1].startswith("sha256="):
            b64 = parts[1][len("sha256=") :]
            out[parts[0]] = base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).hex()
    return out


def _record_ok(record, name, data):
    want = record.get(name)
    if want is None:
        raise AssertionError("%s is not listed in the wheel's RECORD" % name)
    got = hashlib.sha256(data).hexdigest()
    if got != want:
        raise AssertionError("%s: sha256 %s, the wheel's RECORD says %s" % (name, got, want))


def wheel_files(version, wanted, project="vllm"):
    """Extract the members whose path ends with one of `wanted` suffixes; returns {member: local path}.

    Cached per version; every file (cached or fresh) is checked against the wheel's RECORD.
    """
    vdir = os.path.join(cache_root(), "wheel-files", version)
    index_path = os.path.join(vdir, "members.json")
    record_path = os.path.join(vdir, "RECORD")
    names = None
    if os.path.exists(index_path) and os.path.exists(record_path):
        with open(index_path) as f:
            names = json.load(f)
    zf = None
    if names is None:
        url, filename, sha256, size = wheel_info(project, version)
        zf = RangeZip(url, size, os.path.join(cache_root(), "wheels", filename), sha256)
        names = sorted(zf.members)
        record_name = "%s-%s.dist-info/RECORD" % (project, version)
        os.makedirs(vdir, exist_ok=True)
        with open(record_path, "wb") as f:
            f.write(zf.read(record_name))
        with open(index_path, "w") as f:
            json.dump(names, f)
    with open(record_path, "rb") as f:
        record = parse_record(f.read().decode("utf-8"))
    out = {}
    for name in names:
        if not any(name.endswith(w) for w in wanted):
            continue
        local = os.path.join(vdir, name)
        data = None
        if os.path.exists(local):
            with open(local, "rb") as f:
                data = f.read()
            try:
                _record_ok(record, name, data)
            except AssertionError:
                data = None  # a damaged cache entry: fetch it again
        if data is None:
            if zf is None:
                url, filename, sha256, size = wheel_info(project, version)
                zf = RangeZip(url, size, os.path.join(cache_root(), "wheels", filename), sha256)
            data = zf.read(name)
            _record_ok(record, name, data)
            os.makedirs(os.path.dirname(local), exist_ok=True)
            with open(local + ".tmp", "wb") as f:
                f.write(data)
            os.rename(local + ".tmp", local)
        out[name] = local
    return out
