"""What a workload's phases mean to the engine, defined once (pure).

The API reports two phases (CONTRACT.md §4): `desiredPhase` (Running, Stopped, Deleted:
what was asked) and `actualPhase` (Creating, Running, Stopping, Stopped, Completed,
Deleting, ...: what is). The engine cares about three facts, answered here for a live
GET body and, where the state records them, for a state record:

- suspended: asked to stop, or stopped or stopping;
- completed: a training that ran to its end (it may be auto-deleted afterwards);
- gone: being deleted (desiredPhase Deleted, actualPhase Deleting): for planning it no
  longer exists.

Every other phase (Creating, Initializing, Pending, Resuming, Updating, ...) is
transitional or running: it moves on its own and causes no action.
Callers: planner, drift, planfile (fingerprints), refresh, executor, render.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.state.model import ResourceState

RUNNING = "Running"  # desiredPhase: run (the default of a spec)
STOPPED = "Stopped"  # desiredPhase: suspended
DELETED = "Deleted"  # desiredPhase: being deleted
COMPLETED = "Completed"  # actualPhase of a finished training
STOPPING = "Stopping"  # actualPhase: on its way to Stopped (what a suspend starts)
RESUMING = "Resuming"  # actualPhase: on its way back to Running (what a resume starts)
SUSPENDED = frozenset({"Stopped", STOPPING})  # actualPhase of a suspended workload


def live_suspended(live: Mapping[str, Any]) -> bool:
    """The live workload is suspended, or on its way there."""
    return live.get("desiredPhase") == STOPPED or live.get("actualPhase") in SUSPENDED


def live_completed(live: Mapping[str, Any]) -> bool:
    return live.get("actualPhase") == COMPLETED


def live_gone(live: Mapping[str, Any]) -> bool:
    """The live workload is being deleted: gone as far as planning goes."""
    return live.get("desiredPhase") == DELETED


def state_completed(rs: ResourceState) -> bool:
    """The state saw this workload complete (so its disappearance is no drift)."""
    return rs.completed or rs.last_phase == COMPLETED


def state_suspended(rs: ResourceState) -> bool:
    """The state says we last asked for it to be suspended."""
    return rs.desired_phase == STOPPED
