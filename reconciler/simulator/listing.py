"""The workloads list: GET /api/v1/workloads and GET /api/v1/workloads/{id}.

Callers: `app` adds `routes(sim)` after every kind's routes (so a kind's path is not
taken for a workload id). A list item is the `Workload` of workloads.yml, made from a
record (`list_item`); the list takes filterBy, limit (≤ 500), offset, deleted, sortBy
and sortOrder (`queries`).

Choices where the API spec is silent:
- An item's `type` is its kind's `type` in `kinds.KINDS` ("distributed",
  "distributed-inference", "training", "workspace", "inference"): the spec enumerates
  none. Its `category`, when the spec names none, is the kind's: Train for trainings,
  Build for workspaces, Deploy for inferences (Run:ai's default categories).
- Its project name is a defined project's (POST /_sim/projects), else `project-<id>`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from reconciler.simulator import queries
from reconciler.simulator.errors import ApiError
from reconciler.simulator.store import Record, iso
from reconciler.simulator.workloads import DEPARTMENT_ID

if TYPE_CHECKING:
    from reconciler.simulator.app import Simulator

TENANT_ID = 1001

# workloads.yml's WorkloadsFilterBy pattern.
FILTER = re.compile(
    r"^(type|name|clusterId|projectId|projectName|departmentId|departmentName|createdAt|"
    r"deletedAt|submittedBy|phase|completedAt|nodepool|distributedFramework|allocatedGPU|"
    r"idleGpus|idleAllocatedGpus|phaseUpdatedAt|category|totalPendingTimeSeconds|"
    r"totalRunningTimeSeconds|priority|priorityClassName|guaranteedRuntimeEndsAt|"
    r"aiApplicationId|aiApplicationName)(==|!=|<=|>=|=@|!@|=\^|=\$)(.+)$")
# List item fields that are a record's own values, as list_item() copies them: a filter
# on one of them is checked before any list item is built.
_RECORD_FIELDS: dict[str, Callable[[Record], Any]] = {
    "type": lambda r: r.kind, "name": lambda r: r.body.get("name"),
    "projectId": lambda r: r.body.get("projectId"), "clusterId": lambda r: r.body.get("clusterId"),
    "createdAt": lambda r: r.body.get("createdAt"), "submittedBy": lambda r: r.body.get("createdBy"),
}


def routes(sim: Simulator) -> tuple[list[Route], list[Route]]:
    """(the list route, which goes first; GET by id, which goes after the kinds')."""
    async def list_(request):
        return await list_workloads(sim, request)

    async def one(request):
        return await get_any(sim, request)

    return ([Route("/api/v1/workloads", list_, methods=["GET"])],
            [Route("/api/v1/workloads/{workloadId}", one, methods=["GET"])])


def _k8s_phase(phase: str) -> str:
    return {"Running": "Running", "Completed": "Succeeded", "Failed": "Failed",
            "Creating": "Pending", "Initializing": "Pending", "Pending": "Pending"}.get(phase,
                                                                                          phase)


def list_item(sim: Simulator, rec: Record) -> dict:
    kind = sim.kinds[rec.kind]
    b = rec.body
    spec = b.get("spec") or {}
    phase = sim.store.phase(rec)
    phase_at = iso(sim.store.phase_since(rec) if rec.deleted_at is None else rec.deleted_at)
    project = sim.projects.by_id(str(b["projectId"]), b["clusterId"])
    project_name = project.name if project else f"project-{b['projectId']}"
    item = {
        "tenantId": TENANT_ID, "runningPods": 0,
        "phaseUpdatedAt": phase_at, "k8sPhaseUpdatedAt": phase_at,
        "updatedAt": iso(rec.updated), "source": "Control-plane",
        "deletedAt": iso(rec.deleted_at) if rec.deleted_at is not None else None,
        "type": rec.kind, "name": b["name"], "id": b["workloadId"],
        "priority": None, "priorityClassName": spec.get("priorityClass") or "",
        "submittedBy": b["createdBy"], "clusterId": b["clusterId"],
        "projectName": project_name, "projectId": b["projectId"],
        "departmentName": f"department-{b.get('departmentId', DEPARTMENT_ID)}",
        "departmentId": b.get("departmentId", DEPARTMENT_ID),
        "namespace": f"runai-{project_name}", "createdAt": b["createdAt"],
        "phase": phase, "conditions": [], "k8sPhase": _k8s_phase(phase),
        "category": spec.get("category") or b.get("category") or kind.category,
        "preemptible": spec.get("preemptibility") == "preemptible",
    }
    for key in kind.list_fields:
        if spec.get(key):
            item[key] = spec[key]
    return item


async def list_workloads(sim: Simulator, request: Request) -> Response:
    sim.auth(request)
    q = request.query_params
    paging = queries.Paging.of(q)
    deleted = q.get("deleted", "false").lower()
    if deleted not in ("true", "false"):
        raise ApiError(400, "deleted must be true or false")
    filters = queries.filters(q, FILTER)
    source = sim.store.deleted if deleted == "true" else sim.store.live
    records = sorted(source.values(), key=lambda r: r.created)
    match = queries.match
    direct = [(_RECORD_FIELDS[f], op, v) for f, op, v in filters if f in _RECORD_FIELDS]
    if direct:
        records = [r for r in records if all(match(get(r), op, v) for get, op, v in direct)]
    items = [list_item(sim, r) for r in records]
    items = [i for i in items if all(match(i.get(f), op, v) for f, op, v in filters)]
    return JSONResponse(paging.page(items, "workloads", dict.get))


async def get_any(sim: Simulator, request: Request) -> Response:
    sim.auth(request)
    item = list_item(sim, sim.live(request.path_params["workloadId"]))
    item["pendingSchedulingMessages"] = []
    return JSONResponse(item)
