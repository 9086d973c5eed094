"""A run's phase times on stderr, when `RUNAI_RECONCILE_TIMELINE` is set (to anything but
"" or "0"): one line per edge, seconds since the process started,

    timeline: state start 0.412
    timeline: state end 0.503

Phases: `import` (the process's start to the command's), `state`, `specs` (the specs
asked for to the specs in hand), `first request` and `last answer` (one edge each: the
first API request sent, the last answer received, written at exit), `plan`, `render`.
`benchmarks/bench.py` reads them (docs/performance.md). Off, each call is one test of a
module constant.

Callers: `reconciler.cli`, `reconciler.operations.planning`, `reconciler.api.client`,
`reconciler.desired.background` (the specs in the parent's hands).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import time
from collections.abc import Iterator

ON = os.environ.get("RUNAI_RECONCILE_TIMELINE", "") not in ("", "0")


def _process_start() -> float:
    """When this process started, on the CLOCK_BOOTTIME clock (the kernel's own record,
    to its clock tick); the first call's time where there is none (not Linux)."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return _clock()


def _clock() -> float:
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    return time.clock_gettime(boottime) if boottime is not None else time.monotonic()


_start = _process_start() if ON else 0.0
_first: list[bool] = []  # the first request was marked
_last: list[float] = []  # the last answer's time, written at exit
_pid = os.getpid()


def now() -> float:
    """Seconds since the process started."""
    return _clock() - _start


def mark(phase: str, edge: str = "") -> None:
    """Write `phase edge` with the time now (nothing when off, or in a forked child)."""
    if ON and os.getpid() == _pid:
        label = f"{phase} {edge}" if edge else phase
        _write(f"timeline: {label} {now():.3f}\n")


@contextlib.contextmanager
def span(phase: str) -> Iterator[None]:
    """`phase start` before the block, `phase end` after it (when it ends, raising too)."""
    mark(phase, "start")
    try:
        yield
    finally:
        mark(phase, "end")


def request_sent() -> None:
    """An API request is sent: the first one is marked."""
    if ON and not _first:
        _first.append(True)
        mark("first request")


def answer_received() -> None:
    """An API answer arrived: the last one is marked at exit."""
    if ON:
        if not _last:
            atexit.register(_write_last)
            _last.append(0.0)
        _last[0] = now()



def _write_last() -> None:
    if os.getpid() == _pid:
        _write(f"timeline: last answer {_last[0]:.3f}\n")


def _write(line: str) -> None:
    """One write per line: the state is read in a thread, whose lines must not cut others."""
    sys.stderr.write(line)
    sys.stderr.flush()
