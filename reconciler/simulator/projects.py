"""The simulator's projects, in projects.yml's `Project` shape, and their routes:
GET /api/v1/org-unit/projects (filterBy, limit, offset, sortBy, sortOrder, search),
GET /api/v1/org-unit/projects/{id}, and POST /_sim/projects (define one: {"id", "name",
"clusterId", "gpuQuota"}; 201, the Project).

Callers: `app` adds `routes(sim)` and loads the defined projects from the data file
into `Projects`; `listing` names a workload's project.

A project is known when it was defined (`POST /_sim/projects`, kept in the data file
too, so `sim serve --data .runai-sim/data.json` defines them for `--sim`) or by default:
for any project id a request uses, a project named `project-<id>` in the cluster the
request asks about, with a GPU quota of `DEFAULT_GPU_QUOTA`. "Uses" means: the id in
`GET /api/v1/org-unit/projects/{id}`, the id a name filter spells (`name==project-7` is
project 7), and the `projectId` of every live workload (so a list without a name filter
shows the projects the workloads are in). A defined project takes its id's place: once
project 7 is defined as `team-a`, `project-7` no longer names it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from reconciler.simulator import queries
from reconciler.simulator.errors import ApiError, read_json
from reconciler.simulator.store import iso

if TYPE_CHECKING:
    from reconciler.simulator.app import Simulator

# A default project's cluster when the request names none and no workload is in it.
DEFAULT_CLUSTER_ID = "00000000-0000-4000-8000-000000000001"
PARENT_ID = "4f1a9c3e-2b7d-4e8a-9c1f-0d2e3f4a5b6c"  # the one department every project is in
DEFAULT_NODE_POOL = {"id": "1", "name": "default"}
DEFAULT_CREATED = "2025-01-01T00:00:00.000Z"
# A default project's GPU quota (`deserved`; projects.yml's example value): large, so that
# a plan against projects nobody defined is not flagged over quota. A defined project's
# quota is its `gpuQuota`, 0 when not given (the API's default).
DEFAULT_GPU_QUOTA = 1000

# projects.yml's ProjectsFilterBy pattern.
FILTER = re.compile(
    r"^(name|clusterId|departmentId|parentId|parentName|phase|totalGpuQuota|gpuAllocated|"
    r"createdAt|avgGpuAllocation24h|avgGpuUtilization24h|avgGpuMemoryUtilization24h|"
    r"avgGpuAllocation7d|avgGpuUtilization7d|avgGpuMemoryUtilization7d|avgGpuAllocation30d|"
    r"avgGpuUtilization30d|avgGpuMemoryUtilization30d)(==|!=|<=|>=|=@|!@|=\^|=\$)(.+)$")
_DEFAULT_NAME = re.compile(r"^project-([0-9]+)$")
_DIGITS = re.compile(r"^[0-9]+$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


@dataclass(frozen=True)
class Project:
    id: str
    name: str
    cluster_id: str
    gpu_quota: float = 0
    created: str = DEFAULT_CREATED

    def body(self) -> dict[str, Any]:
        """The `Project` body: the GPU quota is the default node pool's `gpu.deserved`."""
        return {
            "id": self.id, "name": self.name, "clusterId": self.cluster_id,
            "parentId": PARENT_ID, "description": "", "enforceRunaiScheduler": True,
            "createdAt": self.created, "updatedAt": self.created,
            "status": {"namespace": f"runai-{self.name}", "phase": "Ready",
                       "phaseMessage": "Project is ready"},
            "totalResources": {"gpuQuota": self.gpu_quota, "cpuQuota": None,
                               "memoryQuota": None},
            "effective": {"defaultNodePools": [DEFAULT_NODE_POOL["name"]]},
            "defaultNodePools": [DEFAULT_NODE_POOL["name"]],
            "resources": [{"nodePool": dict(DEFAULT_NODE_POOL),
                           "gpu": {"deserved": self.gpu_quota, "limit": None,
                                   "overQuotaWeight": None}}],
        }

    def field(self, name: str) -> Any:
        """The value a `filterBy` field compares (None for the metrics it does not keep)."""
        return {"name": self.name, "clusterId": self.cluster_id, "parentId": PARENT_ID,
                "departmentId": PARENT_ID, "phase": "Ready", "totalGpuQuota": self.gpu_quota,
                "createdAt": self.created}.get(name)


