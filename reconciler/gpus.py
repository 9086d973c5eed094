"""GPU accounting (pure): the GPUs a workload holds while running, from its body and phase.

A body is a create body or a live GET body (as a plan change's `before`/`after` hold
them). Per pod (a `compute` object, CONTRACT.md §2, §5, §7):
- `gpuDevicesRequest` whole devices (absent: none);
- portion requests (`gpuRequestType: portion`, or a `gpuPortionRequest` alone): devices ×
  `gpuPortionRequest`, the devices being 1 when absent (0.5 is half a GPU; no portion
  given means whole devices);
- memory requests (`gpuRequestType: memory`, or a `gpuMemoryRequest` alone): their
  devices (1 when absent) as GPUs, and devices × `gpuMemoryRequest` apart as GPU memory.
Pods per kind are its entry's (`kinds.Kind.pods`, in the kind's family): Training and Workspace 1; Inference 1, or
with `autoscaling` minReplicas..maxReplicas (defaults 1 and minReplicas, or 1 when that is
0); DistributedTraining `numWorkers` (1 when absent) workers with `spec.compute` plus one
master with `masterSpec.compute` (`spec.compute` when `masterSpecSameAsWorker`);
DistributedInference `replicas` (default 1) × (leader + `workers` (default 0) × worker);
NIMService `replicas` (default 1), or with `autoscaling` minReplicas..maxReplicas
(defaults 1 and minReplicas), × (1 + `multiNode.workers`) pods of `spec.compute`.
A suspended, deleting or completed (a training run to its end) workload holds nothing.
A count or size that cannot be read (a live body's `lots`, `-8` or `8.5` devices, a
replica count in words, GPU memory that is no quantity) is counted as nothing and makes
the amount `unknown` (`plans.Gpus.unknown`), never 0.
`change_gpus` gives a plan change's GPUs before and after apply, `by_project` a finished
plan's totals per project, `difference` what one amount holds beyond another at each end.
Only a kind whose address holds a project (`kinds.Kind.in_project`) counts toward one.

Quotas: a project the plan holds as a unit (an entry that provides a project's quota,
`kinds.Kind.quota`) gives its quota itself, per node pool, before and after apply
(`plans.PoolQuota`); its workloads are counted against the planned one. The impact lists
the units whose quota the plan changes (`plans.QuotaChange`) and warns
(`plans.QuotaWarning`) of a project's quota lowered below the GPUs its workloads hold and
of a department whose projects of the plan deserve more GPUs in a node pool than it does.

A plan's GPU impact (`plans.GpuImpact`, made by `impact` from the plan and the projects'
GPU quotas; `impact_of(plan)` with the quotas, names and failed reads `operations` put on
it, kept in a saved plan) is made once, when the planning operation finishes the plan,
and carried on it (`Plan.gpu_impact`): the renderers and the policy rules read it there.
Callers: the planning operation (`impact_of`, `quota` of the projects it reads),
`drift` (`held`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from reconciler import kinds, phases, plans
from reconciler.kinds.pods import count as _count
from reconciler.quantities import parse_quantity


# The data the accounting fills in lives in `plans` (a finished plan carries it); named
# here too for this module's callers.
Gpus, NONE, tidy = plans.Gpus, plans.NO_GPUS, plans.tidy
WorkloadGpus, ProjectImpact, GpuImpact = plans.WorkloadGpus, plans.ProjectImpact, plans.GpuImpact


def difference(before: Gpus, after: Gpus) -> tuple[float, float]:
    """What `after` holds beyond `before` (negative: short of it) at each end, the fewest
    pods and the most: `90..100 -> 106..111` is (16, 11). Two numbers, not a range: the
    ends move apart, so the change at the fewest pods may well be the larger."""
    return tidy(after.low - before.low), tidy(after.high - before.high)


def _obj(x: Any) -> Mapping[str, Any]:
    return x if isinstance(x, Mapping) else {}


def per_pod(compute: Mapping[str, Any] | None) -> tuple[float, float, bool]:
    """(GPUs, GPU memory in bytes, whether a value could not be read) of one pod with this
    `compute`; what cannot be read counts nothing."""
    c = _obj(compute)
    devices = c.get("gpuDevicesRequest")
    memory = c.get("gpuMemoryRequest")
    kind = c.get("gpuRequestType") or (
        "memory" if memory is not None else
        "portion" if c.get("gpuPortionRequest") is not None else None)
    if kind is None:
        n = _count(devices, 0)
        return (0, 0, True) if n is None else (n, 0, False)
    n = _count(devices, 1)
    if n is None:
        return 0, 0, True
    if kind == "memory":
        # A quantity we cannot read (the live API's pattern is looser) is not known.
        per_device = parse_quantity(str(memory)) if memory is not None else 0
        size = None if per_device is None else _count(per_device, 0, whole=False)
        return (n, 0, True) if size is None else (n, n * size, False)
    portion = _count(c.get("gpuPortionRequest"), 1, whole=False)
    return (0, 0, True) if portion is None else (n * portion, 0, False)


def held(kind: str, body: Mapping[str, Any] | None, *, desired_phase: str | None = None,
         actual_phase: str | None = None) -> Gpus:
    """The GPUs a workload of `kind` with `body` holds while running. The phases default
    to the body's own (a live GET body has them; a create body and a plan change's
    `before`/`after` do not: pass the change's `desired_phase` or `live_phase`)."""
    if body is None:
        return NONE
    phase = {"desiredPhase": desired_phase or body.get("desiredPhase"),
             "actualPhase": actual_phase or body.get("actualPhase")}
    # Pods that were stopped, are being deleted or ran to completion hold nothing.
    if phases.live_suspended(phase) or phases.live_gone(phase) or phases.live_completed(phase):
        return NONE
    total = NONE
    for low, high, compute in kinds.get(kind).pods(body):
        gpus, memory, unknown = per_pod(compute)
        low, high = _count(low, 0), _count(high, 0)
        if low is None or high is None:
            # Pods that cannot be counted hold an unknown amount, unless each holds none.
            total += Gpus(unknown=bool(gpus or memory or unknown))
            continue
        total += Gpus(low * gpus, high * gpus, low * memory, high * memory, unknown)
    return total


