"""Fixtures for the state tests: a controllable clock and every store behind one interface."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from reconciler.state import LocalFileStore, MemoryStore, ResourceState


@dataclass
class FakeClock:
    """`now`/`sleep` pair for lock waits: sleeping advances time instantly.

    `on_sleep` runs after each sleep (e.g. to release a lock mid-wait)."""

    now: float = 1000.0
    slept: list[float] = field(default_factory=list)
    on_sleep: object = None

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        if self.on_sleep is not None:
            self.on_sleep()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["file", "memory"])
def open_store(request, tmp_path, clock):
    """A factory of handles on one stored state, each like a separate process.

    `open_store(lock_timeout=...)` returns a new handle on the same file (or memory)."""
    first: list[MemoryStore] = []

    def factory(*, lock_timeout: float = 0.0):
        if request.param == "file":
            return LocalFileStore(tmp_path / "state" / "state.json", lock_timeout=lock_timeout,
                                  clock=clock, sleep=clock.sleep)
        if not first:
            first.append(MemoryStore(lock_timeout=lock_timeout, clock=clock, sleep=clock.sleep))
            return first[0]
        return first[0].peer(lock_timeout=lock_timeout)

    return factory


def resource(name: str = "bert-ddp", *, project: str = "7", image: str = "img:1",
             workload_id: str | None = "0b6f6a4e-1d2c-4a43-9c44-3d1d5f1c9a01") -> ResourceState:
    return ResourceState(
        kind="DistributedTraining", name=name, project_id=project,
        cluster_id="71f69d83-ba66-4822-adf5-55ce55efd210", workload_id=workload_id,
        applied={"name": name, "projectId": project,
                 "clusterId": "71f69d83-ba66-4822-adf5-55ce55efd210",
                 "spec": {"image": image, "numWorkers": 2}},
        last_phase="Running")
