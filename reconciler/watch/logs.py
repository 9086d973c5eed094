"""The watch loop's log lines: one line per event, as text (`key=value`) or JSON
(`--log-format json`) (pure: formats, the caller writes).

    line("cycle", {"cycle": 3, "result": "ok"}, fmt="json", now=...)
    -> {"ts": "2026-12-01T21:30:00.000Z", "event": "cycle", "cycle": 3, "result": "ok"}

Callers: the CLI's `watch` command, tests.
"""

from __future__ import annotations

import datetime as _dt
import json
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


def _text(value: Any) -> str:
    if isinstance(value, Mapping):
        value = ",".join(f"{k}:{v}" for k, v in value.items())
    text = str(value)
    if not text or any(c.isspace() or c in '"=' for c in text):
        return json.dumps(text)
    return text
