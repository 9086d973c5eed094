"""The progress line's timing and manners, on a fake terminal in a real event loop (the
CLI's use of it on a pseudo-terminal: tests/e2e/test_everyday_messages.py)."""

from __future__ import annotations

import asyncio
import io
import logging

from reconciler.progress import Progress

CLEAR = "\r\x1b[K"


def drive(progress: Progress, seconds: float, steps: int = 0, total: int = 10) -> None:
    async def phase() -> None:
        progress.start("Applying", total)
        for _ in range(steps):
            await asyncio.sleep(seconds / max(steps, 1))
            progress.step()
        if not steps:
            await asyncio.sleep(seconds)
        progress.finish()

    asyncio.run(phase())


def test_a_phase_shorter_than_the_delay_draws_nothing():
    out = io.StringIO()
    drive(Progress(out, delay=5.0), 0.2, steps=4)
    assert out.getvalue() == ""


def test_redraws_are_at_most_one_per_interval_and_the_line_is_erased_at_the_end():
    out = io.StringIO()
    progress = Progress(out, delay=0.0, interval=0.1)
    drive(progress, 0.55, steps=5)
    text = out.getvalue()
    assert 2 <= progress.drawn <= 7  # 0.55 s at one per 0.1 s, the first at once
    assert text.count(CLEAR + "Applying: ") == progress.drawn
    assert text.endswith(CLEAR) and "\n" not in text
    last = text.split(CLEAR)[-2]
    assert last.startswith("Applying: ") and " of 10 done, " in last and last.endswith(" 0 failed")


def test_failures_so_far_are_counted():
    progress = Progress(io.StringIO())
    progress.start("Applying", 3)  # no event loop: counts, never draws
    progress.step()
    progress.step(failed=True)
    assert progress.line().startswith("Applying: 2 of 3 done, ")
    assert progress.line().endswith(" s elapsed, 1 failed")


def test_a_phase_of_nothing_so_far_draws_nothing():
    out = io.StringIO()
    drive(Progress(out, delay=0.0, interval=0.05), 0.3, total=0)
    assert out.getvalue() == ""


def test_other_lines_and_log_records_clear_the_line_first():
    out = io.StringIO()
    progress = Progress(out, delay=0.0, interval=0.05)

    async def phase() -> None:
        progress.start("Refreshing", 4)
        await asyncio.sleep(0.12)
        progress.say("Training/7/a: created")
        assert progress.log_filter(logging.makeLogRecord({"msg": "retrying"})) is True
        progress.finish()

    asyncio.run(phase())
    text = out.getvalue()
    assert text.startswith(CLEAR + "Refreshing: 0 of 4 done, ")
    # Erased, then the line of its own; the log line and the end find nothing to erase.
    assert text.endswith(" 0 failed" + CLEAR + "Training/7/a: created\n")