def change_gpus(change: plans.ResourceChange) -> tuple[Gpus, Gpus]:
    """What the workload of `change` holds before apply (live, or the state's without
    refresh) and after it (its spec; nothing once deleted)."""
    if change.action is plans.Action.NOOP:
        # Apply leaves it as it is (paths under ignoreChanges included), in the phase its
        # spec asks for: the planner found it there (a state's last seen phase may predate
        # a suspend), or done, or gone.
        if change.reason == plans.REASON_COMPLETED:
            return NONE, NONE
        now = held(change.kind, change.before, desired_phase=change.desired_phase,
                   actual_phase=change.live_phase)
        return now, now
    # A workload to resume is suspended, as the planner found it (live, or the state).
    before = NONE if change.action is plans.Action.RESUME else held(
        change.kind, change.before, actual_phase=change.live_phase)
    # A patched workload stays in its live phase; after the other actions it runs as its
    # spec asks.
    after = held(change.kind, change.after, desired_phase=change.desired_phase,
                 actual_phase=change.live_phase if change.action is plans.Action.UPDATE else None)
    return before, after


def by_project(plan: plans.Plan) -> list[ProjectImpact]:
    """The GPUs of each project's workloads that the plan knows (specs and state), before
    and after apply, by project id (quotas unknown)."""
    return impact(plan).projects


# --- a plan's GPU impact ------------------------------------------------------------


