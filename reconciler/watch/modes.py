"""Which of a plan's changes a watch cycle performs, by mode, and the cap (pure).

- `report`: none (it records and alerts what differs);
- `heal`: only the changes that undo drift (`health.is_healing`: an out-of-band PATCH,
  suspend, resume or deletion undone); spec changes stay OutOfSync for `apply`;
- `sync`: every change of the plan, deletions only with `prune` (Argo CD's default), and
  the state-only no-ops (adoptions, lifecycle flags).
Then what blocks an action skips it: a deny rule of the policy (`denied`: address ->
`Block`, made by `denied_by`), `preventDestroy` (`protected`: address -> why); and at most
`max_actions` API actions are taken, in address order (what waits for another change's
outcome last); the rest wait for the next cycle (`deferred`). A change that waits for
another (`known_after`: a workload for its project's create or replacement) is skipped
or deferred with it. `Selection.blocked` names, per address, what held its action back
(the status' `blocked_by`): `policy <rules>`, `preventDestroy`, `--max-actions N`,
`sync without --prune`, or the address of the change it waits for.
Callers: `operations.watching`, tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from reconciler.plans import Action, Plan, ResourceChange
from reconciler.watch import health
# The mode words live with the status contract (a snapshot names its mode); used from here.
from reconciler.watch.status import HEAL, MODES, REPORT, SYNC  # noqa: F401


PRUNE_OFF = "sync without --prune"
PROTECTED = "preventDestroy"


@dataclass(frozen=True)
class Block:
    """A deny of the policy for one address: `label` names the rules (`policy gpu-cap`),
    `why` says what they found."""
    label: str
    why: str


@dataclass
class Selection:
    take: list[ResourceChange] = field(default_factory=list)  # to perform, address order
    skipped: dict[str, str] = field(default_factory=dict)  # address -> why not (mode, policy)
    deferred: list[str] = field(default_factory=list)  # over the cap: the next cycle's
    # address -> what held back an action the mode wanted (see the module's docstring)
    blocked: dict[str, str] = field(default_factory=dict)

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
           denied: Mapping[str, Block] | None = None,
           protected: Mapping[str, str] | None = None) -> Selection:
    """What a cycle performs of `plan` (see the module's docstring)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}")
    out = Selection()
    denied = denied or {}
    protected = protected or {}
    # What waits for another change's outcome (`known_after`) comes after the rest, so
    # that what it waits for is decided first.
    # (A change that changes no state is passed over: `Plan.acting` holds the others.)
    for change in sorted(plan.acting, key=lambda c: (bool(c.known_after), c.address)):
        address = change.address
        why = wanted(change, mode, prune=prune)
        if why is not None:
            if change.changes_state:
                out.skipped[address] = why
                if mode == SYNC and change.action is Action.DELETE:
                    out.blocked[address] = PRUNE_OFF
            continue
        if address in protected:
            out.skipped[address] = f"protected by preventDestroy: {protected[address]}"
            out.blocked[address] = PROTECTED
            continue
        if address in denied:
            out.skipped[address] = denied[address].why
            out.blocked[address] = denied[address].label
            continue
        waits = _not_taken(change, out)
        if waits is not None:
            if waits in out.deferred:  # the cap's delay: it waits with it
                out.deferred.append(address)
                out.blocked[address] = out.blocked[waits]
            else:
                out.skipped[address] = f"waits for {waits}, which this cycle does not act on"
                out.blocked[address] = waits
            continue
        if change.action is not Action.NOOP and out.actions >= max_actions:
            out.deferred.append(address)
            out.blocked[address] = f"--max-actions {max_actions}"
            continue
        out.take.append(change)
    return out


def _not_taken(change: ResourceChange, out: Selection) -> str | None:
    """The change of the plan that `change` takes a value from (`known_after`: a
    workload's projectId, from its project's create or replacement) when the cycle does
    not take it; a change waiting for it is not sent to fail (or, in a replaced project, to
    be taken along with nothing new)."""
    if not change.known_after:  # (most changes: the fleet's workloads)
        return None
    taken = {c.address for c in out.take}
    return next((s for s in change.known_after.values() if s not in taken), None)


def candidates(plan: Plan, mode: str, *, prune: bool = False) -> list[ResourceChange]:
    """The changes `mode` would perform before policy and the cap (what the policy judges)."""
    return [c for c in plan.acting if wanted(c, mode, prune=prune) is None]


def denied_by(violations: Sequence[tuple[str, ...]],
              chosen: Sequence[ResourceChange]) -> dict[str, Block]:
    """address -> its `Block`, from `violations` ((address, message, rule name) of the
    failed deny rules; the name may be left out): a workload's address skips it;
    `project <id>` skips the chosen changes of that project; anything else (`plan`) skips
    them all. The block's `why` is the first message naming it; its label, every rule."""
    messages: dict[str, str] = {}
    rules: dict[str, set[str]] = {}
    addresses = {c.address for c in chosen}
    for where, message, *rule in violations:
        if where in addresses:
            hit = [where]
        elif where.startswith("project "):
            pid = where.split(" ", 2)[1]
            hit = [c.address for c in chosen if c.project_id == pid]
        else:
            hit = sorted(addresses)
        for address in hit:
            messages.setdefault(address, f"denied by policy: {message}")
            rules.setdefault(address, set()).update(r for r in rule if r)
    return {a: Block(label=("policy " + ", ".join(sorted(rules[a]))) if rules[a] else "policy",
                     why=why) for a, why in messages.items()}
