"""The operations behind the commands: validate, plan, apply (a specs folder or a saved
plan), drift and the state commands.

Each takes plain inputs (a specs folder, a state store, a client factory, options) and
returns plain results (a `PlanResult`, an `executor.ApplyResult`, a `drift.DriftReport`,
...); it loads the specs, reads and locks the state, refreshes live, plans, recovers and
executes, in the order and with the overlap the command needs. What only a command line
can do comes in as callbacks: `on_event(message)` for progress lines and
`approve(plan) -> bool` between the plan and its execution (it shows the plan and asks).
Caller: `reconciler.cli`, which turns flags into these inputs and renders the results.

The client factory is a callable returning an async context manager that yields an API
client (`reconciler.api.RunaiClient` or anything with its methods); it is called only
when the operation needs the API.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, AsyncContextManager

from reconciler import errors, gpus, planner
from reconciler.desired.types import DesiredWorkload
from reconciler.plans import Plan
from reconciler.state import journal
from reconciler.state.model import ResourceState, State

ClientFactory = Callable[[], AsyncContextManager[Any]]
OnEvent = Callable[[str], None]
Approve = Callable[[Plan], bool]


@dataclass
class PlanOptions:
    targets: Sequence[str] = ()
    replace: Sequence[str] = ()
    destroy: bool = False
    refresh: bool = True
    parallelism: int = 64
    policy: Sequence[str] = ()  # policy files (--policy): their rules are checked on the plan


@dataclass(repr=False)  # a plan's inputs are large: the default repr would print them all
class PlanResult:
    plan: Plan
    desired: list[DesiredWorkload]  # the specs it was made from
    live: dict[str, dict | None]  # the live bodies read for it (empty without refresh)
    saved_to: str | None = None  # where `out=` wrote it


def _quiet(message: str) -> None:
    pass


@contextlib.contextmanager
def _loading(directory: str, *, caller_busy: bool = True) -> Iterator[Any]:
    """The specs loading (on the other core for a big folder) while the caller reads the
    state and the live workloads; stopped when the operation ends. `caller_busy=False`
    when the caller only waits (validate): then the loaders take every core."""
    from reconciler.desired import start_loading

    pending = start_loading(directory, caller_busy=caller_busy)
    try:
        yield pending
    finally:
        pending.cancel()


# --- validate and plan --------------------------------------------------------------


def validate(specs_dir: str) -> list[DesiredWorkload]:
    """The specs of `specs_dir`, checked offline; `errors.SpecError` lists every problem."""
    with _loading(specs_dir, caller_busy=False) as specs:
        return list(specs.result())


def plan(specs_dir: str, store, connect: ClientFactory, options: PlanOptions, *,
         out: str | None = None, progress=None) -> PlanResult:
    """The plan for `specs_dir` against the state and (with `options.refresh`) live.

    Makes no API writes and does not change the state. With `out`, the plan is saved
    there (`planfile`) for `apply` of exactly it. `progress` (a `reconciler.progress.Progress`,
    here and below) counts the refresh's reads, and apply's actions. With `options.policy`,
    the plan's `policy` holds the rules' results (a bad policy file stops before anything
    is read)."""
    rules = load_policy(options.policy)
    with _loading(specs_dir) as specs:
        state, pending = store.read_with_pending()

        async def run() -> tuple[Plan, dict, list]:
            if not options.refresh:
                desired = await _resolved_without_refresh(specs, connect)
                return await _make_plan(None, specs, state, options, pending, desired=desired)
            async with connect() as client:
                return await _make_plan(client, specs, state, options, pending,
                                        progress=progress)

        the_plan, live, desired = asyncio.run(run())
    finish(the_plan, rules, options.policy)
    result = PlanResult(plan=the_plan, desired=list(desired), live=live)
    if out:
        from reconciler import planfile

        saved = planfile.SavedPlan(plan=the_plan, desired=result.desired,
                                   live=planfile.fingerprints(the_plan, live),
                                   state_digest=planfile.state_digest(state, pending),
                                   replace=list(options.replace), destroy=options.destroy,
                                   refresh=options.refresh)
        try:
            planfile.write(out, saved)
        except OSError as exc:
            raise errors.ReconcileError(f"cannot write the plan to {out}: {exc.strerror}") from None
        result.saved_to = out
    return result


async def _make_plan(client, specs, state: State, options: PlanOptions,
                     pending: Sequence[journal.Intent] = (), *,
                     desired: list[DesiredWorkload] | None = None,
                     progress=None) -> tuple[Plan, dict, list]:
    """`_refresh_and_plan`, with the GPU quotas of the plan's projects on it
    (`Plan.gpu_quotas`): those of the state's projects read during the refresh, not after
    it, then those only the specs name. Without a client, none is read."""
    early = None
    if client is not None:
        early = asyncio.ensure_future(read_projects(client, {
            r.project_id for a, r in state.resources.items()
            if not options.targets or a in options.targets}))
    try:
        the_plan, live, desired = await _refresh_and_plan(client, specs, state, options,
                                                          pending, desired=desired,
                                                          progress=progress)
        if early is not None:
            projects = {c.project_id for c in the_plan.changes}
            read = await early
            read.update(await read_projects(client, projects - read.keys()))
            the_plan.gpu_quotas = {p: read[p].quota for p in projects}
            the_plan.quota_unknown = {p: read[p].unknown for p in sorted(projects)
                                      if read[p].unknown is not None}
            the_plan.project_names = {p: read[p].name for p in sorted(projects)
                                      if read[p].name is not None}
        if options.targets:  # the totals of the targets' projects count the others too
            the_plan.gpu_elsewhere = gpus.held_elsewhere(
                r for a, r in state.resources.items() if a not in set(options.targets))
    finally:
        if early is not None:  # a refresh or a plan that failed leaves it unfinished
            early.cancel()
            await asyncio.gather(early, return_exceptions=True)
    return the_plan, live, desired


async def _refresh_and_plan(client, specs, state: State, options: PlanOptions,
                            pending: Sequence[journal.Intent] = (), *,
                            desired: list[DesiredWorkload] | None = None,
                            progress=None) -> tuple[Plan, dict, list]:
    """The plan, the live bodies read for it and the specs. `specs` is a PendingSpecs: the
    GETs of the workloads the state knows start while the specs still load. The specs'
    project names are resolved once they are loaded, before the lookups by name.
    Without a client, `desired` are the specs (already resolved). `pending`: the
    journal's open intents (a killed run's), whose deletes and creates the plan finishes."""
    live: dict[str, dict | None] = {}
    if client is not None:
        from reconciler import refresh  # brings the HTTP client: --no-refresh goes without

        async def specs_in() -> list[DesiredWorkload]:
            nonlocal desired
            desired = await refresh.resolve_projects(client, await specs.wait())
            return desired

        # While the specs load on the other core: the token and the transport's set-up.
        warm = asyncio.ensure_future(client.connect()) if specs.in_background else None
        try:
            live = await refresh.read_live(client, specs_in(), state,
                                           parallelism=options.parallelism,
                                           only=set(options.targets) or None,
                                           progress=progress)
        finally:
            if warm is not None:  # its failure, if any, the requests have met and said
                warm.cancel()
                await asyncio.gather(warm, return_exceptions=True)
    if desired is None:  # a refresh ends only once the specs are in (or raises)
        raise AssertionError("the specs were never read")
    the_plan = planner.make_plan(desired, state, live, targets=options.targets,
                                 replace=options.replace, destroy=options.destroy,
                                 interrupted=interrupted(pending))
    return the_plan, live, desired


@dataclass(frozen=True)
class ProjectRead:
    """What a project's read gave a plan: its GPU quota, its name, and when the quota is
    unknown, why (`unknown`: the read that failed, or what the answer lacked; None with
    a quota, or with a negative one, which sets no limit)."""
    quota: float | None = None
    name: str | None = None
    unknown: str | None = None


async def read_projects(client, project_ids) -> dict[str, ProjectRead]:
    """Each project's `GET /api/v1/org-unit/projects/{id}`, one GET per project, all at
    once. A project not found (404), not readable with these credentials (403), whose read
    failed (a 5xx, a timeout, after the retries) or whose answer cannot be read has its
    quota unknown, and says why: the plan is made, and a policy rule that needs the quota
    fails it. The failed reads and odd answers are warned about too. Another refusal (a
    400) is an error."""
    from reconciler.api import errors as api_errors

    path = "GET /api/v1/org-unit/projects/"

    async def one(project_id: str) -> ProjectRead:
        try:
            body = await client.get_project(project_id)
        except api_errors.NotFound:
            return ProjectRead(unknown=f"{path}{project_id} answered 404: no such project")
        except api_errors.Unauthorized as exc:
            if exc.status == 403:
                return ProjectRead(unknown=f"{path}{project_id} answered 403: not readable "
                                           "with these credentials")
            raise
        except (api_errors.RetryableError, api_errors.PermanentError) as exc:
            # Given up on (a 5xx, a timeout, after the retries), or an answer that is not
            # JSON: unknown. What the API refuses of the request itself (a 400) is an error.
            if isinstance(exc, api_errors.PermanentError) and not (
                    exc.status is not None and 200 <= exc.status < 300):
                raise
            _unread_quota(project_id, str(exc))
            return ProjectRead(unknown=f"{path}{project_id} failed: {exc}")
        quota, problem = gpus.read_quota(body)
        name = body.get("name") if isinstance(body, dict) else None
        name = name if isinstance(name, str) else None
        if problem:
            _unread_quota(project_id, problem)
            return ProjectRead(name=name, unknown=f"{path}{project_id}: {problem}")
        if quota is None and not gpus.unlimited(body):
            return ProjectRead(name=name, unknown=f"{path}{project_id} gives no GPU quota "
                                                  "(no resources[].gpu.deserved)")
        return ProjectRead(quota=quota, name=name)

    ids = sorted(project_ids)
    return dict(zip(ids, await asyncio.gather(*map(one, ids))))


def _unread_quota(project_id: str, why: str) -> None:
    """A quota the API did not give in a readable form: the plan goes on without it."""
    import logging

    logging.getLogger("reconciler.operations").warning(
        "project %s's GPU quota could not be read (%s); it is unknown in this plan",
        project_id, why)


async def _resolved_without_refresh(specs, connect: ClientFactory) -> list[DesiredWorkload]:
    """The specs, with the API asked only when some name their project (`project:`):
    even without a refresh, a name's id comes from the API."""
    desired = list(await specs.wait())
    if all(d.resolved for d in desired):
        return desired
    from reconciler import refresh

    async with connect() as client:
        return await refresh.resolve_projects(client, desired)


