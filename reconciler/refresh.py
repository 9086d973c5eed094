"""Reading the live control plane for a plan (the "R" of the three-way diff).

Called by `operations` before planning (`plan`, `apply`), to re-read what a saved plan
acts on (`apply PLANFILE`) and for `drift`. For each address the state knows, one GET
by workload id; for desired addresses the state does not know (first run, lost state),
one list call per project (pages of 500) finds existing workloads by name, and only
those found are read with a GET. So an unchanged fleet of N costs N GETs, and a new one
a handful of list calls.

Before any of that needs them, `resolve_projects` turns the specs' project names
(`project: team-a`) into project ids: one projects lookup per distinct name and cluster.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Iterable, Mapping
from typing import Any

from reconciler import kinds, phases
from reconciler.api import errors as api_errors
from reconciler.desired.sources import Problem, problem_lines
from reconciler.desired.types import DesiredWorkload, duplicate_addresses
from reconciler.errors import SpecError
from reconciler.state.model import State

log = logging.getLogger("reconciler.refresh")


async def read_live(client, desired: Iterable[DesiredWorkload] | Awaitable[Iterable[DesiredWorkload]],
                    state: State, *, parallelism: int, only: set[str] | None = None,
                    progress=None) -> dict[str, dict | None]:
    """Map each address (of specs or state) to its live GET body, or None when it does not exist.

    `desired` may be an awaitable (specs still loading, `PendingSpecs.wait()`): the GETs
    of the workloads the state knows start at once, and only the lookups by name of new
    addresses wait for the specs. When the awaitable raises (bad specs), the GETs in
    flight are cancelled and the error propagates. `only` limits the refresh to those
    addresses (for --target). `progress` (a `reconciler.progress.Progress`, or None)
    counts the GETs."""
    sem = asyncio.Semaphore(max(1, parallelism))
    live: dict[str, dict | None] = {}
    found: dict[str, str] = {}  # address -> id, of new addresses found by name

    async def get(addr: str, kind: kinds.Kind, workload_id: str) -> None:
        async with sem:
            try:
                body = await client.get(kind, workload_id)
            except api_errors.NotFound:
                body = None
                if addr in found:
                    # Listed under this name, but not a workload of this kind: another
                    # kind holds the name, and names are unique per project.
                    _, project_id, name = kinds.parse_address(addr)
                    log.warning("%s: the name %r in project %s is taken by workload %s of "
                                "another kind, which runai-reconcile does not manage here: "
                                "creating it will fail until that one is gone",
                                addr, name, project_id, workload_id)
            # A workload being deleted is gone as far as planning goes.
            live[addr] = None if body and phases.live_gone(body) else body
            if progress is not None:
                progress.step()

    reads: list[asyncio.Future] = []
    try:
        known = sorted(a for a, res in state.resources.items()
                       if res.workload_id and (only is None or a in only))
        reads += [asyncio.ensure_future(get(a, kinds.get(state.resources[a].kind),
                                            state.resources[a].workload_id)) for a in known]
        if progress is not None:
            progress.start("Refreshing", len(known))
        if inspect.isawaitable(desired):
            desired = await desired
        desired_by_addr = {d.address: d for d in desired}
        known_set = set(known)
        unknown = sorted(a for a in set(desired_by_addr) | set(state.resources)
                         if (only is None or a in only) and a not in known_set)
        found.update(await _find_by_name(
            client, [desired_by_addr[a] for a in unknown if a in desired_by_addr]))
        for addr in unknown:
            if addr not in found:
                live[addr] = None
        new = [a for a in unknown if a in found]
        reads += [asyncio.ensure_future(get(a, kinds.get(desired_by_addr[a].kind), found[a]))
                  for a in new]
        if progress is not None:
            progress.more(len(new))
        await asyncio.gather(*reads)
    except BaseException:
        if inspect.iscoroutine(desired):
            desired.close()  # not awaited yet (closing a finished one does nothing)
        for task in reads:
            task.cancel()
        await asyncio.gather(*reads, return_exceptions=True)
        raise
    finally:
        if progress is not None:
            progress.finish()
    return live


async def resolve_projects(client, desired: Iterable[DesiredWorkload]) -> list[DesiredWorkload]:
    """`desired` with each `project:` name replaced by its project's id (the address
    always holds the id), looking each distinct (name, cluster) up once.

    Raises SpecError naming the spec file (or the `_defaults.yaml` that gave the name,
    once, with the specs it is a default for) and the project for every name that does not
    match exactly one project in its cluster, and for two specs that turn out to have
    one address (`project: team-a` and `projectId` of team-a)."""
    desired = list(desired)
    wanted = sorted({(d.project_name, d.cluster_id) for d in desired if not d.resolved})
    if not wanted:
        return desired
    answers = await asyncio.gather(*(client.find_projects(n, c) for n, c in wanted))
    matches = dict(zip(wanted, answers))
    unresolved: list[Problem] = []
    out: list[DesiredWorkload] = []
    for d in desired:
        if d.resolved:
            out.append(d)
            continue
        found = matches[(d.project_name, d.cluster_id)]
        if len(found) == 1 and found[0].get("id"):
            out.append(d.with_project_id(str(found[0]["id"])))
            continue
        why = ("no project of that name" if not found else
               f"{len(found)} projects of that name (ids "
               + ", ".join(sorted(str(p.get("id")) for p in found))
               + "): give projectId instead")
        message = f"{d.project_name!r} does not resolve in cluster {d.cluster_id}: {why}"
        file, line = d.project_at or (d.source, d.line)
        unresolved.append(Problem(file, line, "project", message,
                                  (d.source,) if d.project_at else ()))
    problems = problem_lines(unresolved)
    if not problems:
        problems = [f"{_where(source, line)}: {message}" for source, line, message
                    in duplicate_addresses([(d.address, d.source, d.line) for d in out])]
    if problems:
        raise SpecError(problems)
    return out


def _where(source: str, line: int | None) -> str:
    return source if line is None else f"{source}:{line}"


async def _find_by_name(client, wanted: list[DesiredWorkload]) -> Mapping[str, str]:
    """address -> workload id for the desired workloads that already exist live."""
    if not wanted:
        return {}
    by_project: dict[str, dict[str, DesiredWorkload]] = {}
    for d in wanted:
        by_project.setdefault(d.project_id, {})[d.name] = d
    found: dict[str, str] = {}

    async def scan(project_id: str, names: dict[str, DesiredWorkload]) -> None:
        if len(names) == 1:
            (name,) = names
            items = await client.iter_workloads(filter_by=[f"name=={name}", f"projectId=={project_id}"])
        else:
            items = await client.iter_workloads(filter_by=[f"projectId=={project_id}"])
        for item in items:
            d = names.get(item.get("name"))
            if d is not None and _id(item):
                found[d.address] = _id(item)

    await asyncio.gather(*(scan(p, n) for p, n in sorted(by_project.items())))
    return found


def _id(item: Mapping[str, Any]) -> str | None:
    return item.get("id") or item.get("workloadId")
