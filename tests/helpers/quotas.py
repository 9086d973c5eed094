"""Organisation units as plan changes, for the quota tests on built plans (tests/engine,
tests/policy, tests/render): `unit` (a Project's or a Department's change, its quotas per
node pool given as `{pool: (deserved, limit)}`)."""

from __future__ import annotations

from reconciler.plans import Action, ResourceChange
from tests.helpers.constants import CLUSTER

Pools = dict[str, tuple[float | None, float | None]]


def body(kind: str, name: str, pools: Pools | None, department: str | None = None) -> dict | None:
    """A unit's flat body (the spec's shape) with these quotas; None for no pools."""
    if pools is None:
        return None
    out: dict = {"name": name, "clusterId": CLUSTER, "resources": {
        pool: {"gpu": {k: v for k, v in (("deserved", d), ("limit", lim)) if v is not None}}
        for pool, (d, lim) in pools.items()}}
    if department is not None:
        out["department"] = department
    return out


def unit(name: str, before: Pools | None, after: Pools | None, *, kind: str = "Project",
         action: Action = Action.UPDATE, unit_id: str | None = "7",
         department: str | None = None) -> ResourceChange:
    """The change of the unit `name` of `kind` (id `unit_id`, None when the plan creates
    it) from the quotas `before` (None: none live) to `after` (None: deleted)."""
    return ResourceChange(
        address=f"{kind}/{CLUSTER}/{name}", kind=kind, name=name, project_id=CLUSTER,
        action=action, reason="spec_changed" if action is Action.UPDATE else "new",
        workload_id=unit_id, before=body(kind, name, before, department),
        after=body(kind, name, after, department),
        desired_phase=None if after is None else "Running")
