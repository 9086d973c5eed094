"""Fixtures for the state tests: a controllable clock and every store behind one interface."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field

import pytest

from reconciler.state import LocalFileStore, MemoryStore, ResourceState

PG_ENV = "RUNAI_RECONCILE_TEST_PG"  # a PostgreSQL URL the tests may create schemas in


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


def missing(what: str) -> None:
    """Skip the test for want of `what`, except in CI (which provides it), where it fails."""
    if os.environ.get("CI"):
        pytest.fail(f"CI runs the PostgreSQL tests: {what}")
    pytest.skip(what)


@pytest.fixture(scope="session")
def pg_url() -> str:
    """$RUNAI_RECONCILE_TEST_PG; without it the test skips, except in CI, where it fails."""
    url = os.environ.get(PG_ENV)
    if not url:
        missing(f'{PG_ENV} is not set: start a server with eval "$(.ci/postgres.sh start)"')
    return url


@pytest.fixture(scope="session")
def pg_schema(pg_url) -> str:
    """A schema of this test session's own, dropped at its end."""
    import psycopg

    schema = f"rr_test_{uuid.uuid4().hex[:12]}"
    yield schema
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture
def pg_store(pg_url, pg_schema, clock):
    """A factory of PostgreSQL stores on one fresh state name; all closed at the end."""
    from reconciler.state.postgres import PostgresStore

    opened: list[PostgresStore] = []
    default_name = f"test-{uuid.uuid4().hex[:8]}"

    def factory(*, lock_timeout: float = 0.0, name: str | None = None,
                schema: str | None = None, url: str | None = None) -> PostgresStore:
        store = PostgresStore(url or pg_url, name=name or default_name,
                              schema=schema or pg_schema, lock_timeout=lock_timeout,
                              clock=clock, sleep=clock.sleep)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


@pytest.fixture(params=["file", "memory", pytest.param("postgres", marks=pytest.mark.postgres)])
def open_store(request, tmp_path, clock):
    """A factory of handles on one stored state, each like a separate process.

    `open_store(lock_timeout=...)` returns a new handle on the same file (memory, state
    name in PostgreSQL)."""
    first: list[MemoryStore] = []
    if request.param == "postgres":
        return request.getfixturevalue("pg_store")

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