# --- apply --------------------------------------------------------------------------


def apply(specs_dir: str, store, connect: ClientFactory, options: PlanOptions, *,
          approve: Approve, on_event: OnEvent = _quiet, progress=None):
    """Recover what a killed run left in flight, plan, `approve(plan)`, then perform the
    plan and record each outcome; Ctrl-C or SIGTERM lets the actions in flight finish.

    Returns the `executor.ApplyResult` (its `plan` is the plan performed); raises
    `errors.ReconcileError` when `approve` declines, `errors.PolicyDenied` (before
    `approve`) when the plan breaks a deny rule of `options.policy`."""
    rules = load_policy(options.policy)
    with _loading(specs_dir) as specs, store.lock("apply"):
        state, pending = store.read_with_pending()

        async def make(client) -> tuple[Plan, list[DesiredWorkload]]:
            the_plan, _, desired = await _make_plan(client, specs, state, options, pending,
                                                    progress=progress)
            finish(the_plan, rules, options.policy)
            return the_plan, desired

        return _perform(store, connect, state, pending, make, options.parallelism, approve,
                        on_event, progress=progress)


def apply_saved(path: str, store, connect: ClientFactory, *, parallelism: int,
                approve: Approve, on_event: OnEvent = _quiet, progress=None,
                policy: Sequence[str] = ()):
    """`apply` of exactly the plan saved at `path`, on the same path as a specs folder's:
    recovery first, the same Ctrl-C handling, the same result.

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
    finish(saved.plan, None, ())
    refuse_denied(saved.plan)
    if policy:
        finish(saved.plan, load_policy(policy), policy)
        refuse_denied(saved.plan)
    with store.lock("apply"):
        state, pending = store.read_with_pending()
        planfile.adopt_new_state(saved, state)
        _refuse_stale(path, planfile.state_problems(saved, state, pending))

        async def make(client) -> tuple[Plan, list[DesiredWorkload]]:
            acted = planfile.acted_on(saved)
            if acted:
                from reconciler import refresh

                live_now = await refresh.read_live(client, saved.desired, state,
                                                   parallelism=parallelism, only=acted,
                                                   progress=progress)
                _refuse_stale(path, planfile.live_problems(saved, live_now))
            return saved.plan, saved.desired

        result = _perform(store, connect, state, pending, make, parallelism, approve, on_event,
                          progress=progress)
        store.write(state, force=True)
    return result


def _perform(store, connect: ClientFactory, state: State, pending: list, make,
             parallelism: int, approve: Approve, on_event: OnEvent, *, progress=None):
    """The common path of both applies, with the state lock held: recover, `make` the
    plan, approve, execute (SIGINT, SIGTERM: `executor.run_interruptible`)."""
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
                                   progress=progress)
            return await executor.run_interruptible(ex, the_plan)

    return asyncio.run(run())


def _refuse_stale(path: str, problems: list[str]) -> None:
    if problems:
        raise errors.ReconcileError(
            f"the saved plan {path} is stale: " + "; ".join(problems)
            + ". Nothing was applied; make a new plan.")


def show(path: str) -> Plan:
    """The plan saved at `path` (no API, no state)."""
    from reconciler import planfile

    return finish(planfile.read(path).plan, None, ())


# --- policy -------------------------------------------------------------------------


def load_policy(paths: Sequence[str]) -> list | None:
    """The rules (`policy.Source`s) of the policy files at `paths`, None without any;
    `errors.PolicyFileError` lists every problem (file, line, field) of every file."""
    if not paths:
        return None
    from reconciler import policy
    from reconciler.desired import documents
    from reconciler.desired.sources import Problem

    rules: list = []
    problems: list[Problem] = []
    for path in paths:
        doc, raw, found = documents.read_model(path, policy.PolicyFile)
        problems += [Problem(p.file, p.line, p.path, policy.problem_words(p.path, p.message))
                     for p in found]
        if doc is not None and raw is not None:
            rules += policy.sources_of(path, doc, raw.line_of)
    problems += [Problem(f, line, "", m) for f, line, m in policy.duplicate_names(rules)]
    if problems:
        raise errors.PolicyFileError([str(p) for p in problems])
    return rules


def finish(the_plan: Plan, rules: list | None, files: Sequence[str]) -> Plan:
    """Finish `the_plan` for the renderers, the executor and a saved plan: its GPU impact
    (from its changes and the quota reads it carries) and, with `rules` (None: no
    policy, and a saved plan keeps the results it recorded), their results
    (`plan.policy`), which read that impact. Returns the plan."""
    the_plan.gpu_impact = gpus.impact_of(the_plan)
    if rules is not None:
        from reconciler import policy

        the_plan.policy = policy.evaluate(rules, the_plan, files=files)
    return the_plan


def policy_refusal(the_plan: Plan) -> str | None:
    """Why apply refuses `the_plan` for its policy results, None when it does not."""
    report = the_plan.policy
    if report is None or report.passed:
        return None
    failed = report.failed
    return (f"the plan breaks {len(failed)} deny rule{'s' if len(failed) != 1 else ''} of the "
            f"policy ({', '.join(r.name for r in failed)})")


def refuse_denied(the_plan: Plan) -> None:
    """`errors.PolicyDenied` when the plan's policy results failed: nothing is applied."""
    reason = policy_refusal(the_plan)
    if reason:
        raise errors.PolicyDenied(f"{reason}: nothing was applied.", the_plan)


