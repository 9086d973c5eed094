"""Finding live workloads in the workload list (`GET /api/v1/workloads`, pages of 500).

`find_by_name` is the one "list a project's workloads and match them by name": the plan's
adoption of workloads the state does not know (`refresh.read_live`) and `import --all`
both find them with it, so they agree on what exists. One list per project (with the
name in the filter when the project has one wanted name); an item counts when its
project and name are a wanted spec's (names are unique per project across kinds).
`list_all` is export's: every workload, and the deleted ones, listed once. A type the
workloads list does not show (`Kind.listed` false: a resource that is no workload) is
found in its own collection by each of them (`listed_apart`), as list items.
`list_scopes` is the list-first refresh's (`--refresh=auto`): the lists of several
(project, cluster) scopes, every page of every scope in flight at once through the one
`reads.Reader`. What is decided from the lists (the scopes, the fingerprint of an item,
the specs matched by name, what to read) is `reconciler.listing`'s, which is pure.
Callers: `reconciler.refresh`, `operations.importing`, `operations.exporting`,
`operations.applying` (the list sweep that records fingerprints after an apply).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from reconciler import kinds
from reconciler.desired.types import DesiredWorkload
from reconciler.listing import Scope, match_listed


async def find_by_name(client, wanted: Iterable[DesiredWorkload]) -> dict[str, str]:
    """address -> workload id, for each of `wanted` (resolved specs) that exists live."""
    by_project: dict[str, list[DesiredWorkload]] = {}
    for d in wanted:
        by_project.setdefault(d.project_id, []).append(d)

    async def scan(project_id: str, specs: list[DesiredWorkload]) -> dict[str, str]:
        names = {d.listed_name for d in specs}
        where = [f"projectId=={project_id}"]
        if len(names) == 1:
            where.insert(0, f"name=={next(iter(names))}")
        # The workloads list shows only the listed kinds (an organisation unit, an access
        # rule or a Run:ai policy is found in its own collection alone).
        listed = await client.iter_workloads(filter_by=where) \
            if any(kinds.get(d.kind).listed for d in specs) else []
        return match_listed(specs, listed + await listed_apart(
            client, where, {d.kind for d in specs}))

    found: dict[str, str] = {}
    for part in await asyncio.gather(*(scan(p, s) for p, s in sorted(by_project.items()))):
        found.update(part)
    return found


async def in_projects(client, project_ids: Iterable[str]) -> dict[str, list[dict]]:
    """project id -> the live workloads listed in it (`GET /api/v1/workloads` filtered by
    the project: what deleting the project deletes with it), each project's read at once."""
    ids = sorted(set(project_ids))
    found = await asyncio.gather(*(client.iter_workloads(filter_by=[f"projectId=={p}"])
                                   for p in ids))
    return {p: [i for i in items if isinstance(i, dict) and i.get("name")]
            for p, items in zip(ids, found)}


async def list_all(client, kinds_in_use: Iterable[str] | None = None
                   ) -> tuple[list[dict], list[dict]]:
    """(the workloads listed that have an id and a name, the deleted ones listed), both
    lists read at once."""
    listed, deleted, apart = await asyncio.gather(client.iter_workloads(),
                                                  client.iter_workloads(deleted=True),
                                                  listed_apart(client, (), kinds_in_use))
    listed = listed + apart
    return ([i for i in listed if isinstance(i, dict) and i.get("id") and i.get("name")],
            [i for i in deleted if isinstance(i, dict)])


# --- the list-first refresh -----------------------------------------------------------

PAGE = 500  # the API's largest page (workloads.yml `Limit`)

