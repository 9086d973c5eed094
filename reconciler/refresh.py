"""Reading the live control plane for a plan (the "R" of the three-way diff).

Called by `operations` before planning (`plan`, `apply`), to re-read what a saved plan
acts on (`apply PLANFILE`) and for `drift`. For each address the state knows, one GET
by workload id; for desired addresses the state does not know (first run, lost state),
one list call per project (pages of 500) finds existing workloads by name, and only
those found are read with a GET. So an unchanged fleet of N costs N GETs, and a new one
a handful of list calls.

The reads themselves are `reconciler.live`'s: its `Reader` (the bounded GETs) and its
`workloads.find_by_name` (the list calls, shared with `import --all`). The specs' project
names are ids by then (`live.projects.resolve_projects`).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Iterable

from reconciler import kinds, phases
from reconciler.desired.types import DesiredWorkload
from reconciler.live import reads, workloads
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
    reader = reads.Reader(client, parallelism, progress=progress)
    live: dict[str, dict | None] = {}
    found: dict[str, str] = {}  # address -> id, of new addresses found by name

    tasks: list[asyncio.Future] = []
    addrs: list[str] = []  # the address of each of `tasks`
    try:
        known = sorted(a for a, res in state.resources.items()
                       if res.workload_id and (only is None or a in only))
        tasks += [asyncio.ensure_future(reader.get(kinds.get(state.resources[a].kind),
                                                   state.resources[a].workload_id))
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
