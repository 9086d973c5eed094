"""The controller lock (`state.election`): one holder per state, apart from the state's
write lock, released when its holder goes."""

from __future__ import annotations

import subprocess
import sys

from reconciler.state import LocalFileStore, MemoryStore, election


def test_one_holder_per_state_file_and_the_write_lock_stays_free(tmp_path):
    store = LocalFileStore(tmp_path / "state.json")
    first = election.controller_lock(store)
    second = election.controller_lock(LocalFileStore(tmp_path / "state.json"))
    assert first.try_acquire() and first.still_held()
    assert not second.try_acquire()
    with store.lock("apply"):  # a person's apply is not blocked by the controller
        pass
    first.release()
    assert second.try_acquire()
    second.release()


def test_the_lock_dies_with_its_process(tmp_path):
    path = tmp_path / "state.json"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "from reconciler.state import LocalFileStore, election\n"
        f"lock = election.controller_lock(LocalFileStore({str(path)!r}))\n"
        "assert lock.try_acquire()\n"
        "print('held', flush=True)\n"
        "time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        lock = election.controller_lock(LocalFileStore(path))
        assert not lock.try_acquire()
        holder.kill()
        holder.wait()
        assert lock.try_acquire()
        lock.release()
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


def test_memory_peers_share_one_controller():
    store = MemoryStore()
    a, b = election.controller_lock(store), election.controller_lock(store.peer())
    assert a.try_acquire() and not b.try_acquire()
    a.release()
    assert b.try_acquire()