# --- drift --------------------------------------------------------------------------


def drift(specs_dir: str, store, connect: ClientFactory, *, parallelism: int, progress=None):
    """What changed live behind the reconciler's back (`drift.DriftReport`): a refresh of
    the workloads the state knows, compared with the state; never writes anything (nor
    recovers: the workloads a killed apply was deleting or creating, from the journal's
    open intents, are reported as an interrupted apply, not as drift).

    A state that was never written is an error naming the store: a scheduled check
    pointed at the wrong (or an empty) state must not pass forever with "no drift"."""
    from reconciler import drift as drifts

    with _loading(specs_dir) as specs:
        state, pending = store.read_with_pending()
        if never_written(store, state):
            raise errors.ReconcileError(
                f"no state at {store.where}: nothing has been applied with it, so "
                "nothing can drift. Point --state at the state your applies write.")
        if not state.resources:
            return drifts.find_drift(asyncio.run(_resolved_without_refresh(specs, connect)),
                                     state, {})

        async def run() -> tuple[dict, list]:
            from reconciler import refresh

            async with connect() as client:
                resolved: list[DesiredWorkload] = []

                async def specs_in() -> list[DesiredWorkload]:
                    resolved.extend(await refresh.resolve_projects(client, await specs.wait()))
                    return resolved

                live = await refresh.read_live(client, specs_in(), state,
                                               parallelism=parallelism,
                                               only=set(state.resources), progress=progress)
                return live, resolved

        live, desired = asyncio.run(run())
    return drifts.find_drift(list(desired), state, live, interrupted=interrupted(pending))


