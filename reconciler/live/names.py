"""The names specs give of things on the control plane, checked when a plan is made: an
organisation unit's node pools, a project's department, a quota's `priority` (each type's
`Codec.names`). A name that names nothing there, and nothing the same plan creates, fails
the plan (`errors.SpecError`, naming the spec file and line, the field and the names that
exist), not the apply's action.

Each collection is read once per plan, and only when a spec names something in it: a plan
of workloads alone sends nothing more. A collection that is not served (404) names
nothing: each name in it is an error saying so, with the reference's `unserved` hint (a
quota's `priority` on a 3.0 control plane, which serves ranks; a `rank` on an earlier
one).

Caller: `operations.planning`, once the specs are loaded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path

from reconciler import kinds
from reconciler.api import errors as api_errors
from reconciler.desired import sources
from reconciler.desired.sources import Problem, problem_lines
from reconciler.desired.types import DesiredWorkload
from reconciler.errors import SpecError
from reconciler.kinds import Reference

# A collection: (path, key, cluster).
_Collection = tuple[str, str, str]


async def check_names(client, desired: Iterable[DesiredWorkload]) -> None:
    """SpecError listing every name of `desired` (`Codec.names`) that names nothing on the
    control plane and nothing a spec of `desired` creates in the same cluster."""
    desired = list(desired)
    named = references(desired)
    if not named:
        return
    wanted: list[_Collection] = sorted({_collection(ref) for _, ref in named})
    found = await asyncio.gather(*(_names_in(client, c) for c in wanted))
    known = dict(zip(wanted, found))
    planned: dict[tuple[str, str], set[str]] = {}
    for d in desired:
        planned.setdefault((kinds.get(d.kind).api_path, d.cluster_id), set()).add(d.name)
    problems = []
    for d, ref in named:
        served = known[_collection(ref)]
        if served is None:
            hint = f": {ref.unserved}" if ref.unserved else ""
            problems.append(Problem(d.source, _line(d, ref.field), ref.field,
                                    f"the control plane serves no {ref.what} (GET {ref.path} "
                                    f"answers 404){hint}"))
            continue
        names = served | planned.get((ref.path, ref.cluster), set())
        if ref.name in names:
            continue
        where = f" in cluster {ref.cluster}" if ref.cluster else ""
        these = ", ".join(sorted(names)) or "none"
        problems.append(Problem(d.source, _line(d, ref.field), ref.field,
                                f"no {ref.what} is named {ref.name!r}{where} (there are: "
                                f"{these})"))
    if problems:
        raise SpecError(problem_lines(problems))


def references(desired: Iterable[DesiredWorkload]) -> list[tuple[DesiredWorkload, Reference]]:
    """Each name of a thing on the control plane that a spec of `desired` gives, with its
    spec (`Codec.names`): what `check_names` checks."""
    named: list[tuple[DesiredWorkload, Reference]] = []
    for d in desired:
        kind = kinds.get(d.kind)
        named += [(d, ref) for ref in kind.codec.names(kind, d.body)]
    return named


def _line(d: DesiredWorkload, field: str) -> int | None:
    """The line of `field` in `d`'s document (the file read again: only for a problem), or
    the document's own line when the file does not show it (a folder default gave it)."""
    if not d.source or not field:
        return d.line
    found, _ = sources.read_documents(Path(d.source), d.source)
    for doc in found:
        if doc.line == d.line:
            return doc.line_of(tuple(field.split(".")))
    return d.line


def _collection(ref: Reference) -> _Collection:
    return ref.path, ref.key, ref.cluster


async def _names_in(client, collection: _Collection) -> set[str] | None:
    """The names in `collection`; None when the control plane does not serve it (404)."""
    path, key, cluster = collection
    try:
        items = await client.names_in(path, key, cluster)
    except api_errors.NotFound:
        return None
    return {str(i["name"]) for i in items if i.get("name") is not None
            and (not cluster or i.get("clusterId") in (None, cluster))}
