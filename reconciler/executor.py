"""Runs a finished Plan against the API and journals each step as it happens; recovers
what a dead run left in flight.

Called by `operations.apply` and `operations.apply_saved` (`recover` first, then
`run_interruptible`, which runs `Executor.run`). Actions run
concurrently up to `parallelism`; a change waits for the changes named in its
`waits_for` (deletions that free its name, the creates of what it names, the changes of
the types ranked before it). A replace deletes, waits until the workload is gone, then
creates; a replace that `goes_with` another change (a workload in a project the plan
replaces) sends no delete: it waits for the old workload to be gone, then creates. A
create whose body holds what was known only after apply (`known_after`: a workload's
projectId, its project created or replaced by the same run) takes it from the state's
record of that create, and is recorded at its real address (the record at its old
address, if any, dropped); it fails, without a request, when that create did not
finish. Waits for a resource to be ready or gone are
bounded by `wait_timeout_s` (apply's --timeout).

Durability: before each API write an *intent* is appended to the store's journal, and
after it the address's new record (or a *close* when it failed): one short line each,
flushed and fsynced, with concurrent appends sharing one fsync (group commit); a body is
written once, in its intent, and the records after it name it. The state
file itself is rewritten once, when the run ends (compaction). A `kill -9` at any moment
leaves at most the intents in flight open; the next read sees the workloads they may
have created as "known by name only", and `recover` looks each one up by name.

Secrets: a record's `applied` body and an intent's body hold each sensitive value as its
keyed hash (`masking.hash_sensitive`, with the state's `hmac_key`), never the value; the
requests carry the values. A run about to record the first one makes the key and writes
the state before its first intent, so that a killed run's journal is read with it.

Ambiguity: a create whose outcome is unknown (timeout, 5xx, a dropped connection after
the POST) is resolved by looking the workload up by name before anything is retried; a
409 whose holder is the workload we asked for adopts it; a delete or suspend/resume
that ended ambiguous re-reads the workload to see whether it happened.

`stop()` (Ctrl-C, SIGTERM): no new actions start, those in flight finish and are
recorded. Each API step is tracked from its intent to its answer, so that when a second
signal abandons the steps in flight the result says which may have happened (`UNKNOWN`).
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from reconciler import diff, errors, kinds, masking, phases, plans
from reconciler.api import errors as api_errors
from reconciler.desired.types import DesiredWorkload
from reconciler.plans import REASON_GONE, Action, Plan, ResourceChange
from reconciler.state import journal
from reconciler.state.model import ResourceState, State


# How often a wait for a created resource to be ready says it still waits (seconds).
PROGRESS_EVERY_S = 10.0

# What became of a change (`Outcome.status`).
DONE = "done"
FAILED = "failed"
UNKNOWN = "unknown"  # abandoned with an API call in flight: it may have happened


@dataclass
class Outcome:
    address: str
    action: Action
    ok: bool
    message: str = ""  # the error of a failure; what is known of an unknown one
    status: str = ""  # DONE, FAILED or UNKNOWN (from `ok` when not given)
    workload_id: str | None = None  # the id the state holds after it (a delete's: the old)

    def __post_init__(self) -> None:
        self.status = self.status or (DONE if self.ok else FAILED)


@dataclass(repr=False)  # asyncio formats its main task's result on the way out: keep it short
class ApplyResult:
    plan: Plan | None = None  # the plan performed
    outcomes: list[Outcome] = field(default_factory=list)  # done and failed
    interrupted: bool = False
    not_started: list[str] = field(default_factory=list)  # addresses skipped after stop()
    unknown: list[Outcome] = field(default_factory=list)  # abandoned by a second signal
    signal: int | None = None  # the first signal received (SIGINT or SIGTERM)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.ok]

    def count(self, action: Action) -> int:
        return sum(1 for o in self.outcomes if o.ok and o.action is action)

    def counts(self) -> dict[str, int]:
        """What was done, per action (`create`, ...), plus `adopt` and `state_only` as the
        plan counts them (`Plan.counts`)."""
        changes = {c.address: c for c in self.plan.changes} if self.plan else {}
        out = plans.counts(changes[o.address] for o in self.outcomes
                           if o.ok and o.address in changes)
        del out[Action.NOOP.value]
        return out


# A local journal append (a write and an fsync) that took longer than this (a slow disk)
# sends the next one to a thread, so that the loop goes on while it syncs (seconds).
SLOW_APPEND_S = 0.01


class _Journal:
    """Appends journal entries through the store; the entries queued before an append
    starts go together in it (one fsync for many actions). A local file's append is made
    on the event loop, which joins every entry the callbacks of a loop turn queued (an
    append in a thread, started as soon as the last ended, makes more and smaller ones),
    unless the last took longer than `SLOW_APPEND_S`; a database's append (a round trip)
    in a thread, the loop going on meanwhile."""

    def __init__(self, store, lineage: str):
        self._store = store
        self._lineage = lineage
        self._queue: list[tuple[dict, asyncio.Future]] = []
        self._flusher: asyncio.Task | None = None
        self._local = getattr(store, "local_file", None) is not None
        self._slow = not self._local  # the next append goes to a thread

    async def write(self, entry: dict) -> None:
        fut = asyncio.get_running_loop().create_future()
        self._queue.append((entry, fut))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        await fut  # its entry is written even when this waiter is cancelled

    async def _flush(self) -> None:
        while self._queue:
            batch, self._queue = self._queue, []
            entries = [e for e, _ in batch]
            try:
                if self._slow:
                    took = await asyncio.to_thread(self._append, entries)
                else:
                    took = self._append(entries)
                self._slow = not self._local or took > SLOW_APPEND_S
            except BaseException as exc:  # noqa: BLE001 - handed to every waiter
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                continue
            for _, fut in batch:
                if not fut.done():
                    fut.set_result(None)

    def _append(self, entries: list[dict]) -> float:
        """Append `entries` through the store; the seconds it took."""
        started = time.monotonic()
        self._store.append(entries, self._lineage)
        return time.monotonic() - started


class Executor:
    def __init__(self, client, store, state: State, desired: Mapping[str, DesiredWorkload], *,
                 parallelism: int = 16, wait_timeout_s: float = 900.0,
                 poll_interval_s: float = 0.05, on_event: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic, progress=None,
                 finishing: Callable[[ApplyResult], Awaitable[None]] | None = None,
                 force_write: bool = False):
        self.client = client
        self.store = store
        self.state = state
        self.desired = desired
        self.parallelism = max(1, parallelism)
        self.wait_timeout_s = wait_timeout_s
        self.poll_interval_s = poll_interval_s
        self.on_event = on_event or (lambda msg: None)
        self.clock = clock
        self.progress = progress  # a `reconciler.progress.Progress` (a terminal), or None
        # Run once every action has ended, before the state is compacted, so that what it
        # records in the state goes into the same write (apply's list fingerprints).
        self.finishing = finishing
        # The serial moves at the compaction even when nothing changed (a saved plan's
        # apply: it must not apply twice).
        self.force_write = force_write
        self._stop = False
        self._abandoned = False
        self._seq = 0
        self._journal: _Journal | None = None
        # address -> its API steps so far, [action, "sent" | "done" | "failed"]; by seq too
        self.steps: dict[str, list[list[str]]] = {}
        self._step_of: dict[int, list[str]] = {}
        # (id of a body, its sensitive paths) -> (the body, it hashed): `_hashed`
        self._hashes: dict[tuple[int, frozenset[str]], tuple[dict, dict]] = {}
        # id of a body an intent wrote to this run's journal -> (the body, the intent's seq)
        self._journaled: dict[int, tuple[dict, int]] = {}
        # A change's address in the plan -> where the state records it since (a workload
        # whose project was made by this run: `_known_now`).
        self.moved: dict[str, str] = {}
        self.result = ApplyResult()  # filled as run() goes (kept when it is cancelled)

    def stop(self) -> None:
        """No new actions start; those in flight finish and are recorded."""
        self._stop = True

    def abandon(self) -> None:
        """Before cancelling `run`: the journal is left as it is, open intents included."""
        self._abandoned = True

    def cancelled_result(self, plan: Plan) -> ApplyResult:
        """The result of `run(plan)` cancelled with API steps in flight (after `abandon`):
        each change without an outcome is unknown when one of its steps was sent and not
        answered (or when a replace's delete was done and its create not yet sent), else
        not started."""
        result = self.result
        result.interrupted = True
        done = {o.address for o in result.outcomes}
        result.not_started, result.unknown = [], []
        for ch in plan.changes:
            if not ch.changes_state or ch.address in done:
                continue
            steps = self.steps.get(ch.address, [])
            if not steps:
                result.not_started.append(ch.address)
                continue
            said = [f"{action} {'sent, no answer' if how == 'sent' else how}"
                    for action, how in steps]
            result.unknown.append(Outcome(ch.address, ch.action, False, "; ".join(said),
                                          status=UNKNOWN, workload_id=self._workload_id(ch)))
        result.outcomes.sort(key=lambda o: o.address)
        result.not_started.sort()
        return result

    async def run(self, plan: Plan) -> ApplyResult:
        """Perform the plan's changes; the state is compacted (written whole) at the end."""
        result = self.result = ApplyResult(plan=plan)
        if self.state.secret_key() is None and any(
                self._hashed(ch.after, ch.sensitive, key=False) is None
                for ch in plan.changes if ch.after is not None and ch.changes_state):
            self.state.secret_key(create=True)
            await asyncio.to_thread(self.store.write, self.state)
        self._journal = _Journal(self.store, self.state.lineage)
        self._journaled.clear()
        sem = asyncio.Semaphore(self.parallelism)
        finished = {ch.address: asyncio.Event() for ch in plan.changes}

        async def one(ch: ResourceChange) -> None:
            try:
                for addr in ch.waits_for:
                    if addr in finished:
                        await finished[addr].wait()
                if self._stop:
                    if ch.changes_state:
                        result.not_started.append(ch.address)
                    return
                async with sem:
                    if self._stop:
                        if ch.changes_state:
                            result.not_started.append(ch.address)
                        return
                    await self._perform(ch)
                result.outcomes.append(Outcome(ch.address, ch.action, True,
                                               workload_id=self._workload_id(ch)))
                if ch.action is not Action.NOOP:
                    self.on_event(f"{ch.address}: {_done_word(ch.action)}")
                    if self.progress is not None:
                        self.progress.step()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - reported per action, the others go on
                # Reported once, in the CLI's summary.
                result.outcomes.append(Outcome(ch.address, ch.action, False, _describe(exc),
                                               workload_id=self._workload_id(ch)))
                if self.progress is not None and ch.action is not Action.NOOP:
                    self.progress.step(failed=True)
            finally:
                finished[ch.address].set()

        if self.progress is not None:
            self.progress.start("Applying", sum(ch.action is not Action.NOOP
                                                for ch in plan.changes))
        ended = False
        try:
            # The changes with more steps (a replace, a create then suspended or waited
            # for) take the first slots, so that their later steps go out beside the
            # other changes rather than trail after them. (Dependencies are `waits_for`.)
            await asyncio.gather(*(one(ch) for ch in sorted(plan.changes, key=self._fewer_steps)))
            ended = True
        finally:
            if self.progress is not None:
                self.progress.finish()
            result.interrupted = self._stop
            try:
                if ended and self.finishing is not None:
                    await self.finishing(result)
            finally:
                # Abandoned: no compaction, so the intents in flight stay open in the
                # journal for the next read to see, as after a kill.
                if not self._abandoned:
                    await asyncio.to_thread(self.store.write, self.state,
                                            force=self.force_write)
                    self._journaled.clear()  # the journal is gone, and the bodies it held
        result.outcomes.sort(key=lambda o: o.address)
        result.not_started.sort()
        return result

    @staticmethod
    def _fewer_steps(ch: ResourceChange) -> bool:
        """False (first) for a change of more than one API step."""
        if ch.action is Action.REPLACE:
            return False
        if ch.action is not Action.CREATE:
            return True
        kind = kinds.KINDS.get(ch.kind)
        return kind is None or not (kind.ready_phase or (ch.desired_phase == phases.STOPPED
                                                         and kind.can_suspend))

    def _workload_id(self, ch: ResourceChange) -> str | None:
        res = self.state.resources.get(self.moved.get(ch.address, ch.address))
        return res.workload_id if res is not None and res.workload_id else ch.workload_id

    # --- actions -------------------------------------------------------------------

    async def _perform(self, ch: ResourceChange) -> None:
        kind = kinds.get(ch.kind)
        planned_at = ch.address
        if ch.known_after:
            ch = self._known_now(ch)
        if ch.action is Action.REPLACE and ch.goes_with and ch.workload_id:
            # The deletion of what it is in (its project) took it: no delete of ours.
            self.on_event(f"{planned_at}: deleted with {ch.goes_with}; waiting for "
                          f"workload {ch.workload_id} to be gone")
            await self._wait_gone(kind, ch.workload_id)
        if planned_at != ch.address:
            self.moved[planned_at] = ch.address
            self.on_event(f"{planned_at}: its project is {ch.project_id} now: creating it as "
                          f"{ch.address}")
        if ch.action is Action.NOOP:
            await self._record_noop(ch)
        elif ch.action is Action.CREATE or ch.action is Action.REPLACE and ch.goes_with:
            await self._forget_moved(planned_at, ch)
            await self._create(kind, ch)
        elif ch.action is Action.REPLACE:
            if ch.workload_id:
                self.on_event(f"{ch.address}: deleting for replacement")
                seq = await self._intend("delete", ch, workload_id=ch.workload_id)
                await self._guard(seq, self._delete_and_wait(kind, ch.workload_id))
                prev = self.state.resources.get(ch.address)
                if prev is not None:
                    prev = _copy(prev, workload_id=None)
                await self._set(ch.address, prev, closes=seq)
            await self._create(kind, ch)
        elif ch.action is Action.UPDATE:
            seq = await self._intend("update", ch, workload_id=ch.workload_id)
            live = await self._guard(seq, self.client.patch(kind, ch.workload_id, ch.patch or {},
                                                             sensitive=ch.sensitive,
                                                             whole=ch.after))
            await self._set(ch.address, self._resource(ch, workload_id=ch.workload_id,
                                                       applied=ch.after, live=live), closes=seq)
        elif ch.action is Action.DELETE:
            seq = await self._intend("delete", ch, workload_id=ch.workload_id)
            await self._guard(seq, self._delete_and_wait(kind, ch.workload_id))
            await self._set(ch.address, None, closes=seq)
        elif ch.action in (Action.SUSPEND, Action.RESUME):
            await self._suspend_resume(kind, ch, ch.workload_id, ch.action is Action.SUSPEND)

    def _known_now(self, ch: ResourceChange) -> ResourceChange:
        """`ch` with what the plan knew only after apply filled in from the creates this
        run made (`known_after`: a workload's projectId, the id of the project created
        before it), at its address now: `Kind/<project id>/<name>`, where the state records
        it. An error when that create did not happen (it failed, or was not started)."""
        after = dict(ch.after or {})
        done = {o.address for o in self.result.outcomes if o.ok}
        for path, source in ch.known_after.items():
            made = self.state.resources.get(source)
            if source not in done or made is None or not made.workload_id:
                raise errors.ReconcileError(
                    f"not sent: its {path} is the id of {source}, whose create did not "
                    "finish")
            after[path] = made.workload_id
        project_id = str(after.get("projectId", ch.project_id))
        address = kinds.address(ch.kind, project_id, ch.name)
        d = self.desired.get(ch.address)
        if d is not None and d.project_id != project_id:
            self.desired = {**self.desired, address: d.with_project_id(project_id)}
        return dataclasses.replace(ch, address=address, project_id=project_id, after=after,
                                   known_after={})

    async def _forget_moved(self, planned_at: str, ch: ResourceChange) -> None:
        """The state's record at `planned_at`, the address the plan knew a change by, is
        dropped when the change is created elsewhere (`_known_now`: in its project's new
        id): what it recorded is gone with its old project."""
        if planned_at != ch.address and planned_at in self.state.resources:
            await self._set(planned_at, None)

    async def _create(self, kind: kinds.Kind, ch: ResourceChange) -> None:
        body = ch.after or {}
        maybe = self._resource(ch, workload_id=None, applied=body)
        seq = await self._intend("create", ch, body=body, maybe=maybe)
        try:
            live = await self._create_call(kind, ch, body)
        except api_errors.RetryableError as exc:
            if exc.ambiguous:  # it may exist: the next run looks it up by name
                await self._set(ch.address, maybe, closes=seq)
            else:
                await self._close(seq)
            raise
        except Exception:
            await self._close(seq)
            raise
        workload_id = live.get("workloadId")
        await self._set(ch.address, self._resource(ch, workload_id=workload_id, applied=body,
                                                   live=live), closes=seq)
        if kind.ready_phase and workload_id:
            live = await self._wait_ready(kind, ch, workload_id, live)
            await self._set(ch.address, self._resource(ch, workload_id=workload_id,
                                                       applied=body, live=live))
        if ch.desired_phase == phases.STOPPED and kind.can_suspend and \
                live.get("desiredPhase") != phases.STOPPED:
            await self._suspend_resume(kind, ch, workload_id, True)

    async def _create_call(self, kind: kinds.Kind, ch: ResourceChange, body: dict) -> dict:
        listed_name = kind.hooks.listed_name(kind, body)  # an access rule's: its identity

        async def lookup() -> dict | None:
            return await self.client.find_live(kind, listed_name, ch.project_id)

        try:
            return await self.client.create(kind, body, on_ambiguous=lookup,
                                            sensitive=ch.sensitive)
        except api_errors.Conflict as exc:
            holder = await self.client.find_live(kind, listed_name, ch.project_id,
                                                 include_deleting=True)
            if holder is None:
                # Whoever held the name is gone since the 409 (a workload that finished
                # deleting between the two calls): the name is free now.
                return await self.client.create(kind, body, on_ambiguous=lookup)
            if phases.live_gone(holder):
                # The name is still held by a workload on its way out (deleted outside, or
                # by us a moment ago): wait for it to go, then create once more.
                await self._wait_gone(kind, holder["workloadId"])
                return await self.client.create(kind, body, on_ambiguous=lookup,
                                                sensitive=ch.sensitive)
            if not diff.diff_workload(kind, body, None, holder):
                # The workload we asked for (an earlier attempt went through): adopt it.
                self.on_event(f"{ch.address}: already exists as asked "
                              f"(workload {holder.get('workloadId')}); adopted")
                return holder
            raise api_errors.Conflict(
                f"{exc}; the workload {holder.get('workloadId')} holding the name differs from "
                "the spec and is not in the state: rename the spec, or delete that workload",
                status=exc.status, method=exc.method, path=exc.path) from exc

    async def _suspend_resume(self, kind: kinds.Kind, ch: ResourceChange,
                              workload_id: str | None, suspend: bool) -> None:
        target = phases.STOPPED if suspend else phases.RUNNING
        seq = await self._intend("suspend" if suspend else "resume", ch, workload_id=workload_id)
        call = self.client.suspend if suspend else self.client.resume
        try:
            await call(kind, workload_id)
        except api_errors.RetryableError as exc:
            # Did it happen anyway? Re-read the phase we asked for.
            try:
                live = await self.client.get(kind, workload_id)
            except api_errors.ApiError:
                live = None
            if not live or live.get("desiredPhase") != target:
                await self._close(seq)
                raise exc from None
        except Exception:
            await self._close(seq)
            raise
        # The phase it is on its way to, as last seen: a plan without refresh reads it
        # (a suspended workload holds no GPUs) until a refresh sees the live one.
        moving = phases.STOPPING if suspend else phases.RESUMING
        await self._set(ch.address, self._resource(ch, workload_id=workload_id, phase=target,
                                                   live={"actualPhase": moving}), closes=seq)

    async def _delete_and_wait(self, kind: kinds.Kind, workload_id: str | None) -> None:
        if not workload_id:
            return
        try:
            await self.client.delete(kind, workload_id)
        except api_errors.NotFound:
            return
        except api_errors.RetryableError as exc:
            try:  # did it happen anyway?
                live = await self.client.get(kind, workload_id)
            except api_errors.NotFound:
                return
            except api_errors.ApiError:
                raise exc from None
            if not phases.live_gone(live):
                raise
        await self._wait_gone(kind, workload_id)

    async def _wait_ready(self, kind: kinds.Kind, ch: ResourceChange, workload_id: str,
                          live: dict) -> dict:
        """Poll a created resource until it is in its kind's `ready_phase` (a project's
        Ready: its namespace made), saying each phase it passes, and every
        `PROGRESS_EVERY_S` that it still waits; TimeoutError after the wait timeout
        (--timeout). Returns its last GET."""
        start = self.clock()
        deadline = start + self.wait_timeout_s
        delay = self.poll_interval_s
        said, said_at = None, start
        while live.get("actualPhase") != kind.ready_phase:
            phase = live.get("actualPhase")
            now = self.clock()
            if phase != said:
                self.on_event(f"{ch.address}: {phase or 'no phase yet'}, waiting for "
                              f"{kind.ready_phase} (at most {self.wait_timeout_s:g}s)")
                said, said_at = phase, now
            elif now - said_at >= PROGRESS_EVERY_S:
                self.on_event(f"{ch.address}: still {phase or 'no phase yet'} after "
                              f"{now - start:.0f}s, waiting for {kind.ready_phase}")
                said_at = now
            if now >= deadline:
                raise TimeoutError(f"{kind.name} {workload_id} is still "
                                   f"{phase or 'without a phase'} "
                                   f"{self.wait_timeout_s:g}s after its creation "
                                   f"(waiting for {kind.ready_phase}; --timeout sets how "
                                   "long apply waits)")
            await asyncio.sleep(max(0.0, min(delay, deadline - now)))
            delay = min(delay * 2, 5.0)
            live = await self.client.get(kind, workload_id)
        return live

    async def _wait_gone(self, kind: kinds.Kind, workload_id: str) -> None:
        await wait_gone(self.client, kind, workload_id, timeout_s=self.wait_timeout_s,
                        poll_interval_s=self.poll_interval_s, clock=self.clock)

    # --- journal -------------------------------------------------------------------

    async def _intend(self, action: str, ch: ResourceChange, *, workload_id: str | None = None,
                      body: dict | None = None, maybe: ResourceState | None = None) -> int:
        self._seq += 1
        seq = self._seq
        # "sent" before the intent is on disk: abandoned from here on, it may have happened.
        step = self._step_of[seq] = [action, "sent"]
        self.steps.setdefault(ch.address, []).append(step)
        prev = self.state.resources.get(ch.address)
        hashed = self._hashed(body, ch.sensitive)
        if hashed is not None:  # on disk once: later records name it by `seq`
            self._journaled[id(hashed)] = (hashed, seq)
        entry = journal.Intent(seq, action, ch.address, workload_id=workload_id,
                               body=hashed, maybe=maybe, prev=prev).to_json()
        await self._journal_write(entry)
        return seq

    async def _guard(self, seq: int, call):
        """Await `call`; a failure closes intent `seq` before it propagates."""
        try:
            return await call
        except Exception:
            await self._close(seq)
            raise

    async def _set(self, address: str, res: ResourceState | None, *, closes: int | None = None) -> None:
        if closes in self._step_of:
            self._step_of[closes][1] = "done"
        applied_of = None
        if res is None:
            self.state.resources.pop(address, None)
        else:
            self.state.resources[address] = res
            known = self._journaled.get(id(res.applied))
            if known is not None and known[0] is res.applied:
                applied_of = known[1]
        await self._journal_write(journal.set_entry(address, res, closes, applied_of))

    async def _close(self, seq: int) -> None:
        if seq in self._step_of:
            self._step_of[seq][1] = "failed"
        await self._journal_write(journal.close(seq))

    async def _journal_write(self, entry: dict) -> None:
        if self._journal is None:
            self._journal = _Journal(self.store, self.state.lineage)
        await self._journal.write(entry)

    # --- records -------------------------------------------------------------------

    def _resource(self, ch: ResourceChange, *, workload_id: str | None,
                  applied: dict | None = None, live: dict | None = None,
                  phase: str | None = None) -> ResourceState:
        prev = self.state.resources.get(ch.address)
        d = self.desired.get(ch.address)
        if applied is None:
            applied = prev.applied if prev else (ch.after or {})
        sensitive = list(d.lifecycle.sensitive) if d else (list(prev.sensitive) if prev else [])
        applied = self._hashed(applied, [*sensitive, *ch.sensitive])
        res = ResourceState(
            kind=ch.kind, name=ch.name, project_id=ch.project_id,
            cluster_id=(d.cluster_id if d else (prev.cluster_id if prev else applied.get("clusterId", ""))),
            workload_id=workload_id,
            applied=applied,
            desired_phase=phase or (d.desired_phase if d else (prev.desired_phase if prev else phases.RUNNING)),
            last_phase=(live or {}).get("actualPhase") or (prev.last_phase if prev else None),
            prevent_destroy=(d.lifecycle.prevent_destroy if d else (prev.prevent_destroy if prev else False)),
            completed=bool(prev and prev.completed and prev.workload_id == workload_id),
            sensitive=sensitive,
            project_name=ch.project_name or (prev.project_name if prev else None),
        )
        if res.last_phase == phases.COMPLETED:
            res.completed = True
        return res

    def _hashed(self, body: dict | None, sensitive, *, key: bool = True) -> dict | None:
        """`body` with each sensitive value as its keyed hash (the state's key).

        A change's body is recorded up to four times (the check for a key, the intent, the
        `maybe`, the record): each body is walked once, and the answer kept for as long as
        this executor holds the body (its identity and its sensitive paths are the memo's
        key). Without `key` (no key made yet): None when the body holds a sensitive value."""
        if body is None:
            return None
        memo = (id(body), frozenset(sensitive))
        hit = self._hashes.get(memo)
        if hit is not None and hit[0] is body:
            return hit[1]
        if not key:
            if masking.has_sensitive(body, sensitive):
                return None
            out = body  # nothing to hash: the same with any key
        else:  # one walk: the key is made (or read) at the first sensitive value
            key_of = self.state.secret_key
            out = masking.map_sensitive(body, sensitive,
                                        lambda _, v: masking.keyed_hash(v, key_of(create=True)))
        self._hashes[memo] = (body, out)
        return out

    async def _record_noop(self, ch: ResourceChange) -> None:
        prev = self.state.resources.get(ch.address)
        d = self.desired.get(ch.address)
        if ch.reason == REASON_GONE or (d is None and ch.workload_id is None):
            if prev is not None:
                await self._set(ch.address, None)
            return
        if d is None or prev is None and ch.workload_id is None:
            return
        # Adopt a workload found by name, and keep phase and lifecycle flags current. Live
        # matches the spec (else this would not be a no-op), so the spec is what is applied
        # now, with ignored paths kept at their prior values (the planner's `after`).
        applied = ch.after if ch.after is not None else (prev.applied if prev else d.body)
        res = self._resource(ch, workload_id=ch.workload_id or (prev.workload_id if prev else None),
                             applied=applied, live={"actualPhase": ch.live_phase})
        if prev is None or res != prev:
            await self._set(ch.address, res)


async def wait_gone(client, kind: kinds.Kind, workload_id: str, *, timeout_s: float = 900.0,
                    poll_interval_s: float = 0.05,
                    clock: Callable[[], float] = time.monotonic) -> None:
    """Until a GET of the workload answers 404 (polls back off to 5 s); TimeoutError after
    `timeout_s`."""
    deadline = clock() + timeout_s
    delay = poll_interval_s
    while True:
        try:
            await client.get(kind, workload_id)
        except api_errors.NotFound:
            return
        if clock() >= deadline:
            raise TimeoutError(
                f"workload {workload_id} still exists {timeout_s:.0f}s after its deletion")
        await asyncio.sleep(delay)
        delay = min(delay * 2, 5.0)


# --- Ctrl-C and SIGTERM ----------------------------------------------------------------


async def run_interruptible(executor: Executor, plan: Plan) -> ApplyResult:
    """`executor.run(plan)` with SIGINT and SIGTERM turned into `stop()`: no new actions
    start, those in flight finish and are recorded. A second signal abandons those in
    flight too: their intents stay open in the journal, for the next apply to resolve,
    and the result lists them as `unknown` (an API call was sent, its answer was not
    recorded), apart from those not started. `result.signal` is the first signal.
    Called by both of `operations`' applies."""
    import signal

    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(executor.run(plan))
    received: list[int] = []

    def on_signal(signum: int) -> None:
        received.append(signum)
        if len(received) == 1:
            executor.stop()
            name = "Interrupt" if signum == signal.SIGINT else "SIGTERM"
            executor.on_event(f"{name} received: no new actions start; waiting for those in "
                              "flight to finish (a second Ctrl-C or SIGTERM abandons them)")
        else:
            executor.abandon()
            task.cancel()

    installed: list[tuple[int, object]] = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(signum)
        try:
            loop.add_signal_handler(signum, on_signal, signum)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
            continue
        installed.append((signum, previous))
    try:
        result = await task
    except asyncio.CancelledError:
        if len(received) < 2:
            raise
        result = executor.cancelled_result(plan)
    finally:
        for signum, previous in installed:
            loop.remove_signal_handler(signum)
            if previous is not None:  # what the caller had (the CLI's SIGTERM handler)
                signal.signal(signum, previous)
    result.signal = received[0] if received else None
    return result


# --- recovery ------------------------------------------------------------------------


async def recover(client, store, state: State, pending: list[journal.Intent], *,
                  on_event: Callable[[str], None] | None = None,
                  wait_timeout_s: float = 900.0, poll_interval_s: float = 0.05) -> list[str]:
    """Resolve what a dead run left unsure, then compact the journal into the state file.

    A delete in flight when the run died (a replacement's first half, or a delete) is
    finished as the run would have: a workload it left being deleted is waited for until
    it is gone, so that the plan's create of the name does not meet a 409. Every address
    the state knows by name only (a create in flight, an ambiguous create that stayed
    unresolved) is looked up by name in its project: a live workload is adopted, and a
    create that never happened is forgotten. Called by both of `operations`' applies
    with the state lock held, before anything else (for a specs folder: before it
    plans). Returns one message per resolved address."""
    say = on_event or (lambda msg: None)
    intents = {i.address: i for i in pending if i.action == "create"}
    notes: list[str] = []
    for intent in pending:
        if intent.action != "delete" or not intent.workload_id:
            continue
        kind = kinds.get(kinds.parse_address(intent.address)[0])
        try:
            live = await client.get(kind, intent.workload_id)
        except api_errors.NotFound:
            continue
        if phases.live_gone(live):
            say(f"{intent.address}: waiting for workload {intent.workload_id}, which the "
                "interrupted run was deleting, to be gone")
            await wait_gone(client, kind, intent.workload_id, timeout_s=wait_timeout_s,
                            poll_interval_s=poll_interval_s)
            notes.append(f"{intent.address}: workload {intent.workload_id}, deleted by the "
                         "interrupted run, is gone")
    unsure = sorted(a for a, r in state.resources.items() if r.workload_id is None)
    for address in unsure:
        res = state.resources[address]
        kind = kinds.get(res.kind)
        live = await client.find_live(kind, kind.hooks.listed_name(
            kind, {**(res.applied or {}), "name": res.name}), res.project_id)
        if live is not None and live.get("workloadId"):
            res.workload_id = live["workloadId"]
            res.last_phase = live.get("actualPhase") or res.last_phase
            notes.append(f"{address}: found workload {res.workload_id} created by an "
                         "interrupted run; now tracked in the state")
        elif address in intents:
            prev = intents[address].prev
            if prev is None:
                del state.resources[address]
            else:
                state.resources[address] = prev
            notes.append(f"{address}: the interrupted run had not created it")
    for n in notes:
        say(n)
    if notes or pending or store.has_journal():
        await asyncio.to_thread(store.write, state)
    return notes


def _copy(res: ResourceState, **changes) -> ResourceState:
    return dataclasses.replace(res, applied=copy.deepcopy(res.applied), **changes)


def _done_word(action: Action) -> str:
    return {
        Action.CREATE: "created", Action.UPDATE: "updated", Action.REPLACE: "replaced",
        Action.DELETE: "deleted", Action.SUSPEND: "suspended", Action.RESUME: "resumed",
    }.get(action, action.value)


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0] if text else type(exc).__name__
