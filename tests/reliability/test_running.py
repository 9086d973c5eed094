"""`operations.running`, which the CLI's SIGTERM handler stops: the run's main task is
cancelled and unwinds (its cleanup runs, what it started is awaited) before `run` raises
KeyboardInterrupt; a second interrupt raises at once; with no run in progress nothing is
done; SIGINT's disposition is left as it was."""

from __future__ import annotations

import asyncio
import signal

import pytest

from reconciler.operations import running


def test_an_interrupt_cancels_the_main_task_which_unwinds_before_keyboard_interrupt():
    unwound = []

    async def main():
        asyncio.get_running_loop().call_later(0.01, running.interrupt)
        try:
            await asyncio.sleep(30)
        finally:
            unwound.append(True)

    with pytest.raises(KeyboardInterrupt):
        running.run(main())
    assert unwound == [True]


def test_a_second_interrupt_raises_at_once():
    async def main():
        assert running.interrupt() is True
        with pytest.raises(KeyboardInterrupt):
            running.interrupt()
        await asyncio.sleep(30)

    with pytest.raises(KeyboardInterrupt):
        running.run(main())


def test_with_no_run_in_progress_an_interrupt_does_nothing():
    assert running.interrupt() is False
    assert running.run(asyncio.sleep(0, result="done")) == "done"
    assert running.interrupt() is False


def test_a_cancellation_that_is_not_the_interrupts_stays_a_cancellation():
    async def main():
        asyncio.current_task().cancel()
        await asyncio.sleep(1)

    with pytest.raises(asyncio.CancelledError):
        running.run(main())


def test_sigint_ignored_stays_ignored():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        async def main():
            return signal.getsignal(signal.SIGINT)

        assert running.run(main()) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
