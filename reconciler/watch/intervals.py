"""Durations as the watch flags write them: `60s`, `2m`, `500ms`, `1h30m`, or a bare number
of seconds (pure).

Caller: the CLI's `watch` command (`--interval`), tests.
"""

from __future__ import annotations

import math
import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def parse(text: str) -> float:
    """Seconds in `text`; ValueError (saying what is expected) when it is not a duration
    above zero."""
    raw = text.strip().lower()
    expected = (f"expected a duration such as 60s, 2m, 500ms or 1h30m, got {text!r}")
    if not raw:
        raise ValueError(expected)
    try:
        seconds = float(raw)
    except ValueError:
        pos, seconds = 0, 0.0
        for m in _PART.finditer(raw):
            if m.start() != pos:
                raise ValueError(expected) from None
            seconds += float(m.group(1)) * _UNITS[m.group(2)]
            pos = m.end()
        if pos != len(raw):
            raise ValueError(expected) from None
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(f"expected a duration above zero, got {text!r}")
    return seconds


def show(seconds: float) -> str:
    """`seconds` as `parse` reads it back: 0.5 -> "500ms", 90 -> "90s", 120 -> "2m"."""
    if seconds < 1:
        return f"{round(seconds * 1000):g}ms"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"
