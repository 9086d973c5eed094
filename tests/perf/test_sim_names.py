"""The simulator's store answers "is this name taken in this project?" from an index
(a create must not scan every workload): the answers follow adds, deletions that
settle, and records placed in `live` directly."""

from __future__ import annotations

from reconciler.simulator.store import DELETE_PHASES, Record, Store


def _rec(wid: str, project: str, name: str) -> Record:
    return Record(kind="distributed", body={"workloadId": wid, "projectId": project, "name": name},
                  phases=["Running"], since=0.0, created=0.0, updated=0.0)


def test_names_follow_adds_deletions_and_direct_changes():
    store = Store(clock=lambda: 10.0)
    a = _rec("1", "7", "bert")
    store.add(a)
    store.add(_rec("2", "8", "bert"))
    assert store.name_taken("7", "bert") and store.name_taken("8", "bert")
    assert not store.name_taken("7", "gpt")
    store.transition(a, DELETE_PHASES)
    store.settle()  # phase_seconds 0: gone at once
    assert not store.name_taken("7", "bert") and store.name_taken("8", "bert")
    store.live["3"] = _rec("3", "7", "gpt")
    assert store.name_taken("7", "gpt")
    store.clear()
    assert not store.name_taken("8", "bert") and not store.name_taken("7", "gpt")
