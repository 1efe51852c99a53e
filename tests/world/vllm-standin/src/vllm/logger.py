"""vLLM-style logging ("INFO 11-30 04:45:00 [file.py:12] message" on stdout), configured like
vllm/logger.py: vLLM's default config, or the JSON dictConfig named by VLLM_LOGGING_CONFIG_PATH."""
import json
import logging
import logging.config
import os

_FMT = "%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s"
_configured = False


def _default_config():
    level = os.environ.get("VLLM_LOGGING_LEVEL", "INFO").upper()
    return {
        "formatters": {"vllm": {"class": "vllm.logging_utils.NewLineFormatter",
                                "datefmt": "%m-%d %H:%M:%S", "format": _FMT}},
        "handlers": {"vllm": {"class": "logging.StreamHandler", "formatter": "vllm", "level": level,
                              "stream": "ext://sys.stdout"}},
        "loggers": {"vllm": {"handlers": ["vllm"], "level": level, "propagate": False}},
        "version": 1,
        "disable_existing_loggers": False,
    }


def _configure():
    path = os.environ.get("VLLM_LOGGING_CONFIG_PATH")
    config = _default_config()
    if path:
        if not os.path.exists(path):
            raise RuntimeError("Could not load logging config. File does not exist: %s" % path)
        with open(path, encoding="utf-8") as handle:
            config = json.loads(handle.read())
        if not isinstance(config, dict):
            raise ValueError("Invalid logging config. Expected dict, got %s." % type(config).__name__)
    logging.config.dictConfig(config)


def init_logger(name):
    global _configured
    if not _configured:
        _configure()
        _configured = True
    return logging.getLogger(name)
