"""Reading the live control plane for a plan (the "R" of the three-way diff).

Called by `operations` before planning (`plan`, `apply`), to re-read what a saved plan
acts on (`apply PLANFILE`) and for `drift`. For each address the state knows, one GET
by workload id; for desired addresses the state does not know (first run, lost state),
one list call per project (pages of 500) finds existing workloads by name, and only
those found are read with a GET. So an unchanged fleet of N costs N GETs, and a new one
a handful of list calls.

That is `--refresh=full` (`read_live`). `--refresh=auto` (`read_listed`, the default of
plan and apply) lists first: the workloads of every (project, cluster) of the state and
the specs, pages of 500 all in flight at once; then GETs only the workloads that need it:
new addresses found by name, and workloads whose list entry's fingerprint
(`listing.fingerprint`) is not the one the state recorded when it last saw them
match it. A workload the list lacks (or lists under another id) is gone; the phase of the
others comes from the list. What auto relies on: the API moves a workload's list entry
when the workload changes (docs/refresh.md). `read_by_id` GETs the vouched-for workloads
a first plan acts on, `sweep` lists the fingerprints apply records.

The reads themselves are `reconciler.live`'s: its `Reader` (the bounded GETs and list
pages) and its `workloads.find_by_name` (the list calls, shared with `import --all`). The
specs' project names are ids by then (`live.projects.resolve_projects`).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from reconciler import kinds, listing, phases
from reconciler.desired.types import DesiredWorkload
from reconciler.live import reads, workloads
from reconciler.state.model import State

log = logging.getLogger("reconciler.refresh")

MODES = ("auto", "full", "none")  # --refresh=

# derived(name, inputs, make): make(), or its kept value for these very inputs
# (`operations.reuse.Reuse.derived`).
Derived = Callable[[str, tuple, Callable[[], Any]], Any]


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
    reader = reads.Reader(client, parallelism, progress=progress)
    live: dict[str, dict | None] = {}
    found: dict[str, str] = {}  # address -> id, of new addresses found by name

    tasks: list[asyncio.Future] = []
    addrs: list[str] = []  # the address of each of `tasks`
    try:
        known = sorted(a for a, res in state.resources.items()
                       if res.workload_id and (only is None or a in only))
        tasks += [asyncio.ensure_future(reader.get(kinds.get(state.resources[a].kind),
                                                   state.resources[a].workload_id,
                                                   like=state.resources[a].applied))
                  for a in known]
        addrs += known
        if progress is not None:
            progress.start("Refreshing", len(known))
        if inspect.isawaitable(desired):
            desired = await desired
        desired_by_addr = {d.address: d for d in desired}
        known_set = set(known)
        unknown = sorted(a for a in set(desired_by_addr) | set(state.resources)
                         if (only is None or a in only) and a not in known_set)
        new_specs = [desired_by_addr[a] for a in unknown if a in desired_by_addr]
        if new_specs:
            found.update(await workloads.find_by_name(client, new_specs))
        for addr in unknown:
            if addr not in found:
                live[addr] = None
        new = [a for a in unknown if a in found]
        tasks += [asyncio.ensure_future(reader.get(kinds.get(desired_by_addr[a].kind), found[a]))
                  for a in new]
        addrs += new
        if progress is not None:
            progress.more(len(new))
        bodies = await asyncio.gather(*tasks)
    except BaseException:
        if inspect.iscoroutine(desired):
            desired.close()  # not awaited yet (closing a finished one does nothing)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    finally:
        if progress is not None:
            progress.finish()
    for addr, body in zip(addrs, bodies):
        if body is None and addr in found:
            # Listed under this name, but not a workload of this kind: another kind holds
            # the name, and names are unique per project.
            _, project_id, name = kinds.parse_address(addr)
            log.warning("%s: the name %r in project %s is taken by workload %s of another "
                        "kind, which runai-reconcile does not manage here: creating it "
                        "will fail until that one is gone", addr, name, project_id,
                        found[addr])
        # A workload being deleted is gone as far as planning goes.
        live[addr] = None if body and phases.live_gone(body) else body
    return live


# --- the list-first refresh (--refresh=auto) -----------------------------------------

@dataclass
class Refreshed:
    """What `read_listed` found. `live`: the GET bodies read (None: gone), as
    `read_live`'s; `listed`: address -> phase of each workload the list vouches for
    (unchanged since the state last saw it: not read); `fingerprints`: address -> its
    list item's fingerprint, for every address the list holds."""
    live: dict[str, dict | None] = field(default_factory=dict)
    listed: dict[str, str | None] = field(default_factory=dict)
    fingerprints: dict[str, str] = field(default_factory=dict)


def _scope_of(kind: str, project_id: str, cluster_id: str | None) -> listing.Scope:
    """The list that shows a workload of `kind`: as its registry entry scopes it."""
    return kinds.get(kind).list_scope(project_id, cluster_id)


def _now(name: str, inputs: tuple, make: Callable[[], Any]) -> Any:
    return make()


