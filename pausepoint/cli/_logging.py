"""``--log-level`` and ``--log-format``: where the server's logs go, as text or JSON lines.

Both go to stderr. The ``pausepoint`` loggers (the request log is ``pausepoint.server.access``,
webhooks ``pausepoint.webhooks``) and uvicorn's own take the level. uvicorn's access log is
always off: it prints query strings, which may hold a token; pausepoint's request log does not.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any

__all__ = ["LEVELS", "JsonFormatter", "TextFormatter", "add_arguments", "configure"]

LEVELS = ("debug", "info", "warning", "error")

# Attributes every LogRecord has; anything else was passed as ``extra`` and becomes a field.
# (uvicorn passes ``color_message``, the message with ANSI colours for its own formatter.)
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "taskName",
    "color_message",
}
# A terminal's escape sequences, whole, and any ESC left over.
_ANSI = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves
    r"|\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC: a window's title, a link
    r"|[@-Z\\-_])?"  # the other two-byte ones
)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and the record's extra fields.

    A line is for a log collector, not a terminal: no ANSI escape sequence is left in a string.
    """

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        for key, value in entry.items():
            if isinstance(value, str) and "\x1b" in value:
                entry[key] = _ANSI.sub("", value)
        return json.dumps(entry, default=str, ensure_ascii=False)


# Characters a terminal or a log reader acts on (C0, DEL, C1): in a text log's message, shown as
# ``\xNN`` instead.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class TextFormatter(logging.Formatter):
    r"""A line of text per record. A message quotes what anyone may send (a request's path): its
    control characters are written as ``\xNN``, so nobody writes a line of their own (a line
    break) or drives the terminal that shows the log (an escape sequence). A traceback stays as
    it is."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging's name)
        record.message = _CONTROL.sub(lambda found: f"\\x{ord(found[0]):02x}", record.message)
        return super().formatMessage(record)


def add_arguments(parser: Any, *, default: str) -> None:
    parser.add_argument(
        "--log-level",
        choices=LEVELS,
        default=default,
        help="what to log (default: %(default)s; info logs each request)",
    )
    parser.add_argument(
        "--log-format", choices=("text", "json"), default="text", help="log lines as text or JSON (default: text)"
    )


def configure(level: str, log_format: str) -> None:
    """Send pausepoint's and uvicorn's logs to stderr at ``level``, as text or JSON lines."""
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name in ("pausepoint", "uvicorn"):
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.setLevel(level.upper())
        logger.propagate = False
    logging.getLogger("uvicorn.access").disabled = True
    # Every other library's records too, in the same format: the MCP SDK's server would install
    # its own handler (Rich's boxes and colours) on a root that has none, and writes a line at
    # info for every request, so it says only warnings and worse unless asked for debug.
    logging.getLogger().handlers = [handler]
    mcp = logging.getLogger("mcp")
    mcp.setLevel("DEBUG" if level.upper() == "DEBUG" else max(logging.WARNING, logging.getLevelName(level.upper())))
