"""Applying: `apply` of a specs folder, `apply` of a saved plan (`apply_saved`) and
`show` of one. Both applies lock the state, recover what a killed run left in flight,
plan (or check the saved plan is not stale), ask `approve`, then execute.

Caller: `reconciler.cli`, through `reconciler.operations`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from reconciler import errors
from reconciler.desired.types import DesiredWorkload
from reconciler.operations import running
from reconciler.operations.judging import finish, load_policy, refuse_denied
from reconciler.operations.planning import (
    Approve,
    ClientFactory,
    OnEvent,
    PlanOptions,
    check_specs_folder,
    loading,
    make_plan,
    prepare,
    quiet,
    resume_collector,
)
from reconciler.plans import Action, Plan
from reconciler.state.model import State

log = logging.getLogger("reconciler.operations")


def apply(specs_dir: str, store, connect: ClientFactory, options: PlanOptions, *,
          approve: Approve, on_event: OnEvent = quiet, progress=None,
          wait_timeout_s: float | None = None):
    """Recover what a killed run left in flight, plan, `approve(plan)`, then perform the
    plan and record each outcome; Ctrl-C or SIGTERM lets the actions in flight finish.
    `wait_timeout_s` (--timeout) bounds each wait for a resource to finish: a created
    project to be Ready, a deleted one to be gone (None: the executor's own bound).

    Returns the `executor.ApplyResult` (its `plan` is the plan performed); raises
    `errors.ReconcileError` when `approve` declines, `errors.PolicyDenied` (before
    `approve`) when the plan breaks a deny rule of `options.policy`."""
    rules = load_policy(options.policy)
    seen: dict[str, str] = {}  # the auto refresh's list fingerprints
    with loading(specs_dir, connect=connect) as specs, store.lock("apply"):
        state, pending = store.read_with_pending()
        specs.share_bodies({a: r.applied for a, r in state.resources.items()})

        async def make(client) -> tuple[Plan, list[DesiredWorkload]]:
            the_plan, _, desired = await make_plan(client, specs, state, options, pending,
                                                    progress=progress, seen=seen)
            folder = check_specs_folder(specs_dir, store, state, the_plan, options)
            if not options.targets:  # the state now follows this folder (its last write)
                state.specs_folder = folder
            finish(the_plan, rules, options.policy)
            resume_collector()  # the actions make garbage
            return the_plan, desired

        async def after(client, result) -> None:
            if options.refresh and options.refresh_mode == "auto":
                await record_fingerprints(client, state, result, seen,
                                          parallelism=options.parallelism)

        return _perform(store, connect, state, pending, make, options.parallelism, approve,
                        on_event, progress=progress, after=after,
                        wait_timeout_s=wait_timeout_s)


async def record_fingerprints(client, state: State, result, seen: dict[str, str], *,
                              parallelism: int) -> None:
    """After an apply, record in the state the list fingerprint of each workload it may
    vouch for (`ResourceState.listed`), so that the next auto plan GETs none of them: a
    no-op found unchanged gets the one the refresh listed; a workload acted on, the one of
    one list sweep of its projects now. A workload whose
    action failed, was not started or was abandoned keeps none (it is read next time); so
    does every workload acted on when the sweep fails (the apply's result stands).
    Run by the executor before it writes the state (`Executor.finishing`): what it records
    goes into that write."""
    from reconciler import plans, refresh

    the_plan = result.plan
    if the_plan is None:
        return
    ok = {o.address for o in result.outcomes if o.ok}
    unchanged = {c.address for c in the_plan.changes if c.action is Action.NOOP
                 and c.reason in (plans.REASON_UNCHANGED, plans.REASON_COMPLETED)}
    touched = {c.address for c in the_plan.changes
               if c.action is not Action.NOOP and c.address in ok}
    found = {a: fp for a, fp in seen.items() if a in unchanged}
    if touched and not result.interrupted:
        try:
            found.update(await refresh.sweep(client, state, touched, parallelism=parallelism))
        except errors.ReconcileError as exc:  # the API's errors too: the apply stands
            # Not recorded: the next plan reads what this apply touched.
            log.info("the list sweep after the apply failed (%s): the workloads it acted "
                     "on are read by the next plan", exc)
    for addr, rs in state.resources.items():
        if addr in touched or addr in unchanged:
            rs.listed = found.get(addr)


def apply_saved(path: str, store, connect: ClientFactory, *, parallelism: int,
                approve: Approve, on_event: OnEvent = quiet, progress=None,
                policy: Sequence[str] = (), wait_timeout_s: float | None = None):
    """`apply` of exactly the plan saved at `path`, on the same path as a specs folder's:
    recovery first, the same Ctrl-C handling, the same result, the same waits.

    Stale plans are refused (`errors.ReconcileError` saying "stale", nothing applied):
    - the state is judged as read, before recovery: it must be the one the plan was made
      against (lineage, serial, and the digest of its records and open journal intents,
      which a run killed after the plan changes without moving the serial). A plan made
      after a killed run saw that run's journal too, so it still applies, and recovery
      then resolves the journal before anything else happens;
    - every live workload the plan acts on is read again, after recovery, and must be as
      the plan read it (`planfile.live_problems`).
    Applying moves the serial even when nothing changed, so a plan applies once.
    A plan whose recorded policy results failed is refused (`errors.PolicyDenied`), and so
    is one that breaks a deny rule of `policy` (files given now), before anything else."""
    from reconciler import planfile

    saved = planfile.read(path)
    if saved.secrets is not None:  # its sensitive values, decrypted or read again
        saved = planfile.reveal(saved, planfile.plan_key(os.environ), _specs_now, path)
    finish(saved.plan, None, ())
    refuse_denied(saved.plan)
    if policy:
        finish(saved.plan, load_policy(policy), policy)
        refuse_denied(saved.plan)
    prepare(connect)
    with store.lock("apply"):
        state, pending = store.read_with_pending()
        planfile.adopt_new_state(saved, state)
        _refuse_stale(path, planfile.state_problems(saved, state, pending))
        if saved.specs_folder is not None:  # made from a folder, not --target: it follows
            state.specs_folder = saved.specs_folder

        async def make(client) -> tuple[Plan, list[DesiredWorkload]]:
            acted = planfile.acted_on(saved)
            if acted:
                from reconciler import refresh

                # (A workload whose project the plan creates is not live yet: not read.)
                live_now = await refresh.read_live(client, [d for d in saved.desired
                                                            if d.resolved], state,
                                                   parallelism=parallelism, only=acted,
                                                   progress=progress)
                _refuse_stale(path, planfile.live_problems(saved, live_now))
            return saved.plan, saved.desired

        # The serial moves even when nothing changed, unless a second signal abandoned the
        # run: its intents in flight stay open in the journal, as after a kill.
        return _perform(store, connect, state, pending, make, parallelism, approve,
                        on_event, progress=progress, wait_timeout_s=wait_timeout_s,
                        force_write=True)


def _specs_now(folder: str) -> list[DesiredWorkload]:
    """The specs of `folder` as they are now, their references resolved (a saved plan's
    sensitive values, read again)."""
    from reconciler.desired import load_specs

    return load_specs(folder)


def _perform(store, connect: ClientFactory, state: State, pending: list, make,
             parallelism: int, approve: Approve, on_event: OnEvent, *, progress=None,
             after=None, wait_timeout_s: float | None = None, force_write: bool = False):
    """The common path of both applies, with the state lock held: recover, `make` the
    plan, approve, execute (SIGINT, SIGTERM: `executor.run_interruptible`), with
    `after(client, result)` when given once the actions ended, before the executor writes
    the state."""
    from reconciler import executor

    async def run():
        async with connect() as client:
            # What a killed run left in flight is looked up by name before anything else.
            await executor.recover(client, store, state, pending, on_event=on_event)
            the_plan, desired = await make(client)
            refuse_denied(the_plan)
            if not approve(the_plan):
                raise errors.ReconcileError("apply cancelled.")
            # No-ops run too: they adopt workloads found by name and forget vanished ones.
            ex = executor.Executor(client, store, state, {d.address: d for d in desired},
                                   parallelism=parallelism, on_event=on_event,
                                   progress=progress,
                                   finishing=None if after is None
                                   else lambda result: after(client, result),
                                   force_write=force_write,
                                   **({} if wait_timeout_s is None
                                      else {"wait_timeout_s": wait_timeout_s}))
            return await executor.run_interruptible(ex, the_plan)

    return running.run(run())


def _refuse_stale(path: str, problems: list[str]) -> None:
    if problems:
        raise errors.ReconcileError(
            f"the saved plan {path} is stale: " + "; ".join(problems)
            + ". Nothing was applied; make a new plan.")


def show(path: str) -> Plan:
    """The plan saved at `path` (no API, no state)."""
    from reconciler import planfile

    return finish(planfile.read(path).plan, None, ())