def interrupted(pending: Sequence[journal.Intent]) -> frozenset[str]:
    """The addresses of open intents (a run killed, or abandoned, in their middle) that
    delete or create a workload (a replace is a delete, then a create)."""
    return frozenset(i.address for i in pending if i.action in ("delete", "create"))


# --- import -------------------------------------------------------------------------


_UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")


@dataclass
class ImportResult:
    adopted: list[tuple[str, str]]  # (address, workload id) now in the state
    serial: int  # the state's serial after the write (unchanged when nothing was adopted)
    not_found: list[str]  # addresses of specs with no live workload (import --all)
    skipped: list[tuple[str, str]]  # (address, why not) of specs found but not adopted
    known: int = 0  # specs whose address the state holds already


def import_workload(store, connect: ClientFactory, address: str,
                    workload_id: str) -> ImportResult:
    """Record the live workload `workload_id` under `address` without any API write.

    Refused (`errors.ReconcileError`, nothing written): a malformed address, one the
    state holds already (or a workload it holds under another address), an id no kind
    knows, a workload whose kind, project or name is not the address's, one being
    deleted, and a state whose journal holds an interrupted apply's actions."""
    from reconciler import adoption, kinds, phases

    try:
        kind_name = kinds.parse_address(address)[0]
    except ValueError as exc:
        raise errors.ReconcileError(str(exc)) from None
    # The API's workloadId is a UUID (format: uuid); anything else would be sent as a path
    # ("", "a/b", "..": another endpoint, or none).
    if not _UUID.fullmatch(workload_id):
        raise errors.ReconcileError(
            f"workload id {workload_id!r}: expected a workload's UUID, as the API's workload "
            "list gives it (e.g. 3f2504e0-4f89-41d3-9a0c-0305e82c3301); nothing was written")
    with store.lock("import"):
        state, pending = store.read_with_pending()
        _refuse_pending(store, pending, "import")
        _refuse_known(state, address, workload_id)

        async def run() -> tuple[kinds.Kind, dict]:
            async with connect() as client:
                return await _live_by_id(client, kinds.get(kind_name), workload_id)

        found_kind, live = asyncio.run(run())
        problems = adoption.mismatches(address, found_kind.name, live)
        if problems:
            raise errors.ReconcileError(
                f"workload {workload_id} does not match {address}: " + "; ".join(problems)
                + "; nothing was written")
        if phases.live_gone(live):
            raise errors.ReconcileError(f"workload {workload_id} is being deleted; nothing "
                                        "was written")
        state.set(adoption.record(found_kind, live))
        store.write(state)
    return ImportResult(adopted=[(address, workload_id)], serial=state.serial, not_found=[],
                        skipped=[])


def _refuse_known(state: State, address: str, workload_id: str) -> None:
    held = state.resources.get(address)
    if held is not None:
        raise errors.ReconcileError(
            f"{address} is in the state already (workload {held.workload_id}); nothing was "
            f"written. `runai-reconcile state rm {address}` first to import it again")
    for other, res in state.resources.items():
        if res.workload_id == workload_id:
            raise errors.ReconcileError(
                f"workload {workload_id} is in the state already, as {other}; nothing was "
                "written")


