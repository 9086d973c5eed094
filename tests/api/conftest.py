"""Fixtures for the API client tests: a controllable clock, a client over
`httpx.MockTransport` whose handler each test writes as a small function (tests/helpers/api.py
has the handlers' materials), and a `sim serve` per module."""

from __future__ import annotations

import random
import time

import httpx
import pytest

from reconciler.api import RunaiClient
from tests.helpers.api import TOKEN, URL, sim_serve


class FakeTime:
    """A monotonic clock and a sleep that advances it at once; `wall` follows along."""

    def __init__(self):
        self.now = 1000.0
        self.wall0 = time.time()
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def wall(self) -> float:
        return self.wall0 + (self.now - 1000.0)

    def advance(self, seconds: float) -> None:
        self.now += seconds

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()


@pytest.fixture
def make_client(fake_time):
    """make_client(handler, **kw) -> RunaiClient over MockTransport(handler), fake time,
    a static token unless client credentials are given."""
    def factory(handler, **kw) -> RunaiClient:
        if "client_id" not in kw:
            kw.setdefault("token", TOKEN)
        kw.setdefault("sleep", fake_time.sleep)
        kw.setdefault("clock", fake_time)
        kw.setdefault("wall_clock", fake_time.wall)
        kw.setdefault("rng", random.Random(7))
        return RunaiClient(URL, transport=httpx.MockTransport(handler), **kw)

    return factory


@pytest.fixture
def anyio_backend() -> str:
    """The client is asyncio-based (asyncio.Lock, asyncio.sleep): run the tests on asyncio."""
    return "asyncio"


# --- a `runai-reconcile sim serve` process over real HTTP ----------------------------


@pytest.fixture(scope="module")
def sim_url(tmp_path_factory):
    """A plain `sim serve` shared by a module's tests (they use distinct names)."""
    with sim_serve(tmp_path_factory.mktemp("sim")) as url:
        yield url
