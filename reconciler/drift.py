"""Drift: how live workloads differ from what the state says was applied (pure).

Called by `operations.drift` after a refresh-only read of live. It compares live
(R) with the state (L) only, never the specs: a path drifted when R differs from the last
applied body (server defaults and server-owned fields aside, as in `diff`), a workload
drifted when it was suspended or resumed outside, or deleted outside without having
completed. What live holds that the state does not, and the server did not put there (an
environment variable, `args`), is drift too: added outside (`DriftedPath.added`). Paths the spec lists under `lifecycle.ignoreChanges` are not drift.

A workload gone from live while the journal holds an open intent to delete or create
it (a replace is both) was being changed by an apply that was killed or abandoned: it is
reported apart, as an interrupted apply, not as drift; `plan` shows the action that
finishes it (reason `interrupted_apply`).

Where the specs differ from the state is reported beside it as pending changes: the
`plan --no-refresh` of the same inputs, which is not drift (git changed, live did not).
Each drifted workload carries the GPUs it holds as applied and live (`gpus.held`), so a
report can say how many GPUs drift took or freed.
Renderers: `render.drift` (text, json) and `render.markdown.render_drift`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler import diff, errors, gpus, kinds, phases, planner, plans
from reconciler.desired.types import DesiredWorkload
from reconciler.state.model import State

DRIFT = plans.REASON_DRIFT
PHASE_DRIFT = plans.REASON_PHASE_DRIFT
DELETED_OUTSIDE = plans.REASON_DELETED_OUTSIDE
INTERRUPTED = plans.REASON_INTERRUPTED


@dataclass
class DriftedPath:
    path: str
    state: Any  # the value last applied (None when absent)
    live: Any  # the value live now (None when absent)
    # Live alone holds it and the server did not put it there: added outside.
    added: bool = False


@dataclass
class DriftedWorkload:
    address: str
    kind: str
    name: str
    project_id: str
    workload_id: str | None
    reason: str  # DRIFT (fields, maybe the phase too), PHASE_DRIFT, DELETED_OUTSIDE; INTERRUPTED
    paths: list[DriftedPath] = field(default_factory=list)
    sensitive: tuple[str, ...] = ()  # the spec's lifecycle.sensitive, for masking
    gpus_state: gpus.Gpus = gpus.NONE  # what it holds as last applied (`gpus.held`)
    gpus_live: gpus.Gpus = gpus.NONE  # what it holds live (nothing once deleted)
    manifest_kind: str | None = None  # a Manifest's own kind (`PyTorchJob`), as applied


@dataclass
class DriftReport:
    drifted: list[DriftedWorkload]  # sorted by address
    pending: plans.Plan | None  # the specs against the state; None when it cannot be made
    pending_error: str | None = None  # why not (e.g. a protected workload's spec removed)
    lineage: str | None = None
    serial: int | None = None
    # Gone while an apply that did not finish was deleting or creating them (not drift).
    interrupted: list[DriftedWorkload] = field(default_factory=list)

    @property
    def has_drift(self) -> bool:
        return bool(self.drifted)

    def gpus_moved(self) -> tuple[gpus.Gpus, gpus.Gpus]:
        """(GPUs taken, GPUs freed) by drift, summed over the drifted workloads at each end
        (`low`: the fewest pods, `high`: the most): what live holds beyond what was
        applied, and short of it. `1..6 -> 2..12` took 1 at the fewest pods, 6 at the most."""
        deltas = [gpus.difference(item.gpus_state, item.gpus_live) for item in self.drifted]

        def total(sign: int, end: int) -> float:
            return gpus.tidy(sum(sign * d[end] for d in deltas if sign * d[end] > 0))
        return (gpus.Gpus(total(1, 0), total(1, 1)), gpus.Gpus(total(-1, 0), total(-1, 1)))

    def pending_changes(self) -> list[plans.ResourceChange]:
        """The specs' changes to apply: actions, and lifecycle flags only the state records."""
        return [c for c in self.pending.changes if c.changes_state] if self.pending else []


def find_drift(desired: list[DesiredWorkload], state: State,
               live: Mapping[str, dict | None], *,
               interrupted: Collection[str] = ()) -> DriftReport:
    """The drift of every state address found in `live`, and the pending spec changes.

    `interrupted`: the addresses of the journal's open deletes and creates; those gone
    from live are listed in `DriftReport.interrupted` instead."""
    by_addr = {d.address: d for d in desired}
    drifted, cut_short = [], []
    for addr in sorted(state.resources):
        if addr not in live:
            continue
        rs = state.resources[addr]
        if rs.kind not in kinds.KINDS:
            continue
        if addr in interrupted and live[addr] is None:
            cut_short.append(DriftedWorkload(addr, rs.kind, rs.name, rs.project_id,
                                             rs.workload_id, INTERRUPTED,
                                             manifest_kind=kinds.label(rs.kind, rs.applied)))
            continue
        if not rs.workload_id:
            continue
        dw = by_addr.get(addr)
        item = _one(addr, rs, live[addr], dw, state.secret_key())
        if item is not None:
            drifted.append(item)
    pending, pending_error = None, None
    try:
        pending = planner.make_plan(desired, state, {}, interrupted=interrupted)
    except errors.PlanError as exc:
        pending_error = str(exc)
    return DriftReport(drifted=drifted, pending=pending, pending_error=pending_error,
                       lineage=state.lineage, serial=state.serial, interrupted=cut_short)


def _one(addr: str, rs, live_body: dict | None, dw: DesiredWorkload | None,
         key: bytes | None = None) -> DriftedWorkload | None:
    kind = kinds.get(rs.kind)
    completed = phases.COMPLETED if phases.state_completed(rs) else rs.last_phase
    item = DriftedWorkload(address=addr, kind=rs.kind, name=rs.name, project_id=rs.project_id,
                           workload_id=rs.workload_id, reason=DRIFT,
                           sensitive=tuple(dw.lifecycle.sensitive if dw else rs.sensitive),
                           gpus_state=gpus.held(rs.kind, rs.applied,
                                                desired_phase=rs.desired_phase,
                                                actual_phase=completed),
                           gpus_live=gpus.held(rs.kind, live_body),
                           manifest_kind=kinds.label(rs.kind, rs.applied, live_body))
    if live_body is None:
        if phases.state_completed(rs):
            return None  # a finished training that was cleaned up
        item.reason = DELETED_OUTSIDE
        return item
    ignore = dw.lifecycle.ignore_changes if dw else ()
    # With desired = applied, every difference the diff finds is R != L: drift.
    # The state holds sensitive values as keyed hashes: live's are compared hashed alike.
    live_, = planner.hashed_alike(key, (*rs.sensitive, *(dw.lifecycle.sensitive if dw else ())),
                                  rs.applied, live_body)
    for c in diff.diff_workload(kind, rs.applied, rs.applied, live_, ignore=ignore):
        item.paths.append(DriftedPath(c.path, state=c.after, live=c.before, added=c.added))
    if kind.can_suspend and not phases.live_completed(live_body) \
            and not diff.is_ignored("desiredPhase", ignore):
        suspended = phases.live_suspended(live_body)
        if suspended != phases.state_suspended(rs):
            item.paths.append(DriftedPath("desiredPhase", state=rs.desired_phase,
                                          live=phases.STOPPED if suspended else phases.RUNNING))
            if len(item.paths) == 1:
                item.reason = PHASE_DRIFT
    return item if item.paths else None
