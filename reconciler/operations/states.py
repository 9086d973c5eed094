"""The state commands: `state list|show|rm|history|restore|migrate` and `force-unlock`,
and the checks other operations share (`never_written`, `refuse_pending`).

Callers: `reconciler.cli` (through `reconciler.operations`), the package's `drifting`
and `importing`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reconciler import errors
from reconciler.state.model import ResourceState, State


def state_list(store) -> list[tuple[str, str | None, str | None]]:
    """(address, project name or None, a Manifest's own kind or None) of each workload the
    state tracks, sorted."""
    from reconciler import kinds

    return [(a, r.project_name, kinds.label(r.kind, r.applied))
            for a, r in sorted(store.read().resources.items())]


def never_written(store, state: State | None = None) -> bool:
    """No state at the store: nothing was ever written there, nor journaled (`state`: the
    store's, when the caller has read it already)."""
    state = store.read() if state is None else state
    return not state.resources and state.serial == 0 and not store.has_journal()


def _check_address(address: str) -> None:
    """A malformed address is said as such, not as one the state lacks."""
    from reconciler import kinds

    try:
        kinds.parse_address(address)
    except ValueError as exc:
        raise errors.ReconcileError(str(exc)) from None


def state_show(store, address: str) -> ResourceState:
    _check_address(address)
    res = store.read().resources.get(address)
    if res is None:
        raise errors.ReconcileError(f"no such address in the state: {address}")
    return res


def state_rm(store, addresses: Sequence[str]) -> list[str]:
    """Forget `addresses` (all or none) without touching the workloads; returns them."""
    for a in addresses:
        _check_address(a)
    with store.lock("state rm"):
        state = store.read()
        missing = [a for a in addresses if a not in state.resources]
        if missing:
            raise errors.ReconcileError("no such address in the state: " + ", ".join(missing))
        for a in addresses:
            del state.resources[a]
        store.write(state)
    return list(addresses)


def force_unlock(store, lock_id: str):
    """Remove the lock `lock_id` whose holder is gone; returns its `LockInfo`."""
    return store.force_unlock(lock_id)


def state_history(store) -> list:
    """The versions the store keeps, newest first (`state.store.Version`)."""
    return store.history()


def refuse_pending(store, pending: list, doing: str) -> None:
    if pending:
        raise errors.ReconcileError(
            f"{store.where} has {len(pending)} action(s) of an interrupted apply still open "
            f"in its journal; run apply first (it looks them up and records them), then "
            f"{doing}")


def state_restore(store, serial: int) -> State:
    """Write the kept version `serial` again, as a new serial, under the lock (the way
    back after a wrong `state rm`); the workloads are not touched. Returns it as written."""
    with store.lock(f"state restore {serial}"):
        current, pending = store.read_with_pending()
        refuse_pending(store, pending, "restore")
        if serial == current.serial:
            raise errors.ReconcileError(f"serial {serial} is the current version of "
                                        f"{store.where}; nothing to restore")
        old = store.read_version(serial)
        if old.lineage != current.lineage:
            raise errors.ReconcileError(
                f"serial {serial} of {store.where} belongs to another lineage "
                f"({old.lineage}) than the current state ({current.lineage})")
        old.serial = current.serial
        store.write(old, force=True)
    return old


@dataclass
class Migrated:
    state: State  # as the target holds it now
    copied: bool  # False when the target held this very version already


def state_migrate(source, target) -> Migrated:
    """Copy the source's current state to `target`, serial and lineage kept, with an empty
    journal; the source is left as it was. Both locks are held while it copies.

    Refused: a source with journal intents still open (apply first), a source with no
    state, a target holding a state of another lineage, or a newer or different version
    of this one."""
    if source.where == target.where:
        raise errors.ReconcileError(f"the target is the source ({source.where}): give "
                                    "another --to or --to-name")
    with source.lock("state migrate"), target.lock("state migrate"):
        state, pending = source.read_with_pending()
        refuse_pending(source, pending, "migrate")
        if state.serial == 0 and not state.resources:
            raise errors.ReconcileError(f"no state at {source.where}: nothing to migrate")
        there, theirs = target.read_with_pending()
        if there.serial or there.resources or theirs:
            if there.lineage != state.lineage:
                raise errors.ReconcileError(
                    f"refusing to migrate: {target.where} holds a state of another lineage "
                    f"({there.lineage}, serial {there.serial}) than {source.where} "
                    f"({state.lineage}); give another --to or --to-name")
            refuse_pending(target, theirs, "migrate")
            if there.serial == state.serial and there.same_content(state):
                return Migrated(there, copied=False)
            if there.serial >= state.serial:
                raise errors.ReconcileError(
                    f"refusing to migrate: {target.where} holds serial {there.serial} of this "
                    f"state, newer than (or different from) serial {state.serial} at "
                    f"{source.where}")
        copy = state.copy()
        copy.serial = state.serial - 1  # a write raises it: the target keeps the serial
        target.write(copy, force=True)
    return Migrated(copy, copied=True)
