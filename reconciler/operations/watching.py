"""Watching: `runai-reconcile watch`, the engine run as a controller, cycle after cycle.

Each cycle: (with `pull`) fast-forward the specs' git tree and note its commit; re-read
the specs when a file changed (otherwise the last cycle's are used again); read the
state; refresh and plan (`planning.make_plan`, a full refresh every
`full_refresh_every` cycles); pick what the mode performs (`watch.modes`), judged by the
policy (a deny skips the action) and capped at `max_actions`; perform it through the
executor under the state's ordinary write lock (journal, state, `preventDestroy` as
`apply`); then build a `watch.status.Snapshot` and publish it to the board and the
observers (the notifier). Between cycles it waits on the interval (beating the board), or
backs off after a failed cycle (doubling, up to `BACKOFF_MAX_S` or the interval).

A cycle over a fleet that did not change reads and works out only what tells it so
(docs/watch.md, "What a cycle costs"): the state only when the store's version stamp
moved and the list fingerprints of what it found unchanged kept in memory
(`reuse.StateReads`), the project quotas only on full refreshes, the plan and the
statuses not again from the same inputs (`reuse.Reuse`, `reporting`).

One active controller per state: the holder of the state's controller lock
(`state.election`) acts; the others stand by and try again every interval. The write lock
is taken only while a cycle acts, so a person's `apply` between cycles goes ahead (a
cycle that finds it held acts on the next one).

SIGINT and SIGTERM: the actions in flight finish and are journaled, nothing new starts,
the board says stopping, and `watch` returns 0. A second signal abandons the actions in
flight (their intents stay open for the next run's recovery, as after a kill).
Caller: `reconciler.cli` (the `watch` command), through `reconciler.operations`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from reconciler import errors, planner
from reconciler.operations import judging, memory, reporting, running, specfolder
from reconciler.operations.planning import ClientFactory, PlanOptions, make_plan
from reconciler.operations.reuse import Reuse, StateReads
from reconciler.plans import Plan
from reconciler.watch import modes, status

BACKOFF_MAX_S = 300.0  # the longest wait after failed cycles (or the interval, if longer)
CYCLES_KEPT = 20  # summaries a snapshot carries, the most recent last

Log = Callable[..., None]  # log(event, **fields): one line per event


class Client(Protocol):
    """What the loop asks of its client beyond the reads and writes (`api.RunaiClient`)."""

    @property
    def request_count(self) -> int:
        """HTTP requests sent so far (each cycle reports its own)."""

    @property
    def requests_by_status(self) -> dict[str, int]:
        """HTTP requests sent so far by answer ("200", "429", "error")."""

    def renew_budget(self) -> None:
        """A fresh retry budget: each cycle has the whole --timeout to spend on retries."""


def _no_log(event: str, **fields) -> None:
    pass


@dataclass
class WatchOptions:
    mode: str = modes.REPORT
    interval_s: float = 60.0
    prune: bool = False
    max_actions: int = 10
    full_refresh_every: int = 10
    pull: bool = False
    policy: Sequence[str] = ()
    parallelism: int = 64
    max_cycles: int | None = None  # stop after this many cycles (tests, benchmarks)


def watch(specs_dir: str, store, connect: ClientFactory, options: WatchOptions,
          board: status.StatusBoard | None = None, *, observers: Sequence[Callable] = (),
          log: Log = _no_log) -> int:
    """Run cycles until SIGINT or SIGTERM (or `options.max_cycles`); 0 when stopped so.

    `board` receives every snapshot (one is made when not given); `observers` are called
    with each snapshot too (the notifier); their failures are logged, never fatal.
    Raises `errors.PolicyFileError` for a bad policy file and `errors.ReconcileError` for
    a bad option, before the first cycle."""
    if options.mode not in modes.MODES:
        raise errors.ReconcileError(f"--mode: expected one of {', '.join(modes.MODES)}")
    if options.max_actions < 0 or options.full_refresh_every < 1:
        raise errors.ReconcileError("--max-actions must be 0 or more and "
                                    "--full-refresh-every 1 or more")
    rules = judging.load_policy(options.policy)
    if options.pull:
        specfolder.git(specs_dir, "rev-parse", "--is-inside-work-tree")  # a clear error up front
    from reconciler.state import election

    if board is None:
        board = status.StatusBoard(_empty(specs_dir, store, options))
    loop = _Loop(specs_dir, store, connect, options, board, rules, list(observers), log,
                 election.controller_lock(store))
    return running.run(loop.run())


def _empty(specs_dir: str, store, options: WatchOptions) -> status.Snapshot:
    return status.Snapshot(mode=options.mode, role=status.STANDBY, specs_dir=specs_dir,
                           state=store.where, interval_s=options.interval_s)


class _Loop:
    def __init__(self, specs_dir, store, connect, options: WatchOptions, board, rules,
                 observers, log: Log, lock) -> None:
        self.specs_dir, self.store, self.connect = specs_dir, store, connect
        self.options, self.board, self.rules = options, board, rules
        self.observers, self.log, self.lock = observers, log, lock
        self.specs = specfolder.SpecsFolder(specs_dir)
        self.cycles: collections.deque = collections.deque(maxlen=CYCLES_KEPT)
        self.stopping: asyncio.Event | None = None  # made inside the event loop
        self.signals = 0
        self.executor = None  # the executor of the actions in flight, if any
        self.report = reporting.Report(log)  # what each cycle says of every workload
        self.failed_in_row = 0
        self.role: str | None = None  # known after the first cycle's election
        self.commit: str | None = None
        self.last_success: float | None = None
        self.acting = 0  # cycles this process was the active controller in
        self.snapshot = board.snapshot
        # Kept from one cycle to the next while nothing changed (the state in `state_reads`, the plan
        # and the project reads in `reuse`, the statuses in `report`):
        self.state_reads = StateReads(store)
        self.reuse = Reuse()
        self.parsed = False  # the specs were parsed since the last good cycle

    # --- the loop ------------------------------------------------------------------

    async def run(self) -> int:
        self.stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        installed = []
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, self._on_signal, signum)
                installed.append(signum)
        self.log("start", mode=self.options.mode, specs=self.specs_dir, state=self.store.where,
                 interval_s=self.options.interval_s)
        client = self.connect()
        try:
            async with client:
                number = 0
                while not self.stopping.is_set():
                    number += 1
                    wait = await self._cycle(client, number)
                    if self.options.max_cycles is not None and number >= self.options.max_cycles:
                        break
                    await self._wait(wait)
        finally:
            self.board.stop()
            self.lock.release()
            for signum in installed:
                loop.remove_signal_handler(signum)
            self.log("stopped", cycles=len(self.cycles) and self.cycles[-1].number)
        return 0

    def _on_signal(self, signum: int) -> None:
        self.signals += 1
        name = "SIGINT" if signum == signal.SIGINT else "SIGTERM"
        self.board.stop()
        self.stopping.set()
        if self.executor is not None:
            if self.signals == 1:
                self.executor.stop()
                self.log("stopping", signal=name, note="the actions in flight finish first")
            else:
                self.executor.abandon()
                if self._acting_task is not None:
                    self._acting_task.cancel()
                self.log("abandoning", signal=name)
        else:
            self.log("stopping", signal=name)

    _acting_task: asyncio.Task | None = None

    async def _wait(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.stopping.is_set():
            self.board.beat()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), min(remaining, 1.0))

    def _backoff(self) -> float:
        interval = self.options.interval_s
        if not self.failed_in_row:
            return interval
        return min(interval * 2 ** (self.failed_in_row - 1), max(interval, BACKOFF_MAX_S))

    # --- one cycle -----------------------------------------------------------------

    async def _cycle(self, client: Client, number: int) -> float:
        started, t0, cpu0 = time.time(), time.monotonic(), time.process_time()
        requests0, by_status0 = client.request_count, client.requests_by_status
        refresh = "full"
        try:
            if not await asyncio.to_thread(self._elected):
                self._publish(status.CycleSummary(number, started, time.monotonic() - t0,
                                                  "standby", refresh="none"), workloads=None)
                self.log("cycle", cycle=number, result="standby", lock=self.lock.where)
                return self.options.interval_s
            if self.options.pull:
                self.commit = await asyncio.to_thread(specfolder.pull, self.specs_dir)
            wants = "full" if (self.acting % self.options.full_refresh_every) == 0 else "auto"
            self.acting += 1
            summary, workloads, projects = await self._reconcile(client, number, started, wants)
            refresh = summary.refresh
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failed cycle is reported, the loop goes on
            self.failed_in_row += 1
            message = reporting.one_line(exc)
            wait = self._backoff()
            summary = status.CycleSummary(
                number, started, time.monotonic() - t0, "failed", error=message,
                refresh=refresh, commit=self.commit,
                requests=client.request_count - requests0,
                requests_by_status=reporting.requests_since(client, by_status0),
                cpu_s=time.process_time() - cpu0)
            self._publish(summary, workloads=None, backoff=wait)
            self.log("cycle", cycle=number, result="failed", error=message,
                     next_in_s=round(wait, 3), commit=self.commit)
            return wait
        self.failed_in_row = 0
        self.last_success = time.time()
        summary = replace(summary, duration_s=time.monotonic() - t0,
                          requests=client.request_count - requests0,
                          requests_by_status=reporting.requests_since(client, by_status0),
                          cpu_s=time.process_time() - cpu0)
        self._publish(summary, workloads=workloads, projects=projects)
        if self.parsed:
            # What the cycles keep for long (the modules, the parsed specs) exists now:
            # the program's hook (the CLI freezes it out of the cycle collector's reach).
            self.parsed = False
            memory.hooks.settled()
        self.log("cycle", cycle=number, result=summary.result, refresh=summary.refresh,
                 commit=self.commit, drift=summary.drift_found, healed=summary.healed,
                 actions=summary.actions, deferred=summary.deferred, duration_s=round(summary.duration_s, 3),
                 requests=summary.requests, cpu_s=round(summary.cpu_s, 3))
        return max(0.0, self.options.interval_s - summary.duration_s)

    def _elected(self) -> bool:
        held = self.lock.still_held() or self.lock.try_acquire()
        role = status.ACTIVE if held else status.STANDBY
        if role != self.role:
            self.role = role
            self.log("role", role=role, lock=self.lock.where)
        return held

    async def _reconcile(self, client: Client, number: int, started: float, wants: str):
        client.renew_budget()  # each cycle has the whole --timeout to spend on retries
        # The specs, the state and the control plane read and the plan made between the
        # program's hooks (the CLI pauses the cycle collector, as for a plan).
        memory.hooks.loading()
        try:
            planned = await self._plan(client, wants)
        finally:
            memory.hooks.cycle_planned()
        the_plan, live, desired, state, pending, selection = planned
        outcomes: dict = {}
        note = None
        if self.stopping.is_set():  # stopped while it planned: nothing new starts
            note = "not acted: stopping"
        elif selection.take or (pending and self.options.mode != modes.REPORT):
            outcomes, note = await self._act(client, selection, desired, state, pending)
        return self.report.summarise(number, started, wants, the_plan, live, selection,
                                     outcomes, note, commit=self.commit)

    async def _plan(self, client: Client, wants: str):
        """(plan, live, specs, state, pending intents, what the mode takes of the plan)."""
        desired, parsed = await asyncio.to_thread(self.specs.get)
        self.parsed = self.parsed or parsed
        if parsed:
            self.log("specs", loaded=len(desired), parsed=self.specs.parsed, dir=self.specs_dir,
                     commit=self.commit)
        if wants == "full":  # the quotas are read afresh with each full refresh
            self.reuse.projects.clear()
        state, pending = await asyncio.to_thread(self.state_reads.read)
        options = PlanOptions(refresh=True, refresh_mode=wants,
                              parallelism=self.options.parallelism, policy=self.options.policy,
                              refuse_protected=False)
        seen: dict[str, str] = {}
        the_plan, live, desired = await make_plan(client, specfolder.Loaded(desired), state, options,
                                                  pending, reuse=self.reuse, seen=seen)
        if wants == "auto":
            self.state_reads.vouch(the_plan, seen)
        chosen = modes.candidates(the_plan, self.options.mode, prune=self.options.prune)
        protected = planner.protected(chosen, desired, state)
        chosen = [c for c in chosen if c.address not in protected]
        denied = judging.denied_actions(the_plan, chosen, state, self.rules, self.options.policy)
        selection = modes.select(the_plan, self.options.mode, prune=self.options.prune,
                                 max_actions=self.options.max_actions, denied=denied,
                                 protected=protected)
        for address, why in protected.items():
            self.log("protected", address=address, reason=why)
        for address, block in denied.items():
            self.log("denied", address=address, rules=block.label, reason=block.why)
        return the_plan, live, desired, state, pending, selection

    async def _act(self, client: Client, selection: modes.Selection, desired, planned_state, pending):
        """Perform `selection.take` under the state's write lock, unless a person holds it
        or the state moved since it was read (then the next cycle plans again)."""
        with contextlib.ExitStack() as held:
            try:
                held.enter_context(self.store.lock("watch"))
            except errors.StateError as exc:  # a person's apply holds it: the next cycle acts
                self.log("deferred", reason=reporting.one_line(exc))
                return {}, f"not acted: {reporting.one_line(exc)}"
            return await self._act_locked(client, selection, desired, planned_state, pending)

    async def _act_locked(self, client: Client, selection: modes.Selection, desired,
                          planned_state, pending):
        from reconciler import executor

        state, pending_now = await asyncio.to_thread(self.store.read_with_pending)
        # A state never written has a new lineage at each read: the serial says it.
        moved = state.serial != planned_state.serial or (
            state.serial and state.lineage != planned_state.lineage)
        if moved or len(pending_now) != len(pending):
            self.state_reads.forget()
            self.log("deferred", reason="the state changed while the cycle planned")
            return {}, "not acted: the state changed while planning; planned again next cycle"
        if pending_now:
            await executor.recover(client, self.store, state, pending_now,
                                   on_event=lambda m: self.log("recovery", message=m))
            return {}, "recovered what a killed run left in flight; planned again next cycle"
        the_plan = Plan(changes=selection.take, lineage=state.lineage, serial=state.serial)
        ex = executor.Executor(client, self.store, state, {d.address: d for d in desired},
                               parallelism=self.options.parallelism,
                               on_event=lambda m: self.log("action", message=m))
        self.executor = ex
        self._acting_task = asyncio.ensure_future(ex.run(the_plan))
        try:
            result = await self._acting_task
        except asyncio.CancelledError:
            if self.signals < 2:
                raise
            result = ex.cancelled_result(the_plan)
        finally:
            self.executor = self._acting_task = None
        return {o.address: o for o in [*result.outcomes, *result.unknown]}, None

    # --- what a cycle says -----------------------------------------------------------

    def _publish(self, summary: status.CycleSummary, *, workloads, projects=None,
                 backoff: float = 0.0) -> None:
        self.cycles.append(summary)
        base = self.snapshot
        snapshot = replace(
            base, mode=self.options.mode, role=self.role or status.STANDBY, commit=self.commit,
            workloads=base.workloads if workloads is None else workloads,
            projects=base.projects if projects is None else projects,
            cycles=tuple(self.cycles), last_success_at=self.last_success,
            interval_s=self.options.interval_s, backoff_s=backoff,
            failed_in_row=self.failed_in_row)
        if self.role == status.STANDBY:
            snapshot = replace(snapshot, workloads=(), projects=())
        self.snapshot = snapshot
        self.board.publish(snapshot)
        for observe in self.observers:
            try:
                observe(snapshot)
            except Exception as exc:  # noqa: BLE001 - an alert that fails never stops the loop
                self.log("observer_failed", error=reporting.one_line(exc))
