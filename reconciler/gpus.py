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
           unknown: Mapping[str, str] | None = None) -> GpuImpact:
    """The GPU impact of `plan`; `quotas` maps project ids to their GPU quota (None or
    absent: unknown), None when they were not read; `names` to the names the same reads
    gave (for projects neither the specs nor the state name); `unknown` to why a quota
    read gave none."""
    workloads = []
    for change in sorted(plan.changes, key=lambda c: c.address):
        if not in_project(change.kind):
            continue
        before, after = change_gpus(change)
        workloads.append(WorkloadGpus(change.address, change.kind, change.name,
                                      change.project_id, change.project_name, change.action,
                                      before, after))
    totals: dict[str, list] = {}
    for w in workloads:
        entry = totals.setdefault(w.project_id, [None, NONE, NONE])
        entry[0] = entry[0] or w.project_name
        entry[1] += w.before
        entry[2] += w.after
    for pid, entry in totals.items():  # a targeted plan's other workloads, unchanged
        other = Gpus(*(plan.gpu_elsewhere or {}).get(pid, ()))
        entry[1], entry[2] = entry[1] + other, entry[2] + other
    known, read_names, why = quotas or {}, names or {}, unknown or {}
    projects = [ProjectImpact(pid, name or read_names.get(pid), before, after, known.get(pid),
                              why.get(pid) if known.get(pid) is None else None)
                for pid, (name, before, after) in sorted(totals.items(), key=_by_id)]
    return GpuImpact(workloads, projects, quotas_read=quotas is not None)


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
    `quota_unknown`): what finishing a plan sets as `plan.gpu_impact`."""
    return impact(plan, plan.gpu_quotas, plan.project_names, plan.quota_unknown)


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


def unlimited(project: Any) -> bool:
    """A project body whose GPU quota is a negative `deserved` (no limit), which `quota`
    reads as None like a body that gives none."""
    resources = project.get("resources") if isinstance(project, Mapping) else None
    return isinstance(resources, list) and any(
        isinstance(r, Mapping) and isinstance(r.get("gpu"), Mapping)
        and isinstance(r["gpu"].get("deserved"), (int, float))
        and not isinstance(r["gpu"].get("deserved"), bool) and r["gpu"]["deserved"] < 0
        for r in resources)
