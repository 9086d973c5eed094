"""Runs a finished Plan against the API and records each outcome in the state as it happens.

Called by the CLI's `apply`. Actions run concurrently up to `parallelism`; a create
whose name is being freed by a delete in the same plan waits for that delete to finish.
A replace deletes, waits until the workload is gone, then creates. After every action the
state is written (atomically, by the store), so a crash loses at most the actions in
flight. A create whose outcome is unknown (timeout, dropped connection after the POST) is
resolved by looking the workload up by name before anything is retried.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler import kinds
from reconciler.api import errors as api_errors
from reconciler.desired.types import DesiredWorkload
from reconciler.plans import Action, Plan, ResourceChange, REASON_GONE
from reconciler.state.model import ResourceState, State

_SUSPENDED = {"Stopped", "Stopping"}


@dataclass
class Outcome:
    address: str
    action: Action
    ok: bool
    message: str = ""


@dataclass
class ApplyResult:
    outcomes: list[Outcome] = field(default_factory=list)
    interrupted: bool = False

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.ok]

    def count(self, action: Action) -> int:
        return sum(1 for o in self.outcomes if o.ok and o.action is action)


class Executor:
    def __init__(self, client, store, state: State, desired: Mapping[str, DesiredWorkload], *,
                 parallelism: int = 16, wait_timeout_s: float = 900.0,
                 poll_interval_s: float = 0.05, on_event: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.client = client
        self.store = store
        self.state = state
        self.desired = desired
        self.parallelism = max(1, parallelism)
        self.wait_timeout_s = wait_timeout_s
        self.poll_interval_s = poll_interval_s
        self.on_event = on_event or (lambda msg: None)
        self.clock = clock
        self._stop = False

    def stop(self) -> None:
        """No new actions start; those in flight finish and are recorded."""
        self._stop = True

    async def run(self, plan: Plan) -> ApplyResult:
        result = ApplyResult()
        sem = asyncio.Semaphore(self.parallelism)
        # A create (or a replace's create) of (project, name) waits for a delete freeing it.
        freeing: dict[tuple[str, str], asyncio.Event] = {}
        for ch in plan.changes:
            if ch.action is Action.DELETE:
                freeing[(ch.project_id, ch.name)] = asyncio.Event()

        async def one(ch: ResourceChange) -> None:
            key = (ch.project_id, ch.name)
            try:
                if ch.action in (Action.CREATE, Action.REPLACE) and key in freeing:
                    await freeing[key].wait()
                async with sem:
                    if self._stop:
                        return
                    await self._perform(ch)
                result.outcomes.append(Outcome(ch.address, ch.action, True))
                if ch.action is not Action.NOOP:
                    self.on_event(f"{ch.address}: {_done_word(ch.action)}")
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - reported per action, the others go on
                result.outcomes.append(Outcome(ch.address, ch.action, False, _describe(exc)))
                self.on_event(f"{ch.address}: {ch.action.value} failed: {_describe(exc)}")
            finally:
                if ch.action is Action.DELETE and key in freeing:
                    freeing[key].set()

        await asyncio.gather(*(one(ch) for ch in plan.changes))
        result.interrupted = self._stop
        result.outcomes.sort(key=lambda o: o.address)
        return result

    # --- actions -------------------------------------------------------------------

    async def _perform(self, ch: ResourceChange) -> None:
        kind = kinds.get(ch.kind)
        if ch.action is Action.NOOP:
            self._record_noop(ch)
        elif ch.action is Action.CREATE:
            await self._create(kind, ch)
        elif ch.action is Action.REPLACE:
            if ch.workload_id:
                self.on_event(f"{ch.address}: deleting for replacement")
                await self._delete_and_wait(kind, ch.workload_id)
                self._forget(ch.address, keep_if_desired=True)
            await self._create(kind, ch)
        elif ch.action is Action.UPDATE:
            live = await self.client.patch(kind, ch.workload_id, ch.patch or {})
            self._record(ch, workload_id=ch.workload_id, applied=ch.after, live=live)
        elif ch.action is Action.DELETE:
            await self._delete_and_wait(kind, ch.workload_id)
            self._forget(ch.address)
        elif ch.action is Action.SUSPEND:
            await self.client.suspend(kind, ch.workload_id)
            self._record(ch, workload_id=ch.workload_id, phase="Stopped")
        elif ch.action is Action.RESUME:
            await self.client.resume(kind, ch.workload_id)
            self._record(ch, workload_id=ch.workload_id, phase="Running")

    async def _create(self, kind: kinds.Kind, ch: ResourceChange) -> None:
        body = ch.after or {}

        async def lookup() -> dict | None:
            items = await self.client.iter_workloads(
                filter_by=[f"name=={ch.name}", f"projectId=={ch.project_id}"])
            for item in items:
                wid = item.get("id") or item.get("workloadId")
                if wid:
                    try:
                        return await self.client.get(kind, wid)
                    except api_errors.NotFound:
                        continue
            return None

        try:
            live = await self.client.create(kind, body, on_ambiguous=lookup)
        except api_errors.Conflict:
            # The name may still be held by a workload on its way out (deleted outside,
            # or by us a moment ago): wait for it to go, then create once more.
            holder = await lookup()
            if not holder or holder.get("desiredPhase") != "Deleted":
                raise
            await self._wait_gone(kind, holder["workloadId"])
            live = await self.client.create(kind, body, on_ambiguous=lookup)
        workload_id = live.get("workloadId")
        self._record(ch, workload_id=workload_id, applied=body, live=live)
        if ch.desired_phase == "Stopped" and kind.can_suspend:
            await self.client.suspend(kind, workload_id)
            self._record(ch, workload_id=workload_id, phase="Stopped")

    async def _delete_and_wait(self, kind: kinds.Kind, workload_id: str | None) -> None:
        if not workload_id:
            return
        try:
            await self.client.delete(kind, workload_id)
        except api_errors.NotFound:
            return
        await self._wait_gone(kind, workload_id)

    async def _wait_gone(self, kind: kinds.Kind, workload_id: str) -> None:
        deadline = self.clock() + self.wait_timeout_s
        delay = self.poll_interval_s
        while True:
            try:
                await self.client.get(kind, workload_id)
            except api_errors.NotFound:
                return
            if self.clock() >= deadline:
                raise TimeoutError(
                    f"workload {workload_id} still exists {self.wait_timeout_s:.0f}s after its deletion")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    # --- state ---------------------------------------------------------------------

    def _record(self, ch: ResourceChange, *, workload_id: str | None,
                applied: dict | None = None, live: dict | None = None,
                phase: str | None = None) -> None:
        prev = self.state.resources.get(ch.address)
        d = self.desired.get(ch.address)
        if applied is None:
            applied = prev.applied if prev else (ch.after or {})
        res = ResourceState(
            kind=ch.kind, name=ch.name, project_id=ch.project_id,
            cluster_id=(d.cluster_id if d else (prev.cluster_id if prev else applied.get("clusterId", ""))),
            workload_id=workload_id,
            applied=applied,
            desired_phase=phase or (d.desired_phase if d else (prev.desired_phase if prev else "Running")),
            last_phase=(live or {}).get("actualPhase") or (prev.last_phase if prev else None),
            prevent_destroy=(d.lifecycle.prevent_destroy if d else (prev.prevent_destroy if prev else False)),
            completed=bool(prev and prev.completed and prev.workload_id == workload_id),
        )
        if res.last_phase == "Completed":
            res.completed = True
        self.state.resources[ch.address] = res
        self.store.write(self.state)

    def _record_noop(self, ch: ResourceChange) -> None:
        prev = self.state.resources.get(ch.address)
        d = self.desired.get(ch.address)
        if ch.reason == REASON_GONE or (d is None and ch.workload_id is None):
            self._forget(ch.address)
            return
        if d is None or prev is None and ch.workload_id is None:
            return
        # Adopt a workload found by name, and keep phase and lifecycle flags current.
        applied = prev.applied if prev and prev.workload_id else d.body
        res = ResourceState(
            kind=ch.kind, name=ch.name, project_id=ch.project_id, cluster_id=d.cluster_id,
            workload_id=ch.workload_id or (prev.workload_id if prev else None),
            applied=applied,
            desired_phase=d.desired_phase if d.desired_phase else "Running",
            last_phase=ch.live_phase or (prev.last_phase if prev else None),
            prevent_destroy=d.lifecycle.prevent_destroy,
            completed=bool((prev and prev.completed) or ch.live_phase == "Completed"),
        )
        if prev is None or res != prev:
            self.state.resources[ch.address] = res
            self.store.write(self.state)

    def _forget(self, address: str, *, keep_if_desired: bool = False) -> None:
        if address in self.state.resources:
            if keep_if_desired:
                self.state.resources[address].workload_id = None
            else:
                del self.state.resources[address]
            self.store.write(self.state)


def _done_word(action: Action) -> str:
    return {
        Action.CREATE: "created", Action.UPDATE: "updated", Action.REPLACE: "replaced",
        Action.DELETE: "deleted", Action.SUSPEND: "suspended", Action.RESUME: "resumed",
    }.get(action, action.value)


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0] if text else type(exc).__name__


