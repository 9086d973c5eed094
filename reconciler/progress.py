"""A progress line on a terminal while a long refresh or apply runs.

`Progress` counts one phase's steps (`start(what, total)`, `more(n)`, `step()`,
`finish()`) and, from the running event loop's timer, redraws one line in place on its
stream: done of total, elapsed seconds, failures so far. It draws nothing for a phase
that ends within `delay` seconds (nor while its total is 0), and at most once per
`interval` after that. Other
lines go through `say` (or a log record through `log_filter`), which clears the line
first so that they never share it. Callers: `reconciler.cli` makes one only when
stderr is a terminal and hands it to the operations, which pass it to
`refresh.read_live` and to the `executor.Executor`; they only call its methods.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable, TextIO

_CLEAR = "\r\x1b[K"  # to the start of the line, and erase it


class Progress:
    def __init__(self, stream: TextIO, *, interval: float = 0.25, delay: float = 0.5,
                 clock: Callable[[], float] = time.monotonic):
        self._stream = stream
        self._interval = interval
        self._delay = delay
        self._clock = clock
        self._what = ""
        self._started = 0.0
        self.total = self.done = self.failed = 0
        self._timer: asyncio.TimerHandle | None = None
        self._shown = False
        self.drawn = 0  # lines drawn so far (tests)

    def start(self, what: str, total: int) -> None:
        """A new phase (`what`: "Refreshing", "Applying") of `total` steps so far; its line
        is first drawn `delay` seconds from now, by the running event loop."""
        self.finish()
        self._what, self.total, self.done, self.failed = what, total, 0, 0
        self._started = self._clock()
        self._schedule(self._delay)

    def more(self, n: int) -> None:
        self.total += n

    def step(self, *, failed: bool = False) -> None:
        self.done += 1
        self.failed += failed

    def finish(self) -> None:
        """The phase is over: no more redraws, and the line is erased."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.clear()

    def clear(self) -> None:
        if self._shown:
            self._write(_CLEAR)
            self._shown = False

    def say(self, message: str) -> None:
        """Write `message` as a line of its own; the progress line comes back at the next redraw."""
        self.clear()
        self._write(message + "\n")

    def log_filter(self, record: logging.LogRecord) -> bool:
        """A logging filter for stderr's handler: a log line clears the progress line first."""
        self.clear()
        return True

    def line(self) -> str:
        elapsed = self._clock() - self._started
        return (f"{self._what}: {self.done} of {self.total} done, {elapsed:.1f} s elapsed, "
                f"{self.failed} failed")

    def _schedule(self, after: float) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop: nothing to redraw from
            return
        self._timer = loop.call_later(after, self._redraw)

    def _redraw(self) -> None:
        if self.total:  # "0 of 0" says nothing: a refresh still listing, say
            self._write(_CLEAR + self.line())
            self._shown = True
            self.drawn += 1
        self._schedule(self._interval)

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):  # the terminal went away: progress is not worth an error
            pass