class Projects:
    """The defined projects, and the default one of any id."""

    def __init__(self) -> None:
        self.defined: dict[str, Project] = {}

    def define(self, data: Any, created: str) -> Project:
        """A project from `POST /_sim/projects`' body; ValueError says what is wrong."""
        if not isinstance(data, dict):
            raise ValueError("expected an object with id, name, clusterId and gpuQuota")
        unknown = sorted(set(data) - {"id", "name", "clusterId", "gpuQuota"})
        if unknown:
            raise ValueError(f"unknown field(s) {', '.join(unknown)}")
        pid, name, cluster = data.get("id"), data.get("name"), data.get("clusterId")
        quota = data.get("gpuQuota", 0)
        if not isinstance(pid, str) or not _DIGITS.match(pid):
            raise ValueError("id: expected a string of digits, e.g. \"12\"")
        if not isinstance(name, str) or not name:
            raise ValueError("name: expected a non-empty string")
        if not isinstance(cluster, str) or not _UUID.match(cluster):
            raise ValueError("clusterId: expected a UUID")
        if isinstance(quota, bool) or not isinstance(quota, (int, float)) or quota < 0:
            raise ValueError("gpuQuota: expected a number >= 0")
        project = Project(pid, name, cluster, quota, created)
        self.defined[pid] = project
        return project

    def by_id(self, project_id: str, cluster_id: str) -> Project | None:
        if project_id in self.defined:
            return self.defined[project_id]
        if not _DIGITS.match(project_id):
            return None
        return Project(project_id, f"project-{project_id}", cluster_id, DEFAULT_GPU_QUOTA)

    def listed(self, filters: list[tuple[str, str, str]],
               workload_projects: Iterable[tuple[str, str]]) -> list[Project]:
        """The known projects (defined, then the defaults of the ids in use) matching
        nothing yet: the caller applies `filters`. `workload_projects` are the (project
        id, cluster id) of the live workloads."""
        asked_cluster = next((v for f, op, v in filters if f == "clusterId" and op == "=="), None)
        ids: dict[str, str] = {}
        for pid, cluster in workload_projects:
            ids.setdefault(pid, cluster)
        for f, op, v in filters:
            m = _DEFAULT_NAME.match(v) if f == "name" and op == "==" else None
            if m:
                ids.setdefault(m.group(1), asked_cluster or DEFAULT_CLUSTER_ID)
        out = list(self.defined.values())
        for pid in sorted(set(ids) - set(self.defined), key=lambda p: (len(p), p)):
            if _DIGITS.match(pid):
                out.append(Project(pid, f"project-{pid}", asked_cluster or ids[pid],
                                   DEFAULT_GPU_QUOTA))
        return out


# --- routes --------------------------------------------------------------------------


def routes(sim: Simulator) -> tuple[list[Route], list[Route]]:
    """(the API's project routes, the admin route that defines one)."""
    async def list_(request):
        return await list_projects(sim, request)

    async def one(request):
        return await get_project(sim, request)

    async def define(request):
        return await define_project(sim, request)

    return ([Route("/api/v1/org-unit/projects", list_, methods=["GET"]),
             Route("/api/v1/org-unit/projects/{projectId}", one, methods=["GET"])],
            # (the other project routes, and projects made through the API: `org`)
            [Route("/_sim/projects", define, methods=["POST"])])


def _field(body: dict, name: str) -> Any:
    """The value a `filterBy` (or `sortBy`) field reads from a `Project` body (None for
    the metrics the simulator does not keep)."""
    if name == "departmentId":
        name = "parentId"
    if name == "phase":
        return body["status"].get("phase")
    if name == "totalGpuQuota":
        return body["totalResources"]["gpuQuota"]
    return body.get(name) if name in ("name", "clusterId", "parentId", "createdAt") else None


async def list_projects(sim: Simulator, request: Request) -> Response:
    sim.auth(request)
    q = request.query_params
    paging = queries.Paging.of(q)
    filters = queries.filters(q, FILTER)
    in_use = [(r.body.get("projectId"), r.body.get("clusterId"))
              for r in sim.store.live.values() if r.body.get("projectId")]
    made = sim.org.project_bodies()  # made through the API
    taken = {b["id"] for b in made}
    found = [b for b in made if all(queries.match(_field(b, f), op, v) for f, op, v in filters)]
    found += [p.body() for p in sim.projects.listed(filters, in_use)
              if p.id not in taken and not sim.org.is_gone("project", p.id)
              and all(queries.match(p.field(f), op, v) for f, op, v in filters)]
    search = q.get("search")
    if search:
        found = [b for b in found if search in b["name"]]
    return JSONResponse(paging.page(found, "projects", _field))


async def get_project(sim: Simulator, request: Request) -> Response:
    sim.auth(request)
    pid = request.path_params["projectId"]
    made = sim.org.data["project"].get(pid)
    if made is not None:
        return JSONResponse(sim.org.render_project(made))
    cluster = next((r.body.get("clusterId") for r in sim.store.live.values()
                    if r.body.get("projectId") == pid), DEFAULT_CLUSTER_ID)
    project = None if sim.org.is_gone("project", pid) else sim.projects.by_id(pid, cluster)
    if project is None:
        raise ApiError(404, f"Project {pid} not found")
    return JSONResponse(project.body())


async def define_project(sim: Simulator, request: Request) -> Response:
    body = await read_json(request)
    try:
        project = sim.projects.define(body, iso(sim.clock()))
    except ValueError as exc:
        raise ApiError(400, str(exc)) from None
    sim.store.projects[project.id] = {**body, "created": project.created}
    sim.store.save()
    return JSONResponse(project.body(), status_code=201)
