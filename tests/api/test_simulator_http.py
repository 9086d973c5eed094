"""RunaiClient against `runai-reconcile sim serve` over real HTTP: real sockets, real
timeouts, dropped connections and the fault flags, observed through /_sim/requests."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from reconciler import kinds
from reconciler.api import RunaiClient, errors
from reconciler.simulator import DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET
from tests.helpers import simserve
from tests.helpers.api import sim_serve

pytestmark = [pytest.mark.anyio, pytest.mark.http]

DT = kinds.DISTRIBUTED_TRAINING
DI = kinds.DISTRIBUTED_INFERENCE
CLUSTER = "71f69d83-ba66-4822-adf5-55ce55efd210"


def body(name: str) -> dict:
    return {"name": name, "projectId": "7", "clusterId": CLUSTER,
            "spec": {"image": "nvcr.io/nvidia/pytorch:24.05-py3", "distributedFramework": "PyTorch",
                     "numWorkers": 2}}


def client(url: str, **kw) -> RunaiClient:
    kw.setdefault("client_id", DEFAULT_CLIENT_ID)
    kw.setdefault("client_secret", DEFAULT_CLIENT_SECRET)
    kw.setdefault("timeout", 5.0)
    return RunaiClient(url, **kw)


@pytest.fixture
def admin(sim_url):
    """A plain client for /_sim/: the module's `sim serve` with its start-up faults and an
    empty request log (its workloads stay: the tests use distinct names)."""
    with httpx.Client(base_url=sim_url, timeout=10) as c:
        simserve.reset(c, workloads=False)
        yield c


def log(admin) -> list[tuple[str, str, int | None]]:
    return [(r["method"], r["path"], r["status"])
            for r in admin.get("/_sim/requests").json()["requests"]]


async def test_lifecycle_over_http(sim_url, admin):
    async with client(sim_url) as c:
        live = await c.create(DT, body("http-life"))
        wid = live["workloadId"]
        assert (await c.get(DT, wid))["spec"]["slotsPerWorker"] == 1
        assert (await c.suspend(DT, wid))["code"] == 202
        assert (await c.resume(DT, wid))["code"] == 202
        assert [w["id"] for w in await c.iter_workloads(filter_by=["name==http-life"])] == [wid]
        await c.delete(DT, wid)
        with pytest.raises(errors.NotFound):
            await c.get(DT, wid)
        assert c.request_count == 8
    assert [m for m, _, _ in log(admin)] == ["POST", "POST", "GET", "POST", "POST", "GET",
                                              "DELETE", "GET"]


async def test_wrong_credentials_over_http(sim_url, admin):
    async with client(sim_url, client_secret="nope-nope") as c:
        with pytest.raises(errors.Unauthorized) as ei:
            await c.list_workloads()
    assert "nope-nope" not in str(ei.value)
    assert log(admin) == [("POST", "/api/v1/token", 401)]


async def test_a_dropped_connection_after_a_create_is_ambiguous(sim_url, admin):
    admin.put("/_sim/faults", json={"commitFailRate": 1.0, "commitFailMode": "drop"})
    async with client(sim_url) as c:
        with pytest.raises(errors.TransportError) as ei:
            await c.create(DT, body("http-drop"))
        assert ei.value.ambiguous is True
        admin.put("/_sim/faults", json={"commitFailRate": 0})
        assert len(await c.iter_workloads(filter_by=["name==http-drop"])) == 1
    assert [s for m, p, s in log(admin) if m == "POST" and p == DT.api_path] == [None]


async def test_an_ambiguous_create_is_resolved_by_lookup_over_http(sim_url, admin):
    admin.put("/_sim/faults", json={"commitFailRate": 1.0, "commitFailMode": "500"})
    async with client(sim_url) as c:
        live = await c.create(DT, body("http-500"),
                              on_ambiguous=lambda: c.find_live(DT, "http-500", "7"))
    assert live["name"] == "http-500"
    assert [s for m, p, s in log(admin) if p == DT.api_path] == [500]


async def test_every_request_times_out(sim_url, admin):
    admin.put("/_sim/faults", json={"latencyMs": 2000})
    async with client(sim_url, timeout=0.2, max_attempts=2, token="unused",
                      client_id=None) as c:
        started = time.monotonic()
        with pytest.raises(errors.TransportError, match="timed out") as ei:
            await c.list_workloads()
    assert time.monotonic() - started < 1.9
    assert ei.value.attempts == 2


async def test_a_short_token_ttl_is_renewed_without_a_401(sim_url, admin):
    admin.put("/_sim/faults", json={"tokenTtl": 2})  # exp is whole seconds: 1 to 2 s left
    async with client(sim_url) as c:
        await c.list_workloads()
        await asyncio.sleep(1.85)  # past 90% of the lifetime, before the end of it
        await c.list_workloads()
    assert log(admin) == [("POST", "/api/v1/token", 200), ("GET", "/api/v1/workloads", 200),
                          ("POST", "/api/v1/token", 200), ("GET", "/api/v1/workloads", 200)]


async def test_the_fault_flags_are_absorbed_and_nothing_is_created_twice(tmp_path):
    with sim_serve(tmp_path, "--error-rate", "0.3", "--commit-fail-rate", "0.3",
                   "--retry-after", "0", "--seed", "11", "--no-token-faults") as url:
        async with client(url, max_attempts=20) as c:
            async def create(name):
                return await c.create(DT, body(name), on_ambiguous=lambda: c.find_live(DT, name, "7"))
            made = await asyncio.gather(*(create(f"flaky-{i}") for i in range(12)))
            assert len({w["workloadId"] for w in made}) == 12
            names = sorted(w["name"] for w in await c.iter_workloads())
            sent = c.request_count
        with httpx.Client(base_url=url) as admin:
            seen = log(admin)
    assert names == sorted(f"flaky-{i}" for i in range(12))
    posts = [s for m, p, s in seen if m == "POST" and p == DT.api_path]
    assert {429, 503} & set(posts)  # --error-rate: answered without performing, retried
    assert {500, None} & set(posts)  # --commit-fail-rate: performed, then failed or dropped
    assert len(seen) == sent  # every attempt the client counted reached the server
