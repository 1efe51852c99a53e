"""Bytes read per file from `strace -f -y` output: attributes a process tree's reads to paths.

/proc/<pid>/io only gives totals; when one tree reads both the bundle medium and the destination disk
(the controller-side bundle_stage: action plugin, put_file, append and commit module runs), strace's
`-y` (fd -> path) tells them apart.
"""

import re
import subprocess

TRACE = ["strace", "-f", "-qq", "-y", "-e", "trace=read,pread64,readv,preadv", "-e", "signal=none"]

# 5636  read(3</etc/services>, "..."..., 12814) = 12813      (pid prefix present with -f)
_CALL = re.compile(
    r"^(?:\[pid\s+)?(?P<pid>\d+)\]?\s+(?P<call>read|pread64|readv|preadv)\((?P<fd>\d+)<(?P<path>[^>]*)>,"
)
_UNFINISHED = re.compile(r"<unfinished \.\.\.>\s*$")
_RESUMED = re.compile(r"^(?:\[pid\s+)?(?P<pid>\d+)\]?\s+<\.\.\. (?P<call>read|pread64|readv|preadv) resumed>")
_RET = re.compile(r"\)\s+=\s+(?P<ret>-?\d+)(?:\s+\w+.*)?$")


def reads_by_path(text):
    """{path: bytes} summed over every successful read-family call in strace -f -y output."""
    out = {}
    pending = {}  # pid -> path of an <unfinished ...> call

    def add(path, line):
        m = _RET.search(line)
        if m and int(m.group("ret")) > 0:
            out[path] = out.get(path, 0) + int(m.group("ret"))

    for line in text.splitlines():
        m = _CALL.match(line)
        if m:
            if _UNFINISHED.search(line):
                pending[m.group("pid")] = m.group("path")
            else:
                add(m.group("path"), line)
            continue
        m = _RESUMED.match(line)
        if m and m.group("pid") in pending:
            add(pending.pop(m.group("pid")), line)
    return out


def bytes_under(by_path, prefix):
    prefix = prefix.rstrip("/") + "/"
    return sum(n for p, n in by_path.items() if p.startswith(prefix))


def available():
    try:
        return (
            subprocess.call(
                ["strace", "-qq", "-e", "trace=none", "true"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            == 0
        )
    except OSError:
        return False
