"""Which of a plan's changes a watch cycle performs, by mode, and the cap (pure).

- `report`: none (it records and alerts what differs);
- `heal`: only the changes that undo drift (`health.is_healing`: an out-of-band PATCH,
  suspend, resume or deletion undone); spec changes stay OutOfSync for `apply`;
- `sync`: every change of the plan, deletions only with `prune` (Argo CD's default), and
  the state-only no-ops (adoptions, lifecycle flags).
Then the deny rules of the policy (`denied`: address -> why) skip what they name, and at
most `max_actions` API actions are taken, in address order; the rest wait for the next
cycle (`deferred`).
Callers: `operations.watching`, tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from reconciler.plans import Action, Plan, ResourceChange
from reconciler.watch import health

REPORT = "report"
HEAL = "heal"
SYNC = "sync"
MODES = (REPORT, HEAL, SYNC)


@dataclass
class Selection:
    take: list[ResourceChange] = field(default_factory=list)  # to perform, address order
    skipped: dict[str, str] = field(default_factory=dict)  # address -> why not (mode, policy)
    deferred: list[str] = field(default_factory=list)  # over the cap: the next cycle's

    @property
    def actions(self) -> int:
        """API actions among `take` (state-only no-ops are not counted against the cap)."""
        return sum(c.action is not Action.NOOP for c in self.take)


def wanted(change: ResourceChange, mode: str, *, prune: bool = False) -> str | None:
    """None when `mode` performs `change`; else why not (in the words status shows)."""
    if not change.changes_state:
        return "nothing to do"
    if mode == REPORT:
        return "report mode makes no change"
    if mode == HEAL:
        if health.is_healing(change):
            return None
        return "a spec change: left to a reviewed apply (heal mode undoes drift only)"
    if change.action is Action.DELETE and not prune:
        return "a deletion: sync mode deletes only with --prune"
    return None


def select(plan: Plan, mode: str, *, prune: bool = False, max_actions: int,
           denied: Mapping[str, str] | None = None) -> Selection:
    """What a cycle performs of `plan` (see the module's docstring)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}")
    out = Selection()
    denied = denied or {}
    for change in sorted(plan.changes, key=lambda c: c.address):
        why = wanted(change, mode, prune=prune)
        if why is not None:
            if change.changes_state:
                out.skipped[change.address] = why
            continue
        if change.address in denied:
            out.skipped[change.address] = denied[change.address]
            continue
        if change.action is not Action.NOOP and out.actions >= max_actions:
            out.deferred.append(change.address)
            continue
        out.take.append(change)
    return out


def candidates(plan: Plan, mode: str, *, prune: bool = False) -> list[ResourceChange]:
    """The changes `mode` would perform before policy and the cap (what the policy judges)."""
    return [c for c in plan.changes if wanted(c, mode, prune=prune) is None]


def denied_by(violations: Sequence[tuple[str, str]],
              chosen: Sequence[ResourceChange]) -> dict[str, str]:
    """address -> the first deny message naming it, from `violations` ((address, message)
    of the failed deny rules): a workload's address skips it; `project <id>` skips the
    chosen changes of that project; anything else (`plan`) skips them all."""
    out: dict[str, str] = {}
    addresses = {c.address for c in chosen}
    for where, message in violations:
        if where in addresses:
            hit = [where]
        elif where.startswith("project "):
            pid = where.split(" ", 2)[1]
            hit = [c.address for c in chosen if c.project_id == pid]
        else:
            hit = sorted(addresses)
        for address in hit:
            out.setdefault(address, f"denied by policy: {message}")
    return out
