"""The control plane's registered workload types (`GET /api/v1/workload-types`), checked
against the specs' manifests: `check_manifests`.

A Manifest spec (Workloads V2) names its workload type by the manifest's `apiVersion` and
`kind`. Offline, `validate` knows only a table of common types and warns of another
(`reconciler.desired`); against a control plane, a plan, an apply or a watch cycle reads
the types it has registered, once, only when some spec is a Manifest, and refuses a
manifest whose type is not among them: a `SpecError` naming the spec file, the line and
the field `manifest.kind`, before anything is planned or written.

A read of the list that fails (the endpoint forbidden to these credentials, missing, or
failing after the retries) is a warning, not an error: the control plane refuses an
unregistered type itself when the workload is created (a 400 naming it, nothing made), so
the read only says so sooner; failing closed would stop every plan and every watch cycle,
for every workload, whenever that one list cannot be read. docs/manifests.md says so.

Callers: `operations.planning` (the plan's specs, once their projects are resolved).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path

from reconciler import kinds
from reconciler.api import errors as api_errors
from reconciler.desired.sources import Problem, problem_lines, read_documents
from reconciler.desired.types import DesiredWorkload
from reconciler.errors import SpecError

log = logging.getLogger("reconciler.live")

ENDPOINT = "GET /api/v1/workload-types"


def group_and_kind(manifest: object) -> tuple[str, str]:
    """(the API group of the manifest's apiVersion, "" for the core group; its kind)."""
    if not isinstance(manifest, dict):
        return "", ""
    api_version, kind = manifest.get("apiVersion"), manifest.get("kind")
    group = api_version.rpartition("/")[0] if isinstance(api_version, str) else ""
    return group, kind if isinstance(kind, str) else ""


def manifests(desired: Iterable[DesiredWorkload]) -> list[DesiredWorkload]:
    """The specs of `desired` that carry a manifest: those `check_manifests` checks."""
    return [d for d in desired if kinds.get(d.kind).manifest(d.body) is not None]


async def check_manifests(client, desired: Sequence[DesiredWorkload]) -> list[DesiredWorkload]:
    """`desired`, once every Manifest among them is of a type the control plane lists
    (one read of the list, none without a Manifest). Raises `SpecError` naming each spec
    whose type it does not list; warns, and checks nothing, when the list cannot be read."""
    desired = list(desired)
    wanted = manifests(desired)
    if not wanted:
        return desired
    try:
        types = await client.workload_types()
    except api_errors.ApiError as exc:
        if isinstance(exc, api_errors.Unauthorized) and exc.status != 403:
            raise  # the credentials are refused: every other read fails alike
        log.warning("%s failed (%s): the manifests' workload types were not checked against "
                    "the control plane, which refuses one it has not registered when the "
                    "workload is created", ENDPOINT, exc)
        return desired
    registered = {(str(t.get("group") or ""), t.get("name")) for t in types}
    problems: list[Problem] = []
    for d in wanted:
        carried = kinds.get(d.kind).manifest(d.body)
        group, kind = group_and_kind(carried)
        if (group, kind) in registered:
            continue
        api_version = (carried or {}).get("apiVersion")
        listed = sorted(f"{n} ({g})" if g else str(n) for g, n in registered if n == kind)
        why = (f"this control plane registers {kind} only as " + ", ".join(listed)
               if listed else f"{ENDPOINT} lists {len(registered)} types, not this one")
        where = (*kinds.get(d.kind).hooks.manifest_path, "kind")
        problems.append(Problem(d.source, _line_of_kind(d, where), ".".join(where),
                                f"{kind!r} (apiVersion {api_version!r}) is not a workload "
                                f"type the control plane has registered: {why}. Register it "
                                "(an administrator's task), or correct apiVersion and kind"))
    if problems:
        raise SpecError(problem_lines(problems))
    return desired


def _line_of_kind(d: DesiredWorkload, where: tuple[str, ...]) -> int | None:
    """The line of the spec's `manifest.kind` (`where`; of the manifest, or of the
    document, when the file no longer shows it): the file is read again, as only an error
    needs the line."""
    if not d.source:
        return d.line
    docs, _ = read_documents(Path(d.source), d.source)
    for doc in docs:
        if doc.line == d.line:
            return doc.line_of(where)
    return d.line
