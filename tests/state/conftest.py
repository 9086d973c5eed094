"""Fixtures for the state tests: a controllable clock and every store behind one interface
(`pg_url` is tests/fixtures/postgres.py's)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import pytest

from reconciler.state import LocalFileStore, MemoryStore


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
