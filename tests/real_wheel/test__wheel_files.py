"""The range reader behind the real-wheel tests, against a local server (with and without Range support)."""

import base64
import hashlib
import http.server
import os
import threading
import zipfile

import pytest

import wheel_files


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


@pytest.fixture
def wheel(tmp_path):
    members = {"vllm/v1/kv_offload/cpu/shared_offload_region.py": b"x = 1\n" * 5000, "vllm/other.py": os.urandom(70000)}
    record = "\n".join(_record_line(n, d) for n, d in members.items()) + "\nvllm-9.9.9.dist-info/RECORD,,\n"
    path = tmp_path / "vllm-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(str(path), "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        zf.writestr("vllm-9.9.9.dist-info/RECORD", record)
    return path, members


def _serve(directory, ranges):
    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(directory), **kw)

        def log_message(self, *args):
            pass

        def send_head(self):
            rng = self.headers.get("Range")
            if not ranges or not rng:
                return super().send_head()
            path = self.translate_path(self.path)
            size = os.path.getsize(path)
            spec = rng.split("=", 1)[1]
            start, end = spec.split("-")
            if not start:
                start, end = size - int(end), size - 1
            start, end = int(start), min(int(end), size - 1)
            f = open(path, "rb")
            f.seek(start)
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
            self.send_header("Content-Length", str(end - start + 1))
            self.end_headers()
            self.wfile.write(f.read(end - start + 1))
            f.close()
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize("ranges", [True, False])
def test_members_read_by_range_or_whole_download_match_record(wheel, tmp_path, ranges):
    path, members = wheel
    server = _serve(path.parent, ranges)
    try:
        url = "http://127.0.0.1:%d/%s" % (server.server_address[1], path.name)
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        zf = wheel_files.RangeZip(url, path.stat().st_size, str(tmp_path / "cache" / path.name), sha)
        for name, data in members.items():
            assert zf.read(name) == data
        record = wheel_files.parse_record(zf.read("vllm-9.9.9.dist-info/RECORD").decode())
        for name, data in members.items():
            assert record[name] == hashlib.sha256(data).hexdigest()
        if ranges:
            assert zf.local is None and zf.ranges >= 3  # tail, central directory, members
        else:
            assert zf.local and os.path.exists(zf.local)  # fell back to one full download, cached
    finally:
        server.shutdown()


def test_a_member_that_differs_from_record_is_refused():
    record = {"vllm/x.py": hashlib.sha256(b"good").hexdigest()}
    with pytest.raises(AssertionError, match="RECORD says"):
        wheel_files._record_ok(record, "vllm/x.py", b"evil")
