# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The container around `vllm serve`: `docker run` options and environment of a launch plan.

Not planning: nothing here changes the memory ledger. Pure, stdlib only, Python 3.7-clean.
Every option comes with a reason (``docker_option_reasons``/``env_reasons`` of the plan).

- GPUs: ``--gpus all``, or ``--gpus "device=0,1"`` for a selection (the double quotes are part of the
  word: Docker reads the value as CSV, so without them ``device=0,1`` would split at the comma; the
  word reaches Docker unchanged through the service's argv, systemd quoting included). Docker older
  than 19.03 has no ``--gpus``: ``--runtime nvidia`` with ``NVIDIA_VISIBLE_DEVICES``.
- seccomp: unconfined only where the kernel lacks clone3 and Docker's profile answers it with EPERM
  (vllm_service replaces it with the shipped clone3-ENOSYS profile).
- Log rotation: ``--log-opt max-size``/``max-file`` for the json-file and local drivers (journald and
  syslog rotate themselves and refuse these options).
- /dev/shm: always sized (the field manual's 4g; offload + 8g with KV offload), plus 1g per tensor
  parallel rank beyond the first for NCCL's shared-memory transport and vLLM's shared-memory
  broadcast queue. A private, sized /dev/shm is chosen over ``--ipc=host``: the host IPC namespace
  would let the container attach to the host's SysV segments and semaphores (and those of other
  services on the host), while a tmpfs size is only a cap (pages are allocated as written).
- Whether the image needs the madvise patch is decided by _source_patch.needs_madvise_patch.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_common import TargetsError
from ansible_collections.airgap.vllm.plugins.module_utils.common._version import numbers

# /dev/shm without KV offload (the field manual's 4g); with offload it is offload + 8g.
SHM_BASELINE_GIB = 4
SHM_OFFLOAD_EXTRA_GIB = 8
# Per tensor-parallel rank beyond the first: NCCL's SHM transport (per peer and channel a SIMPLE
# buffer of NCCL_BUFFSIZE 4 MiB plus LL/LL128 buffers, ~9 MiB) and vLLM's shared-memory broadcast
# queue between the ranks stay far below this; tmpfs only caps, so the margin costs nothing.
SHM_PER_EXTRA_RANK_GIB = 1
DEFAULT_LOG_MAX_SIZE = "100m"
DEFAULT_LOG_MAX_FILE = 5
# Docker log drivers that take max-size/max-file (daemon/logger/jsonfilelog, daemon/logger/local).
ROTATING_LOG_DRIVERS = ("json-file", "local")

OFFLINE_ENV = (
    ("HF_HUB_OFFLINE", "1", "use the local snapshot, never call the Hub"),
    ("TRANSFORMERS_OFFLINE", "1", "transformers never reaches the network"),
    ("HF_HUB_DISABLE_TELEMETRY", "1", "no Hub telemetry"),
    ("VLLM_NO_USAGE_STATS", "1", "usage stats POST would hang on a black-holed network"),
    ("VLLM_DO_NOT_TRACK", "1", "same, vLLM's own switch"),
    ("DO_NOT_TRACK", "1", "same, the generic switch"),
    ("FLASHINFER_NO_DOWNLOAD", "1", "cubin downloads fail fast instead of retrying"),
    ("VLLM_HOST_IP", "127.0.0.1", "get_ip() would probe a public address"),
    ("VLLM_MEDIA_FETCH_MAX_RETRIES", "1", "remote media URLs fail fast"),
)


class ContainerOptionsError(TargetsError):
    """An input of the container options is unusable; the message names it."""


def _log_size(value):
    text = str(value).lower()
    if not re.match(r"[1-9][0-9]*[kmg]?\Z", text):
        raise ContainerOptionsError(
            "log_max_size %r: give a size Docker's json-file driver takes, such as 100m, 1g or 50000k" % (value,)
        )
    return text


def _log_files(value):
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if number < 1 or str(value).strip() != str(number):
        raise ContainerOptionsError("log_max_file %r: give a whole number of files >= 1" % (value,))
    return number


def gpu_options(docker_version, gpu_ids=()):
    """(options, reasons, env) that hand the container its GPUs: all of them, or the selection."""
    dv = numbers(docker_version)
    ids = ",".join(str(g) for g in gpu_ids or ())
    if dv is not None and dv < (19, 3):
        env = {"NVIDIA_VISIBLE_DEVICES": ids} if ids else {}
        why = "Docker %s predates --gpus (19.03)" % docker_version
        if ids:
            why += "; NVIDIA_VISIBLE_DEVICES=%s selects the GPUs" % ids
        return ["--runtime", "nvidia"], {"--runtime nvidia": why}, env
    if ids:
        word = '"device=%s"' % ids
        return (
            ["--gpus", word],
            {
                "--gpus %s" % word: "the selected GPUs only (vllm_plan_gpus); quoted so that Docker's CSV "
                "reading keeps the list in one field"
            },
            {},
        )
    return ["--gpus", "all"], {"--gpus all": "Docker >= 19.03 passes GPUs through nvidia-container-toolkit"}, {}


def log_options(max_size=DEFAULT_LOG_MAX_SIZE, max_file=DEFAULT_LOG_MAX_FILE, log_driver=None):
    """--log-opt rotation for the container's log, when the daemon's driver takes it."""
    size, files = _log_size(max_size), _log_files(max_file)
    driver = str(log_driver or "").strip()
    if driver and driver not in ROTATING_LOG_DRIVERS:
        return [], {
            "(no --log-opt)": "Docker's log driver is %s, which rotates on its own and refuses "
            "max-size/max-file" % driver
        }
    opts = ["--log-opt", "max-size=%s" % size, "--log-opt", "max-file=%d" % files]
    why = (
        "rotate the container log at %s, keep %d files (Docker's json-file default never rotates: "
        "a chatty engine fills /var/lib/docker)" % (size, files)
    )
    return opts, {"--log-opt max-size=%s" % size: why, "--log-opt max-file=%d" % files: why}


def shm_size_gib(offload_gib, tensor_parallel_size=1):
    """/dev/shm size in GiB: baseline or offload + 8, plus 1 per tensor-parallel rank beyond the first."""
    base = (int(math.ceil(offload_gib)) + SHM_OFFLOAD_EXTRA_GIB) if offload_gib else SHM_BASELINE_GIB
    return base + SHM_PER_EXTRA_RANK_GIB * max(0, int(tensor_parallel_size or 1) - 1)


def container_options(
    kernel,
    docker_version,
    offload_gib,
    tensor_parallel_size=1,
    gpu_ids=(),
    log_max_size=DEFAULT_LOG_MAX_SIZE,
    log_max_file=DEFAULT_LOG_MAX_FILE,
    log_driver=None,
):
    """(docker options, {option: reason}, extra env) of the container."""
    opts, reasons, env = gpu_options(docker_version, gpu_ids)
    kv = numbers(kernel)
    dv = numbers(docker_version)
    # Docker's default seccomp profile allows clone3 (returns ENOSYS) from 20.10.10; older
    # profiles answer EPERM and glibc >= 2.34 in the image then fails pthread_create.
    if kv is not None and dv is not None and kv < (5, 3) and dv < (20, 10, 10):
        opts += ["--security-opt", "seccomp=unconfined"]
        reasons["--security-opt seccomp=unconfined"] = (
            "kernel %s lacks clone3 and Docker %s's seccomp profile answers it with EPERM, so "
            "pthread_create fails in the image (fixed profile from Docker 20.10.10)" % (kernel, docker_version)
        )
    log_opts, log_reasons = log_options(log_max_size, log_max_file, log_driver)
    opts += log_opts
    reasons.update(log_reasons)
    tp = int(tensor_parallel_size or 1)
    shm = shm_size_gib(offload_gib, tp)
    if offload_gib:
        why = (
            "native KV offload maps /dev/shm/vllm_offload_*.mmap of %s GiB; tmpfs must exceed "
            "it or writes SIGBUS (offload + %dg)" % (offload_gib, SHM_OFFLOAD_EXTRA_GIB)
        )
    else:
        why = (
            "Docker's 64 MiB /dev/shm is too small for vLLM's shared-memory message queues and "
            "multimodal caches (field manual: %dg without offload)" % SHM_BASELINE_GIB
        )
    if tp > 1:
        why += (
            "; + %dg for %d tensor-parallel ranks (NCCL's shared-memory transport and vLLM's "
            "broadcast queue; a private /dev/shm instead of --ipc=host, which would share the "
            "host's IPC namespace)" % (SHM_PER_EXTRA_RANK_GIB * (tp - 1), tp)
        )
    opts += ["--shm-size", "%dg" % shm]
    reasons["--shm-size %dg" % shm] = why
    return opts, reasons, env


def plan_env(backend, extra=None):
    """Container environment: the offline set, with the backend's own need spelled out."""
    env = dict((k, v) for k, v, _why in OFFLINE_ENV)
    reasons = dict((k, why) for k, _value, why in OFFLINE_ENV)
    if backend == "FLASHINFER":
        reasons["FLASHINFER_NO_DOWNLOAD"] = (
            "attention backend is FlashInfer: any TRT-LLM/cuDNN cubin fetch fails at once "
            "instead of retrying for minutes (with --attention-config use_trtllm_attention "
            "false none is attempted)"
        )
    for key, value in sorted((extra or {}).items()):
        env[key] = value
        reasons[key] = "selected GPUs under --runtime nvidia (Docker < 19.03 has no --gpus)"
    return env, reasons