async def _live_by_id(client, kind, workload_id: str):
    """(its kind, the GET body) of the workload `workload_id`: asked of `kind` first, and
    when that kind does not know it, of the others (the id may be another kind's)."""
    from reconciler import kinds

    found = await _get_any(client, workload_id,
                           [kind, *(k for k in kinds.KINDS.values() if k is not kind)])
    if found is None:
        raise errors.ReconcileError(f"no workload with id {workload_id} (no kind knows it); "
                                    "nothing was written")
    return found


def import_all(specs_dir: str, store, connect: ClientFactory, *,
               projects: Sequence[str] = (), kind_names: Sequence[str] = (),
               parallelism: int = 64) -> ImportResult:
    """Record every live workload that a spec of `specs_dir` names and the state does not
    hold, without any API write, in one state write; `projects` (ids or names) and
    `kind_names` limit the specs considered. The live workloads are found with one
    workload list (pages of 500) and read with one GET each."""
    from reconciler import adoption, kinds, phases, refresh
    from reconciler.api import errors as api_errors

    with _loading(specs_dir) as specs, store.lock("import"):
        state, pending = store.read_with_pending()
        _refuse_pending(store, pending, "import")

        async def run():
            async with connect() as client:
                desired = await refresh.resolve_projects(client, await specs.wait())
                chosen = _chosen(desired, projects, kind_names)
                wanted = [d for d in chosen if d.address not in state.resources]
                if not wanted:
                    return chosen, wanted, {}
                ids = sorted({d.project_id for d in wanted})
                listed = await client.iter_workloads(
                    filter_by=[f"projectId=={ids[0]}"] if len(ids) == 1 else None)
                found = adoption.match_listed(wanted, listed)
                sem = asyncio.Semaphore(max(1, parallelism))

                async def get(d: DesiredWorkload):
                    async with sem:
                        try:
                            return await client.get(kinds.get(d.kind), found[d.address])
                        except api_errors.NotFound:
                            return None  # another kind holds the name, or it is gone

                listed_wanted = [d for d in wanted if d.address in found]
                bodies = await asyncio.gather(*map(get, listed_wanted))
                return chosen, wanted, {d.address: b for d, b in zip(listed_wanted, bodies)}

        chosen, wanted, live = asyncio.run(run())
        result = ImportResult(adopted=[], serial=state.serial, not_found=[], skipped=[],
                              known=len(chosen) - len(wanted))
        for d in sorted(wanted, key=lambda d: d.address):
            body = live.get(d.address)
            if d.address not in live:
                result.not_found.append(d.address)
            elif body is None:
                result.skipped.append((d.address, "its name is taken by a workload of "
                                       "another kind"))
            elif phases.live_gone(body):
                result.skipped.append((d.address, f"workload {body.get('workloadId')} is "
                                       "being deleted"))
            else:
                state.set(adoption.record(kinds.get(d.kind), body, desired=d))
                result.adopted.append((d.address, str(body.get("workloadId"))))
        if result.adopted:
            store.write(state)
            result.serial = state.serial
    return result


def _chosen(desired: Sequence[DesiredWorkload], projects: Sequence[str],
            kind_names: Sequence[str]) -> list[DesiredWorkload]:
    """The specs of the projects (ids or names) and kinds asked for; a project that no
    spec names is an error (a typo must not read as "nothing to import")."""
    unknown = [p for p in projects
               if not any(p in (d.project_id, d.project_name) for d in desired)]
    if unknown:
        raise errors.ReconcileError(
            "--project " + ", ".join(unknown) + ": no spec names this project (by id or "
            "name); nothing was written")
    return [d for d in desired
            if (not projects or d.project_id in projects or d.project_name in projects)
            and (not kind_names or d.kind in kind_names)]


# --- state --------------------------------------------------------------------------


def state_list(store) -> list[tuple[str, str | None]]:
    """(address, project name or None) of each workload the state tracks, sorted."""
    return [(a, r.project_name) for a, r in sorted(store.read().resources.items())]


def never_written(store, state: State | None = None) -> bool:
    """No state at the store: nothing was ever written there, nor journaled (`state`: the
    store's, when the caller has read it already)."""
    state = store.read() if state is None else state
    return not state.resources and state.serial == 0 and not store.has_journal()


def state_show(store, address: str) -> ResourceState:
    res = store.read().resources.get(address)
    if res is None:
        raise errors.ReconcileError(f"no such address in the state: {address}")
    return res


def state_rm(store, addresses: Sequence[str]) -> list[str]:
    """Forget `addresses` (all or none) without touching the workloads; returns them."""
    with store.lock("state rm"):
        state = store.read()
        missing = [a for a in addresses if a not in state.resources]
        if missing:
            raise errors.ReconcileError("no such address in the state: " + ", ".join(missing))
        for a in addresses:
            del state.resources[a]
        store.write(state)
    return list(addresses)


def force_unlock(store, lock_id: str):
    """Remove the lock `lock_id` whose holder is gone; returns its `LockInfo`."""
    return store.force_unlock(lock_id)


def state_history(store) -> list:
    """The versions the store keeps, newest first (`state.store.Version`)."""
    return store.history()


def _refuse_pending(store, pending: list, doing: str) -> None:
    if pending:
        raise errors.ReconcileError(
            f"{store.where} has {len(pending)} action(s) of an interrupted apply still open "
            f"in its journal; run apply first (it looks them up and records them), then "
            f"{doing}")


