"""The watch loop's log lines: one line per event, as text (`key=value`) or JSON
(`--log-format json`) (pure: formats, the caller writes).

    line("cycle", {"cycle": 3, "result": "ok"}, fmt="json", now=...)
    -> {"ts": "2026-12-01T21:30:00.000Z", "event": "cycle", "cycle": 3, "result": "ok"}

`JsonFormatter` gives the records of Python's logging (the API client's with -v,
uvicorn's, warnings) the same shape, as event `log`:

    {"ts": "...", "event": "log", "level": "warning", "logger": "uvicorn.error",
     "message": "Invalid HTTP request received."}

Callers: the CLI's `watch` command, tests.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
from collections.abc import Mapping
from typing import Any

FORMATS = ("text", "json")


def line(event: str, fields: Mapping[str, Any], *, fmt: str, now: float) -> str:
    ts = _dt.datetime.fromtimestamp(now, _dt.timezone.utc).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")
    kept = {k: v for k, v in fields.items() if v is not None and v != {}}
    if fmt == "json":
        return json.dumps({"ts": ts, "event": event, **kept}, sort_keys=False,
                          separators=(",", ":"), default=str)
    return " ".join([ts, event, *(f"{k}={_text(v)}" for k, v in kept.items())])


class JsonFormatter(logging.Formatter):
    """A log record as one JSON line of `line`'s shape: event `log`, its level, logger and
    message; an exception's traceback, when the record carries one, as one string."""

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = {"level": record.levelname.lower(), "logger": record.name,
                                  "message": record.getMessage()}
        if record.exc_info:
            fields["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            fields["exception"] = record.exc_text
        if record.stack_info:
            fields["stack"] = self.formatStack(record.stack_info)
        return line("log", fields, fmt="json", now=record.created)


def _text(value: Any) -> str:
    if isinstance(value, Mapping):
        value = ",".join(f"{k}:{v}" for k, v in value.items())
    text = str(value)
    if not text or any(c.isspace() or c in '"=' for c in text):
        return json.dumps(text)
    return text
