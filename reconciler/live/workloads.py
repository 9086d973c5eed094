"""Finding live workloads in the workload list (`GET /api/v1/workloads`, pages of 500).

`find_by_name` is the one "list a project's workloads and match them by name": the plan's
adoption of workloads the state does not know (`refresh.read_live`) and `import --all`
both find them with it, so they agree on what exists. One list per project (with the
name in the filter when the project has one wanted name); an item counts when its
project and name are a wanted spec's (names are unique per project across kinds).
`list_all` is export's: every workload, and the deleted ones, listed once.
Callers: `reconciler.refresh`, `operations.importing`, `operations.exporting`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from reconciler.desired.types import DesiredWorkload


async def find_by_name(client, wanted: Iterable[DesiredWorkload]) -> dict[str, str]:
    """address -> workload id, for each of `wanted` (resolved specs) that exists live."""
    by_project: dict[str, list[DesiredWorkload]] = {}
    for d in wanted:
        by_project.setdefault(d.project_id, []).append(d)

    async def scan(project_id: str, specs: list[DesiredWorkload]) -> dict[str, str]:
        names = {d.name for d in specs}
        where = [f"projectId=={project_id}"]
        if len(names) == 1:
            where.insert(0, f"name=={next(iter(names))}")
        return match_listed(specs, await client.iter_workloads(filter_by=where))

    found: dict[str, str] = {}
    for part in await asyncio.gather(*(scan(p, s) for p, s in sorted(by_project.items()))):
        found.update(part)
    return found


def match_listed(wanted: Iterable[DesiredWorkload],
                 items: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """address -> workload id, for each of `wanted` whose project and name a list item
    has (pure)."""
    by_key = {(d.project_id, d.name): d.address for d in wanted}
    found: dict[str, str] = {}
    for item in items:
        address = by_key.get((_str(item.get("projectId")), item.get("name")))
        workload_id = item.get("id") or item.get("workloadId")
        if address is not None and workload_id:
            found[address] = str(workload_id)
    return found


async def list_all(client) -> tuple[list[dict], list[dict]]:
    """(the workloads listed that have an id and a name, the deleted ones listed), both
    lists read at once."""
    listed, deleted = await asyncio.gather(client.iter_workloads(),
                                           client.iter_workloads(deleted=True))
    return ([i for i in listed if isinstance(i, dict) and i.get("id") and i.get("name")],
            [i for i in deleted if isinstance(i, dict)])


def _str(v: Any) -> str:
    """An id as the address spells it (CONTRACT.md §2: projectId may come as a number)."""
    return "" if v is None else str(v)
