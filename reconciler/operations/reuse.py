"""What a caller that plans again and again keeps from one plan to the next (`Reuse`):
the watch's cycles over an unchanged fleet neither read the quotas again nor plan again.

Callers: the package's `watching` (one `Reuse` per watch), and `planning.make_plan`, which
takes it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from reconciler.plans import Plan
from reconciler.state.model import State


class Reuse:
    """What a caller that plans again and again with the same options (watch) keeps from
    one plan to the next:

    - `projects`: the project reads (quota, name) that succeeded, used instead of reading
      them again (the caller empties it when it wants them read afresh);
    - the last plans and their inputs: the planner is pure, so when the specs and the
      state are the very objects a kept plan was made from (the caller re-reads neither
      when they did not change) and live, the list's vouchers and the open intents are
      equal to its, that plan is the answer, not made again. Two are kept, so that an auto
      refresh after a full one finds the plan of the auto refresh before it."""

    KEPT = 2

    def __init__(self) -> None:
        self.projects: dict[str, Any] = {}
        self._kept: list[tuple[tuple, Plan]] = []  # (inputs, plan), the latest first

    def plan(self, make: Callable[[], Plan], desired, state: State, live: dict,
             listed: dict, interrupted_: Collection[str]) -> Plan:
        for i, (inputs, plan) in enumerate(self._kept):
            if inputs[1] is state and len(inputs[0]) == len(desired) \
                    and all(a is b for a, b in zip(inputs[0], desired)) \
                    and inputs[2:] == (live, listed, frozenset(interrupted_)):
                self._kept.insert(0, self._kept.pop(i))
                return plan
        plan = make()
        # Copies: the caller goes on to change its dicts (a second plan after the GETs).
        inputs = (list(desired), state, dict(live), dict(listed), frozenset(interrupted_))
        self._kept = [(inputs, plan), *self._kept][:self.KEPT]
        return plan
