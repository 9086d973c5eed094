"""How the executor's journal reaches a local state file: the entries of the actions that
answered together share one append (one fsync), each on disk before its writer goes on;
and on a slow disk the run goes on while an append syncs."""

from __future__ import annotations

import asyncio
import json
import time

from reconciler import executor
from reconciler.state import LocalFileStore, State, journal


def _store(tmp_path, appends: list[int], delay: float = 0.0) -> LocalFileStore:
    store = LocalFileStore(tmp_path / "state.json")
    real = store.append

    def append(entries, lineage):
        if delay:
            time.sleep(delay)  # a disk that takes this long to sync
        real(entries, lineage)
        appends.append(len(entries))

    store.append = append
    return store


def test_entries_written_together_share_one_append_and_are_on_disk_when_it_returns(tmp_path):
    appends: list[int] = []
    store = _store(tmp_path, appends)
    state = State()
    log = executor._Journal(store, state.lineage)

    async def one(seq: int) -> None:
        await log.write(journal.close(seq))
        # Back from its write: its line is in the journal file.
        assert journal.close(seq) in _lines(store)

    async def run() -> None:
        await asyncio.gather(*(one(seq) for seq in range(1, 41)))
        await one(41)

    asyncio.run(run())
    assert appends == [40, 1]


def test_on_a_slow_disk_the_run_goes_on_while_the_journal_syncs(tmp_path):
    appends: list[int] = []
    store = _store(tmp_path, appends, delay=2 * executor.SLOW_APPEND_S)
    log = executor._Journal(store, State().lineage)
    ticks: list[int] = []

    async def ticker() -> None:
        while True:
            ticks.append(len(appends))
            await asyncio.sleep(0.001)

    async def run() -> None:
        tick = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        for seq in (1, 2, 3):
            await log.write(journal.close(seq))
        tick.cancel()

    asyncio.run(run())
    assert appends == [1, 1, 1]
    # The first append (before the disk was known to be slow) held the loop; the next ones
    # let it run meanwhile.
    assert ticks.count(1) > 1 and ticks.count(2) > 1


def _lines(store: LocalFileStore) -> list[dict]:
    return [json.loads(line) for line in store.journal_path.read_bytes().splitlines()[1:]]
