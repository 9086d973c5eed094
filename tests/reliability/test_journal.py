"""The write-ahead journal through both stores: replay on read, compaction on write,
open intents after a crash, torn lines, and refusal of a journal that is not ours."""

from __future__ import annotations

import json
import os

import pytest

from reconciler.errors import StateError
from reconciler.state import LocalFileStore, MemoryStore, ResourceState, State
from reconciler.state import journal

CLUSTER = "71f69d83-ba66-4822-adf5-55ce55efd210"


def res(name: str, wid: str | None = "w-1") -> ResourceState:
    return ResourceState(kind="DistributedTraining", name=name, project_id="7",
                         cluster_id=CLUSTER, workload_id=wid,
                         applied={"name": name, "projectId": "7", "clusterId": CLUSTER})


@pytest.fixture(params=["file", "memory"])
def store(request, tmp_path):
    if request.param == "file":
        return LocalFileStore(tmp_path / "state" / "state.json")
    return MemoryStore()


def reopen(store):
    """A fresh handle, as the next process would open it."""
    if isinstance(store, LocalFileStore):
        return LocalFileStore(store.path)
    return store.peer()


def test_journaled_outcomes_are_seen_by_the_next_reader_before_any_compaction(store):
    state = State()
    a, b = res("a", "w-a"), res("b", "w-b")
    store.append([journal.set_entry(a.address, a)], state.lineage)
    store.append([journal.set_entry(b.address, b), journal.set_entry(a.address, None)],
                 state.lineage)
    seen = reopen(store).read()
    assert seen.lineage == state.lineage
    assert set(seen.resources) == {b.address}
    assert seen.resources[b.address].workload_id == "w-b"


def test_a_full_write_folds_the_journal_in_and_removes_it(store):
    state = store.read()
    a = res("a")
    state.resources[a.address] = a
    store.append([journal.set_entry(a.address, a)], state.lineage)
    assert store.has_journal()
    store.write(state)
    assert not store.has_journal()
    again = reopen(store).read()
    assert set(again.resources) == {a.address} and again.serial == 1


def test_an_intent_without_outcome_is_open_and_records_its_maybe(store):
    state = State()
    maybe = res("new", wid=None)
    done = res("old", "w-old")
    store.append([journal.Intent(1, "create", maybe.address, body=maybe.applied,
                                 maybe=maybe).to_json(),
                  journal.Intent(2, "create", done.address, body=done.applied,
                                 maybe=res("old", None)).to_json(),
                  journal.set_entry(done.address, done, closes=2),
                  journal.Intent(3, "delete", done.address, workload_id="w-old").to_json(),
                  journal.close(3)], state.lineage)
    seen, pending = reopen(store).read_with_pending()
    assert [(i.seq, i.action, i.address) for i in pending] == [(1, "create", maybe.address)]
    assert seen.resources[maybe.address].workload_id is None  # the next refresh looks it up
    assert seen.resources[done.address].workload_id == "w-old"


def test_a_torn_last_line_is_ignored(tmp_path):
    store = LocalFileStore(tmp_path / "state.json")
    state = State()
    a = res("a")
    store.append([journal.set_entry(a.address, a)], state.lineage)
    with open(store.journal_path, "ab") as f:
        f.write(b'{"op": "intent", "seq": 9, "act')
    assert set(LocalFileStore(store.path).read().resources) == {a.address}


def test_a_corrupt_line_in_the_middle_is_an_error_naming_the_journal_and_nothing_is_rewritten(tmp_path):
    store = LocalFileStore(tmp_path / "state.json")
    state = store.read()
    store.write(state)
    a = res("a")
    store.append([journal.set_entry(a.address, a)], state.lineage)
    raw = store.journal_path.read_bytes()
    broken = raw + b"garbage\n" + journal.encode([journal.set_entry(a.address, None)])
    store.journal_path.write_bytes(broken)
    before = store.path.read_bytes()
    with pytest.raises(StateError, match=r"state\.json\.journal line 3 is corrupt"):
        LocalFileStore(store.path).read()
    assert store.path.read_bytes() == before and store.journal_path.read_bytes() == broken


def test_a_journal_of_another_lineage_is_refused(tmp_path):
    store = LocalFileStore(tmp_path / "state.json")
    store.write(State())
    other = State()
    a = res("a")
    store.journal_path.write_bytes(journal.encode([journal.header(other.lineage),
                                                   journal.set_entry(a.address, a)]))
    with pytest.raises(StateError, match="belongs to another state"):
        LocalFileStore(store.path).read()
    with pytest.raises(StateError, match="belongs to another state"):
        LocalFileStore(store.path).append([journal.close(1)],
                                          json.loads(store.path.read_text())["lineage"])


def test_a_journal_of_a_newer_format_is_refused(tmp_path):
    store = LocalFileStore(tmp_path / "state.json")
    store.journal_path.write_bytes(b'{"journal": 99, "lineage": "x"}\n')
    with pytest.raises(StateError, match="newer runai-reconcile"):
        store.read()


def test_a_first_run_killed_before_its_state_file_existed_keeps_its_lineage(tmp_path):
    store = LocalFileStore(tmp_path / "state.json")
    state = store.read()
    a = res("a")
    store.append([journal.set_entry(a.address, a)], state.lineage)
    assert not store.path.exists()
    seen = LocalFileStore(store.path).read()
    assert seen.lineage == state.lineage and a.address in seen.resources


def test_the_journal_is_private_and_each_append_is_one_line_per_entry(tmp_path):
    store = LocalFileStore(tmp_path / "state.json")
    state = State()
    for i in range(3):
        r = res(f"w{i}")
        store.append([journal.set_entry(r.address, r)], state.lineage)
    assert os.stat(store.journal_path).st_mode & 0o777 == 0o600
    lines = store.journal_path.read_bytes().splitlines()
    assert len(lines) == 4  # the header, then one per entry: nothing is rewritten


def test_force_unlock_of_a_memory_lock_checks_the_id():
    store = MemoryStore()
    with store.lock("apply") as info:
        with pytest.raises(StateError, match="refusing to unlock"):
            store.peer().force_unlock("not-the-id")
        assert store.peer().force_unlock(info.id).id == info.id
        with store.peer().lock("plan"):
            pass
