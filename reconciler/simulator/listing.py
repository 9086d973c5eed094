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
- What the body says of its containers (the kind's `containers`): `images` (each
  container's image, in order, once), `podsRequestedResources` (the first container's
  `compute`, one pod's request: `gpu` is `gpuPortionRequest`/`gpuPortionLimit` when the
  request is a portion, else `gpuDevicesRequest`), `requestedNodePools` (`spec.nodePools`).
  `workloadRequestedResources`, `allocatedResources` and `requestedPods` are left out:
  they depend on pods the simulator does not schedule.
- `updatedAt` is the store's `updated_at`: it moves on every change (see `store`).

The default order is by creation (then arrival), kept by the store's `Ordered` index, so
a page is cut from it without sorting; `projectId==X` reads that project's records only,
and with `clusterId==Y` that project's records in that cluster only (the list a refresh
reads: its pages cost what they return, not what comes before them);
a filter on a record's own field is checked before any item is built, and items are
built only for the records the page (and a filter on the item) needs. A `sortBy` on a
record's own field sorts the records and builds the page's items only; any other sorts
the items of every record that passed the filters, as before. A page reads the clock
once (its items' phases and times are of one instant) and looks each project up once;
orjson writes it (JSONResponse when orjson refuses a value, an integer beyond 64 bits).
Nothing of an item is kept between requests: each is made from its record when asked.
"""

from __future__ import annotations

import itertools
import re
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import orjson
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


_K8S_PHASES = {"Running": "Running", "Completed": "Succeeded", "Failed": "Failed",
               "Creating": "Pending", "Initializing": "Pending", "Pending": "Pending"}
_KEYS: dict[str, list[str]] = {}  # a container's dotted path, split


def _at(body: dict, path: str) -> Any:
    keys = _KEYS.get(path) or _KEYS.setdefault(path, path.split("."))
    for key in keys:
        body = body.get(key) if isinstance(body, dict) else None
    return body


def _requested(compute: dict) -> dict:
    """A container's `compute` as the list's `WorkloadRequestResources`."""
    out: dict = {}
    if compute.get("gpuRequestType") is not None:
        out["gpuRequestType"] = compute["gpuRequestType"]
    pairs = {"gpuMemory": ("gpuMemoryRequest", "gpuMemoryLimit"),
             "cpu": ("cpuCoreRequest", "cpuCoreLimit"),
             "cpuMemory": ("cpuMemoryRequest", "cpuMemoryLimit")}
    if compute.get("gpuPortionRequest") is not None or compute.get("gpuPortionLimit") is not None:
        pairs["gpu"] = ("gpuPortionRequest", "gpuPortionLimit")
    elif compute.get("gpuDevicesRequest") is not None:
        out["gpu"] = {"request": compute["gpuDevicesRequest"]}
    for name, (request, limit) in pairs.items():
        values = {k: compute[key] for k, key in (("request", request), ("limit", limit))
                  if compute.get(key) is not None}
        if values:
            out[name] = values
    extended = [{k: v for k, v in e.items() if k in ("resource", "quantity", "exclude")}
                for e in compute.get("extendedResources") or () if isinstance(e, dict)]
    if extended:
        out["extendedResources"] = extended
    return out


def list_item(sim: Simulator, rec: Record, now: float | None = None,
              names: dict | None = None) -> dict:
    """`rec` as a list item at `now` (the clock's time when None). A page passes one
    `now` for all its items and a `names` dict, a memo of project names for that page."""
    kind = sim.kinds[rec.kind]
    b = rec.body
    spec = b.get("spec") or {}
    store = sim.store
    if now is None:
        now = sim.clock()
    phase = store.phase(rec, now)
    phase_at = iso(store.phase_since(rec, now) if rec.deleted_at is None else rec.deleted_at)
    project_name = _project_name(sim, b, {} if names is None else names)
    item = {
        "tenantId": TENANT_ID, "runningPods": 0,
        "phaseUpdatedAt": phase_at, "k8sPhaseUpdatedAt": phase_at,
        "updatedAt": iso(store.updated_at(rec, now)), "source": "Control-plane",
        "deletedAt": iso(rec.deleted_at) if rec.deleted_at is not None else None,
        "type": rec.kind, "name": b["name"], "id": b["workloadId"],
        "priority": None, "priorityClassName": spec.get("priorityClass") or "",
        "submittedBy": b["createdBy"], "clusterId": b["clusterId"],
        "projectName": project_name, "projectId": b["projectId"],
        "departmentName": f"department-{b.get('departmentId', DEPARTMENT_ID)}",
        "departmentId": b.get("departmentId", DEPARTMENT_ID),
        "namespace": f"runai-{project_name}", "createdAt": b["createdAt"],
        "phase": phase, "conditions": [], "k8sPhase": _K8S_PHASES.get(phase, phase),
        "category": spec.get("category") or b.get("category") or kind.category,
        "preemptible": spec.get("preemptibility") == "preemptible",
    }
    containers = [c for c in (_at(b, path) for path in kind.containers) if isinstance(c, dict)]
    images = [c["image"] for c in containers if isinstance(c.get("image"), str)]
    if images:
        item["images"] = list(dict.fromkeys(images))
    compute = containers[0].get("compute") if containers else None
    if isinstance(compute, dict) and (requested := _requested(compute)):
        item["podsRequestedResources"] = requested
    pools = spec.get("nodePools")
    if isinstance(pools, list) and pools:
        item["requestedNodePools"] = [str(p) for p in pools]
    for key in kind.list_fields:
        if spec.get(key):
            item[key] = spec[key]
    return item


def _project_name(sim: Simulator, body: dict, names: dict) -> str:
    project_id = str(body["projectId"])
    name = names.get(project_id)
    if name is None:
        project = sim.projects.by_id(project_id, body["clusterId"])
        name = names[project_id] = project.name if project else f"project-{project_id}"
    return name


async def list_workloads(sim: Simulator, request: Request) -> Response:
    sim.auth(request)
    q = request.query_params
    paging = queries.Paging.of(q)
    deleted = q.get("deleted", "false").lower()
    if deleted not in ("true", "false"):
        raise ApiError(400, "deleted must be true or false")
    filters = queries.filters(q, FILTER)
    order = sim.store.ordered(deleted == "true")
    records: list[Record] = order.records
    # One project's records, when the filter names one; of one cluster too, when it
    # names that (a page then cuts them as it cuts the whole list, without a scan).
    project = next((x for x in filters if x[:2] == ("projectId", "==")), None)
    if project is not None:
        cluster = next((x for x in filters if x[:2] == ("clusterId", "==")), None)
        if cluster is not None:
            records = order.of_scope(project[2], cluster[2])
        else:
            records = order.of_project(project[2])
        filters = [x for x in filters if x != project and x != cluster]
    direct = [(_RECORD_FIELDS[f], op, v) for f, op, v in filters if f in _RECORD_FIELDS]
    on_items = [(f, op, v) for f, op, v in filters if f not in _RECORD_FIELDS]
    return _json(_page(sim, paging, records, direct, on_items))


def _json(content: dict) -> Response:
    """`content` as JSONResponse would answer it, written by orjson (in C); by
    JSONResponse itself when orjson refuses it (an integer beyond 64 bits)."""
    try:
        return Response(orjson.dumps(content), media_type="application/json")
    except orjson.JSONEncodeError:
        return JSONResponse(content)


def _page(sim: Simulator, paging: queries.Paging, records: list[Record],
          direct: list, on_items: list) -> dict:
    """{"workloads": the page, "next": the next offset if more match}, the same as
    sorting, filtering and cutting every record's item would give."""
    match = queries.match
    now, names = sim.clock(), {}  # one time and one project lookup for the whole page
    start, end = paging.offset, paging.offset + paging.limit
    desc = paging.order == "desc"
    sort_by = paging.sort_by
    if sort_by is not None and sort_by not in _RECORD_FIELDS:
        candidates = [r for r in records if all(match(get(r), op, v) for get, op, v in direct)]
        items = [list_item(sim, r, now, names) for r in candidates]
        items = [i for i in items if all(match(i.get(f), op, v) for f, op, v in on_items)]
        return paging.page(items, "workloads", dict.get)
    if sort_by is not None:
        get_sorted = _RECORD_FIELDS[sort_by]
        records = sorted(records, key=lambda r: "" if (x := get_sorted(r)) is None else str(x))
    if not direct and not on_items:
        n = len(records)
        if desc:
            page = records[max(0, n - end):max(0, n - start)][::-1]
        else:
            page = records[start:end]
        out: dict = {"workloads": [list_item(sim, r, now, names) for r in page]}
        if end < n:
            out["next"] = end
        return out
    ordered: Iterable[Record] = reversed(records) if desc else records
    if direct:
        ordered = (r for r in ordered if all(match(get(r), op, v) for get, op, v in direct))
    if on_items:
        found: Iterator[dict] = (i for i in (list_item(sim, r, now, names) for r in ordered)
                                 if all(match(i.get(f), op, v) for f, op, v in on_items))
        wanted = list(itertools.islice(found, start, end + 1))
    else:  # items for the page's records only
        wanted = [list_item(sim, r, now, names) for r in itertools.islice(ordered, start, end + 1)]
    out = {"workloads": wanted[:paging.limit]}
    if len(wanted) > paging.limit:
        out["next"] = end
    return out


async def get_any(sim: Simulator, request: Request) -> Response:
    sim.auth(request)
    item = list_item(sim, sim.live(request.path_params["workloadId"]))
    item["pendingSchedulingMessages"] = []
    return _json(item)