def state_restore(store, serial: int) -> State:
    """Write the kept version `serial` again, as a new serial, under the lock (the way
    back after a wrong `state rm`); the workloads are not touched. Returns it as written."""
    with store.lock(f"state restore {serial}"):
        current, pending = store.read_with_pending()
        _refuse_pending(store, pending, "restore")
        if serial == current.serial:
            raise errors.ReconcileError(f"serial {serial} is the current version of "
                                        f"{store.where}; nothing to restore")
        old = store.read_version(serial)
        if old.lineage != current.lineage:
            raise errors.ReconcileError(
                f"serial {serial} of {store.where} belongs to another lineage "
                f"({old.lineage}) than the current state ({current.lineage})")
        old.serial = current.serial
        store.write(old, force=True)
    return old


@dataclass
class Migrated:
    state: State  # as the target holds it now
    copied: bool  # False when the target held this very version already


def state_migrate(source, target) -> Migrated:
    """Copy the source's current state to `target`, serial and lineage kept, with an empty
    journal; the source is left as it was. Both locks are held while it copies.

    Refused: a source with journal intents still open (apply first), a source with no
    state, a target holding a state of another lineage, or a newer or different version
    of this one."""
    if source.where == target.where:
        raise errors.ReconcileError(f"the target is the source ({source.where}): give "
                                    "another --to or --to-name")
    with source.lock("state migrate"), target.lock("state migrate"):
        state, pending = source.read_with_pending()
        _refuse_pending(source, pending, "migrate")
        if state.serial == 0 and not state.resources:
            raise errors.ReconcileError(f"no state at {source.where}: nothing to migrate")
        there, theirs = target.read_with_pending()
        if there.serial or there.resources or theirs:
            if there.lineage != state.lineage:
                raise errors.ReconcileError(
                    f"refusing to migrate: {target.where} holds a state of another lineage "
                    f"({there.lineage}, serial {there.serial}) than {source.where} "
                    f"({state.lineage}); give another --to or --to-name")
            _refuse_pending(target, theirs, "migrate")
            if there.serial == state.serial and there.same_content(state):
                return Migrated(there, copied=False)
            if there.serial >= state.serial:
                raise errors.ReconcileError(
                    f"refusing to migrate: {target.where} holds serial {there.serial} of this "
                    f"state, newer than (or different from) serial {state.serial} at "
                    f"{source.where}")
        copy = state.copy()
        copy.serial = state.serial - 1  # a write raises it: the target keeps the serial
        target.write(copy, force=True)
    return Migrated(copy, copied=True)


# --- export -------------------------------------------------------------------------


@dataclass
class ExportOptions:
    projects: Sequence[str] = ()  # project ids or names: only these
    kinds: Sequence[str] = ()  # kind names: only these
    names: Sequence[str] = ()  # shell-style globs of workload names: only those matching one
    force: bool = False  # overwrite existing files
    include_secrets: bool = False  # write sensitive values instead of the placeholder
    defaults: bool = False  # factor what a folder's specs share into its _defaults.yaml
    parallelism: int = 64


@dataclass
class Exported:
    address: str
    path: str  # the file written
    workload_id: str
    secrets: list[str]  # the dotted paths holding the placeholder: to supply before validate


@dataclass
class ExportResult:
    out_dir: str
    exported: list[Exported]
    skipped: dict[str, int]  # why ("deleted", "completed") -> how many
    defaults_files: list[str]  # the _defaults.yaml files written (--defaults)


def export(out_dir: str, connect: ClientFactory, options: ExportOptions) -> ExportResult:
    """Write one spec file per live workload, `<out_dir>/<project>/<kind>/<name>.yaml`
    (`export.spec_from_live`), and nothing when any of them exists already, unless
    `options.force`. Reads the workloads list once, then GETs each workload; no API write."""
    from reconciler import export as exporting

    if not out_dir.strip():
        raise errors.ReconcileError("--out: an empty folder name (give . for this folder); "
                                    "nothing was written")
    if os.path.lexists(out_dir) and not os.path.isdir(out_dir):
        raise errors.ReconcileError(f"--out {out_dir}: not a folder (a file, or a link to "
                                    "none); nothing was written")
    found, skipped = asyncio.run(_read_for_export(connect, options))
    docs: dict[str, dict] = {}
    ids: dict[str, tuple[str, str]] = {}  # relative path -> (address, workload id)
    for item, live, kind, project_name in found:
        doc = exporting.spec_from_live(kind.name, live, project_name=project_name,
                                       include_secrets=options.include_secrets)
        rel = exporting.relative_path(doc)
        docs[rel] = doc
        ids[rel] = (exporting.address(doc, str(live.get("projectId"))), item["id"])
    shared: dict[str, dict] = {}
    intended = docs
    if options.defaults:
        docs, shared = exporting.factor_defaults(docs, folders=_own_folders(out_dir, docs))
    _refuse_foreign_defaults(out_dir, intended, docs, shared)
    files: dict[str, str] = {}
    exported: list[Exported] = []
    for rel, doc in docs.items():
        address, workload_id = ids[rel]
        path = os.path.join(out_dir, rel)
        secrets = exporting.withheld(doc)
        note = [f"Exported by runai-reconcile export: {address} (workload {workload_id})."]
        if secrets:
            note.append("Withheld secrets (validate refuses the placeholder; supply a secret "
                        "reference or the value): " + ", ".join(secrets))
        files[path] = exporting.to_yaml(doc, comment="\n".join(note))
        exported.append(Exported(address, path, workload_id, secrets))
    for rel, doc in shared.items():
        files[os.path.join(out_dir, rel)] = exporting.to_yaml(doc, comment=(
            "Exported by runai-reconcile export --defaults: what every spec at or below this "
            "folder shares\n(merged into each of them; a spec's own value wins)."))
    # A file with a secret's value in it is for its owner's eyes only.
    _write_all(files, force=options.force, mode=0o600 if options.include_secrets else 0o644)
    return ExportResult(out_dir, sorted(exported, key=lambda e: e.path), skipped,
                        sorted(os.path.join(out_dir, rel) for rel in shared))


