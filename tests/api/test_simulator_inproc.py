"""RunaiClient against the simulator in process (httpx.ASGITransport): every endpoint,
the error paths, token renewal and each fault switch, observed through /_sim/requests."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from reconciler import kinds
from reconciler.api import RunaiClient, errors
from reconciler.simulator import DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, Faults, create_app

pytestmark = pytest.mark.anyio

DT = kinds.DISTRIBUTED_TRAINING
DI = kinds.DISTRIBUTED_INFERENCE
CLUSTER = "71f69d83-ba66-4822-adf5-55ce55efd210"


def dt_body(name="bert", **spec):
    return {"name": name, "projectId": "7", "clusterId": CLUSTER,
            "spec": {"image": "nvcr.io/nvidia/pytorch:24.05-py3", "distributedFramework": "PyTorch",
                     "numWorkers": 2, **spec}}


def di_body(name="llm", replicas=1):
    return {"name": name, "projectId": "7", "clusterId": CLUSTER,
            "spec": {"leader": {"image": "vllm/vllm-openai:v0.6.0"}, "replicas": replicas}}


@pytest.fixture
def sim_app(fake_time):
    return create_app(phase_seconds=0.0, clock=fake_time.wall, seed=3, sleep=fake_time.sleep)


@pytest.fixture
async def admin(sim_app):
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=sim_app),
                                 base_url="http://sim") as c:
        yield c


@pytest.fixture
def sim_client(sim_app, fake_time):
    def factory(**kw) -> RunaiClient:
        kw.setdefault("client_id", DEFAULT_CLIENT_ID)
        kw.setdefault("client_secret", DEFAULT_CLIENT_SECRET)
        return RunaiClient("http://sim", transport=httpx.ASGITransport(app=sim_app),
                           sleep=fake_time.sleep, clock=fake_time, wall_clock=fake_time.wall, **kw)
    return factory


async def api_log(admin) -> list[tuple[str, str, int | None]]:
    reqs = (await admin.get("/_sim/requests")).json()["requests"]
    return [(r["method"], r["path"], r["status"]) for r in reqs]


async def set_faults(admin, **faults):
    r = await admin.put("/_sim/faults", json=faults)
    assert r.status_code == 200, r.text


# --- endpoints ----------------------------------------------------------------------

async def test_distributed_training_lifecycle(sim_client):
    async with sim_client() as client:
        created = await client.create(DT, dt_body())
        wid = created["workloadId"]
        assert created["name"] == "bert" and created["spec"]["backoffLimit"] == 6
        assert (await client.get(DT, wid))["workloadId"] == wid
        assert (await client.get_workload_summary(wid))["id"] == wid
        assert (await client.suspend(DT, wid))["code"] == 202
        assert (await client.get(DT, wid))["desiredPhase"] == "Stopped"
        assert (await client.resume(DT, wid))["code"] == 202
        assert (await client.get(DT, wid))["desiredPhase"] == "Running"
        assert (await client.delete(DT, wid))["code"] == 202
        with pytest.raises(errors.NotFound, match=wid):
            await client.get(DT, wid)
        deleted = await client.iter_workloads(deleted=True)
        assert [w["id"] for w in deleted] == [wid] and deleted[0]["deletedAt"]


async def test_distributed_inference_patch_changes_replicas(sim_client):
    async with sim_client() as client:
        wid = (await client.create(DI, di_body()))["workloadId"]
        patched = await client.patch(DI, wid, {"spec": {"replicas": 3}})
        assert patched["spec"]["replicas"] == 3
        assert (await client.get(DI, wid))["spec"]["replicas"] == 3


async def test_list_filters_and_pages(sim_client):
    async with sim_client() as client:
        for i in range(7):
            await client.create(DT, dt_body(f"w{i}"))
        page = await client.list_workloads(filter_by=["projectId==7"], limit=3, offset=3)
        assert [w["name"] for w in page["workloads"]] == ["w3", "w4", "w5"]
        assert [w["name"] for w in await client.iter_workloads(filter_by=["name==w6"])] == ["w6"]
        assert len(await client.iter_workloads(filter_by=["name!=w6"])) == 6


async def test_find_live_resolves_a_name_to_the_kinds_workload(sim_client):
    async with sim_client() as client:
        wid = (await client.create(DT, dt_body()))["workloadId"]
        assert (await client.find_live(DT, "bert", "7"))["workloadId"] == wid
        assert await client.find_live(DI, "bert", "7") is None
        assert await client.find_live(DT, "other", "7") is None


# --- error paths ----------------------------------------------------------------------

async def test_a_duplicate_name_is_a_conflict(sim_client):
    async with sim_client() as client:
        await client.create(DT, dt_body())
        with pytest.raises(errors.Conflict) as ei:
            await client.create(DT, dt_body())
    assert ei.value.status == 409 and "bert" in str(ei.value)


async def test_an_invalid_distributed_body_is_a_bad_request_naming_the_field(sim_client):
    async with sim_client() as client:
        with pytest.raises(errors.BadRequest) as ei:
            await client.create(DT, dt_body(numWorkers=0))
    assert [i["field"] for i in ei.value.issues] == ["spec.numWorkers"]
    assert "spec.numWorkers" in str(ei.value)


async def test_an_invalid_inference_body_is_a_bad_request(sim_client):
    async with sim_client() as client:
        with pytest.raises(errors.BadRequest) as ei:
            await client.create(DI, di_body(replicas=5000))
    assert "replicas" in str(ei.value) and ei.value.status == 400


async def test_unknown_ids_are_not_found(sim_client):
    async with sim_client() as client:
        for call in (client.get(DT, "00000000-0000-4000-8000-000000000000"),
                     client.delete(DI, "00000000-0000-4000-8000-000000000000"),
                     client.get_workload_summary("00000000-0000-4000-8000-000000000000")):
            with pytest.raises(errors.NotFound):
                await call


async def test_wrong_credentials_are_unauthorized_and_keep_the_secret_out(sim_client):
    async with sim_client(client_secret="not-the-secret") as client:
        with pytest.raises(errors.Unauthorized) as ei:
            await client.get(DT, "00000000-0000-4000-8000-000000000000")
    assert "not-the-secret" not in str(ei.value) and "POST /api/v1/token" in str(ei.value)


async def test_a_forged_static_token_is_unauthorized(sim_client):
    async with sim_client(token="forged.token.value", client_id=None) as client:
        with pytest.raises(errors.Unauthorized, match="RUNAI_TOKEN") as ei:
            await client.list_workloads()
    assert "forged.token.value" not in str(ei.value)


# --- tokens ---------------------------------------------------------------------------

async def test_a_short_lived_token_is_renewed_before_it_expires(sim_client, admin, fake_time):
    await set_faults(admin, tokenTtl=30)
    async with sim_client() as client:
        await client.list_workloads()
        fake_time.advance(28)  # inside the 10% margin of a 30 s token
        await client.list_workloads()
    log = await api_log(admin)
    assert [m for m, p, s in log if p == "/api/v1/token"] == ["POST", "POST"]
    assert all(s == 200 for _, _, s in log)


async def test_a_401_from_the_server_renews_the_token_once(fake_time):
    skew = [0.0]
    app = create_app(clock=lambda: fake_time.wall() + skew[0], seed=3)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sim") as admin, \
            RunaiClient("http://sim", client_id=DEFAULT_CLIENT_ID, client_secret=DEFAULT_CLIENT_SECRET,
                        transport=httpx.ASGITransport(app=app), clock=fake_time,
                        wall_clock=fake_time.wall, sleep=fake_time.sleep) as client:
        await client.list_workloads()
        skew[0] = 7200  # the server's clock runs past the token's expiry; the client's does not
        await client.list_workloads()
        assert [(p, s) for _, p, s in await api_log(admin)] == [
            ("/api/v1/token", 200), ("/api/v1/workloads", 200),
            ("/api/v1/workloads", 401), ("/api/v1/token", 200), ("/api/v1/workloads", 200)]


async def test_concurrent_requests_with_an_expired_token_renew_once(sim_client, admin, fake_time):
    await set_faults(admin, tokenTtl=60)
    async with sim_client() as client:
        await client.list_workloads()
        fake_time.advance(3600)
        await asyncio.gather(*(client.list_workloads() for _ in range(25)))
    assert sum(1 for _, p, _ in await api_log(admin) if p == "/api/v1/token") == 2


# --- faults ---------------------------------------------------------------------------

async def test_injected_errors_are_retried_and_seen_by_the_server(sim_client, admin, fake_time):
    await set_faults(admin, errorRate=0.5, tokenFaults=False)
    async with sim_client(max_attempts=20, retry_budget_s=10_000) as client:
        for i in range(10):
            await client.create(DT, dt_body(f"w{i}"))
    log = await api_log(admin)
    posts = [s for m, p, s in log if m == "POST" and p == DT.api_path]
    assert posts.count(202) == 10 and len(posts) > 10
    assert set(posts) <= {202, 429, 503}
    assert fake_time.slept and all(d == 1.0 for d in fake_time.slept)  # the Retry-After


async def test_a_commit_failure_on_create_is_ambiguous_and_not_re_posted(sim_client, admin):
    await set_faults(admin, commitFailRate=1.0, commitFailMode="500")
    async with sim_client() as client:
        with pytest.raises(errors.ServerError) as ei:
            await client.create(DT, dt_body())
        assert ei.value.ambiguous is True
        await set_faults(admin, commitFailRate=0.0)
        assert len(await client.iter_workloads(filter_by=["name==bert"])) == 1
    assert [s for m, p, s in await api_log(admin) if m == "POST" and p == DT.api_path] == [500]


async def test_a_dropped_connection_after_create_is_resolved_by_lookup(sim_client, admin):
    await set_faults(admin, commitFailRate=1.0, commitFailMode="drop")
    async with sim_client() as client:
        live = await client.create(DT, dt_body(), on_ambiguous=lambda: client.find_live(DT, "bert", "7"))
    assert live["name"] == "bert" and live["workloadId"]
    assert [m for m, p, _ in await api_log(admin) if p == DT.api_path] == ["POST"]


async def test_a_delete_whose_answer_was_lost_is_done_on_retry(sim_client, admin):
    async with sim_client() as client:
        wid = (await client.create(DT, dt_body()))["workloadId"]
        await set_faults(admin, commitFailRate=1.0, commitFailMode="500")
        assert (await client.delete(DT, wid))["code"] == 202
    deletes = [s for m, _, s in await api_log(admin) if m == "DELETE"]
    assert deletes[0] == 500 and deletes[-1] == 404


async def test_latency_is_added_to_each_api_request(sim_client, admin, fake_time):
    await set_faults(admin, latencyMs=250, tokenFaults=False)
    async with sim_client() as client:
        await client.list_workloads()
        await client.list_workloads()
    assert fake_time.slept == [0.25, 0.25]
