# SPDX-License-Identifier: Apache-2.0
# Stand-in for vllm/distributed/ec_transfer/ec_connector/cpu/ec_shared_region.py (vLLM 0.27.1),
# test world only. The MADV_POPULATE_WRITE populate call keeps 0.27.1's shape for the patcher.
import mmap
import os
import time

from vllm._standin import kernel
from vllm.logger import init_logger

logger = init_logger(__name__)


class ECSharedRegion:
    """Flat mmap-backed encoder-cache region: /dev/shm/vllm_ec_{engine_id}.mmap"""

    def __init__(
        self,
        engine_id: str,
        num_blocks: int,
        block_size_bytes: int,
    ) -> None:
        self.num_blocks = num_blocks
        self.block_size_bytes = block_size_bytes

        total_size_bytes = num_blocks * block_size_bytes
        self._mmap_path = f"/dev/shm/vllm_ec_{engine_id}.mmap"
        self._is_creator = False

        try:
            self._fd: int | None = os.open(
                self._mmap_path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600
            )
            os.ftruncate(self._fd, total_size_bytes)
            self._is_creator = True
            logger.info(
                "Created EC mmap file %s (%.2f MiB)",
                self._mmap_path,
                total_size_bytes / (1 << 20),
            )
        except FileExistsError:
            self._fd = os.open(self._mmap_path, os.O_RDWR)
            deadline = time.monotonic() + 30.0
            while os.fstat(self._fd).st_size < total_size_bytes:
                if time.monotonic() > deadline:
                    raise TimeoutError("Timed out waiting for EC mmap file")
                time.sleep(0.005)
            logger.info("Opened existing EC mmap file %s", self._mmap_path)

        self._mmap_obj: mmap.mmap | None = kernel.mmap(
            self._fd,
            total_size_bytes,
            flags=mmap.MAP_SHARED,
            prot=mmap.PROT_READ | mmap.PROT_WRITE,
        )

        if self._is_creator:
            _MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)
            self._mmap_obj.madvise(_MADV_POPULATE_WRITE, 0, total_size_bytes)

    def cleanup(self) -> None:
        if self._is_creator:
            try:
                os.unlink(self._mmap_path)
            except OSError:
                logger.warning("Failed to unlink path %s", self._mmap_path)
            self._is_creator = False
        if self._mmap_obj is not None:
            self._mmap_obj.close()
            self._mmap_obj = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
