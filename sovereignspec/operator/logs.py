"""Structured logging: one JSON object per line (or plain text for humans)."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

_STD = set(vars(logging.LogRecord("x", 0, "", 0, "", None, None))) | {"message", "asctime"}
_NOISE = {"settings", "k8s_skip"}  # kopf attaches its whole settings object to every record


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STD and key not in _NOISE and not key.startswith("_"):
                out[key] = value if isinstance(value, str | int | float | bool | None) else str(value)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, separators=(",", ":"))


def api_error(exc: Exception) -> dict[str, object]:
    """The structured fields of a failed API call (`extra=` of a log record): log readers and tests
    match on the HTTP status, never on a substring of the message."""
    return {"httpStatus": getattr(exc, "status", None), "apiReason": getattr(exc, "reason", None)}


def configure_logging(fmt: str, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("kubernetes").setLevel(logging.WARNING)
    logging.getLogger("urllib3").setLevel(logging.WARNING)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    if level != "DEBUG":  # kopf logs every handler run at INFO: one line per watch event
        logging.getLogger("kopf").setLevel(logging.WARNING)
