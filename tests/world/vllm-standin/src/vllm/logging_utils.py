"""Stand-in for vllm.logging_utils: the formatter class names vLLM's logging configs refer to."""
import logging


class NewLineFormatter(logging.Formatter):
    """Like vLLM's: fills %(fileinfo)s and indents continuation lines."""

    def format(self, record):
        record.fileinfo = record.filename
        msg = super().format(record)
        if record.message:
            prefix = msg.split(record.message)[0]
            msg = msg.replace("\n", "\r\n" + prefix)
        return msg


ColoredFormatter = NewLineFormatter
