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
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from reconciler import errors, gpus
from reconciler.operations.planning import (
    ClientFactory,
    PlanOptions,
    finish,
    load_policy,
    make_plan,
)
from reconciler.plans import Action, Plan
from reconciler.watch import health, modes, status

BACKOFF_MAX_S = 300.0  # the longest wait after failed cycles (or the interval, if longer)
CYCLES_KEPT = 20  # summaries a snapshot carries, the most recent last
GIT_TIMEOUT_S = 120.0

Log = Callable[..., None]  # log(event, **fields): one line per event


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


class _Loaded:
    """The specs already loaded, in the shape `make_plan` takes (a PendingSpecs')."""

    in_background = False

    def __init__(self, workloads) -> None:
        self._workloads = workloads

    async def wait(self):
        return self._workloads


class _Specs:
    """The specs of a folder, read again only when a file under it changed (its path,
    size, modification time or inode); then only the files whose content changed are
    parsed (the spec cache, kept in memory between cycles; `parsed` counts them)."""

    def __init__(self, directory: str) -> None:
        from reconciler.desired.cache import SpecCache

        self.directory = directory
        self._seen: tuple | None = None
        self._workloads: list | None = None
        self.cache = SpecCache.for_folder(directory) or SpecCache()
        self.parsed = 0  # files parsed by the last read

    def _fingerprint(self) -> tuple:
        out = []
        for root, dirs, files in os.walk(self.directory):
            dirs[:] = sorted(d for d in dirs if d != ".git")
            for name in sorted(files):
                if name.endswith((".yaml", ".yml", ".json")):
                    path = os.path.join(root, name)
                    with contextlib.suppress(OSError):
                        st = os.stat(path)
                        out.append((path, st.st_size, st.st_mtime_ns, st.st_ino))
        return tuple(out)

    def get(self) -> tuple[list, bool]:
        """The workloads, and whether they were parsed again for this call."""
        seen = self._fingerprint()
        if seen == self._seen and self._workloads is not None:
            return self._workloads, False
        from reconciler.desired import start_loading

        self._workloads, self._seen = None, None
        pending = start_loading(self.directory, processes=0, cache=self.cache)
        workloads = pending.result()
        pending.save_cache()
        self.parsed = pending.parsed
        self._workloads, self._seen = workloads, seen
        return workloads, True


def _refresh_option(mode: str) -> tuple[bool, str]:
    """What `PlanOptions.refresh` gets for the refresh mode a cycle asks (`auto` or
    `full`), and the mode the cycle then used (`PlanOptions.refresh_mode`)."""
    return True, mode


