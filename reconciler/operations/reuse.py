"""What a caller that plans again and again keeps from one plan to the next: the watch's
cycles over an unchanged fleet neither read the quotas again nor plan again, nor work out
again what depends only on the specs and the state (`Reuse`), nor read the state again,
and they remember the list fingerprints of the workloads they found unchanged
(`StateReads`).

Callers: the package's `watching` (one of each per watch), and `planning.make_plan`, which
takes a `Reuse`.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection
from typing import Any, TypeVar

from reconciler import plans
from reconciler.plans import Action, Plan
from reconciler.state.model import State

T = TypeVar("T")


class Reuse:
    """What a caller that plans again and again with the same options (watch) keeps from
    one plan to the next:

    - `projects`: the project reads (quota, name) that succeeded, used instead of reading
      them again (the caller empties it when it wants them read afresh);
    - the last plans and their inputs: the planner is pure, so when the specs and the
      state are the very objects a kept plan was made from (the caller re-reads neither
      when they did not change) and live, the list's vouchers and the open intents are
      equal to its, that plan is the answer, not made again. Two are kept, so that an auto
      refresh after a full one finds the plan of the auto refresh before it;
    - what `derived` worked out from the specs and the state (each of its names' last)."""

    KEPT = 2

    def __init__(self) -> None:
        self.projects: dict[str, Any] = {}
        self._kept: list[tuple[tuple, Plan]] = []  # (inputs, plan), the latest first
        self._derived: dict[str, tuple[tuple, Any]] = {}  # name -> (inputs, value)

    def derived(self, name: str, inputs: tuple, make: Callable[[], T]) -> T:
        """`make()`, or what it gave the last time `name` was asked for, when `inputs` are
        the very objects they were then: the specs' list and the state, which the caller
        reads again when they changed and otherwise changes in place only in what nothing
        derived reads (a record's list fingerprint, `StateReads`). What it gives is shared
        from one call to the next: read it, never change it."""
        kept = self._derived.get(name)
        if kept is not None and len(kept[0]) == len(inputs) \
                and all(map(operator.is_, kept[0], inputs)):
            return kept[1]
        value = make()
        self._derived[name] = (inputs, value)
        return value

    def plan(self, make: Callable[[], Plan], desired, state: State, live: dict,
             listed: dict, interrupted_: Collection[str]) -> Plan:
        for i, (inputs, plan) in enumerate(self._kept):
            if inputs[1] is state and len(inputs[0]) == len(desired) \
                    and all(map(operator.is_, inputs[0], desired)) \
                    and inputs[2:] == (live, listed, frozenset(interrupted_)):
                self._kept.insert(0, self._kept.pop(i))
                return plan
        plan = make()
        # Copies: the caller goes on to change its dicts (a second plan after the GETs).
        inputs = (list(desired), state, dict(live), dict(listed), frozenset(interrupted_))
        self._kept = [(inputs, plan), *self._kept][:self.KEPT]
        return plan


# The reasons of a no-op whose list fingerprint vouches for it next time (as `apply`'s).
_VOUCHED = (plans.REASON_UNCHANGED, plans.REASON_COMPLETED)


class StateReads:
    """The state and the journal's open intents as a watch's cycles read them: the last
    ones read while the store's version stamp says neither changed (a cycle over an
    unchanged fleet reads nothing of it), else read again; and the list fingerprints of
    the workloads the cycles found unchanged laid on the records of the state kept, as
    `apply` records them (watch writes nothing for them: a state read again has its own)."""

    def __init__(self, store) -> None:
        self.store = store
        self.kept: tuple | None = None  # (the store's version stamp, what it read)
        self._vouched_for: tuple | None = None  # (plan, seen) of the last `vouch` since

    def read(self):
        """(state, open intents)."""
        stamp = self.store.version_stamp()
        if stamp is not None and self.kept is not None and self.kept[0] == stamp:
            return self.kept[1]
        read = self.store.read_with_pending()
        self.kept = (stamp, read) if stamp is not None else None
        self._vouched_for = None
        return read

    def forget(self) -> None:
        """Read the state again next time (it changed while a cycle planned)."""
        self.kept = None

    def vouch(self, the_plan: Plan, seen: dict[str, str]) -> None:
        """Lay on the state kept the list fingerprint of each workload this auto cycle
        found unchanged: a workload whose list entry moved on its own (a phase moving:
        Creating to Running) is read by GET once, not every cycle until the next apply.
        The same plan and fingerprints as the last call on this state: nothing new."""
        last = self._vouched_for
        if self.kept is None or (last is not None and last[0] is the_plan and last[1] == seen):
            return
        records = self.kept[1][0].resources
        for change in the_plan.changes:
            address = change.address
            if change.action is Action.NOOP and not change.changes_state \
                    and change.reason in _VOUCHED and address in seen:
                record = records.get(address)
                if record is not None:
                    record.listed = seen[address]
        self._vouched_for = (the_plan, seen)
