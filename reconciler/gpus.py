"""GPU accounting (pure): the GPUs a workload holds while running, from its body and phase.

A body is a create body or a live GET body (as a plan change's `before`/`after` hold
them). Per pod (a `compute` object, CONTRACT.md §2, §5, §7):
- `gpuDevicesRequest` whole devices (absent: none);
- portion requests (`gpuRequestType: portion`, or a `gpuPortionRequest` alone): devices ×
  `gpuPortionRequest`, the devices being 1 when absent (0.5 is half a GPU; no portion
  given means whole devices);
- memory requests (`gpuRequestType: memory`, or a `gpuMemoryRequest` alone): their
  devices (1 when absent) as GPUs, and devices × `gpuMemoryRequest` apart as GPU memory.
Pods per kind are `RULES`, one entry per kind: Training and Workspace 1; Inference 1, or
with `autoscaling` minReplicas..maxReplicas (defaults 1 and minReplicas, or 1 when that is
0); DistributedTraining `numWorkers` (1 when absent) workers with `spec.compute` plus one
master with `masterSpec.compute` (`spec.compute` when `masterSpecSameAsWorker`);
DistributedInference `replicas` (default 1) × (leader + `workers` (default 0) × worker).
A suspended, deleting or completed (a training run to its end) workload holds nothing.
`change_gpus` gives a plan change's GPUs before and after apply, `by_project` a finished
plan's totals per project.
Callers: the plan's GPU impact and policy rules (issue 15).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler import kinds, phases, plans
from reconciler.desired.fields import parse_quantity


@dataclass(frozen=True)
class Gpus:
    """GPUs held (whole devices, or fractions with portion requests) and GPU memory in
    bytes (memory-type requests), at the fewest pods (`low`) and the most (`high`): the
    two ends differ only for an autoscaled Inference."""
    low: float = 0
    high: float = 0
    memory_low: float = 0
    memory_high: float = 0

    def __add__(self, other: Gpus) -> Gpus:
        return Gpus(_tidy(self.low + other.low), _tidy(self.high + other.high),
                    self.memory_low + other.memory_low, self.memory_high + other.memory_high)

    @property
    def is_range(self) -> bool:
        return self.low != self.high or self.memory_low != self.memory_high


NONE = Gpus()


def _tidy(x: float) -> float:
    # Sums of portions such as 0.1 + 0.2 carry binary noise; GPUs are never finer than 1e-9.
    return round(x, 9)


def per_pod(compute: Mapping[str, Any] | None) -> tuple[float, float]:
    """(GPUs, GPU memory in bytes) of one pod with this `compute`."""
    c = compute or {}
    devices = c.get("gpuDevicesRequest")
    memory = c.get("gpuMemoryRequest")
    kind = c.get("gpuRequestType") or (
        "memory" if memory is not None else
        "portion" if c.get("gpuPortionRequest") is not None else None)
    if kind is None:
        return devices or 0, 0
    devices = 1 if devices is None else devices
    if kind == "memory":
        # A quantity we cannot read (the live API's pattern is looser) counts no memory.
        per_device = parse_quantity(str(memory)) if memory is not None else None
        return devices, devices * (per_device or 0)
    portion = c.get("gpuPortionRequest")
    return devices * (1 if portion is None else portion), 0


# A rule gives the pod groups of a body: (fewest pods, most pods, their compute).
PodGroups = list[tuple[int, int, Mapping[str, Any] | None]]


def _compute(container: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    return (container or {}).get("compute")


def _single(body: Mapping[str, Any]) -> PodGroups:
    return [(1, 1, _compute(body.get("spec")))]


def _inference(body: Mapping[str, Any]) -> PodGroups:
    scaling = (body.get("spec") or {}).get("autoscaling")
    if not scaling:
        return _single(body)
    low = scaling.get("minReplicas")
    low = 1 if low is None else low
    high = scaling.get("maxReplicas")
    high = (low or 1) if high is None else high
    return [(low, high, _compute(body.get("spec")))]


def _distributed_training(body: Mapping[str, Any]) -> PodGroups:
    spec = body.get("spec") or {}
    workers = spec.get("numWorkers")
    workers = 1 if workers is None else workers
    master = spec if body.get("masterSpecSameAsWorker") else body.get("masterSpec")
    return [(workers, workers, _compute(spec)), (1, 1, _compute(master))]


def _distributed_inference(body: Mapping[str, Any]) -> PodGroups:
    spec = body.get("spec") or {}
    replicas = spec.get("replicas")
    replicas = 1 if replicas is None else replicas
    workers = (spec.get("workers") or 0) * replicas
    return [(replicas, replicas, _compute(spec.get("leader"))),
            (workers, workers, _compute(spec.get("worker")))]


# One entry per kind of `kinds.KINDS` (a test checks that none is missing).
RULES: dict[str, Callable[[Mapping[str, Any]], PodGroups]] = {
    kinds.TRAINING.name: _single,
    kinds.WORKSPACE.name: _single,
    kinds.INFERENCE.name: _inference,
    kinds.DISTRIBUTED_TRAINING.name: _distributed_training,
    kinds.DISTRIBUTED_INFERENCE.name: _distributed_inference,
}


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
    for low, high, compute in RULES[kind](body):
        gpus, memory = per_pod(compute)
        total += Gpus(low * gpus, high * gpus, low * memory, high * memory)
    return total


# Actions after which the live phase stays what it was (a completed training left alone,
# a pending workload patched); after the others the workload runs as its spec asks.
_PHASE_KEPT = frozenset({plans.Action.NOOP, plans.Action.UPDATE})


def change_gpus(change: plans.ResourceChange) -> tuple[Gpus, Gpus]:
    """What the workload of `change` holds before apply (live, or the state's without
    refresh) and after it (its spec; nothing once deleted)."""
    before = held(change.kind, change.before, actual_phase=change.live_phase)
    after = held(change.kind, change.after, desired_phase=change.desired_phase,
                 actual_phase=change.live_phase if change.action in _PHASE_KEPT else None)
    return before, after


@dataclass(frozen=True)
class ProjectGpus:
    project_id: str
    project_name: str | None  # when a spec or the state knows it
    before: Gpus
    after: Gpus


def by_project(plan: plans.Plan) -> list[ProjectGpus]:
    """The GPUs of each project's workloads that the plan knows (specs and state), before
    and after apply, by project id."""
    totals: dict[str, list] = {}
    for change in plan.changes:
        before, after = change_gpus(change)
        entry = totals.setdefault(change.project_id, [None, NONE, NONE])
        entry[0] = entry[0] or change.project_name
        entry[1] += before
        entry[2] += after
    # Project ids are digits: "9" sorts before "12".
    return [ProjectGpus(pid, name, before, after) for pid, (name, before, after)
            in sorted(totals.items(), key=lambda item: (len(item[0]), item[0]))]