def impact(plan: plans.Plan, quotas: Mapping[str, float | None] | None = None,
           names: Mapping[str, str] | None = None,
           unknown: Mapping[str, str] | None = None,
           pools: Mapping[str, Mapping[str, Any]] | None = None) -> GpuImpact:
    """The GPU impact of `plan`; `quotas` maps project ids to their GPU quota (None or
    absent: unknown), None when they were not read; `names` to the names the same reads
    gave (for projects neither the specs nor the state name); `unknown` to why a quota
    read gave none; `pools` to their quota per node pool (`read_pools`). A project the
    plan holds as a unit (an entry that provides a project's quota: `kinds.Kind.quota`)
    has its quota from it, as planned (`_planned`)."""
    workloads, units = [], []
    for change in sorted(plan.changes, key=lambda c: c.address):
        kind = kinds.get(change.kind)
        if kind.provides_quota:
            units.append(change)
        if not kind.in_project:
            continue  # an organisation unit holds no GPUs of a project's
        before, after = change_gpus(change)
        workloads.append(WorkloadGpus(change.address, change.kind, change.name,
                                      change.project_id, change.project_name, change.action,
                                      before, after))
    planned = _planned(units, "project")
    new = {q.name: key for key, q in planned.items() if not q.project_id}
    totals: dict[str, list] = {}
    # The id the workloads of a project the plan creates hold until apply knows its own.
    pending: dict[str, str] = {}
    for w in workloads:
        key = w.project_id if w.project_id in planned or w.project_name not in new \
            else new[w.project_name]
        if key != w.project_id:
            pending.setdefault(key, w.project_id)
        entry = totals.setdefault(key, [None, NONE, NONE])
        entry[0] = entry[0] or w.project_name
        entry[1] += w.before
        entry[2] += w.after
    for pid, entry in totals.items():  # a targeted plan's other workloads, unchanged
        other = Gpus(*(plan.gpu_elsewhere or {}).get(pid, ()))
        entry[1], entry[2] = entry[1] + other, entry[2] + other
    for key, q in planned.items():  # a project of the plan whose workloads it does not know
        totals.setdefault(key, [q.name, NONE, NONE])
    known, read_names, why = quotas or {}, names or {}, unknown or {}
    projects = []
    for key, (name, before, after) in sorted(totals.items(), key=_by_id):
        q = planned.get(key)
        if q is None:  # as read: the same before and after apply
            quota = known.get(key)
            read = tuple(plans.PoolQuota(pool, d, d, lim, lim)
                         for pool, (d, lim) in sorted((pools or {}).get(key, {}).items()))
            projects.append(ProjectImpact(key, name or read_names.get(key), before, after,
                                          quota, why.get(key) if quota is None else None,
                                          quota_before=quota, pools=read))
            continue
        quota_after = _total(p.deserved_after for p in q.pools) \
            if q.action is not plans.Action.DELETE else None
        quota_before = _total(p.deserved_before for p in q.pools) \
            if q.action is not plans.Action.CREATE else None
        pid = q.project_id or pending.get(key, "")
        projects.append(ProjectImpact(
            pid, name or q.name, before, after, quota_after,
            None if quota_after is not None else why.get(key) or why.get(pid),
            quota_before=quota_before, pools=q.pools,
            planned_by=q.address if q.action is not plans.Action.NOOP else None))
    warnings = [plans.QuotaWarning(plans.BELOW_HELD, p.planned_by or "", _below_held(p))
                for p in projects if p.below_held]
    warnings += _departments_over(units, plan.department_projects or {})
    acted = [q for q in [*planned.values(), *_planned(units, "department").values()]
             if q.action is not plans.Action.NOOP and q.changes]
    return GpuImpact(workloads, projects, quotas_read=quotas is not None,
                     quotas=sorted(acted, key=lambda q: q.address),
                     warnings=sorted(warnings, key=lambda w: (w.address, w.message)))


def _pools(change: plans.ResourceChange) -> tuple[plans.PoolQuota, ...]:
    """The GPU quota per node pool of a unit's `change`, before and after apply."""
    kind = kinds.get(change.kind)
    quota = kind.quota
    before = quota.pools(kind, change.before) if quota and change.action is not \
        plans.Action.CREATE else {}
    after = quota.pools(kind, change.after) if quota and change.action is not \
        plans.Action.DELETE else {}
    return tuple(plans.PoolQuota(pool, *_pair(before.get(pool), after.get(pool)))
                 for pool in sorted(set(before) | set(after)))


