"""What the kernel would do with madvise(MADV_POPULATE_*) on the host being simulated.

Containers share the CI host's 6.x kernel, so the kernel a test pretends to run is read from
VLLM_STANDIN_KERNEL_RELEASE (default: the real uname). MADV_POPULATE_READ/WRITE (22/23) appeared in
Linux 5.14; older kernels reject unknown advice with EINVAL, which mmap.madvise raises as
OSError(22, 'Invalid argument'). On newer kernels a populate that cannot be backed by the tmpfs
(the container's --shm-size) fails with EFAULT (mm/madvise.c maps VM_FAULT_SIGBUS to -EFAULT).
"""
import errno
import mmap as _mmap
import os
import re

MADV_POPULATE_READ = 22
MADV_POPULATE_WRITE = 23
# Populating for real costs real memory; above this the outcome is computed from statvfs instead.
_REAL_POPULATE_LIMIT = 64 << 20


def kernel_release():
    return os.environ.get("VLLM_STANDIN_KERNEL_RELEASE") or os.uname().release


def kernel_version(release=None):
    m = re.match(r"(\d+)\.(\d+)", release or kernel_release())
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def shm_free_bytes(path):
    st = os.statvfs(os.path.dirname(path) or ".")
    return st.f_bavail * st.f_frsize


class mmap(_mmap.mmap):  # noqa: N801 - drop-in for mmap.mmap
    """mmap.mmap whose madvise answers like the simulated kernel."""

    def __new__(cls, fileno, length, *args, **kwargs):
        self = super().__new__(cls, fileno, length, *args, **kwargs)
        self._standin_path = os.readlink("/proc/self/fd/%d" % fileno)
        self._standin_length = length
        self._standin_checked = False
        return self

    def madvise(self, option, start=0, length=None):
        if length is None:
            length = self._standin_length - start
        if option in (MADV_POPULATE_READ, MADV_POPULATE_WRITE):
            if kernel_version() < (5, 14):
                raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
            if self._standin_length > _REAL_POPULATE_LIMIT:
                # One capacity check for the whole file: the file is sparse until populated.
                if not self._standin_checked:
                    if self._standin_length > shm_free_bytes(self._standin_path):
                        raise OSError(errno.EFAULT, os.strerror(errno.EFAULT))
                    self._standin_checked = True
                return None
        return super().madvise(option, start, length)
