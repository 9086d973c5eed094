"""Projects read from the API: their GPU quotas (in all and per node pool) and names, or
why a quota is unknown (`read_projects`, a `ProjectRead` each), the quotas of the projects of a plan's
departments that the plan does not hold (`department_projects`), and a
project named by id or name turned into ids: the specs' `project:` (`resolve_projects`)
and `export --project` (`select_projects`); whether a `--project` value names a project
(`names_project`, `import --all`'s too).

Callers: `operations.planning` (quotas, the specs' names), `operations.drifting`,
`operations.importing` and `operations.exporting`.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from reconciler import errors, gpus, kinds
from reconciler.api import errors as api_errors
from reconciler.desired.sources import Problem, problem_lines
from reconciler.desired.types import DesiredWorkload, duplicate_addresses, is_dns_label
from reconciler.errors import SpecError

log = logging.getLogger("reconciler.live")


@dataclass(frozen=True)
class ProjectRead:
    """What a project's read gave a plan: its GPU quota, its name, and when the quota is
    unknown, why (`unknown`: the read that failed, or what the answer lacked; None with
    a quota, or with a negative one, which sets no limit)."""
    quota: float | None = None
    name: str | None = None
    unknown: str | None = None
    # Its GPU quota per node pool (`gpus.read_pools`); empty when unread.
    pools: dict[str, list[float | None]] | None = None


async def read_projects(client, project_ids: Iterable[str]) -> dict[str, ProjectRead]:
    """Each project's `GET /api/v1/org-unit/projects/{id}`, one GET per project, all at
    once. A project not found (404), not readable with these credentials (403), whose read
    failed (a 5xx, a timeout, after the retries) or whose answer cannot be read has its
    quota unknown, and says why: the plan is made, and a policy rule that needs the quota
    fails it. The failed reads and odd answers are warned about too. Another refusal (a
    400) is an error, and so is a read the command's --timeout ran out on (nothing more
    can be sent: the command ends, with one error naming this read) or a failure to get a
    token (named as the token endpoint's)."""
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
            if not exc.path.startswith(path.split(" ", 1)[1]):
                raise  # the token's request failed, not this project's: it says so itself
            if getattr(exc, "final", False):
                # The command gave up on the API (its --timeout ran out): nothing more can
                # be sent, so the plan cannot be made; one error, naming this read.
                if isinstance(exc, api_errors.NotSent):
                    raise  # another request spent the budget: the error names that one
                exc.args = (f"project {project_id}'s GPU quota could not be read: "
                            f"{exc.args[0]}",)
                raise
            _unread_quota(project_id, str(exc))
            return ProjectRead(unknown=str(exc))
        quota, problem = gpus.read_quota(body)
        name = body.get("name") if isinstance(body, dict) else None
        name = name if isinstance(name, str) else None
        if problem:
            _unread_quota(project_id, problem)
            return ProjectRead(name=name, unknown=f"{path}{project_id}: {problem}")
        if quota is None and not gpus.unlimited(body):
            return ProjectRead(name=name, unknown=f"{path}{project_id} gives no GPU quota "
                                                  "(no resources[].gpu.deserved)")
        return ProjectRead(quota=quota, name=name, pools=gpus.read_pools(body) or None)

    ids = sorted(project_ids)
    return dict(zip(ids, await asyncio.gather(*map(one, ids))))


async def department_projects(client, changes) -> dict[str, dict[str, dict]]:
    """For each department of the plan's `changes` (an entry providing a department's
    quota, as the plan leaves it), the projects live in it that the plan does not hold:
    department address -> project name -> node pool -> GPU deserved (None where not
    given). One read of the projects' collection (page after page), only when the plan
    holds a department. A read that fails is warned about, and the sums count the plan's
    projects alone."""
    units = [(c, kinds.get(c.kind)) for c in changes if kinds.get(c.kind).provides_quota]
    departments = {(c.project_id, c.name): c.address for c, k in units
                   if k.provides_quota == "department" and c.after is not None}
    if not departments:
        return {}
    held = {(c.project_id, c.name) for c, k in units if k.provides_quota == "project"}
    out: dict[str, dict[str, dict]] = {}
    for kind in [k for k in kinds.KINDS.values() if k.provides_quota == "project"]:
        try:
            found = await client.iter_collection(kind)
        except (api_errors.RetryableError, api_errors.PermanentError,
                api_errors.Unauthorized) as exc:
            if getattr(exc, "final", False):
                raise  # the command's --timeout ran out: nothing more can be sent
            log.warning("the projects of the plan's departments could not be read (%s); a "
                        "department's sum counts the projects of the plan alone", exc)
            continue
        for body in found:
            cluster, name = str(body.get("clusterId") or ""), body.get("name")
            address = departments.get((cluster, kind.quota.parent(kind, body)))
            if address is None or not isinstance(name, str) or (cluster, name) in held:
                continue
            out.setdefault(address, {})[name] = {
                pool: deserved for pool, (deserved, _) in kind.quota.pools(kind, body).items()}
    return out


def _unread_quota(project_id: str, why: str) -> None:
    """A quota the API did not give in a readable form: the plan goes on without it."""
    log.warning("project %s's GPU quota could not be read (%s); it is unknown in this plan",
                project_id, why)


async def resolve_projects(client, desired: Iterable[DesiredWorkload]) -> list[DesiredWorkload]:
    """`desired` with each `project:` name replaced by its project's id (the address
    always holds the id), looking each distinct (name, cluster) up once.

    A name that matches no project but one that `desired` creates (a spec of a type whose
    resources hold workloads: `Kind.holds_workloads`) stays unresolved: the plan knows its
    id only after apply.

    Raises SpecError naming the spec file (or the `_defaults.yaml` that gave the name,
    once, with the specs it is a default for) and the project for every name that does not
    match exactly one project in its cluster, and for two specs that turn out to have
    one address (`project: team-a` and `projectId` of team-a)."""
    desired = list(desired)
    planned = {(d.name, d.cluster_id) for d in desired if kinds.get(d.kind).holds_workloads}
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
        if not found and (d.project_name, d.cluster_id) in planned:
            out.append(d)  # its project is created by this plan
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


async def select_projects(client, wanted: Sequence[str], items: list[dict]) -> set[str] | None:
    """The project ids that `--project` values (ids or names) select; None for all.
    `items` (the workload list) answers first; a value they do not know is asked of the
    API: an id with its project's GET, a name with a projects lookup in each cluster the
    list holds. A value that names no project is an error (with the closest known names)."""
    if not wanted:
        return None
    ids: set[str] = set()
    for value in wanted:
        if not value.strip():  # a name filter of nothing is the API's 400
            raise errors.ReconcileError("--project: an empty value; give a project's id or name")
        hit = {str(i.get("projectId")) for i in items
               if names_project(value, str(i.get("projectId")), i.get("projectName"))}
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


def names_project(value: str, project_id: str, project_name: str | None) -> bool:
    """Whether a `--project` value (an id or a name) names the project `project_id`
    (named `project_name`, when known)."""
    return value == project_id or (project_name is not None and value == project_name)


def names_by_id(items: Iterable[dict]) -> dict[str, str]:
    """Project id -> name, from the workload list, for the names that a spec may give
    (`is_dns_label`, the spec loader's rule) and that name one project."""
    ids_of: dict[str, set[str]] = {}
    for i in items:
        name = i.get("projectName")
        if isinstance(name, str) and is_dns_label(name):
            ids_of.setdefault(name, set()).add(str(i.get("projectId")))
    return {next(iter(ids)): name for name, ids in ids_of.items() if len(ids) == 1}
