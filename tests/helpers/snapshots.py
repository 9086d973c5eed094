"""Snapshots of a watch built by hand for the publishing tests (server, events, notifier):
a small fleet, one cycle after another, with a clock the test moves."""

from __future__ import annotations

from dataclasses import replace

from reconciler.watch import status as st

T0 = 1_790_000_000.0  # a fixed epoch second: times on the page and in events are stable


class Clock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def workload(name: str, *, kind: str = "Training", project: str = "7", sync: str = st.SYNCED,
             health: str = st.HEALTHY, **more) -> st.WorkloadStatus:
    more.setdefault("phase", "Running" if health == st.HEALTHY else None)
    more.setdefault("gpus", "2")
    return st.WorkloadStatus(address=f"{kind}/{project}/{name}", kind=kind, project=project,
                             name=name, sync=sync, health=health, **more)


def fleet(n: int = 4) -> tuple[st.WorkloadStatus, ...]:
    return tuple(workload(f"job-{i}") for i in range(n))


def cycle(number: int, *, result: str = "ok", at: float = T0, **more) -> st.CycleSummary:
    return st.CycleSummary(number=number, started_at=at, duration_s=1.5, result=result,
                           **more)


def snapshot(*, workloads=None, cycles=(), mode: str = "heal", role: str = st.ACTIVE,
             **more) -> st.Snapshot:
    more.setdefault("projects", (st.ProjectStatus(project="7", name="team-a", gpus_held=8,
                                                  gpus_planned=8, quota=16),))
    return st.Snapshot(mode=mode, role=role, specs_dir="specs", state="state/default.json",
                       commit="0123456789abcdef0123", interval_s=30.0,
                       workloads=fleet() if workloads is None else tuple(workloads),
                       cycles=tuple(cycles), **more)


def next_cycle(snap: st.Snapshot, *, workloads=None, result: str = "ok", keep: int = 20,
               **cycle_fields) -> st.Snapshot:
    """The snapshot after one more cycle (its number one past the last; at 30 s steps)."""
    number = snap.cycles[-1].number + 1 if snap.cycles else 1
    new = cycle(number, result=result, at=T0 + 30 * (number - 1), **cycle_fields)
    last_ok = new.started_at + new.duration_s if result == "ok" else snap.last_success_at
    return replace(snap, cycles=(*snap.cycles, new)[-keep:], last_success_at=last_ok,
                   workloads=snap.workloads if workloads is None else tuple(workloads))


def changed(snap: st.Snapshot, address: str, **fields) -> tuple[st.WorkloadStatus, ...]:
    """The snapshot's workloads with the one at `address` changed."""
    return tuple(replace(w, **fields) if w.address == address else w for w in snap.workloads)
