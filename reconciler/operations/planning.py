"""Planning: `validate` and `plan`, and what plan, apply and drift share: loading the
specs (`loading`), refreshing live and planning (`make_plan`), the GPU quotas of the
plan's projects (`live.projects.read_projects`: each with its quota, name, or why it is
unknown), and finishing a plan with its GPU impact and the policy rules' results
(`judging.finish`), and the server's dry run of the writes that have one (`dry_run`: a
Run:ai policy's).
Every read of the API is `reconciler.refresh`'s and `reconciler.live`'s, imported only
when a client is (`--no-refresh` starts without the HTTP client).

Callers: `reconciler.cli` (through `reconciler.operations`), and the package's
`applying` and `drifting`.

The client factory (`ClientFactory`) is a callable returning an async context manager
that yields an API client (`reconciler.api.RunaiClient` or anything with its methods); it
is called only when the operation needs the API. One with a `prepare()` method (the
CLI's) has it called once the specs are loading and not known bad (`loading(connect=...)`):
it may start the token request then, on a thread (which must not run while the loaders
fork).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, AsyncContextManager

from reconciler import errors, gpus, kinds, planner, timeline
from reconciler.desired.types import DesiredWorkload
from reconciler.operations import memory, running
from reconciler.operations.judging import finish, load_policy
from reconciler.operations.reuse import Reuse
from reconciler.plans import Action, Plan
from reconciler.state import journal
from reconciler.state.model import State


ClientFactory = Callable[[], AsyncContextManager[Any]]
OnEvent = Callable[[str], None]
Approve = Callable[[Plan], bool]


@dataclass
class PlanOptions:
    targets: Sequence[str] = ()
    replace: Sequence[str] = ()
    destroy: bool = False
    refresh: bool = True
    # How live is read when `refresh`: "auto" (list first, GET what the list does not
    # vouch for) or "full" (one GET per workload). `refresh.MODES`.
    refresh_mode: str = "auto"
    parallelism: int = 64
    policy: Sequence[str] = ()  # policy files (--policy): their rules are checked on the plan
    # Another specs folder than the state's may delete what only that one names:
    specs_moved: bool = False  # --specs-moved: the folder moved; the state follows it
    prune_others: bool = False  # --prune-others: delete the other folder's workloads
    # False: a plan that deletes or replaces a protected workload is made anyway, and the
    # caller skips those actions itself (`planner.protected`; watch does, per workload).
    refuse_protected: bool = True
    # Under "auto", a workload the list vouches for that the plan acts on is, when True,
    # read (GET) and planned again from live; when False, planned from the state, which
    # the list shows live still matches. A saved plan reads them (`apply FILE` re-reads
    # what the plan read). A workload deleted is read either way (its live body is what
    # the plan shows going), and so is an organisation unit, rule or policy acted on
    # (what a project's deletion takes with it is named from its live body).
    read_acted: bool = False


@dataclass(repr=False)  # a plan's inputs are large: the default repr would print them all
class PlanResult:
    plan: Plan
    desired: list[DesiredWorkload]  # the specs it was made from
    live: dict[str, dict | None]  # the live bodies read for it (empty without refresh)
    saved_to: str | None = None  # where `out=` wrote it


def quiet(message: str) -> None:
    pass


@contextlib.contextmanager
def loading(directory: str, *, caller_busy: bool = True,
            connect: ClientFactory | None = None) -> Iterator[Any]:
    """The specs loading (on the other core for a big folder) while the caller reads the
    state and the live workloads; stopped when the operation ends. `caller_busy=False`
    when the caller only waits (validate): then the loaders take every core. The files
    the user's spec cache holds are not loaded again (`desired.cache`); it is saved at
    the end.

    When it starts and when the plan is made (`resume_collector`, which apply calls
    before it acts) it calls the hooks the program set (`memory.hooks`: the CLI pauses the
    cycle collector meanwhile and freezes what exists when it resumes)."""
    from reconciler.desired import start_loading
    from reconciler.desired.cache import SpecCache

    memory.hooks.loading()
    try:
        timeline.mark("specs", "start")
        pending = start_loading(directory, caller_busy=caller_busy,
                                cache=SpecCache.for_folder(directory))
        if not pending.failed():  # specs known bad already (loaded here) send nothing
            prepare(connect)
        try:
            yield pending
        finally:
            pending.cancel()
            pending.save_cache()
    finally:
        resume_collector()


def prepare(connect: ClientFactory | None) -> None:
    """`connect.prepare()`, when the factory has one (the CLI's: the token asked for now)."""
    ready = getattr(connect, "prepare", None)
    if ready is not None:
        ready()


def resume_collector() -> None:
    """The plan is made (or the operation ends): the program's `memory.hooks.planned`
    (the CLI resumes the cycle collector it paused)."""
    memory.hooks.planned()


# --- validate and plan --------------------------------------------------------------


def validate(specs_dir: str) -> list[DesiredWorkload]:
    """The specs of `specs_dir`, checked offline; `errors.SpecError` lists every problem."""
    with loading(specs_dir, caller_busy=False) as specs:
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
    if out:  # what it acts on is read, for `apply FILE` to check it is still so
        options = dataclasses.replace(options, read_acted=True)
    with loading(specs_dir, connect=connect if options.refresh else None) as specs:
        state, pending = State(), []

        def read_state() -> None:
            nonlocal state, pending
            with timeline.span("state"):
                state, pending = store.read_with_pending()
            specs.share_bodies({a: r.applied for a, r in state.resources.items()})

        # The state is not returned through the task: a task's repr (asyncio makes one at
        # the end) would spell every resource.
        async def run() -> tuple[Plan, dict, list]:
            if not options.refresh:
                read_state()
                desired = await resolved_without_refresh(specs, connect)
                return await make_plan(None, specs, state, options, pending, desired=desired)
            async with connect() as client:
                # The token is asked for while the state is read (in a thread: the loop
                # sends and receives meanwhile) and the specs load: a read. Specs known
                # bad already (loaded here) send nothing.
                warm = None if specs.failed() else asyncio.ensure_future(client.connect())
                try:
                    await asyncio.to_thread(read_state)
                    return await make_plan(client, specs, state, options, pending,
                                           progress=progress)
                finally:  # its failure, if any, the requests have met and said
                    if warm is not None:
                        warm.cancel()
                        await asyncio.gather(warm, return_exceptions=True)

        the_plan, live, desired = running.run(run())
    folder = check_specs_folder(specs_dir, store, state, the_plan, options)
    finish(the_plan, rules, options.policy)
    result = PlanResult(plan=the_plan, desired=list(desired), live=live)
    if out:
        from reconciler import planfile

        saved = planfile.SavedPlan(plan=the_plan, desired=result.desired,
                                   live=planfile.fingerprints(the_plan, live),
                                   state_digest=planfile.state_digest(state, pending),
                                   replace=list(options.replace), destroy=options.destroy,
                                   refresh=options.refresh,
                                   specs_folder=None if options.targets else folder,
                                   specs_path=os.path.abspath(specs_dir))
        try:
            planfile.write(out, saved, planfile.plan_key(os.environ))
        except OSError as exc:
            raise errors.ReconcileError(f"cannot write the plan to {out}: {exc.strerror}") from None
        result.saved_to = out
    return result


async def make_plan(client, specs, state: State, options: PlanOptions,
                     pending: Sequence[journal.Intent] = (), *,
                     desired: list[DesiredWorkload] | None = None,
                     progress=None, seen: dict[str, str] | None = None,
                     reuse: Reuse | None = None) -> tuple[Plan, dict, list]:
    """`_refresh_and_plan`, with the GPU quotas of the plan's projects on it
    (`Plan.gpu_quotas`): those of the state's projects and of the specs' read during the
    refresh, not after it (`_QuotaReads`). Without a client, none is read. `seen`, when
    given, receives the list fingerprint of each address the auto refresh listed.
    `reuse`: what the last plans left to use again (`Reuse`)."""
    quotas = None
    known = reuse.projects if reuse is not None else {}
    # (The projects of the state's and the specs' workloads: the same for the same ones.)
    memo = reuse if not options.targets else None
    if client is not None:
        quotas = _QuotaReads(client, known)
        quotas.start(_derived(memo, "the state's projects", (state,), lambda: {
            r.project_id for a, r in state.resources.items()
            if (not options.targets or a in options.targets) and gpus.in_project(r.kind)}))
    try:
        the_plan, live, desired = await _refresh_and_plan(
            client, specs, state, options, pending, desired=desired, progress=progress,
            seen=seen, reuse=reuse,
            resolved=None if quotas is None else lambda got: quotas.start(
                _derived(memo, "the specs' projects", (got,), lambda: {
                    d.project_id for d in got if gpus.in_project(d.kind)
                    and (not options.targets or d.address in options.targets)})))
        if client is not None:
            await dry_run(client, the_plan)
        if quotas is not None:  # (a project this plan creates has no id to read yet)
            made = {c.address for c in the_plan.acting if c.action is Action.CREATE}
            unborn = [c for c in the_plan.changes
                      if c.known_after.get("projectId") in made] if made else []
            waiting = {c.address for c in unborn}
            projects = _derived(reuse, "the plan's projects", (the_plan,), lambda: {
                c.project_id for c in the_plan.changes
                if gpus.in_project(c.kind) and c.address not in waiting})
            quotas.start(projects)
            read = await quotas.results()
            if reuse is not None:  # only what was read: a failed read is tried again
                known.update((p, r) for p, r in read.items() if r.unknown is None)
            read = {**known, **read}
            the_plan.gpu_quotas = {p: read[p].quota for p in projects}
            the_plan.quota_unknown = {p: read[p].unknown for p in sorted(projects)
                                      if read[p].unknown is not None}
            the_plan.project_names = {p: read[p].name for p in sorted(projects)
                                      if read[p].name is not None}
            for c in unborn:  # a project this plan creates: nothing to read yet
                the_plan.gpu_quotas[c.project_id] = None
                the_plan.quota_unknown[c.project_id] = (
                    f"{c.known_after['projectId']} is created by this plan: its quota "
                    "is read once it exists")
            the_plan.quota_pools = {p: read[p].pools for p in sorted(projects)
                                    if read[p].pools} or None
            from reconciler.live.projects import department_projects

            # (only the changes that provide a quota count: found once per plan)
            units = _derived(reuse, "the plan's quota units", (the_plan,), lambda: [
                c for c in the_plan.changes if kinds.get(c.kind).provides_quota])
            the_plan.department_projects = await department_projects(client, units) or None
        if options.targets:  # the totals of the targets' projects count the others too
            the_plan.gpu_elsewhere = gpus.held_elsewhere(
                r for a, r in state.resources.items() if a not in set(options.targets))
    finally:
        if quotas is not None:  # a refresh or a plan that failed leaves them unfinished
            await quotas.cancel()
    return the_plan, live, desired


def _derived(reuse: Reuse | None, name: str, inputs: tuple, make: Callable[[], Any]) -> Any:
    """`reuse.derived(name, inputs, make)`, or `make()` without a `Reuse`."""
    return make() if reuse is None else reuse.derived(name, inputs, make)


class _QuotaReads:
    """The GPU quota reads of a plan's projects (`live.projects.read_projects`), each
    project's sent once, as soon as it is known to be needed: the state's before the
    refresh, the specs' once they are resolved (beside the list pages), the rest once the
    plan is made. Those `known` already (a watch's last reads) are not sent."""

    def __init__(self, client, known: Mapping[str, object]):
        self._client = client
        self._asked = set(known)
        self._reads: list[asyncio.Future] = []

    def start(self, project_ids: Iterable[str]) -> None:
        from reconciler.live.projects import read_projects  # the HTTP client's errors

        new = set(project_ids) - self._asked
        if new:
            self._asked |= new
            self._reads.append(asyncio.ensure_future(read_projects(self._client, new)))

    async def results(self) -> dict:
        """What each read found, by project id (raises what a read raised)."""
        read: dict = {}
        for one in self._reads:
            read.update(await one)
        return read

    async def cancel(self) -> None:
        for one in self._reads:
            one.cancel()
        await asyncio.gather(*self._reads, return_exceptions=True)


async def dry_run(client, the_plan: Plan) -> None:
    """The server's dry run of each write the plan would send whose type has one (a
    Run:ai policy's create or update: `Codec.dry_run_request`), all at once; each
    verdict is put on its change (`ResourceChange.dry_run`). Nothing is stored: the
    server validates and answers. A refusal fails the plan (`judging.policy_refusal`)."""
    from reconciler import kinds
    from reconciler.plans import DryRun

    checked = [c for c in the_plan.acting
               if c.action in (Action.CREATE, Action.UPDATE, Action.REPLACE) and c.after
               and kinds.get(c.kind).codec.dry_runs]
    if not checked:
        return
    # A write naming what the plan creates (a policy's new project) cannot be checked
    # until apply has made it (the server would answer "no such project"): not sent.
    created = planner.makers(the_plan.changes, (Action.CREATE,))
    waiting = {c.address: planner.named_in(created, c) for c in checked}
    sent = [c for c in checked if not waiting[c.address]]
    verdicts = await asyncio.gather(*(client.dry_run(kinds.get(c.kind), c.after)
                                      for c in sent))
    for change, (verdict, message) in zip(sent, verdicts):
        change.dry_run = DryRun(verdict, message)
    for change in checked:
        if waiting[change.address]:
            unit = waiting[change.address][0]
            change.dry_run = DryRun("unchecked", f"{unit.kind.lower()} {unit.name} is created "
                                    "by this plan: the server checks this write when apply "
                                    "sends it")


async def _refresh_and_plan(client, specs, state: State, options: PlanOptions,
                            pending: Sequence[journal.Intent] = (), *,
                            desired: list[DesiredWorkload] | None = None,
                            progress=None, seen: dict[str, str] | None = None,
                            reuse: Reuse | None = None,
                            resolved: Callable[[list[DesiredWorkload]], None] | None = None,
                            ) -> tuple[Plan, dict, list]:
    """The plan, the live bodies read for it and the specs. `specs` is a PendingSpecs: the
    reads of the workloads the state knows start while the specs still load. The specs'
    project names are resolved once they are loaded, before the lookups by name, and
    their manifests' workload types checked against the control plane's
    (`live.workload_types`: one read, only when a spec is a Manifest).
    Without a client, `desired` are the specs (already resolved). `pending`: the
    journal's open intents (a killed run's), whose deletes and creates the plan finishes.

    With `refresh_mode` "auto", the workloads the list vouches for are planned from the
    state, which the list shows live still matches: the same actions, field changes and
    PATCH bodies as "full" plans from live. Those of them the plan deletes, and with
    `options.read_acted` every one it acts on, are read (GET) and the plan made again.
    `resolved`, when given, is called with the specs whose projects exist once they are
    resolved (before the refresh's reads)."""
    live: dict[str, dict | None] = {}
    listed: dict[str, str | None] = {}
    if client is not None:
        from reconciler import refresh  # brings the HTTP client: --no-refresh goes without
        from reconciler.live import names, projects, workload_types

        def asks_nothing(loaded: list[DesiredWorkload]) -> bool:
            """No spec names its project, a name on the control plane or a Manifest's
            type: the checks below would send nothing and keep every spec."""
            return all(d.resolved for d in loaded) and not names.references(loaded) \
                and not workload_types.manifests(loaded)

        async def specs_in() -> list[DesiredWorkload]:
            nonlocal desired
            loaded = await specs.wait()
            if reuse is not None and reuse.derived("specs ask nothing", (loaded,),
                                                   lambda: asks_nothing(loaded)):
                desired = loaded  # the same list from cycle to cycle: what is derived
                if resolved is not None:  # from it is kept (`Reuse.derived`)
                    resolved(desired)
                return desired
            # The specs' project names resolved, and the names they give of node pools,
            # departments and priorities checked (`live.names`), at once: every problem
            # of either is reported together.
            got = await asyncio.gather(projects.resolve_projects(client, loaded),
                                       names.check_names(client, loaded),
                                       return_exceptions=True)
            failed = [g for g in got if isinstance(g, BaseException)]
            if failed:
                spec_errors = [g for g in failed if isinstance(g, errors.SpecError)]
                if len(spec_errors) != len(failed):
                    raise next(g for g in failed if not isinstance(g, errors.SpecError))
                raise errors.SpecError([p for g in spec_errors for p in g.problems])
            # A Manifest's type must be one the control plane registers (one read).
            desired = await workload_types.check_manifests(client, got[0])
            # A workload whose project this plan creates is not live yet: nothing to read.
            live_ones = [d for d in desired if d.resolved]
            if resolved is not None:
                resolved(live_ones)
            return live_ones

        # While the specs load on the other core: the token and the transport's set-up.
        warm = asyncio.ensure_future(client.connect()) if specs.in_background else None
        try:
            if options.refresh_mode == "full":
                live = await refresh.read_live(client, specs_in(), state,
                                               parallelism=options.parallelism,
                                               only=set(options.targets) or None,
                                               progress=progress)
            else:
                got = await refresh.read_listed(client, specs_in(), state,
                                                parallelism=options.parallelism,
                                                only=set(options.targets) or None,
                                                progress=progress,
                                                derived=reuse and reuse.derived)
                live, listed = got.live, got.listed
                if seen is not None:
                    seen.update(got.fingerprints)
        finally:
            if warm is not None:  # its failure, if any, the requests have met and said
                warm.cancel()
                await asyncio.gather(warm, return_exceptions=True)
    if desired is None:  # a refresh ends only once the specs are in (or raises)
        raise AssertionError("the specs were never read")
    if client is not None:
        live.update(dict.fromkeys(_derived(reuse, "unresolved", (desired,), lambda: [
            d.address for d in desired if not d.resolved])))
    def make() -> Plan:
        def new() -> Plan:
            # Protection is judged below, once what a deletion takes with it is known.
            return planner.make_plan(desired, state, live, targets=options.targets,
                                     replace=options.replace, destroy=options.destroy,
                                     interrupted=interrupted(pending), listed=listed,
                                     judge=False)
        if reuse is None:
            with timeline.span("plan"):
                return new()
        return reuse.plan(new, desired, state, live, listed, interrupted(pending))

    the_plan = make()
    acted = [c.address for c in the_plan.acting
             if c.address in listed and c.action is not Action.NOOP
             and (options.read_acted or c.action is Action.DELETE
                  or not kinds.get(c.kind).in_project)]
    if acted:
        from reconciler import refresh

        live.update(await refresh.read_by_id(client, state, acted,
                                             parallelism=options.parallelism))
        for addr in acted:
            del listed[addr]
        the_plan = make()
    if client is not None:
        await _taken_with(client, the_plan, live, state)
    planner.refuse(the_plan.acting, desired, state, refuse_protected=options.refuse_protected,
                   destroy=options.destroy, targets=options.targets)
    return the_plan, live, desired


async def _taken_with(client, the_plan: Plan, live: dict[str, dict | None],
                      state: State) -> None:
    """For each delete or replace of a resource that holds workloads (a project:
    `Kind.holds_workloads`), what goes with it (`ResourceChange.takes_with`): what its
    type names from its live body (a namespace: `Kind.takes_with`), then every live
    workload in it, by address (one list read per such project): the ones the plan
    creates again in the project's replacement (`ResourceChange.goes_with`) marked so, the
    ones no state records marked `(not managed here)`."""
    from reconciler import kinds
    from reconciler.live import workloads

    going = [rc for rc in the_plan.acting if rc.action in (Action.DELETE, Action.REPLACE)
             and rc.workload_id and kinds.get(rc.kind).holds_workloads]
    if not going:
        return
    held = await workloads.in_projects(client, [str(rc.workload_id) for rc in going])
    following = {rc.address for rc in the_plan.changes if rc.goes_with}
    for rc in going:
        out = list(kinds.get(rc.kind).takes_with(live.get(rc.address)))
        for item in sorted(held[str(rc.workload_id)], key=lambda i: str(i.get("name"))):
            kind = kinds.of_list_type(item.get("type"))
            if kind is None:
                out.append(f"workload {item.get('name')} ({item.get('type')})")
                continue
            address = kinds.address(kind.name, str(rc.workload_id), str(item["name"]))
            out.append(f"workload {address}"
                       + (" (created again by this plan)" if address in following
                          else "" if address in state.resources else " (not managed here)"))
        rc.takes_with = out


async def resolved_without_refresh(specs, connect: ClientFactory) -> list[DesiredWorkload]:
    """The specs, with the API asked only when some name their project (`project:`):
    even without a refresh, a name's id comes from the API."""
    desired = list(await specs.wait())
    if all(d.resolved for d in desired):
        return desired
    from reconciler.live import projects

    async with connect() as client:
        return await projects.resolve_projects(client, desired)


def check_specs_folder(specs_dir: str, store, state: State, the_plan: Plan,
                       options: PlanOptions) -> dict[str, str]:
    """The identity of `specs_dir` (`state.folders`), for apply to record. Refused
    (`errors.ReconcileError`, naming both folders) when the state was last applied from
    another folder and the plan deletes workloads because no spec of this one names them:
    `apply sec/` of one spec must not delete the others of `specs/`. Not refused: a state
    with no folder recorded (it adopts this one), `--target` (only what is named is acted
    on), `--destroy` (deleting is what it asks), `--specs-moved` and `--prune-others`."""
    from reconciler.plans import REASON_REMOVED, Action
    from reconciler.state import folders

    current = folders.identify(specs_dir, store.local_file)
    recorded = state.specs_folder
    if recorded is None or options.targets or options.destroy or options.specs_moved \
            or options.prune_others or folders.same(recorded, current):
        return current
    gone = [c.address for c in the_plan.changes
            if c.action is Action.DELETE and c.reason == REASON_REMOVED]
    if not gone:
        return current
    key = folders.deciding_key(recorded, current)
    n = len(gone)
    named = ", ".join(gone[:3]) + (f" and {n - 3} more" if n > 3 else "")
    raise errors.ReconcileError(
        f"the state {store.where} was last applied from the specs folder "
        f"{folders.describe(recorded, key)}, not {specs_dir}"
        f"{'' if current[key] == specs_dir else f' ({current[key]})'}: this plan "
        f"would delete {n} workload{'s' if n != 1 else ''} that no spec of {specs_dir} names "
        f"({named}). Nothing was done. If the specs folder moved, pass --specs-moved; to "
        "delete them, --prune-others; to act on some workloads only, --target ADDR")


def interrupted(pending: Sequence[journal.Intent]) -> frozenset[str]:
    """The addresses of open intents (a run killed, or abandoned, in their middle) that
    delete or create a workload (a replace is a delete, then a create)."""
    return frozenset(i.address for i in pending if i.action in ("delete", "create"))