def _own_folders(out_dir: str, docs: dict[str, dict]) -> list[str]:
    """The folders (relative to `out_dir`, "" the top) holding no spec file but those of
    `docs`: only there may a `_defaults.yaml` go without changing another spec."""
    import pathlib

    from reconciler import export as exporting

    foreign: set[str] = set()
    root = pathlib.Path(out_dir)
    if root.is_dir():
        for path in root.rglob("*"):
            rel = path.relative_to(root).as_posix()
            if (path.suffix.lower() in (".yaml", ".yml", ".json") and rel not in docs
                    and path.name != exporting.DEFAULTS_FILE):
                foreign.add(rel)
    folders = {"/".join(rel.split("/")[:n]) for rel in docs for n in range(rel.count("/") + 1)}
    return sorted(f for f in folders
                  if not any(f == "" or rel.startswith(f + "/") for rel in foreign))


def _refuse_foreign_defaults(out_dir: str, intended: dict[str, dict], docs: dict[str, dict],
                             shared: dict[str, dict]) -> None:
    """Refuse when a `_defaults.yaml` in `out_dir` that this export does not write (the
    user's, or a stale one of an earlier export) would merge into an exported spec what
    the live workload does not have: its next plan would show a change. `intended` are
    the specs as exported, `docs` as written beside the new defaults `shared`."""
    import pathlib

    import yaml

    from reconciler import export as exporting
    from reconciler.desired import defaults as folder_defaults

    on_disk: dict[str, Any] = {}
    for rel, doc in docs.items():
        folders = rel.split("/")[:-1]
        merged: dict = {}
        foreign = []
        for n in range(len(folders) + 1):
            name = "/".join([*folders[:n], exporting.DEFAULTS_FILE])
            if name not in shared and name not in on_disk:
                try:
                    on_disk[name] = yaml.safe_load(pathlib.Path(out_dir, name).read_text())
                except (OSError, UnicodeDecodeError, yaml.YAMLError):
                    on_disk[name] = None  # none, or broken: validate says so
            layer = shared.get(name, on_disk.get(name))
            if isinstance(layer, dict):
                merged = folder_defaults.merge(layer, merged, {})
                if name not in shared:
                    foreign.append((os.path.join(out_dir, name), layer))
        if foreign and not exporting.same_workload(
                folder_defaults.merge(doc, merged, {}), intended[rel]):
            # The files that add something on their own, else all of them together.
            blamed = [path for path, layer in foreign if not exporting.same_workload(
                folder_defaults.merge(intended[rel], layer, {}), intended[rel])]
            blamed = blamed or [path for path, _ in foreign]
            raise errors.ReconcileError(
                f"{' and '.join(blamed)} would add to {os.path.join(out_dir, rel)} fields "
                "its live workload does not have (the next plan would change it); nothing "
                f"was written: move {'it' if len(blamed) == 1 else 'them'} away, or export "
                "into another folder")


async def _read_for_export(connect: ClientFactory, options: ExportOptions):
    """([(list item, live body, kind, project name or None)], skipped counts): the live
    workloads that `options` select, read with at most `parallelism` GETs in flight."""
    import fnmatch

    from reconciler import export as exporting
    from reconciler import kinds as kinds_mod

    wanted_kinds = {kinds_mod.get(k) for k in options.kinds} or set(kinds_mod.KINDS.values())
    skipped = {"deleted": 0, "completed": 0}
    async with connect() as client:
        listed, deleted = await asyncio.gather(client.iter_workloads(),
                                               client.iter_workloads(deleted=True))
        items = [i for i in listed if isinstance(i, dict) and i.get("id") and i.get("name")]
        projects = await _export_projects(client, items, options.projects)
        names = _project_names(items)

        def selected(item: dict) -> tuple[bool, Any]:
            """Whether the filters keep `item`, and its kind when the list says it."""
            kind = exporting.kind_of_list_type(item.get("type"))
            return (not (projects is not None and str(item.get("projectId")) not in projects)
                    and not (options.names and not any(
                        fnmatch.fnmatchcase(str(item.get("name")), g) for g in options.names))
                    and (kind in wanted_kinds or kind is None)), kind

        # The deleted ones are only counted (their kind, when the list does not say it,
        # taken as selected), each once: one may move to the deleted list between the reads.
        gone = {str(i.get("id")) for i in deleted if isinstance(i, dict) and selected(i)[0]}
        chosen = []
        for item in items:
            keep, kind = selected(item)
            if keep:
                chosen.append((item, [kind] if kind else sorted(wanted_kinds,
                                                                key=lambda k: k.name)))
        sem = asyncio.Semaphore(max(1, options.parallelism))

        async def read(item, candidates):
            async with sem:
                return await _get_any(client, item["id"], candidates)

        answers = await asyncio.gather(*(read(item, c) for item, c in chosen))
    found = []
    for (item, _), answer in zip(chosen, answers):
        reason = "deleted" if answer is None else exporting.skip_reason(answer[0].name, answer[1])
        if reason == "deleted":  # being deleted, or gone since it was listed
            gone.add(item["id"])
        elif reason:
            skipped[reason] += 1
        if reason:
            continue
        kind, live = answer
        if not _safe_file_name(str(live.get("name"))):
            raise errors.ReconcileError(
                f"workload {item['id']} is named {live.get('name')!r}, which cannot be a file "
                "name; leave it out with --name")
        found.append((item, live, kind, names.get(str(live.get("projectId")))))
    skipped["deleted"] = len(gone)
    return found, skipped


