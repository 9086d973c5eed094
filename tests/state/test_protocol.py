"""The `StateStore` Protocol is the whole interface: a backend that has exactly its
members works with every command that reads or writes the state (docs/state-backends.md,
"Adding a backend")."""

from __future__ import annotations

import httpx
import pytest

from reconciler import operations
from reconciler.api import RunaiClient
from reconciler.plans import Action
from reconciler.simulator import DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, create_app
from reconciler.state import MemoryStore, StateStore
from tests.helpers.specs import training_doc


def protocol_members() -> set[str]:
    """The attributes and methods the Protocol's body declares."""
    return set(StateStore.__annotations__) | {
        name for name, value in vars(StateStore).items()
        if callable(value) and not name.startswith("_")}


class OnlyTheProtocol:
    """A backend offering the Protocol's members and nothing more (a MemoryStore inside):
    a member the engine uses but the Protocol does not name is an AttributeError here."""

    def __init__(self, inner: MemoryStore):
        object.__setattr__(self, "_inner", inner)

    def __getattr__(self, name: str):
        if name not in protocol_members():
            raise AttributeError(f"{name} is not a StateStore member")
        return getattr(self._inner, name)


def test_the_protocol_names_what_the_engine_reads_beside_the_methods():
    assert {"where", "journal_where", "has_journal", "keeps_every_version"} <= protocol_members()
    assert isinstance(OnlyTheProtocol(MemoryStore()), StateStore)


@pytest.fixture
def sim():
    app = create_app()

    def connect():
        return RunaiClient("http://sim", client_id=DEFAULT_CLIENT_ID,
                           client_secret=DEFAULT_CLIENT_SECRET,
                           transport=httpx.ASGITransport(app=app))

    return connect


def test_every_state_command_runs_on_a_store_with_only_the_protocols_members(tmp_path, sim):
    (tmp_path / "a.yaml").write_text(training_doc("a"))
    (tmp_path / "b.yaml").write_text(training_doc("b"))
    backing = MemoryStore()

    def store() -> OnlyTheProtocol:  # each command a process of its own, as from the CLI
        return OnlyTheProtocol(backing.peer())

    options = operations.PlanOptions()
    done = operations.apply(str(tmp_path), store(), sim, options, approve=lambda plan: True)
    assert done.count(Action.CREATE) == 2 and not done.failed
    assert not operations.plan(str(tmp_path), store(), sim, options).plan.has_changes
    assert not operations.drift(str(tmp_path), store(), sim, parallelism=4).has_drift
    assert [a for a, *_ in operations.state_list(store())] == ["DistributedTraining/7/a",
                                                               "DistributedTraining/7/b"]
    assert not operations.never_written(store())
    operations.state_rm(store(), ["DistributedTraining/7/a"])
    # The apply wrote once (its actions with the list fingerprints of what it touched),
    # state rm once.
    assert [v.serial for v in operations.state_history(store())] == [2, 1]
    assert operations.state_restore(store(), 1).serial == 3
    assert store().keeps_every_version is False
    target = MemoryStore()
    target.where = "(another memory)"
    assert operations.state_migrate(store(), OnlyTheProtocol(target)).copied
