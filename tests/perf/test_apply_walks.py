"""What an apply costs per create in walks of its body: each create body is walked for
sensitive values once in the run (its intent, its `maybe` and its record reuse the
answer), and a request's secret values are looked for only when a failure's message
needs them. The executor against the simulator in process, through the real client."""

from __future__ import annotations

import asyncio

import httpx

from reconciler import masking, planner, refresh
from reconciler.api import RunaiClient
from reconciler.executor import Executor
from reconciler.plans import Action
from reconciler.simulator import DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, create_app
from reconciler.state import MemoryStore
from reconciler.state.model import State
from tests.helpers.desired import dt

N = 12


def _apply(desired, state, store, counting):
    """Plan, then run the executor with `counting()` in force (the plan's own walks are
    not the apply's)."""
    async def run():
        transport = httpx.ASGITransport(app=create_app())
        async with RunaiClient("http://sim", client_id=DEFAULT_CLIENT_ID,
                               client_secret=DEFAULT_CLIENT_SECRET,
                               transport=transport) as client:
            live = await refresh.read_live(client, desired, state, parallelism=4)
            plan = planner.make_plan(desired, state, live)
            counting()
            ex = Executor(client, store, state, {d.address: d for d in desired},
                          parallelism=4, poll_interval_s=0.01)
            return await ex.run(plan)

    return asyncio.run(run())


def _with_secret(name: str):
    d = dt(name)
    d.body["spec"]["environmentVariables"] = [{"name": "API_TOKEN", "value": f"s3cr3t-{name}"}]
    return d


def test_each_create_body_is_walked_once_and_its_secrets_found_only_for_an_error(monkeypatch):
    walked: list[int] = []
    searched: list[int] = []
    real_map, real_secrets = masking.map_sensitive, masking.secret_values

    def counting_map(body, *args, **kwargs):
        walked.append(id(body))
        return real_map(body, *args, **kwargs)

    def counting_secrets(body, *args, **kwargs):
        searched.append(id(body))
        return real_secrets(body, *args, **kwargs)

    desired = [dt(f"plain-{i}") for i in range(N // 2)] + \
        [_with_secret(f"secret-{i}") for i in range(N // 2)]
    state, store = State(), MemoryStore()

    def counting():
        monkeypatch.setattr(masking, "map_sensitive", counting_map)
        monkeypatch.setattr(masking, "secret_values", counting_secrets)

    result = _apply(desired, state, store, counting)
    monkeypatch.undo()

    assert not result.failed and result.count(Action.CREATE) == N
    # Each body walked once, whatever the number of records made of it; and one more for
    # the first that holds a secret (found before the run, so the key is made first).
    assert len(walked) <= N + 1, len(walked)
    assert searched == []  # no request failed: no message needed its secrets
    # And what the records hold is as before: each secret as its keyed hash.
    again = store.peer().read()
    for d in desired:
        applied = again.resources[d.address].applied
        if d.name.startswith("secret-"):
            value = applied["spec"]["environmentVariables"][0]["value"]
            assert masking.is_hashed(value) and "s3cr3t" not in value
        else:
            assert applied == d.body
