"""One workload's status in a watch cycle, worked out from the cycle's facts (pure).

`status_of` takes the plan's change for the address, this cycle's outcome of its action
(if any), what held the action back (`watch.modes.Selection`), its live body, the GPUs it
holds, and what the last cycles left of it (its last action's error, its last sync and
health and since when); it returns its `status.WorkloadStatus` and what the next cycle
keeps (`Worked`). The sync and health words are `watch.health`'s.

Caller: `operations.reporting.Report`, which keeps what cycles leave and logs the changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from reconciler import gpus
from reconciler.plans import Action, ResourceChange
from reconciler.watch import health, status
from reconciler.watch.modes import Selection

# The health of a workload an action of this cycle moved (its live body predates it).
MOVES = {
    Action.CREATE: (status.PROGRESSING, "created, awaiting the next cycle"),
    Action.REPLACE: (status.PROGRESSING, "replaced, awaiting the next cycle"),
    Action.RESUME: (status.PROGRESSING, "resumed, awaiting the next cycle"),
    Action.SUSPEND: (status.SUSPENDED, None),
}


class Outcome(Protocol):
    """The result of this cycle's action on it (`executor.Outcome`)."""
    ok: bool
    message: str | None
    status: str


Seen = tuple[str, str, float]  # (sync, health, since when: epoch seconds)


@dataclass(frozen=True)
class Worked:
    """`status`: the workload's status; `done`: this cycle's action on it as counted,
    `<action>/<ok|failed|skipped|deferred>` (None: none); `healed`: drift it undid this
    cycle; `error`: its last action's error, kept while it is not in sync (None: none);
    `seen`: its sync, health and since when, for the next cycle."""
    status: status.WorkloadStatus
    done: str | None
    healed: bool
    error: str | None
    seen: Seen


def status_of(change: ResourceChange, *, outcome: Outcome | None, selection: Selection,
              live: Mapping[str, Mapping[str, Any] | None] | None,
              held: gpus.Gpus | None, last_error: str | None, last_seen: Seen | None,
              now: float) -> Worked:
    """The status of `change.address` this cycle. `live`: the cycle's live bodies by
    address (None: not refreshed; an address absent from it was vouched for by the list,
    its phase the plan's `live_phase`); `held`: the GPUs it holds (the plan's impact);
    `last_error`, `last_seen`: what the last cycles left of it; `now`: this cycle's time."""
    address = change.address
    acted = outcome is not None and outcome.ok
    drifting = health.is_healing(change)
    error = last_error
    done = None
    if outcome is not None:
        if change.action is not Action.NOOP:
            done = f"{change.action.value}/{'ok' if outcome.ok else 'failed'}"
        error = None if outcome.ok else (outcome.message or outcome.status)
    elif change.action is not Action.NOOP and address in selection.blocked:
        done = (f"{change.action.value}/deferred" if address in selection.deferred
                else f"{change.action.value}/skipped")
    sync, why = health.sync_of(change, acted=acted, error=error)
    blocked = selection.blocked.get(address) if not acted else None
    if sync == status.SYNCED:
        error = blocked = None
    elif blocked is not None and sync != status.FAILED:
        if address in selection.deferred:
            why = f"{why}; deferred: over --max-actions this cycle"
        else:
            why = f"{why}; not done: {selection.skipped[address]}"
    body = live.get(address) if live else None
    if body is None and live is not None and address not in live:
        # Vouched for by the workload list (--refresh=auto): not read, but listed in this
        # phase, which the plan carries (none for an item that has none: an organisation
        # unit, an access rule, a policy, as when it is read).
        body = {"actualPhase": change.live_phase}
    state_health, health_why = health.health_of(change.kind, body)
    if body is None and change.reason == "completed":
        state_health, health_why = status.HEALTHY, "completed, then removed"
    if acted and change.action in MOVES:  # live was read before the action
        state_health, health_why = MOVES[change.action]
    same = last_seen is not None and last_seen[:2] == (sync, state_health)
    since = last_seen[2] if same else now
    return Worked(
        status=status.WorkloadStatus(
            address=address, kind=change.kind, project=change.project_id, name=change.name,
            sync=sync, health=state_health, phase=body.get("actualPhase") if body else None,
            gpus=gpus_text(held) if held is not None else None, reason=why or health_why,
            error=error if sync == status.FAILED else None, changed_at=since, acted=done,
            drift_found=drifting, blocked_by=blocked),
        done=done, healed=acted and drifting, error=error, seen=(sync, state_health, since))


def gpus_text(g: gpus.Gpus) -> str:
    """GPUs as the plan renders them: "8", "2..6", "4 + unknown"."""
    def num(x: float) -> str:
        return f"{x:g}"
    out = num(g.low) if not g.is_range else f"{num(g.low)}..{num(g.high)}"
    return f"{out} + unknown" if g.unknown else out
