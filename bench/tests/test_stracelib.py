"""strace -f -y parsing of bench `medium` (controller-side staging): reads attributed to paths."""

import stracelib as S

TRACE = """\
5636  read(3</mnt/usb/bundle/artifacts/a.bin>,  <unfinished ...>
5637  read(4</etc/services>,  <unfinished ...>
5637  <... read resumed>"# Network services"..., 12814) = 12813
5636  <... read resumed>"\\x00\\x01"..., 268435456) = 268435456
5636  read(3</mnt/usb/bundle/artifacts/a.bin>, "", 1) = 0
5640  read(7</mnt/usb/bundle/artifacts/b.bin>, "abc"..., 8388608) = 4096
5641  read(9</var/lib/airgap-vllm/bundle/artifacts/a.bin.part>, "x"..., 8388608) = 8388608
5642  read(5</mnt/usb/bundle-other/x>, "x"..., 10) = 10
5643  read(8</mnt/usb/bundle/artifacts/c.bin>, 0x7ffd, 10) = -1 EINTR (Interrupted system call)
5644  pread64(3</mnt/usb/bundle/artifacts/a.bin>, "x"..., 512, 0) = 512
"""


def test_reads_by_path():
    by = S.reads_by_path(TRACE)
    assert by["/mnt/usb/bundle/artifacts/a.bin"] == 268435456 + 512
    assert by["/mnt/usb/bundle/artifacts/b.bin"] == 4096
    assert by["/etc/services"] == 12813
    assert "/mnt/usb/bundle/artifacts/c.bin" not in by  # failed call


def test_bytes_under_a_prefix_only():
    by = S.reads_by_path(TRACE)
    assert S.bytes_under(by, "/mnt/usb/bundle") == 268435456 + 512 + 4096
    assert S.bytes_under(by, "/var/lib/airgap-vllm/bundle/") == 8388608
