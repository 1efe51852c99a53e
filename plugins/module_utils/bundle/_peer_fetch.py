# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Peer staging: one host of a site (the seed) serves its staged bundle over the site LAN, the others
fetch it from there, so the bundle crosses the slow controller-to-site link once per site.

Design (why):
- The seed serves read-only, only the manifest's files, only under a random token path, bound to one
  LAN address, from a process that stops when a stop file appears or its lifetime ends. Python's
  `http.server` cannot answer Range requests, so a peer could not resume: this handler can (one
  `bytes=START-` / `bytes=START-END` range per request) and sends with sendfile.
- A peer writes `<file>.part` (with the same `.part.json` record as airgap.vllm.bundle_stage, so either
  can resume the other's part), resumes from the part's size with a Range request, hashes while writing
  (the part's prefix is re-hashed from local disk), and renames into place only when every file matches
  the manifest's size and sha256 - the same all-or-nothing commit as staging from the controller.
- The fetch reaches nothing but the given URL: plain http to the seed's address, no proxies from the
  environment, no redirects followed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import ipaddress
import os
import posixpath
import re
import socket
import threading
import time

try:  # Python 3 (targets: 3.7); the controller never runs this part.
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.error import HTTPError, URLError
    from urllib.parse import quote, unquote, urlsplit
    from urllib.request import HTTPRedirectHandler, ProxyHandler, Request, build_opener
    from http.client import HTTPException
except ImportError:  # pragma: no cover - Python 2 is not a target
    BaseHTTPRequestHandler = object
    ThreadingHTTPServer = None

from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_manifest import BundleError, validate_entries
from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_stage import (
    Progress,
    StageError,
    check_space,
    commit_verified,
    copy_resumable,
    dest_is_current,
    discard_part,
    part_path,
    stale_part,
)

# Network reads: a part is resumable once it is bigger than one buffer (smaller files just restart).
NET_BUF_SIZE = 1024 * 1024
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{16,128}$")
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")
_HOSTNAME = re.compile(r"\A(?=.{1,253}\Z)[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*\.?\Z")


class PeerFetchError(BundleError):
    """The seed could not be reached or answered wrongly (the part is kept: the next run resumes)."""


# ---------------------------------------------------------------- shared


def check_token(token):
    if not isinstance(token, str) or not _TOKEN.match(token):
        raise BundleError("token must be 16-128 characters of [A-Za-z0-9_-] (it is the unguessable path)")
    return token


def check_base_url(url):
    """http://HOST:PORT only: no path, query, credentials or other scheme; returns it without a trailing /."""
    parts = urlsplit(url or "")
    if parts.scheme != "http" or not parts.hostname:
        raise BundleError(
            "url %r must be http://ADDRESS:PORT of the seed (plain http on the site LAN; "
            "every file is checked against the manifest's sha256)" % (url,)
        )
    if parts.username or parts.password or parts.query or parts.fragment or parts.path not in ("", "/"):
        raise BundleError("url %r must be only http://ADDRESS:PORT (no path, query or credentials)" % (url,))
    return "http://%s" % parts.netloc


def file_url(base_url, token, rel):
    """The only URLs a peer ever requests: BASE/TOKEN/<bundle-relative path>, each segment quoted."""
    return "%s/%s/%s" % (check_base_url(base_url), check_token(token), quote(rel, safe="/"))


# ---------------------------------------------------------------- seed: serve


def parse_range(header, size):
    """(start, end_inclusive) for a Range header on a file of `size` bytes; None = whole file.

    Raises ValueError for a range that cannot be satisfied (answered 416).
    """
    if not header:
        return None
    m = _RANGE.match(header.strip())
    if not m:
        return None  # multi-range or suffix ranges: not ours to ask for; answer with the whole file
    start = int(m.group(1))
    end = int(m.group(2)) if m.group(2) else size - 1
    if start >= size or end < start:
        raise ValueError("range %s not satisfiable for %d bytes" % (header, size))
    return start, min(end, size - 1)


def resolve_request(path, token, files):
    """Map a request path to (rel, entry) or None: only TOKEN/<listed file>, nothing else is served."""
    raw = path.split("?", 1)[0]
    prefix = "/%s/" % token
    if not raw.startswith(prefix):
        return None
    rel = posixpath.normpath(unquote(raw[len(prefix) :]))
    if rel.startswith("/") or rel.startswith("..") or rel not in files:
        return None
    return rel, files[rel]


class ServeStats(object):
    """Bytes sent and requests per client address; thread-safe."""

    def __init__(self):
        self.lock = threading.Lock()
        self.clients = {}
        self.requests = 0
        self.bytes_sent = 0
        self.last_activity = time.time()

    def add(self, client, status, sent):
        with self.lock:
            c = self.clients.setdefault(client, {"requests": 0, "bytes_sent": 0, "errors": 0})
            c["requests"] += 1
            c["bytes_sent"] += sent
            if status >= 400:
                c["errors"] += 1
            self.requests += 1
            self.bytes_sent += sent
            self.last_activity = time.time()

    def as_dict(self):
        with self.lock:
            return {
                "requests": self.requests,
                "bytes_sent": self.bytes_sent,
                "clients": dict((k, dict(v)) for k, v in self.clients.items()),
            }


class PeerRequestHandler(BaseHTTPRequestHandler):
    """GET/HEAD of the listed files under the token, with one byte range; everything else is 404/405."""

    server_version = "airgap-vllm-peer"
    sys_version = ""
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # pylint: disable=arguments-differ
        pass  # our own log line (without the token) is written by _log

    def _log(self, rel, status, sent, rng):
        log = self.server.airgap_log
        if not log:
            return
        line = "%s %s %s %s %d %s %d\n" % (
            time.strftime("%Y-%m-%dT%H:%M:%S"),
            self.client_address[0],
            self.command,
            rel or "-",
            status,
            "%d-%d" % rng if rng else "-",
            sent,
        )
        with self.server.airgap_log_lock:
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                os.write(fd, line.encode("utf-8"))
            finally:
                os.close(fd)

    def _refuse(self, status, rel=None):
        body = ("%d\n" % status).encode("ascii")
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.close_connection = True
        self.server.airgap_stats.add(self.client_address[0], status, 0)
        self._log(rel, status, 0, None)

    def do_GET(self):  # noqa: N802 (http.server's naming)
        self._serve(body=True)

    def do_HEAD(self):  # noqa: N802
        self._serve(body=False)

    def _method_not_allowed(self):
        self._refuse(405)

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _method_not_allowed

    def _serve(self, body):
        found = resolve_request(self.path, self.server.airgap_token, self.server.airgap_files)
        if found is None:
            return self._refuse(404)
        rel, entry = found
        path = os.path.join(self.server.airgap_root, rel)
        try:
            f = open(path, "rb")
        except (IOError, OSError):
            return self._refuse(404, rel)
        with f:
            size = os.fstat(f.fileno()).st_size
            if size != entry["size"]:
                return self._refuse(409, rel)  # not (yet) the staged file the manifest names
            try:
                rng = parse_range(self.headers.get("Range"), size)
            except ValueError:
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % size)
                self.send_header("Content-Length", "0")
                self.end_headers()
                self.server.airgap_stats.add(self.client_address[0], 416, 0)
                self._log(rel, 416, 0, None)
                return None
            start, end = rng if rng else (0, size - 1)
            length = max(end - start + 1, 0)
            self.send_response(206 if rng else 200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(length))
            self.send_header("Accept-Ranges", "bytes")
            if rng:
                self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
            self.end_headers()
            sent = 0
            if body and length:
                try:
                    sent = self.connection.sendfile(f, offset=start, count=length) or 0
                except (IOError, OSError):
                    self.close_connection = True  # the peer went away: it resumes from its part
            self.server.airgap_stats.add(self.client_address[0], 206 if rng else 200, sent)
            self._log(rel, 206 if rng else 200, sent, (start, end) if rng else None)
        return None


def peer_bind_problem(address):
    """None when the seed's peer server may listen on `address` ('' = the host's default IPv4), else why not.

    Every interface (0.0.0.0, ::) would offer the bundle to every network the seed is on: the peers reach
    one address, name it."""
    text = ("%s" % (address,)) if address is not None else ""
    if not text.strip():
        return None
    if text != text.strip():
        return "an address without spaces or line breaks around it, not %r" % (address,)
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        # '0', '0x0', '10.1' are addresses to the socket layer (inet_aton), not names: 0 is every interface.
        if _HOSTNAME.match(text) and not re.match(r"\A(0x[0-9a-f]*|[0-9.]+)\Z", text, re.I):
            return None
        return "an IP address (or host name) of the seed the peers reach, not %r" % (address,)
    if ip.is_unspecified:
        return (
            "one address of the seed the peers reach, not every interface (%s): the seed's bundle would be "
            "offered on every network it is on" % text
        )
    return None


def make_server(bind, port, token, root, entries, log_path=None):
    """A threading HTTP server for the listed files of `root`, not yet serving (on one address: never every
    interface)."""
    check_token(token)
    if not ("%s" % (bind,)).strip():
        raise BundleError("no address to listen on: set bundle_peer_address to an address of the seed the peers reach")
    wrong = peer_bind_problem(bind)
    if wrong:
        raise BundleError("bundle_peer_address %r: wants %s" % (bind, wrong))
    files = dict((e["path"], e) for e in validate_entries(entries))
    if not os.path.isdir(root):
        raise BundleError("%s is not a directory: stage the bundle on the seed first" % root)
    try:
        server = ThreadingHTTPServer((bind, int(port)), PeerRequestHandler)
    except (IOError, OSError) as e:
        raise BundleError(
            "cannot listen on %s:%s (%s): is another server using the port, or is %s not an "
            "address of this host? set bundle_peer_address / bundle_peer_port" % (bind, port, e.strerror or e, bind)
        )
    server.daemon_threads = True
    server.airgap_token = token
    server.airgap_files = files
    server.airgap_root = root
    server.airgap_log = log_path or None
    server.airgap_log_lock = threading.Lock()
    server.airgap_stats = ServeStats()
    return server


def serve_until(server, stop_file, max_seconds, poll=0.5, clock=time.time):
    """Serve until stop_file exists or max_seconds pass; returns (why it stopped, stats)."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2})
    thread.daemon = True
    thread.start()
    t0 = clock()
    why = "max_seconds"
    try:
        while clock() - t0 < max_seconds:
            if stop_file and os.path.exists(stop_file):
                why = "stop_file"
                break
            time.sleep(poll)
    finally:
        server.shutdown()
        server.server_close()
    stats = server.airgap_stats.as_dict()
    stats["stopped_by"] = why
    stats["served_seconds"] = round(clock() - t0, 1)
    return why, stats


# ---------------------------------------------------------------- peer: fetch


class _NoRedirect(HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # pylint: disable=too-many-arguments
        raise PeerFetchError("%s answered with a redirect to %s: refusing to follow it" % (req.full_url, newurl))


def make_opener():
    """urllib without the environment's proxies and without redirects: only the seed is reached."""
    return build_opener(ProxyHandler({}), _NoRedirect())


class RangeReader(object):
    """A file-like reader of one URL for copy_resumable: seek(offset) then readinto() with a Range request."""

    def __init__(self, url, size, opener=None, timeout=60.0):
        self.url = url
        self.size = size
        self.opener = opener or make_opener()
        self.timeout = timeout
        self.offset = 0
        self.resp = None

    def seek(self, offset):
        self.close()
        self.offset = offset

    def _open(self):
        req = Request(self.url)
        if self.offset:
            req.add_header("Range", "bytes=%d-" % self.offset)
        try:
            resp = self.opener.open(req, timeout=self.timeout)
        except HTTPError as e:
            raise PeerFetchError(
                "%s: the seed answered HTTP %d%s"
                % (
                    _safe(self.url),
                    e.code,
                    " (not staged on the seed, or another bundle there)" if e.code in (404, 409) else "",
                )
            )
        status = resp.getcode()
        if self.offset and status != 206:
            resp.close()
            raise PeerFetchError("%s: the seed ignored the range request (HTTP %d)" % (_safe(self.url), status))
        if self.offset:
            want = "bytes %d-%d/%d" % (self.offset, self.size - 1, self.size)
            if resp.headers.get("Content-Range") != want:
                resp.close()
                raise PeerFetchError(
                    "%s: the seed sent %r, expected %r" % (_safe(self.url), resp.headers.get("Content-Range"), want)
                )
        self.resp = resp

    def readinto(self, view):
        if self.resp is None:
            self._open()
        n = self.resp.readinto(view)
        self.offset += n or 0
        return n

    def close(self):
        if self.resp is not None:
            try:
                self.resp.close()
            except (IOError, OSError, HTTPException):
                pass
            self.resp = None


def _safe(url):
    """The URL without its token, for messages and logs."""
    parts = url.split("/")
    if len(parts) > 3 and _TOKEN.match(parts[3]):
        parts[3] = "<token>"
    return "/".join(parts)


_TRANSIENT = (URLError, HTTPException, socket.timeout, ConnectionError, IOError, OSError)


def fetch_one(
    base_url,
    token,
    dest_root,
    entry,
    log_path=None,
    opener=None,
    timeout=60.0,
    retries=3,
    connect_wait=60.0,
    sleep=time.sleep,
    clock=time.monotonic,
):
    """Fetch one artifact into <dest>.part, resuming; retries a cut connection from the part's size.

    Returns {'bytes_copied', 'resumed_from', 'sha256', 'size', 'restarted_stale_part', 'attempts'}.
    A connection refused is retried for connect_wait seconds (the seed's server may still be starting).
    """
    dest = os.path.join(dest_root, entry["path"])
    parent = os.path.dirname(dest)
    if not os.path.isdir(parent):
        os.makedirs(parent, 0o755)
    url = file_url(base_url, token, entry["path"])
    stale = stale_part(dest, entry)
    part = part_path(dest)
    resumed_from = 0 if stale or not os.path.exists(part) else min(os.path.getsize(part), entry["size"])
    copied = 0
    attempts = 0
    failures = 0
    t0 = clock()
    while True:
        attempts += 1
        reader = RangeReader(url, entry["size"], opener=opener, timeout=timeout)
        progress = Progress(log_path, entry["path"], entry["size"], interval=5.0)
        before = os.path.getsize(part) if os.path.exists(part) else 0
        try:
            out = copy_resumable(None, dest, entry, progress=progress, reader=reader, bufsize=NET_BUF_SIZE)
        except PeerFetchError:
            raise
        except _TRANSIENT as e:
            reason = getattr(e, "reason", e)
            refused = isinstance(reason, ConnectionRefusedError) or getattr(reason, "errno", None) == errno.ECONNREFUSED
            got = os.path.getsize(part) if os.path.exists(part) else 0
            copied += max(got - before, 0)
            if refused and clock() - t0 < connect_wait:
                sleep(1.0)
                continue
            failures += 1
            if failures > retries:
                raise PeerFetchError(
                    "%s: %s after %d attempts; %d bytes are kept in %s.part, the next run "
                    "resumes there" % (_safe(url), reason, attempts, got, entry["path"])
                )
            progress.message("connection cut at %d bytes (%s); resuming" % (got, reason))
            sleep(min(2.0 * failures, 10.0))
            continue
        finally:
            reader.close()
        copied += out["bytes_copied"]
        if out["size"] < entry["size"]:
            failures += 1
            if failures > retries:
                raise PeerFetchError(
                    "%s ended at %d of %d bytes after %d attempts; the part is kept, the next "
                    "run resumes there" % (_safe(url), out["size"], entry["size"], attempts)
                )
            sleep(min(2.0 * failures, 10.0))
            continue
        return {
            "bytes_copied": copied,
            "resumed_from": resumed_from,
            "sha256": out["sha256"],
            "size": out["size"],
            "restarted_stale_part": stale,
            "attempts": attempts,
        }


def probe_peer(dest_root, entries, stamps):
    """Per entry: current (stamp hit or hashed once), or what a fetch would start from."""
    out = []
    for entry in validate_entries(entries):
        dest = os.path.join(dest_root, entry["path"])
        current, hashed = dest_is_current(dest, entry, stamps)
        offset = 0
        if not current and not stale_part(dest, entry) and os.path.exists(part_path(dest)):
            offset = min(os.path.getsize(part_path(dest)), entry["size"])
        out.append(
            {
                "path": entry["path"],
                "size": entry["size"],
                "state": "current" if current else "missing",
                "offset": offset,
                "hashed_dest": hashed,
                "bytes_copied": 0,
                "resumed_from": 0,
            }
        )
    return out


def fetch_files(
    base_url,
    token,
    dest_root,
    entries,
    stamps=None,
    log_path=None,
    check_mode=False,
    mode=0o644,
    keep_free=0,
    opener=None,
    timeout=60.0,
    retries=3,
    connect_wait=60.0,
    sleep=time.sleep,
):
    """Fetch every artifact the peer lacks from the seed; all-or-nothing commit like bundle_stage.

    Returns the per-file results; raises StageError (results attached) when a file cannot be fetched or
    does not match the manifest - the verified parts stay for the next run, nothing is renamed.
    """
    check_base_url(base_url)
    check_token(token)
    results = probe_peer(dest_root, entries, stamps)
    todo = [r for r in results if r["state"] != "current"]
    for r in todo:
        r["state"] = "copied"
    if check_mode or not todo:
        return results
    by_path = dict((e["path"], e) for e in validate_entries(entries))
    check_space(dest_root, sum(r["size"] - r["offset"] for r in todo), keep_free)
    pending = []
    errors = []
    for r in todo:
        entry = by_path[r["path"]]
        try:
            out = fetch_one(
                base_url,
                token,
                dest_root,
                entry,
                log_path=log_path,
                opener=opener,
                timeout=timeout,
                retries=retries,
                connect_wait=connect_wait,
                sleep=sleep,
            )
        except PeerFetchError as e:
            r["state"] = "interrupted"
            errors.append(str(e))
            continue
        r.update(
            bytes_copied=out["bytes_copied"],
            resumed_from=out["resumed_from"],
            attempts=out["attempts"],
            restarted_stale_part=out["restarted_stale_part"],
        )
        if out["sha256"] != entry["sha256"]:
            discard_part(os.path.join(dest_root, entry["path"]))
            r["state"] = "checksum_mismatch"
        else:
            pending.append((os.path.join(dest_root, entry["path"]), out["sha256"]))
    if errors:
        raise StageError("fetching from the seed failed, nothing was put in place: %s" % "; ".join(errors), results)
    # Renames every verified part into place, or none (and fails naming a checksum mismatch).
    commit_verified(results, pending, stamps, mode)
    return results
