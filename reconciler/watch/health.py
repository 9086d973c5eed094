"""A workload's health and sync status, from its live body, its kind and its plan change
(pure). docs/watch.md has both tables.

Health, from the live `actualPhase` (and `desiredPhase`) and the kind:
- Healthy: Running; Completed for a kind that runs to completion (a training);
- Progressing: Creating, Initializing, Pending, Resuming, Updating (moving on its own);
- Suspended: Stopped, Stopping, or asked to stop;
- Degraded: Failed, Degraded (the API's word for repeated restarts and for an Inference
  below its minimum replicas), Unknown, Completed for a kind that should not complete,
  or fewer running pods than the spec's `autoscaling.minReplicas` where the body says how
  many run (`runningPods`, as the workloads list gives it);
- Missing: no live workload, or one being deleted (Deleting, Terminating).
A resource that is no workload (an organisation unit, an access rule, a Run:ai policy:
`Kind.listed` false) runs nothing: it is Healthy once it exists, when its type reports
no phase (a department, a policy) or reports Ready (a project), Degraded when NotReady,
Progressing while Creating, Initializing or Updating.

Sync, from the plan's change for the address and what the loop did with it:
- Synced: nothing to do;
- OutOfSync: the spec changed (new, changed, removed, phase asked): left to `apply`
  in heal mode;
- Drifted: live moved away from what was applied while the spec did not;
- Healing: an action for it succeeded this cycle (the next cycle confirms it);
- Failed: its last action failed (the error says why) and it is still not in sync.
Callers: `operations.watching` (one `WorkloadStatus` per address a cycle), tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler import kinds, phases, plans
from reconciler.plans import Action, ResourceChange
from reconciler.render import words
from reconciler.watch import status

PROGRESSING_PHASES = frozenset({"Creating", "Initializing", "Pending", "Resuming", "Updating"})
DEGRADED_PHASES = frozenset({"Failed", "Degraded", "Unknown", "NotReady"})
GONE_PHASES = frozenset({"Deleting", "Terminating"})
# A project's (and an access rule's) phase once it is there (CONTRACT.md §13).
READY = "Ready"


def health_of(kind_name: str, live: Mapping[str, Any] | None) -> tuple[str, str | None]:
    """(health, why) for a workload of `kind_name` whose live GET body is `live` (None:
    not found). `why` names the phase when it is not plainly Healthy."""
    if live is None:
        return status.MISSING, "not found live"
    phase = live.get("actualPhase") or live.get("phase")
    if phases.live_gone(live) or phase in GONE_PHASES:
        return status.MISSING, f"being deleted (phase {phase or 'Deleting'})"
    if phases.live_suspended(live):
        return status.SUSPENDED, None
    if not phase or phase == READY:
        kind = kinds.KINDS.get(kind_name)
        if kind is not None and not kind.listed:  # no workload: it exists, it runs nothing
            return status.HEALTHY, None
    if phase == phases.COMPLETED:
        try:
            completes = kinds.get(kind_name).runs_to_completion(live)
        except (KeyError, ValueError):
            completes = False
        if completes:
            return status.HEALTHY, None
        return status.DEGRADED, "phase Completed, for a kind that serves until stopped"
    if phase in DEGRADED_PHASES:
        return status.DEGRADED, f"phase {phase}"
    if phase in PROGRESSING_PHASES:
        return status.PROGRESSING, f"phase {phase}"
    if phase == phases.RUNNING:
        short = _below_min_replicas(live)
        if short:
            return status.DEGRADED, short
        return status.HEALTHY, None
    return status.PROGRESSING, f"phase {phase}" if phase else "no phase reported yet"


def _below_min_replicas(live: Mapping[str, Any]) -> str | None:
    running = live.get("runningPods")
    spec = live.get("spec") if isinstance(live.get("spec"), Mapping) else {}
    scaling = spec.get("autoscaling") if isinstance(spec.get("autoscaling"), Mapping) else {}
    least = scaling.get("minReplicas")
    if isinstance(running, int) and isinstance(least, int) and running < least:
        return f"{running} running pods, below minReplicas {least}"
    return None


def is_healing(change: ResourceChange) -> bool:
    """The change undoes drift only: live moved (an out-of-band PATCH, suspend, resume or
    deletion) while the spec stayed as applied."""
    if not change.is_drift or change.action is Action.NOOP:
        return False
    return all(c.drift for c in change.changes)


def drift_words(change: ResourceChange) -> str:
    """What moved outside, in words for the status and the alerts, values masked as in a
    plan: `spec.replicas changed outside: 2 -> 5 live`, `suspended outside`,
    `deleted outside`."""
    if change.reason == plans.REASON_DELETED_OUTSIDE:
        return "deleted outside"
    if change.reason == plans.REASON_PHASE_DRIFT:
        return "suspended outside" if change.action is Action.RESUME else "resumed outside"
    drifted = [c for c in change.changes if c.drift]
    if not drifted:
        return f"{change.action.value} ({change.reason})"
    first = drifted[0]
    if first.added:
        text = (f"{first.path} added outside: "
                f"{words.shown(first.path, first.before, change.sensitive)} live")
        return text + (f" (and {len(drifted) - 1} more)" if len(drifted) > 1 else "")
    # A drift's change goes from live (`before`) to the spec, which is what was applied.
    text = (f"{first.path} changed outside: "
            f"{words.shown(first.path, first.after, change.sensitive)} -> "
            f"{words.shown(first.path, first.before, change.sensitive)} live")
    return text + (f" (and {len(drifted) - 1} more)" if len(drifted) > 1 else "")


def sync_of(change: ResourceChange | None, *, acted: bool = False, error: str | None = None,
            ) -> tuple[str, str | None]:
    """(sync, why) for the plan's `change` (None: the address is in no spec or state any
    more). `acted`: an action for it succeeded this cycle; `error`: its last action
    failed with this (masked) error and it is still not in sync."""
    if change is None or (change.action is Action.NOOP and not change.changes_state):
        return status.SYNCED, None
    drift = is_healing(change)
    if acted:
        if drift:
            return status.HEALING, f"{drift_words(change)}; {change.action.value} sent to undo it"
        return status.HEALING, f"{change.action.value} done, awaiting the next cycle"
    if error is not None:
        return status.FAILED, error
    if change.action is Action.NOOP:  # an adoption or a lifecycle flag for the state
        return status.OUT_OF_SYNC, f"state only ({change.reason})"
    if drift:
        return status.DRIFTED, f"{drift_words(change)}: {change.action.value} to undo it"
    return status.OUT_OF_SYNC, f"{change.action.value} ({change.reason})"
