"""A replacement cut short by `kill -9` after its delete was sent: the next apply waits for
the old workload to be gone before it creates the new one, and a name freed between a
409 and the lookup of its holder is created, not reported as taken (seen under load in
test_signals' kill -9 mid-replacement)."""

from __future__ import annotations

import asyncio

import httpx

from reconciler import kinds, operations, planner, refresh
from reconciler.api import RunaiClient
from reconciler.executor import Executor
from reconciler.plans import Action
from reconciler.simulator import DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, create_app
from reconciler.state import MemoryStore, journal
from reconciler.state.model import State
from tests.helpers.desired import dt
from tests.helpers.specs import training_doc

ADDRESS = "DistributedTraining/7/a"
DT = kinds.get("DistributedTraining")


def client_of(app) -> RunaiClient:
    return RunaiClient("http://sim", client_id=DEFAULT_CLIENT_ID,
                       client_secret=DEFAULT_CLIENT_SECRET, transport=httpx.ASGITransport(app=app))


async def statuses_of_creates(app) -> list[int]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://sim") as admin:
        reqs = (await admin.get("/_sim/requests")).json()["requests"]
    return [r["status"] for r in reqs if r["method"] == "POST" and r["path"].endswith("/distributed")]


def test_the_apply_after_a_kill_mid_replacement_waits_for_the_old_workload_to_go(tmp_path):
    app = create_app(phase_seconds=0.4)  # a delete takes 0.4 s: Deleting, then gone
    store = MemoryStore()
    (tmp_path / "a.yaml").write_text(training_doc("a"))
    options = operations.PlanOptions()
    first = operations.apply(str(tmp_path), store.peer(), lambda: client_of(app), options,
                             approve=lambda plan: True)
    assert first.count(Action.CREATE) == 1
    old_id = store.read().resources[ADDRESS].workload_id

    # The killed run: its replacement's delete intent journaled and the DELETE sent, no
    # answer recorded.
    state = store.read()
    store.peer().append([journal.Intent(1, "delete", ADDRESS, workload_id=old_id,
                                        prev=state.resources[ADDRESS]).to_json()],
                        state.lineage)

    async def delete() -> None:
        async with client_of(app) as client:
            await client.delete(DT, old_id)

    asyncio.run(delete())
    (tmp_path / "a.yaml").write_text(training_doc("a", image="nvcr.io/nvidia/pytorch:24.10-py3"))
    said: list[str] = []
    result = operations.apply(str(tmp_path), store.peer(), lambda: client_of(app), options,
                              approve=lambda plan: True, on_event=said.append)
    assert not result.failed, result.failed
    assert result.count(Action.CREATE) == 1
    assert f"{ADDRESS}: waiting for workload {old_id}, which the interrupted run was " \
           "deleting, to be gone" in said
    assert asyncio.run(statuses_of_creates(app)) == [202, 202]  # no 409 on the way
    after = store.read()
    assert after.resources[ADDRESS].workload_id not in (None, old_id)
    assert after.resources[ADDRESS].applied["spec"]["image"].endswith("24.10-py3")
    assert store.read_with_pending()[1] == []


def vanishing_after_409(app):
    """The sim, where the workload holding a name finishes deleting right after it caused
    a 409: the race between the 409 and the lookup of its holder, made certain."""

    async def wrapped(scope, receive, send):
        status: list[int] = []

        async def spy(message):
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        await app(scope, receive, spy)
        if scope["type"] == "http" and scope["method"] == "POST" and status == [409]:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                         base_url="http://sim") as admin:
                for w in (await admin.get("/_sim/workloads")).json()["workloads"]:
                    if w["desiredPhase"] == "Deleted":
                        await admin.delete(f"/_sim/workloads/{w['workloadId']}")

    return wrapped


def test_a_name_freed_between_the_409_and_the_lookup_is_created():
    app = create_app(phase_seconds=60)  # a delete would hold the name for a minute
    desired = [dt("a")]

    async def run():
        async with client_of(app) as client:
            created = await client.create(DT, desired[0].body)
            await client.delete(DT, created["workloadId"])  # Deleting: it holds the name
        async with client_of(vanishing_after_409(app)) as client:
            state = State()
            live = await refresh.read_live(client, desired, state, parallelism=4)
            plan = planner.make_plan(desired, state, live)
            assert [c.action for c in plan.actionable()] == [Action.CREATE]
            ex = Executor(client, MemoryStore(), state, {d.address: d for d in desired},
                          poll_interval_s=0.01)
            return await ex.run(plan), state

    result, state = asyncio.run(run())
    assert not result.failed, result.failed[0].message
    assert state.resources[ADDRESS].workload_id