async def _get_any(client, workload_id: str, candidates):
    """(kind, live body) of the workload, trying each candidate kind's endpoint in turn;
    None when none has it (another error than a 404 is raised)."""
    from reconciler.api import errors as api_errors

    for kind in candidates:
        try:
            return kind, await client.get(kind, workload_id)
        except api_errors.NotFound:
            continue
    return None


async def _export_projects(client, items: list[dict], wanted: Sequence[str]) -> set[str] | None:
    """The project ids `--project` values (ids or names) select; None for all. A value that
    names no project is an error (with the closest known names)."""
    import difflib

    from reconciler.api import errors as api_errors

    if not wanted:
        return None
    ids: set[str] = set()
    for value in wanted:
        if not value.strip():  # a name filter of nothing is the API's 400
            raise errors.ReconcileError("--project: an empty value; give a project's id or name")
        hit = {str(i.get("projectId")) for i in items
               if value in (str(i.get("projectId")), i.get("projectName"))}
        if not hit and value.isdigit():
            try:
                await client.get_project(value)
                hit = {value}
            except api_errors.NotFound:
                pass
        elif not hit:
            clusters = sorted({str(i["clusterId"]) for i in items if i.get("clusterId")})
            for answer in await asyncio.gather(*(client.find_projects(value, c)
                                                 for c in clusters)):
                hit |= {str(p["id"]) for p in answer if p.get("id") is not None}
        if not hit:
            known = sorted({str(i["projectName"]) for i in items if i.get("projectName")})
            close = difflib.get_close_matches(value, known, n=3)
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
            raise errors.ReconcileError(f"--project {value}: no such project{hint}")
        ids |= hit
    return ids


def _project_names(items: list[dict]) -> dict[str, str]:
    """Project id -> name, for the names that are valid in a spec and name one project."""
    import re

    ids_of: dict[str, set[str]] = {}
    for i in items:
        name = i.get("projectName")
        if isinstance(name, str) and re.fullmatch(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?", name):
            ids_of.setdefault(name, set()).add(str(i.get("projectId")))
    return {next(iter(ids)): name for name, ids in ids_of.items() if len(ids) == 1}


def _safe_file_name(name: str) -> bool:
    return bool(name) and name not in (".", "..") and not any(c in name for c in "/\\\0")


def _write_all(files: dict[str, str], *, force: bool, mode: int) -> None:
    """Write every file, or none when one exists and not `force`: each goes to a sibling
    temporary file first, and only when all of them are written are they renamed into
    place, with SIGINT and SIGTERM held off, so that an interrupt or a failure (a folder
    that is a file, a full disk) leaves no file behind nor any folder made for one."""
    import pathlib
    import signal
    import tempfile

    taken = [p for p in files if os.path.lexists(p)]
    if taken and not force:
        raise errors.ReconcileError(
            f"{len(taken)} file{'s' if len(taken) != 1 else ''} exist already "
            f"({', '.join(sorted(taken)[:3])}{', ...' if len(taken) > 3 else ''}); nothing was "
            "written: pass --force to overwrite them")
    not_files = [p for p in taken if not os.path.isfile(p) or os.path.islink(p)]
    if not_files:
        raise errors.ReconcileError(f"{not_files[0]} is not a regular file; nothing was written")
    made: list[pathlib.Path] = []  # folders this call created, outermost first
    written: list[tuple[str, pathlib.Path]] = []  # (temporary file, its target)
    done = False
    try:
        for path, text in files.items():
            target = pathlib.Path(path)
            try:
                missing = [d for d in (target.parent, *target.parent.parents)
                           if not os.path.lexists(d)]
                target.parent.mkdir(parents=True, exist_ok=True)
                made.extend(reversed(missing))
                fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                                           suffix=".tmp")
                written.append((tmp, target))
                with os.fdopen(fd, "wb") as f:
                    f.write(text.encode())
                os.chmod(tmp, mode)
            except OSError as exc:
                raise errors.ReconcileError(f"cannot write {path}: {exc.strerror or exc}; "
                                            "nothing was written") from None
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            for tmp, target in written:
                os.replace(tmp, target)
            done = True
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
    finally:
        if not done:
            for tmp, _ in written:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
            for folder in reversed(made):
                with contextlib.suppress(OSError):
                    folder.rmdir()
