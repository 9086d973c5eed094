"""The executor against the simulator in process: outcomes recorded as they happen,
replace waits for the old workload to be gone, deletes free names before creates."""

from __future__ import annotations

import asyncio

import httpx

from reconciler import planner
from reconciler.api import RunaiClient
from reconciler.executor import Executor
from reconciler.plans import Action
from reconciler.simulator import DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, create_app
from reconciler.state import MemoryStore
from reconciler.state.model import State
from tests.helpers.desired import dt, di

CLUSTER = "71f69d83-ba66-4822-adf5-55ce55efd210"


class CountingStore(MemoryStore):
    """Records which addresses another reader would know by id (state + journal) after
    each append; those in flight it knows by name only."""

    def __init__(self):
        super().__init__()
        self.snapshots: list[set[str]] = []

    def append(self, entries, lineage):
        super().append(entries, lineage)
        seen = self.peer().read().resources
        self.snapshots.append({a for a, r in seen.items() if r.workload_id})


async def converge(app, desired, state, store, parallelism=8):
    from reconciler import refresh

    transport = httpx.ASGITransport(app=app)
    async with RunaiClient("http://sim", client_id=DEFAULT_CLIENT_ID, client_secret=DEFAULT_CLIENT_SECRET,
                           transport=transport) as client:
        live = await refresh.read_live(client, desired, state, parallelism=parallelism)
        plan = planner.make_plan(desired, state, live)
        ex = Executor(client, store, state, {d.address: d for d in desired}, parallelism=parallelism,
                      poll_interval_s=0.01)
        result = await ex.run(plan)
        return plan, result


def test_each_create_is_in_the_state_as_it_happens():
    app = create_app()
    store = CountingStore()
    state = State()
    desired = [dt(f"job-{i}") for i in range(5)]
    plan, result = asyncio.run(converge(app, desired, state, store, parallelism=1))
    assert not result.failed
    assert result.count(Action.CREATE) == 5
    # a reader sees each create as soon as it is done, one at a time, before the final write
    sizes = sorted({len(s) for s in store.snapshots})
    assert sizes == [0, 1, 2, 3, 4, 5]
    assert all(r.workload_id for r in store.read().resources.values())


def test_replace_waits_until_the_old_workload_is_gone():
    app = create_app(phase_seconds=0.05)
    store = MemoryStore()
    state = State()
    asyncio.run(converge(app, [dt("a")], state, store))
    old_id = state.resources["DistributedTraining/7/a"].workload_id
    plan, result = asyncio.run(converge(app, [dt("a", image="nvcr.io/nvidia/pytorch:24.10-py3")], state, store))
    assert [c.action for c in plan.actionable()] == [Action.REPLACE]
    assert not result.failed, result.failed
    new_id = state.resources["DistributedTraining/7/a"].workload_id
    assert new_id and new_id != old_id
    assert state.resources["DistributedTraining/7/a"].applied["spec"]["image"].endswith("24.10-py3")


def test_delete_frees_the_name_before_a_create_of_another_kind_needs_it():
    app = create_app(phase_seconds=0.05)
    store = MemoryStore()
    state = State()
    asyncio.run(converge(app, [di("shared-name")], state, store))
    plan, result = asyncio.run(converge(app, [dt("shared-name")], state, store))
    assert sorted(c.action.value for c in plan.actionable()) == ["create", "delete"]
    assert not result.failed, result.failed
    assert set(state.resources) == {"DistributedTraining/7/shared-name"}


def test_a_failed_action_does_not_stop_the_others_and_is_reported():
    app = create_app()
    store = MemoryStore()
    state = State()
    bad = dt("bad")
    bad.body["spec"]["numWorkers"] = 0  # the API refuses it (400)
    plan, result = asyncio.run(converge(app, [dt("good"), bad], state, store))
    assert [o.address for o in result.failed] == ["DistributedTraining/7/bad"]
    assert "numWorkers" in result.failed[0].message
    assert set(state.resources) == {"DistributedTraining/7/good"}


def test_stopped_on_create_is_created_then_suspended():
    app = create_app()
    store = MemoryStore()
    state = State()
    plan, result = asyncio.run(converge(app, [dt("paused", phase="Stopped")], state, store))
    assert not result.failed
    assert state.resources["DistributedTraining/7/paused"].desired_phase == "Stopped"
    plan, result = asyncio.run(converge(app, [dt("paused", phase="Stopped")], state, store))
    assert plan.actionable() == []


def test_a_change_of_two_steps_takes_a_slot_before_the_changes_of_one():
    # Its second step (the suspend after the create) then goes out beside the other
    # creates, not after the last of them: an apply's tail is one round trip shorter.
    app = create_app()
    store = MemoryStore()
    state = State()
    desired = [dt(f"a-{i}") for i in range(4)] + [dt("z-paused", phase="Stopped")]
    plan, result = asyncio.run(converge(app, desired, state, store, parallelism=1))
    assert not result.failed and result.count(Action.CREATE) == 5
    assert [c.address for c in plan.changes][-1] == "DistributedTraining/7/z-paused"
    sent = [(r.method, r.path.rsplit("/", 1)[-1]) for r in app.state.sim.requests
            if r.method == "POST" and r.path != "/api/v1/token"]
    assert sent[:2] == [("POST", "distributed"), ("POST", "suspend")]
    assert len(sent) == 6
