"""History, restore and migration, for every store: what `state history`, `state restore`
and `state migrate` do (through `reconciler.operations`, as the CLI calls them)."""

from __future__ import annotations

import pytest

from reconciler import operations
from reconciler.errors import ReconcileError
from reconciler.state import LocalFileStore, journal

from tests.helpers.state import resource


def three_versions(open_store) -> str:
    """Serial 1 holds a, serial 2 a and b, serial 3 b: each by a separate command."""
    for names in (["a"], ["a", "b"], ["b"]):
        store = open_store()
        state = store.read()
        state.resources = {}
        for n in names:
            state.set(resource(n))
        store.write(state)
    return state.lineage


def test_history_lists_the_versions_kept_newest_first_with_their_workload_counts(open_store):
    three_versions(open_store)
    store = open_store()
    history = operations.state_history(store)
    if store.keeps_every_version:
        assert [(v.serial, v.workloads) for v in history] == [(3, 1), (2, 2), (1, 1)]
        assert all(v.written_at and v.written_by and v.operation for v in history)
    else:  # the state and its backup: the state before the last command's first write
        assert [(v.serial, v.workloads) for v in history] == [(3, 1), (2, 2)]
        if isinstance(store, LocalFileStore):  # the file's time; the backup's is unknown
            assert history[0].written_at and history[1].written_at is None


def test_restore_brings_back_what_a_wrong_state_rm_forgot_as_a_new_serial(open_store):
    store = open_store()
    state = store.read()
    state.set(resource("a"))
    state.set(resource("b"))
    store.write(state)
    operations.state_rm(open_store(), ["DistributedTraining/7/a"])
    assert open_store().read().addresses() == ["DistributedTraining/7/b"]

    restored = operations.state_restore(open_store(), 1)
    assert restored.serial == 3
    after = open_store().read()
    assert after.serial == 3 and after.lineage == state.lineage
    assert after.addresses() == ["DistributedTraining/7/a", "DistributedTraining/7/b"]
    assert after.get("DistributedTraining/7/a") == resource("a")
    newest = operations.state_history(open_store())[0]
    assert (newest.serial, newest.workloads) == (3, 2)
    if open_store().keeps_every_version:
        assert newest.operation == "state restore 1"


def test_restore_refuses_a_serial_not_kept_the_current_one_and_open_intents(open_store):
    three_versions(open_store)
    with pytest.raises(ReconcileError, match="is the current version"):
        operations.state_restore(open_store(), 3)
    with pytest.raises(ReconcileError, match="no version with serial 9"):
        operations.state_restore(open_store(), 9)
    store = open_store()
    state = store.read()
    c = resource("c")
    store.append([journal.Intent(1, "create", c.address, body=c.applied, maybe=c).to_json()],
                 state.lineage)
    with pytest.raises(ReconcileError, match="run apply first"):
        operations.state_restore(open_store(), 2)
    assert open_store().read().serial == 3


def test_restore_holds_the_lock(open_store):
    three_versions(open_store)
    holder = open_store()
    with holder.lock("apply"):
        with pytest.raises(ReconcileError, match="state is locked by"):
            operations.state_restore(open_store(), 2)


@pytest.fixture
def file_store(tmp_path):
    return lambda name="other": LocalFileStore(tmp_path / name / "state.json")


def test_migrate_copies_serial_lineage_and_workloads_and_leaves_the_source_as_it_was(
        open_store, file_store):
    lineage = three_versions(open_store)
    before = [v.serial for v in open_store().history()]
    done = operations.state_migrate(open_store(), file_store())
    assert done.copied
    copy = file_store().read()
    assert (copy.lineage, copy.serial, copy.addresses()) == (lineage, 3, ["DistributedTraining/7/b"])
    assert not file_store().has_journal()
    assert [v.serial for v in open_store().history()] == before  # the source untouched
    assert open_store().read().same_content(copy)
    again = operations.state_migrate(open_store(), file_store())  # run twice: nothing to do
    assert not again.copied and file_store().read().serial == 3


def test_migrate_to_a_store_and_back(open_store, file_store):
    source = file_store("source")
    state = source.read()
    state.set(resource("a"))
    source.write(state)
    operations.state_migrate(source, open_store())
    moved = open_store().read()
    assert (moved.lineage, moved.serial, moved.addresses()) == (
        state.lineage, 1, ["DistributedTraining/7/a"])
    moved.set(resource("b"))
    open_store().write(moved)  # it goes on from there ...
    operations.state_migrate(open_store(), file_store("back"))  # ... and comes back
    back = file_store("back").read()
    assert back.serial == 2 and len(back.resources) == 2


def test_migrate_refuses_another_lineage_a_newer_target_open_intents_and_no_state(
        open_store, file_store):
    with pytest.raises(ReconcileError, match="nothing to migrate"):
        operations.state_migrate(open_store(), file_store())
    three_versions(open_store)
    stranger = file_store()
    other = stranger.read()
    other.set(resource("x"))
    stranger.write(other)
    with pytest.raises(ReconcileError, match="holds a state of another lineage"):
        operations.state_migrate(open_store(), file_store())
    assert file_store().read().addresses() == ["DistributedTraining/7/x"]  # kept

    newer = file_store("newer")
    operations.state_migrate(open_store(), newer)
    ahead = newer.read()
    ahead.set(resource("y"))
    newer.write(ahead)
    with pytest.raises(ReconcileError, match="holds serial 4 of this state, newer"):
        operations.state_migrate(open_store(), file_store("newer"))

    store = open_store()
    c = resource("c")
    store.append([journal.Intent(1, "create", c.address, body=c.applied, maybe=c).to_json()],
                 store.read().lineage)
    with pytest.raises(ReconcileError, match="still open in its journal; run apply first"):
        operations.state_migrate(open_store(), file_store("third"))
    assert not file_store("third").path.exists()


def test_the_cli_on_a_state_file_says_it_keeps_one_previous_version_and_restores_it(tmp_path):
    from click.testing import CliRunner

    from reconciler.cli import main

    path = tmp_path / "state.json"
    three_versions(lambda: LocalFileStore(path))

    def cli(*args: str):
        return CliRunner().invoke(main, ["--state", str(path), "state", *args])

    res = cli("history")
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    # What a state file does not record is said, not shown as "-": it keeps no author nor
    # operation per version, and the backup's time is unknown.
    assert lines[0].split() == ["SERIAL", "WHEN", "WORKLOADS"]
    assert [ln.split()[0] for ln in lines[1:3]] == ["3", "2"]
    assert lines[2].split() == ["2", "not", "recorded", "2"]
    assert " - " not in res.output
    assert ("A state file keeps one previous version (its .backup; when that version was "
            "written is not recorded), and records neither who wrote a version nor with "
            "which command") in res.output
    res = cli("restore", "2")
    assert res.exit_code == 0 and "Restored serial 2 (2 workloads) as serial 4" in res.output
    res = cli("restore", "1")
    assert res.exit_code == 1
    assert "keeps no version with serial 1 (it keeps the state and the one before it: " \
           "serials 4, 3)" in res.output
    res = cli("migrate", "--to-name", "x")
    assert res.exit_code == 1 and "--to-name selects a state in a PostgreSQL --to" in res.output
