"""One contract, every store (opentofu's statemgr TestFull): read, write, serial, lock."""

from __future__ import annotations

import logging
import uuid

import pytest

from reconciler.errors import StateError
from reconciler.state import State, StateStore

from tests.helpers.state import resource


def test_is_a_state_store(open_store):
    assert isinstance(open_store(), StateStore)


def test_nothing_stored_reads_as_a_new_empty_state(open_store):
    state = open_store().read()
    assert state.serial == 0
    assert state.resources == {}
    uuid.UUID(state.lineage)


def test_write_then_read_round_trips(open_store):
    store = open_store()
    state = store.read()
    state.set(resource("a"))
    state.set(resource("b", project="12"))
    store.write(state)
    again = open_store().read()
    assert again.lineage == state.lineage
    assert again.serial == 1 == state.serial
    assert again.addresses() == ["DistributedTraining/12/b", "DistributedTraining/7/a"]
    assert again.get("DistributedTraining/7/a") == resource("a")


def test_the_specs_folder_round_trips_and_a_change_of_it_is_a_new_serial(open_store):
    store = open_store()
    state = store.read()
    state.set(resource("a"))
    store.write(state)
    assert open_store().read().specs_folder is None  # as an older state: none recorded
    state.specs_folder = {"git": "specs/prod", "path": "/src/repo/specs/prod"}
    store.write(state)
    again = open_store().read()
    assert again.serial == 2 and again.version == 2
    assert again.specs_folder == {"git": "specs/prod", "path": "/src/repo/specs/prod"}
    assert again.get("DistributedTraining/7/a") == resource("a")


def test_serial_rises_only_when_content_changes(open_store):
    store = open_store()
    state = store.read()
    state.set(resource())
    store.write(state)
    store.write(state)
    store.write(open_store().read())
    assert open_store().read().serial == 1
    state.get("DistributedTraining/7/bert-ddp").last_phase = "Stopped"
    store.write(state)
    assert state.serial == 2
    assert open_store().read().serial == 2


def test_each_read_is_an_independent_copy(open_store):
    store = open_store()
    state = store.read()
    state.set(resource())
    store.write(state)
    state.get("DistributedTraining/7/bert-ddp").applied["spec"]["image"] = "changed"
    assert store.read().get("DistributedTraining/7/bert-ddp").applied["spec"]["image"] == "img:1"


def test_a_stale_writer_is_refused_and_the_newer_state_kept(open_store):
    alice, bob = open_store(), open_store()
    seed = alice.read()
    alice.write(seed)
    a, b = alice.read(), bob.read()
    a.set(resource("from-alice"))
    alice.write(a)
    b.set(resource("from-bob"))
    with pytest.raises(StateError, match=r"changed by someone else.*serial 2 on disk, 1 when read"):
        bob.write(b)
    assert open_store().read().addresses() == ["DistributedTraining/7/from-alice"]


def test_writes_under_one_lock_keep_the_serial_rules(open_store):
    """A store's second write under the lock it holds (an apply's compaction, then its
    list fingerprints) knows its own bytes: the same content keeps the serial, a change
    raises it, and a state written by someone else in between is still refused."""
    store, other = open_store(), open_store()
    with store.lock("apply"):
        state = store.read()
        state.set(resource())
        store.write(state)
        store.write(state)
        assert state.serial == 1
        state.get("DistributedTraining/7/bert-ddp").last_phase = "Stopped"
        store.write(state)
        assert state.serial == 2 == open_store().read().serial
        theirs = other.read()
        theirs.set(resource("from-other"))
        other.write(theirs)
        state.set(resource("mine"))
        with pytest.raises(StateError, match=r"changed by someone else.*serial 3 on disk, 2 "
                                             "when read"):
            store.write(state)
    assert open_store().read().addresses() == ["DistributedTraining/7/bert-ddp",
                                               "DistributedTraining/7/from-other"]


def test_a_state_of_another_lineage_is_refused(open_store):
    store = open_store()
    store.write(store.read())
    stranger = State(serial=99)
    stranger.set(resource())
    with pytest.raises(StateError, match="another lineage"):
        store.write(stranger)
    assert open_store().read().resources == {}


def test_backup_is_the_state_before_this_store_first_wrote(open_store):
    first = open_store()
    state = first.read()
    state.set(resource("v1"))
    first.write(state)
    assert first.read_backup() is None  # nothing existed before

    run = open_store()  # the next command
    state = run.read()
    state.set(resource("v2"))
    run.write(state)
    state.set(resource("v3"))
    run.write(state)
    backup = run.read_backup()
    assert backup.serial == 1
    assert backup.addresses() == ["DistributedTraining/7/v1"]


def test_a_second_locker_is_refused_with_the_holders_identity(open_store):
    holder, other = open_store(), open_store()
    with holder.lock("apply") as info:
        with pytest.raises(StateError) as err:
            with other.lock("plan"):
                pass
        msg = str(err.value)
        assert msg.startswith("state is locked by ")
        assert info.who in msg and "operation apply since" in msg and info.id in msg
    with other.lock("plan"):  # released on exit
        pass


def test_lock_is_released_when_the_body_raises(open_store):
    holder = open_store()
    with pytest.raises(RuntimeError):
        with holder.lock("apply"):
            raise RuntimeError("boom")
    with open_store().lock("apply"):
        pass


def test_lock_waits_up_to_the_timeout(open_store, clock):
    holder, waiter = open_store(), open_store(lock_timeout=5)
    with holder.lock("apply"):
        start = clock.now
        with pytest.raises(StateError, match="locked by"):
            with waiter.lock("apply"):
                pass
        assert clock.now - start == pytest.approx(5)


def test_a_lock_wait_is_said_once_on_stderr(open_store, clock, caplog):
    holder, waiter = open_store(), open_store(lock_timeout=3)
    with holder.lock("apply") as info, caplog.at_level(logging.WARNING):
        with pytest.raises(StateError, match="locked by"):
            with waiter.lock("apply"):
                pass
    [record] = caplog.records
    assert record.getMessage().startswith("state ")
    assert record.getMessage().endswith(
        f" is locked by {info.who} (operation apply since {info.created}); waiting up to 3 s "
        "for it (--lock-timeout)")


def test_lock_is_taken_as_soon_as_the_holder_lets_go(open_store, clock):
    holder, waiter = open_store(), open_store(lock_timeout=60)
    ctx = holder.lock("apply")
    ctx.__enter__()
    clock.on_sleep = lambda: len(clock.slept) == 3 and ctx.__exit__(None, None, None)
    with waiter.lock("plan") as info:
        assert info.operation == "plan"
    assert len(clock.slept) == 3
    assert sum(clock.slept) < 1


def test_lock_is_reentrant_for_the_same_store_and_writes_work_inside(open_store):
    store = open_store()
    with store.lock("apply") as outer:
        with store.lock("apply") as inner:
            assert inner.id == outer.id
        state = store.read()
        state.set(resource())
        store.write(state)
        with pytest.raises(StateError):
            with open_store().lock("plan"):
                pass
    assert open_store().read().serial == 1
