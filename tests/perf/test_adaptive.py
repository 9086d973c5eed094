"""Adaptive concurrency: when the API answers 429 the client sends fewer requests at
once, every request still succeeds, and the limit climbs back once the 429s stop."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from reconciler.api import RunaiClient
from reconciler.api.limits import AdaptiveLimit
from reconciler.kinds import KINDS

KIND = KINDS["DistributedTraining"]


async def _no_sleep(_seconds: float) -> None:
    await asyncio.sleep(0)


def _client(handler, max_connections: int) -> RunaiClient:
    return RunaiClient("https://runai.example.test", token="t", max_connections=max_connections,
                       transport=httpx.MockTransport(handler), sleep=_no_sleep, max_attempts=50,
                       retry_budget_s=1e9)


def test_429s_lower_the_requests_in_flight_and_every_request_succeeds():
    capacity = 4
    in_flight = 0
    peaks: list[int] = []
    throttled = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, throttled
        in_flight += 1
        try:
            await asyncio.sleep(0.001)
            peaks.append(in_flight)
            if in_flight > capacity:
                throttled += 1
                return httpx.Response(429, json={"code": 429, "message": "Too many requests."})
            return httpx.Response(200, json={"workloadId": request.url.path.rsplit("/", 1)[1]})
        finally:
            in_flight -= 1

    async def run() -> tuple[list[dict], RunaiClient]:
        client = _client(handler, 32)
        async with client:
            got = await asyncio.gather(*(client.get(KIND, f"w{i}") for i in range(200)))
        return got, client

    got, client = asyncio.run(run())
    assert [g["workloadId"] for g in got] == [f"w{i}" for i in range(200)]
    assert client.concurrency.cuts >= 1
    assert client.concurrency.limit < 32
    # Once cut, far fewer requests are refused than sent: most went through at once.
    assert throttled < 200
    assert max(peaks[-50:]) <= 2 * capacity


def test_limit_halves_once_per_round_and_recovers():
    async def run() -> AdaptiveLimit:
        lim = AdaptiveLimit(16)
        tickets = [await lim.acquire() for _ in range(16)]
        for t in tickets[:8]:  # eight 429s from one round: one cut
            lim.release(t, throttled=True)
        assert lim.limit == 8 and lim.cuts == 1
        for t in tickets[8:]:
            lim.release(t, throttled=False)
        for _ in range(400):
            lim.release(await lim.acquire(), throttled=False)
        return lim

    lim = asyncio.run(run())
    assert lim.limit == 16 and lim.in_flight == 0


def test_waiters_get_slots_in_turn_and_never_exceed_the_limit():
    async def run() -> int:
        lim = AdaptiveLimit(3)
        peak = 0

        async def one() -> None:
            nonlocal peak
            t = await lim.acquire()
            peak = max(peak, lim.in_flight)
            await asyncio.sleep(0)
            lim.release(t, throttled=False)

        await asyncio.gather(*(one() for _ in range(30)))
        return peak

    assert asyncio.run(run()) == 3


def test_bad_bounds_are_refused():
    with pytest.raises(ValueError):
        AdaptiveLimit(0)
