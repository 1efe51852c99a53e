"""vLLM-style log lines ("INFO 11-30 04:45:00 [file.py:12] message") on stdout."""
import logging
import sys

_FMT = "%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s"
_configured = False


def init_logger(name):
    global _configured
    if not _configured:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter(_FMT, datefmt="%m-%d %H:%M:%S"))
        root = logging.getLogger("vllm")
        root.addHandler(handler)
        root.setLevel(logging.DEBUG if _debug() else logging.INFO)
        root.propagate = False
        _configured = True
    return logging.getLogger(name)


def _debug():
    import os
    return os.environ.get("VLLM_LOGGING_LEVEL", "INFO").upper() == "DEBUG"