def _git(directory: str, *args: str) -> str:
    done = subprocess.run(["git", "-C", directory, *args], capture_output=True, text=True,
                          timeout=GIT_TIMEOUT_S, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        raise errors.ReconcileError(f"git {' '.join(args)} in {directory} failed: "
                                    + (lines[-1].strip() if lines else f"exit {done.returncode}"))
    return done.stdout.strip()


def pull(directory: str) -> str:
    """Fast-forward the git tree at `directory` (`git pull --ff-only`); its HEAD commit."""
    _git(directory, "pull", "--ff-only", "--quiet")
    return _git(directory, "rev-parse", "HEAD")


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
    rules = load_policy(options.policy)
    if options.pull:
        _git(specs_dir, "rev-parse", "--is-inside-work-tree")  # a clear error up front
    from reconciler.state import election

    if board is None:
        board = status.StatusBoard(_empty(specs_dir, store, options))
    loop = _Loop(specs_dir, store, connect, options, board, rules, list(observers), log,
                 election.controller_lock(store))
    return asyncio.run(loop.run())


def _empty(specs_dir: str, store, options: WatchOptions) -> status.Snapshot:
    return status.Snapshot(mode=options.mode, role=status.STANDBY, specs_dir=specs_dir,
                           state=store.where, interval_s=options.interval_s)


class _Loop:
    def __init__(self, specs_dir, store, connect, options: WatchOptions, board, rules,
                 observers, log: Log, lock) -> None:
        self.specs_dir, self.store, self.connect = specs_dir, store, connect
        self.options, self.board, self.rules = options, board, rules
        self.observers, self.log, self.lock = observers, log, lock
        self.specs = _Specs(specs_dir)
        self.cycles: collections.deque = collections.deque(maxlen=CYCLES_KEPT)
        self.stopping: asyncio.Event | None = None  # made inside the event loop
        self.signals = 0
        self.executor = None  # the executor of the actions in flight, if any
        self.failures: dict[str, str] = {}  # address -> its last action's error
        self.seen: dict[str, tuple[str, str, float]] = {}  # address -> sync, health, since
        self.failed_in_row = 0
        self.role: str | None = None  # known after the first cycle's election
        self.commit: str | None = None
        self.last_success: float | None = None
        self.acting = 0  # cycles this process was the active controller in
        self.snapshot = board.snapshot

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

    async def _cycle(self, client, number: int) -> float:
        started, t0, cpu0 = time.time(), time.monotonic(), time.process_time()
        requests0 = getattr(client, "request_count", 0)
        refresh = "full"
        try:
            if not await asyncio.to_thread(self._elected):
                self._publish(status.CycleSummary(number, started, time.monotonic() - t0,
                                                  "standby", refresh="none"), workloads=None)
                self.log("cycle", cycle=number, result="standby", lock=self.lock.where)
                return self.options.interval_s
            if self.options.pull:
                self.commit = await asyncio.to_thread(pull, self.specs_dir)
            wants = "full" if (self.acting % self.options.full_refresh_every) == 0 else "auto"
            self.acting += 1
            summary, workloads, projects = await self._reconcile(client, number, started, wants)
            refresh = summary.refresh
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failed cycle is reported, the loop goes on
            self.failed_in_row += 1
            message = _one_line(exc)
            wait = self._backoff()
            summary = status.CycleSummary(
                number, started, time.monotonic() - t0, "failed", error=message,
                refresh=refresh, commit=self.commit,
                requests=getattr(client, "request_count", 0) - requests0,
                cpu_s=time.process_time() - cpu0)
            self._publish(summary, workloads=None, backoff=wait)
            self.log("cycle", cycle=number, result="failed", error=message,
                     next_in_s=round(wait, 3), commit=self.commit)
            return wait
        self.failed_in_row = 0
        self.last_success = time.time()
        summary = replace(summary, duration_s=time.monotonic() - t0,
                          requests=getattr(client, "request_count", 0) - requests0,
                          cpu_s=time.process_time() - cpu0)
        self._publish(summary, workloads=workloads, projects=projects)
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

    async def _reconcile(self, client, number: int, started: float, wants: str):
        renew = getattr(client, "renew_budget", None)
        if renew is not None:  # each cycle has the whole --timeout to spend on retries
            renew()
        desired, parsed = await asyncio.to_thread(self.specs.get)
        if parsed:
            self.log("specs", loaded=len(desired), parsed=self.specs.parsed, dir=self.specs_dir,
                     commit=self.commit)
        state, pending = await asyncio.to_thread(self.store.read_with_pending)
        value, used = _refresh_option(wants)
        options = PlanOptions(refresh=value, refresh_mode=used,
                              parallelism=self.options.parallelism, policy=self.options.policy)
        the_plan, live, desired = await make_plan(client, _Loaded(desired), state, options,
                                                  pending)
        chosen = modes.candidates(the_plan, self.options.mode, prune=self.options.prune)
        denied = self._denied(the_plan, chosen, state)
        selection = modes.select(the_plan, self.options.mode, prune=self.options.prune,
                                 max_actions=self.options.max_actions, denied=denied)
        for address, why in denied.items():
            self.log("denied", address=address, reason=why)
        outcomes: dict = {}
        note = None
        if self.stopping.is_set():  # stopped while it planned: nothing new starts
            note = "not acted: stopping"
        elif selection.take or (pending and self.options.mode != modes.REPORT):
            outcomes, note = await self._act(client, selection, desired, state, pending)
        return self._summarise(number, started, used, the_plan, live, selection, outcomes,
                               note)

    def _denied(self, the_plan: Plan, chosen, state) -> dict[str, str]:
        """address -> why a deny rule of the policy skips it: the rules judge the actions
        the mode would take, as `apply --target` of them (the rest held as the state has
        them)."""
        if self.rules is None or not chosen:
            return {}
        acting = Plan(changes=list(chosen), lineage=the_plan.lineage, serial=the_plan.serial,
                      targets=[c.address for c in chosen], gpu_quotas=the_plan.gpu_quotas,
                      project_names=the_plan.project_names,
                      quota_unknown=the_plan.quota_unknown)
        picked = {c.address for c in chosen}
        acting.gpu_elsewhere = gpus.held_elsewhere(
            r for a, r in state.resources.items() if a not in picked)
        report = finish(acting, self.rules, self.options.policy).policy
        violations = [(v.address, v.message) for r in report.failed for v in r.violations]
        return modes.denied_by(violations, chosen)

    async def _act(self, client, selection: modes.Selection, desired, planned_state, pending):
        """Perform `selection.take` under the state's write lock, unless a person holds it
        or the state moved since it was read (then the next cycle plans again)."""
        from reconciler import executor

        try:
            lock = self.store.lock("watch")
            lock.__enter__()
        except errors.StateError as exc:
            self.log("deferred", reason=_one_line(exc))
            return {}, f"not acted: {_one_line(exc)}"
        try:
            state, pending_now = await asyncio.to_thread(self.store.read_with_pending)
            # A state never written has a new lineage at each read: the serial says it.
            moved = state.serial != planned_state.serial or (
                state.serial and state.lineage != planned_state.lineage)
            if moved or len(pending_now) != len(pending):
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
                result = executor._abandoned(ex, the_plan)
            finally:
                self.executor = self._acting_task = None
            return {o.address: o for o in [*result.outcomes, *result.unknown]}, None
        finally:
            lock.__exit__(None, None, None)

    # --- what a cycle says -----------------------------------------------------------

    def _summarise(self, number, started, refresh, the_plan: Plan, live, selection, outcomes,
                   note):
        now = time.time()
        impact = the_plan.gpu_impact or finish(the_plan, None, ()).impact
        counts: dict[str, int] = collections.Counter()
        healed = drift = 0
        workloads = []
        for change in the_plan.changes:
            outcome = outcomes.get(change.address)
            acted = outcome is not None and outcome.ok
            if outcome is not None:
                key = "ok" if outcome.ok else "failed"
                if change.action is not Action.NOOP:
                    counts[f"{change.action.value}/{key}"] += 1
                if outcome.ok:
                    self.failures.pop(change.address, None)
                    if health.is_healing(change):
                        healed += 1
                else:
                    self.failures[change.address] = outcome.message or outcome.status
                    self.log("action_failed", address=change.address,
                             action=change.action.value, error=outcome.message)
            elif change.address in selection.skipped and change.action is not Action.NOOP \
                    and selection.skipped[change.address].startswith("denied"):
                counts[f"{change.action.value}/skipped"] += 1
            if health.is_healing(change):
                drift += 1
            sync, why = health.sync_of(change, acted=acted,
                                       error=self.failures.get(change.address))
            if sync == status.SYNCED:
                self.failures.pop(change.address, None)
            elif not acted and change.address in selection.skipped and sync != status.FAILED:
                skipped = selection.skipped[change.address]
                if skipped.startswith("denied"):
                    why = f"{why}; {skipped}"
            elif change.address in selection.deferred:
                why = f"{why}; deferred: over --max-actions this cycle"
            body = live.get(change.address) if live else None
            if body is None and live is not None and change.address not in live \
                    and change.live_phase:
                # Vouched for by the workload list (--refresh=auto): not read, but listed
                # in this phase, which the plan carries.
                body = {"actualPhase": change.live_phase}
            state_health, health_why = health.health_of(change.kind, body)
            if body is None and change.reason == "completed":
                state_health, health_why = status.HEALTHY, "completed, then removed"
            phase = body.get("actualPhase") if body else None
            held = impact.workload(change.address)
            previous = self.seen.get(change.address)
            since = previous[2] if previous and previous[:2] == (sync, state_health) else now
            if previous and previous[:2] != (sync, state_health):
                self.log("workload", address=change.address, sync=sync, health=state_health,
                         was_sync=previous[0], was_health=previous[1], reason=why)
            self.seen[change.address] = (sync, state_health, since)
            workloads.append(status.WorkloadStatus(
                address=change.address, kind=change.kind, project=change.project_id,
                name=change.name, sync=sync, health=state_health, phase=phase,
                gpus=_gpus_text(held.before) if held is not None else None,
                reason=why or health_why,
                error=self.failures.get(change.address) if sync == status.FAILED else None,
                changed_at=since))
        known = {c.address for c in the_plan.changes}
        for gone in [a for a in self.seen if a not in known]:
            del self.seen[gone]
        projects = tuple(status.ProjectStatus(
            project=p.project_id, name=p.project_name, gpus_held=p.before.high,
            gpus_planned=p.after.high, quota=p.quota,
            quota_why=None if p.quota is not None else "not read, or not readable")
            for p in impact.projects)
        result = "ok" if not any(k.endswith("/failed") for k in counts) else "failed"
        summary = status.CycleSummary(
            number=number, started_at=started, duration_s=0.0, result=result,
            error=note if result == "ok" else "some actions failed",
            refresh=refresh, commit=self.commit, actions=dict(counts), drift_found=drift,
            healed=healed, deferred=len(selection.deferred))
        return summary, tuple(workloads), projects

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
                self.log("observer_failed", error=_one_line(exc))


def _gpus_text(g: gpus.Gpus) -> str:
    def num(x: float) -> str:
        return f"{x:g}"
    return num(g.low) if not g.is_range else f"{num(g.low)}..{num(g.high)}"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, errors.SpecError):
        n = len(exc.problems)
        first = exc.problems[0] if exc.problems else ""
        return f"{n} problem{'s' if n != 1 else ''} in the specs: {first}"
    lines = text.splitlines()
    return lines[0] + (f" (and {len(lines) - 1} more lines)" if len(lines) > 1 else "")