async def list_scopes(reader, expected: Mapping[Scope, int],
                      kinds_in_use: Iterable[str] = (),
                      cut: Callable[[dict], Mapping] | None = None) -> dict[Scope, list]:
    """Every listed workload of each scope (`filterBy` projectId and clusterId), each
    item as `cut` keeps it as it arrives (`listing.cut_to`; None: whole). Each
    scope's first `ceil(expected / PAGE)` pages (at least one) go out at once, with every
    other scope's, through `reader` (its bound holds); a scope whose last page says more
    follow (`next`), or is full without saying and holds fewer items than expected, asks
    for its next pages, again all at once. The collections of the types the workloads
    list does not show are read for those of `kinds_in_use` only."""
    async def scope(project_id: str, cluster_id: str, count: int) -> list[dict]:
        where = [f"projectId=={project_id}"] + ([f"clusterId=={cluster_id}"] if cluster_id else [])
        found: list = []

        async def page(at: int) -> tuple[dict, list]:
            """The page at `at` and its items, cut as it arrives (of them the page keeps
            their count, what `_more` reads)."""
            got = await reader.list_page(where, at)
            items = got["workloads"]
            got["workloads"] = range(len(items))
            return got, [i if cut is None else cut(i) for i in items if isinstance(i, dict)]

        offset, pages = 0, max(1, math.ceil(count / PAGE))
        while True:
            answers = await asyncio.gather(*(page(offset + i * PAGE) for i in range(pages)))
            for _, items in answers:
                found.extend(items)
            last = answers[-1][0]
            if not _more(last, offset + (pages - 1) * PAGE, len(found) >= count):
                return found
            offset += pages * PAGE
            pages = max(1, pages)

    scopes = sorted(expected)
    apart = _apart(kinds_in_use)
    answers, collections = await asyncio.gather(
        asyncio.gather(*(scope(p, c, expected[(p, c)]) for p, c in scopes)),
        asyncio.gather(*(reader.collection(k) for k in apart)))
    out = dict(zip(scopes, answers))
    for kind, bodies in zip(apart, collections):
        for body in bodies:
            item = as_list_item(kind, body)
            where = kind.list_scope(str(item["projectId"]), item.get("clusterId"))
            if where in out:
                out[where].append(item if cut is None else cut(item))
    return out


# --- types the workloads list does not show (`Kind.listed` false) --------------------


def _str(v: Any) -> str:
    """An id as the address spells it (CONTRACT.md §2: projectId may come as a number)."""
    return "" if v is None else str(v)


def _apart(names: Iterable[str] | None = None) -> list[kinds.Kind]:
    """The registered types the workloads list does not show (of `names`, when given)."""
    wanted = None if names is None else set(names)
    return [k for k in kinds.KINDS.values()
            if not k.listed and (wanted is None or k.name in wanted)]


def as_list_item(kind: kinds.Kind, body: Mapping[str, Any]) -> dict:
    """A flat body of a type's own collection as a workload list item: its id, name,
    project, cluster, `type` (the kind's first list type) and times (what a change
    moves, for `fingerprint`)."""
    item = {"id": body.get("workloadId"), "name": body.get("name"),
            "projectId": _str(body.get("projectId")), "clusterId": body.get("clusterId"),
            "type": min(kind.list_types)}
    for key in ("createdAt", "updatedAt"):
        if body.get(key) is not None:
            item[key] = body[key]
    return item


async def listed_apart(client, filter_by: Iterable[str] = (),
                       kinds_in_use: Iterable[str] | None = None) -> list[dict]:
    """The items of every registered type the workloads list does not show, from each
    type's own collection, as list items matching `filter_by` (`field==value`); none,
    and no request, while no such type is registered."""
    apart = _apart(kinds_in_use)
    if not apart:
        return []
    collections = await asyncio.gather(*(client.iter_collection(k) for k in apart))
    wanted = [f.split("==", 1) for f in filter_by]
    items = [as_list_item(k, b) for k, bodies in zip(apart, collections) for b in bodies]
    return [i for i in items if i["id"] and all(_str(i.get(f)) == v for f, v in wanted)]


def _more(page: Mapping[str, Any], offset: int, as_expected: bool = False) -> bool:
    """Whether a list page (read at `offset`) has a page after it: its `next` when it
    gives one; without one, whether it was full, unless as many items as expected are in
    (`as_expected`: a full last page then ends the list, without an empty page after it)."""
    if "next" in page:
        nxt = page.get("next")
        return isinstance(nxt, int) and nxt > offset
    return len(page["workloads"]) >= PAGE and not as_expected