async def read_listed(client,
                      desired: Iterable[DesiredWorkload] | Awaitable[Iterable[DesiredWorkload]],
                      state: State, *, parallelism: int, only: set[str] | None = None,
                      progress=None, derived: Derived | None = None) -> Refreshed:
    """The list-first refresh: list the scopes (project, cluster) of the state's workloads
    at once (while the specs load), then those only the specs name; GET what the list does
    not vouch for (`listing.choose`). `desired`, `only`, `progress` as `read_live`'s.
    `derived`: what keeps the lists' scopes of the same state and specs (a watch's
    `Reuse.derived`), used without `only`."""
    reader = reads.Reader(client, parallelism, progress=progress)
    out = Refreshed()
    tasks: list[asyncio.Future] = []
    derived = derived if derived is not None and only is None else _now
    try:
        chosen = state.resources if only is None else {
            a: r for a, r in state.resources.items() if a in only}
        first, known, cut = derived("the state's lists", (state,), lambda: (
            listing.scopes(chosen.values(), (), _scope_of)[0],
            {r.kind for r in chosen.values()},  # whose own collections are read
            # the state's workloads' items held cut; over a watch's cycles, the fingerprint
            # of an item whose text is the last cycle's taken from then (`remember`)
            listing.cut_to(chosen.values(), remember=None if derived is _now else {})))
        tasks.append(asyncio.ensure_future(workloads.list_scopes(reader, first, known, cut)))
        if inspect.isawaitable(desired):
            desired = await desired

        def specs_lists() -> tuple[dict[str, DesiredWorkload], dict, set[str]]:
            by_addr = {d.address: d for d in desired if only is None or d.address in only}
            _, more = listing.scopes(chosen.values(), by_addr.values(), _scope_of)
            new_kinds = {d.kind for d in by_addr.values()} - known
            # A type first named by a spec: its own collection is read with the new scopes.
            more = {**{_scope_of(d.kind, d.project_id, d.cluster_id): 0
                       for d in by_addr.values()
                       if d.kind in new_kinds and not kinds.get(d.kind).listed}, **more}
            return by_addr, more, new_kinds

        desired_by_addr, more, new_kinds = derived("the specs' lists", (state, desired),
                                                   specs_lists)
        if more:
            tasks.append(asyncio.ensure_future(workloads.list_scopes(reader, more, new_kinds, cut)))
        parts = await asyncio.gather(*tasks)
        items = [i for part in parts for listed in part.values() for i in listed]
        for part in parts:  # (the gather that woke this task holds them until the plan
            part.clear()    # is made: the items go with `items`, before the collector runs)
        tasks = []
        choice = listing.choose(chosen, items, desired_by_addr)
        del items
        out.listed, out.fingerprints = choice.vouched, choice.fingerprints
        out.live.update(dict.fromkeys(choice.gone))
        if progress is not None:
            progress.start("Refreshing", len(choice.read))
        tasks = [asyncio.ensure_future(reader.get(
                     kinds.get(r.kind), r.workload_id, listed_phase=r.listed_phase,
                     like=chosen[r.address].applied if r.address in chosen else None))
                 for r in choice.read]
        bodies = await asyncio.gather(*tasks)
    except BaseException:
        if inspect.iscoroutine(desired):
            desired.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    finally:
        if progress is not None:
            progress.finish()
    for r, body in zip(choice.read, bodies):
        if body is None and r.address in choice.found:
            _, project_id, name = kinds.parse_address(r.address)
            log.warning("%s: the name %r in project %s is taken by workload %s of another "
                        "kind, which runai-reconcile does not manage here: creating it "
                        "will fail until that one is gone", r.address, name, project_id,
                        r.workload_id)
        out.live[r.address] = None if body and phases.live_gone(body) else body
        if out.live[r.address] is None:
            out.fingerprints.pop(r.address, None)
    return out


async def read_by_id(client, state: State, addresses: Iterable[str], *,
                     parallelism: int) -> dict[str, dict | None]:
    """The GET bodies of state workloads the list vouched for but a plan acts on: the plan
    of those is made from live, as `--refresh=full` makes it."""
    reader = reads.Reader(client, parallelism)
    addrs = sorted(addresses)
    bodies = await asyncio.gather(*(reader.get(kinds.get(state.resources[a].kind),
                                               state.resources[a].workload_id) for a in addrs))
    return {a: None if b and phases.live_gone(b) else b for a, b in zip(addrs, bodies)}


async def sweep(client, state: State, addresses: Iterable[str], *,
                parallelism: int) -> dict[str, str]:
    """address -> the fingerprint of its list item now, for those of `addresses` the state
    holds with an id that the list shows under it (one list of each of their scopes, the
    scopes and the choice `read_listed`'s, each list as its kind scopes it:
    `Kind.list_scope`)."""
    wanted = {a: state.resources[a] for a in addresses
              if a in state.resources and state.resources[a].workload_id}
    counts, _ = listing.scopes(wanted.values(), (), _scope_of)
    if not counts:
        return {}
    listed = await workloads.list_scopes(reads.Reader(client, parallelism), counts,
                                         {r.kind for r in wanted.values()})
    return listing.choose(wanted, (i for part in listed.values() for i in part)).fingerprints
