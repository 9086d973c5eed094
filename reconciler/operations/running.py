"""How the operations run their coroutines: `run(main)`, asyncio.run's work, which
`interrupt()` can stop the way asyncio stops it on Ctrl-C.

asyncio.run (`asyncio.Runner`) turns Ctrl-C into a cancellation of its main task, and
then a KeyboardInterrupt once the task has unwound (its `finally` blocks and `async
with` exits ran), but only where SIGINT's handler is Python's own: a process started
with SIGINT ignored (a background job of a non-interactive shell, many containers and
CI runners) gets no such handler. The program's SIGTERM handler (`cli`) calls
`interrupt()`, so that SIGTERM stops a run the same clean way whatever SIGINT's
disposition; SIGINT's disposition itself is left as it is.

    result = running.run(coroutine())   # KeyboardInterrupt when interrupted
    running.interrupt()                 # from a signal handler: True if a run was stopped

Callers: every operation that runs a coroutine; `cli` (its SIGTERM handler).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["interrupt", "run"]

T = TypeVar("T")


class _Run:
    """One `run` in progress: its loop, its main task once started, interrupts so far."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.task: asyncio.Task | None = None
        self.interrupts = 0


_runs: list[_Run] = []  # the runs in progress, innermost last


def run(main: Coroutine[Any, Any, T]) -> T:
    """`running.run(main)`; KeyboardInterrupt when `interrupt()` stopped it (after its
    main task has unwound)."""
    with asyncio.Runner() as runner:
        this = _Run(runner.get_loop())
        _runs.append(this)
        try:
            return runner.run(_started(main, this))
        except asyncio.CancelledError:
            # asyncio.Runner's own test for its SIGINT: the cancellation was the
            # interrupt's, not one the coroutine met and let out.
            if this.interrupts and this.task is not None and this.task.uncancel() == 0:
                raise KeyboardInterrupt from None
            raise
        finally:
            _runs.remove(this)


async def _started(main: Coroutine[Any, Any, T], this: _Run) -> T:
    this.task = asyncio.current_task()
    return await main


def interrupt() -> bool:
    """Stop the run in progress, from a signal handler of the main thread: the first
    time, its main task is cancelled (it unwinds, then `run` raises KeyboardInterrupt);
    the next time, KeyboardInterrupt is raised here at once, as asyncio does after a
    second Ctrl-C. False when no run is in progress (nothing was done)."""
    if not _runs or _runs[-1].task is None or _runs[-1].task.done():
        return False
    this = _runs[-1]
    this.interrupts += 1
    if this.interrupts > 1:
        raise KeyboardInterrupt
    this.task.cancel()
    this.loop.call_soon_threadsafe(lambda: None)  # wake the loop if it waits
    return True
