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

from reconciler import errors, gpus, planner, plans
from reconciler.operations.judging import finish, load_policy
from reconciler.operations.reuse import Reuse
from reconciler.operations.planning import ClientFactory, PlanOptions, make_plan
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
        # Kept from one cycle to the next while nothing changed (`_read_state`, the plan
        # and the project reads in `reuse`, the GPU impact of the plan in `impact_for`):
        self.state_read: tuple | None = None  # (the store's version stamp, what it read)
        self.vouched: dict[str, str] = {}  # address -> list fingerprint found unchanged
        self.reuse = Reuse()
        self.impact_for: tuple | None = None
        self.statuses: tuple | None = None  # (what they were worked out from, the result)

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
        by_status0 = dict(getattr(client, "requests_by_status", {}))
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
                requests_by_status=_since(client, by_status0),
                cpu_s=time.process_time() - cpu0)
            self._publish(summary, workloads=None, backoff=wait)
            self.log("cycle", cycle=number, result="failed", error=message,
                     next_in_s=round(wait, 3), commit=self.commit)
            return wait
        self.failed_in_row = 0
        self.last_success = time.time()
        summary = replace(summary, duration_s=time.monotonic() - t0,
                          requests=getattr(client, "request_count", 0) - requests0,
                          requests_by_status=_since(client, by_status0),
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
        if wants == "full":  # the quotas are read afresh with each full refresh
            self.reuse.projects.clear()
        state, pending = await asyncio.to_thread(self._read_state)
        for address, fingerprint in self.vouched.items():
            record = state.resources.get(address)
            if record is not None:
                record.listed = fingerprint
        value, used = _refresh_option(wants)
        options = PlanOptions(refresh=value, refresh_mode=used,
                              parallelism=self.options.parallelism, policy=self.options.policy,
                              refuse_protected=False)
        seen: dict[str, str] = {}
        the_plan, live, desired = await make_plan(client, _Loaded(desired), state, options,
                                                  pending, reuse=self.reuse, seen=seen)
        if used == "auto":
            self._vouch(the_plan, seen)
        chosen = modes.candidates(the_plan, self.options.mode, prune=self.options.prune)
        protected = planner.protected(chosen, desired, state)
        chosen = [c for c in chosen if c.address not in protected]
        denied = self._denied(the_plan, chosen, state)
        selection = modes.select(the_plan, self.options.mode, prune=self.options.prune,
                                 max_actions=self.options.max_actions, denied=denied,
                                 protected=protected)
        for address, why in protected.items():
            self.log("protected", address=address, reason=why)
        for address, block in denied.items():
            self.log("denied", address=address, rules=block.label, reason=block.why)
        outcomes: dict = {}
        note = None
        if self.stopping.is_set():  # stopped while it planned: nothing new starts
            note = "not acted: stopping"
        elif selection.take or (pending and self.options.mode != modes.REPORT):
            outcomes, note = await self._act(client, selection, desired, state, pending)
        return self._summarise(number, started, used, the_plan, live, selection, outcomes,
                               note)

    def _read_state(self):
        """The state and the journal's open intents: the last ones read while the store's
        version stamp says neither changed (a cycle over an unchanged fleet reads nothing
        of it), else read again (and the fingerprints vouched for in memory forgotten:
        they held for the state read before)."""
        stamp = self.store.version_stamp()
        if stamp is not None and self.state_read is not None and self.state_read[0] == stamp:
            return self.state_read[1]
        read = self.store.read_with_pending()
        self.state_read = (stamp, read) if stamp is not None else None
        self.vouched.clear()
        return read

    def _vouch(self, the_plan: Plan, seen: dict[str, str]) -> None:
        """Remember, for the next cycles, the list fingerprint of each workload this auto
        cycle found unchanged, as `apply` records them in the state (watch writes nothing
        for it): a workload whose list entry moved on its own (a phase moving: Creating to
        Running) is read by GET once, not every cycle until the next apply."""
        for change in the_plan.changes:
            address = change.address
            if change.action is Action.NOOP and not change.changes_state \
                    and change.reason in _VOUCHED and address in seen:
                self.vouched[address] = seen[address]
            else:
                self.vouched.pop(address, None)

    def _denied(self, the_plan: Plan, chosen, state) -> dict[str, modes.Block]:
        """address -> the deny rules of the policy skips it: the rules judge the actions
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
        violations = [(v.address, v.message, r.name) for r in report.failed
                      for v in r.violations]
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
                self.state_read = None
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
        # The impact of a plan made again (or reused) with the same quotas is the same.
        made_for = (id(the_plan), sorted((the_plan.gpu_quotas or {}).items()),
                    sorted((the_plan.project_names or {}).items()))
        if the_plan.gpu_impact is None or made_for != self.impact_for:
            finish(the_plan, None, ())
            self.impact_for = made_for
        impact = the_plan.gpu_impact
        # The same plan, live, selection and failures as the last cycle, nothing done:
        # every workload's status is the last one (no need to work it out again).
        inputs = (the_plan, made_for, live, selection.skipped, selection.blocked,
                  selection.deferred, dict(self.failures))
        last = self.statuses
        if not outcomes and last is not None and last[0][0] is the_plan \
                and last[0][1:] == inputs[1:]:
            workloads, projects, counts, drift, healed = last[1]
        else:
            workloads, projects, counts, drift, healed = self._statuses(
                the_plan, impact, live, selection, outcomes, now)
            self.statuses = None if outcomes else (
                (*inputs[:2], dict(live or {}) if live is not None else None,
                 *inputs[3:]), (workloads, projects, counts, drift, healed))
        result = "ok" if not any(k.endswith("/failed") for k in counts) else "failed"
        summary = status.CycleSummary(
            number=number, started_at=started, duration_s=0.0, result=result,
            error=note if result == "ok" else "some actions failed",
            refresh=refresh, commit=self.commit, actions=dict(counts), drift_found=drift,
            healed=healed, deferred=len(selection.deferred))
        return summary, workloads, projects

    def _statuses(self, the_plan: Plan, impact, live, selection, outcomes, now):
        """Each workload's status (logging each change of its sync or health), the
        projects', this cycle's actions by `<action>/<result>`, drift found and healed."""
        held_by = {w.address: w for w in impact.workloads}
        counts: dict[str, int] = collections.Counter()
        healed = drift = 0
        workloads = []
        for change in the_plan.changes:
            address = change.address
            outcome = outcomes.get(address)
            acted = outcome is not None and outcome.ok
            drifting = health.is_healing(change)
            done = None  # this cycle's action on it, "<action>/<ok|failed|skipped|deferred>"
            if outcome is not None:
                key = "ok" if outcome.ok else "failed"
                if change.action is not Action.NOOP:
                    done = f"{change.action.value}/{key}"
                if outcome.ok:
                    self.failures.pop(address, None)
                    healed += drifting
                else:
                    self.failures[address] = outcome.message or outcome.status
                    self.log("action_failed", address=address,
                             action=change.action.value, error=outcome.message)
            elif change.action is not Action.NOOP and address in selection.blocked:
                done = (f"{change.action.value}/deferred" if address in selection.deferred
                        else f"{change.action.value}/skipped")
            if done is not None:
                counts[done] += 1
            drift += drifting
            sync, why = health.sync_of(change, acted=acted, error=self.failures.get(address))
            blocked = selection.blocked.get(address) if not acted else None
            if sync == status.SYNCED:
                self.failures.pop(address, None)
                blocked = None
            elif blocked is not None and sync != status.FAILED:
                if address in selection.deferred:
                    why = f"{why}; deferred: over --max-actions this cycle"
                else:
                    why = f"{why}; not done: {selection.skipped[address]}"
            body = live.get(address) if live else None
            if body is None and live is not None and address not in live \
                    and change.live_phase:
                # Vouched for by the workload list (--refresh=auto): not read, but listed
                # in this phase, which the plan carries.
                body = {"actualPhase": change.live_phase}
            state_health, health_why = health.health_of(change.kind, body)
            if body is None and change.reason == "completed":
                state_health, health_why = status.HEALTHY, "completed, then removed"
            if acted and change.action in _MOVES:  # live was read before the action
                state_health, health_why = _MOVES[change.action]
            phase = body.get("actualPhase") if body else None
            held = held_by.get(address)
            previous = self.seen.get(address)
            since = previous[2] if previous and previous[:2] == (sync, state_health) else now
            if previous and previous[:2] != (sync, state_health):
                self.log("workload", address=address, sync=sync, health=state_health,
                         was_sync=previous[0], was_health=previous[1], reason=why)
            self.seen[address] = (sync, state_health, since)
            workloads.append(status.WorkloadStatus(
                address=address, kind=change.kind, project=change.project_id,
                name=change.name, sync=sync, health=state_health, phase=phase,
                gpus=_gpus_text(held.before) if held is not None else None,
                reason=why or health_why,
                error=self.failures.get(address) if sync == status.FAILED else None,
                changed_at=since, acted=done, drift_found=drifting, blocked_by=blocked))
        known = {c.address for c in the_plan.changes}
        for gone in [a for a in self.seen if a not in known]:
            del self.seen[gone]
        projects = tuple(status.ProjectStatus(
            project=p.project_id, name=p.project_name, gpus_held=p.before.high,
            gpus_planned=p.after.high, quota=p.quota,
            quota_why=None if p.quota is not None else "not read, or not readable")
            for p in impact.projects)
        return tuple(workloads), projects, dict(counts), drift, healed

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


# The reasons of a no-op whose list fingerprint vouches for it next time (as `apply`'s).
_VOUCHED = (plans.REASON_UNCHANGED, plans.REASON_COMPLETED)

# The health of a workload an action of this cycle moved (its live body predates it).
_MOVES = {
    Action.CREATE: (status.PROGRESSING, "created, awaiting the next cycle"),
    Action.REPLACE: (status.PROGRESSING, "replaced, awaiting the next cycle"),
    Action.RESUME: (status.PROGRESSING, "resumed, awaiting the next cycle"),
    Action.SUSPEND: (status.SUSPENDED, None),
}


def _since(client, before: dict[str, int]) -> dict[str, int]:
    """The client's requests by answer since it counted `before` (the cycle's)."""
    now = getattr(client, "requests_by_status", {})
    return {k: n - before.get(k, 0) for k, n in sorted(now.items()) if n > before.get(k, 0)}


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