def _pair(before, after) -> tuple:
    b, a = before or (None, None), after or (None, None)
    return b[0], a[0], b[1], a[1]


def _planned(units: list[plans.ResourceChange], unit: str) -> dict[str, plans.QuotaChange]:
    """The plan's units whose quota bounds `unit` ("project", "department"), by the id the
    API gave the unit (a project's workloads' addresses hold it), or `name:<name>` for one
    the plan creates."""
    out = {}
    for change in units:
        if kinds.get(change.kind).provides_quota != unit:
            continue
        q = plans.QuotaChange(change.address, change.kind, change.name, unit, change.action,
                              _pools(change),
                              (change.workload_id or None) if unit == "project" else None)
        out[change.workload_id or f"name:{change.name}"] = q
    return out


def _total(deserved) -> float | None:
    """A quota from its pools' `deserved`: their sum; None when none gives one, or one is
    negative (no limit, as `read_quota`)."""
    found = [d for d in deserved if d is not None]
    if not found or any(d < 0 for d in found):
        return None
    return tidy(sum(found))


def _n(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _below_held(p: ProjectImpact) -> str:
    label = f"project {p.project_id}" if p.project_id else "project"
    label += f" ({p.project_name})" if p.project_name else ""
    return (f"{label}: quota lowered from {_n(p.quota_before or 0)} to {_n(p.quota or 0)} "
            f"GPUs, below the {_n(p.after.high)} GPUs its workloads hold after apply")


def _departments_over(units: list[plans.ResourceChange],
                      others: Mapping[str, Mapping[str, Mapping[str, float | None]]]
                      ) -> list[plans.QuotaWarning]:
    """A department (a spec of the plan) whose projects, as planned, deserve more GPUs in a
    node pool than it does: its projects of the plan, and `others` (per department
    address, its projects live that the plan does not hold: name -> pool -> deserved);
    only where the plan acts on the department or one of its projects of the plan (what
    it leaves alone is not its news)."""
    out = []
    for dept in units:
        kind = kinds.get(dept.kind)
        if kind.provides_quota != "department" or dept.after is None:
            continue
        members = []
        for p in units:
            pkind = kinds.get(p.kind)
            if (pkind.provides_quota == "project" and p.after is not None
                    and p.project_id == dept.project_id
                    and pkind.quota.parent(pkind, p.after) == dept.name):
                members.append((p, pkind.quota.pools(pkind, p.after)))
        if all(c.action is plans.Action.NOOP for c in [dept] + [m for m, _ in members]):
            continue
        for pool, (deserved, _) in sorted(kind.quota.pools(kind, dept.after).items()):
            if deserved is None or deserved < 0:
                continue
            parts = [(m.name, pools[pool][0]) for m, pools in members
                     if pool in pools and pools[pool][0] is not None and pools[pool][0] > 0]
            parts += [(name, pools[pool]) for name, pools in
                      sorted((others.get(dept.address) or {}).items())
                      if (pools.get(pool) or 0) > 0]
            parts.sort()
            total = tidy(sum(d for _, d in parts))
            if total > deserved:
                each = ", ".join(f"{name} {_n(d)}" for name, d in parts)
                out.append(plans.QuotaWarning(plans.DEPARTMENT_OVER, dept.address, (
                    f"department {dept.name}: its projects' deserved GPUs in node pool "
                    f"{pool} sum to {_n(total)} ({each}), past the department's "
                    f"{_n(deserved)}")))
    return out


def in_project(kind: str) -> bool:
    """Whether a resource of `kind` counts toward a project's GPUs and quota (a workload:
    `Kind.in_project`; an organisation unit's address names its cluster, not a project)."""
    entry = kinds.KINDS.get(kind)
    return entry is None or entry.in_project


def held_elsewhere(records) -> dict[str, list[float]]:
    """Per project id, what the state's `records` (`ResourceState`s: the workloads a
    targeted plan leaves out) hold as last applied, in the phase last asked for (`Plan.
    gpu_elsewhere`'s form)."""
    out: dict[str, Gpus] = {}
    for r in records:
        if not in_project(r.kind):
            continue
        done = phases.COMPLETED if phases.state_completed(r) else None
        out[r.project_id] = out.get(r.project_id, NONE) + held(
            r.kind, r.applied, desired_phase=r.desired_phase, actual_phase=done)
    return {pid: [g.low, g.high, g.memory_low, g.memory_high] for pid, g in out.items()}


def _by_id(item: tuple[str, Any]) -> tuple[int, str]:
    # Project ids are digits: "9" sorts before "12".
    return len(item[0]), item[0]


def impact_of(plan: plans.Plan) -> GpuImpact:
    """The impact of `plan` with what its reads put on it (`gpu_quotas`, `project_names`,
    `quota_unknown`, `quota_pools`): what finishing a plan sets as `plan.gpu_impact`."""
    return impact(plan, plan.gpu_quotas, plan.project_names, plan.quota_unknown,
                  plan.quota_pools)


def quota(project: Mapping[str, Any]) -> float | None:
    """A project's GPU quota from its `GET /api/v1/org-unit/projects/{id}` body: the sum of
    `gpu.deserved` over its node-pool `resources` (None when it gives none, or a negative
    one, or one that cannot be read: `read_quota`)."""
    return read_quota(project)[0]


def read_quota(project: Any) -> tuple[float | None, str | None]:
    """(`quota`'s answer, None), or (None, what is wrong) when the body holds a quota that
    cannot be read: not an object, `resources` not a list, a `deserved` that is not a
    number (a string), or not a finite one (NaN, 1e400, a sum past a float's range)."""
    if not isinstance(project, Mapping):
        return None, "the answer is not an object"
    resources = project.get("resources")
    if resources is None:
        return None, None
    if not isinstance(resources, list):
        return None, "resources is not a list"
    found = []
    for i, r in enumerate(resources):
        gpu = r.get("gpu") if isinstance(r, Mapping) else None
        deserved = gpu.get("deserved") if isinstance(gpu, Mapping) else None
        if deserved is None:
            continue
        if isinstance(deserved, bool) or not isinstance(deserved, (int, float)):
            return None, f"resources[{i}].gpu.deserved is not a number"
        found.append(deserved)
    if not found or any(d < 0 for d in found):  # a negative one reads as "no limit"
        return None, None
    try:
        total = tidy(sum(found))
        finite = math.isfinite(total)
    except OverflowError:  # an integer beyond a float's range
        finite = False
    if not finite:
        return None, "resources[].gpu.deserved is not a finite number"
    return total, None


def read_pools(project: Any) -> dict[str, list[float | None]]:
    """A project's GPU quota per node pool from its `GET /api/v1/org-unit/projects/{id}`
    body: pool name -> [`gpu.deserved`, `gpu.limit`] (None where not a number); empty when
    it gives none, or in a form that cannot be read (`read_quota` says why)."""
    resources = project.get("resources") if isinstance(project, Mapping) else None
    out: dict[str, list[float | None]] = {}
    for r in resources if isinstance(resources, list) else ():
        pool = r.get("nodePool") if isinstance(r, Mapping) else None
        name = pool.get("name") if isinstance(pool, Mapping) else None
        gpu = r.get("gpu") if isinstance(r, Mapping) else None
        if not isinstance(name, str) or not isinstance(gpu, Mapping):
            continue
        out[name] = [_finite(gpu.get("deserved")), _finite(gpu.get("limit"))]
    return out


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return value if math.isfinite(value) else None
    except OverflowError:  # an integer beyond a float's range
        return None


def unlimited(project: Any) -> bool:
    """A project body whose GPU quota is a negative `deserved` (no limit), which `quota`
    reads as None like a body that gives none."""
    resources = project.get("resources") if isinstance(project, Mapping) else None
    return isinstance(resources, list) and any(
        isinstance(r, Mapping) and isinstance(r.get("gpu"), Mapping)
        and isinstance(r["gpu"].get("deserved"), (int, float))
        and not isinstance(r["gpu"].get("deserved"), bool) and r["gpu"]["deserved"] < 0
        for r in resources)
