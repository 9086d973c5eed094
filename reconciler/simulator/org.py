"""The simulator's organisation: departments and projects made through the API, node
pools, priorities and ranks, and their routes (org-units.yml, CONTRACT.md §13).

Callers: `app` keeps an `Organisation` in `Simulator.org` and adds `routes(sim)`;
`projects` lists and answers the projects made here beside its default and defined ones;
`access` and `policies` look scopes up here; `faults` settles finished project deletions
before each API request; `admin` changes a unit behind the client's back. Its records live
in `Store.org`, so they are kept in the data file.

    POST   /api/v1/org-unit/{projects|departments}            201, the unit
    GET    /api/v1/org-unit/departments                       {departments, next}
    GET    /api/v1/org-unit/{projects|departments}/{id}       200, the unit
    PUT    /api/v1/org-unit/{projects|departments}/{id}       200, the unit
    PUT    .../{id}/resources, PATCH .../{id}/resources       200, the quota list
    DELETE /api/v1/org-unit/projects/{id}                     202, then gone on the clock
    DELETE /api/v1/org-unit/departments/{id}                  204
    GET    /api/v1/node-pools, /api/v1/node-pools/{id}        the seeded node pools
    GET    /api/v1/org-unit/priorities, /api/v1/org-unit/ranks

Each unit type is one `UnitType` entry of `UNITS`: its path, bodies, create-only fields,
phases and delete answer; the handlers read the entry and name no type.

Choices where the API spec is silent:
- A name is unique per cluster among live units of its type: a second create answers
  409. A project being deleted still holds its name.
- An update naming a create-only field (`name`, `clusterId`, `parentId`,
  `requestedNamespace`) answers 400 naming it; any other unknown key is a 400 too.
- A quota entry names a node pool by id: an id the simulator does not seed, or one named
  twice, is a 400. The answer fills in the pool's `name`, and `gpu.deserved` 0 when not
  sent. A `priority` must be one of the priorities' names.
- PUT of a unit replaces every updatable field; one not sent is cleared (the description
  becomes ""), but `enforceRunaiScheduler`, which has no default on update, keeps its
  value. PATCH of `resources` replaces the entries it sends, matched by `nodePool.id`,
  and keeps the others.
- A project without `parentId` is in the seeded department "default" (id "1"); a
  `parentId` naming no department is a 400. A department that still has projects cannot
  be deleted (400).
- A project's phase goes Creating → Ready on the simulator's clock (Updating → Ready
  after a PUT or a quota change); `status.namespace` (`requestedNamespace`, else
  `runai-<name>`) shows once it is Ready. Its DELETE answers 202: the phase is Deleting,
  and when the clock moves on the project and every workload in it are gone (GET 404).
- The priorities are Low, Normal (the default) and High; the ranks (Run:ai 3.0) VeryLow
  to VeryHigh, MediumLow the default. `GET .../ranks` answers `{ranks: [{name, value,
  isDefault}]}`, the shape of a priority: the 2.24 files hold no `Rank`.
- As a 3.0 control plane (`create_app(control_plane="3.0")`, `sim serve --control-plane
  3.0`) a quota entry takes `rank` (one of the ranks' names) in the place of `priority`,
  which is then an unknown key (400), and `GET .../priorities` is not served (404). As
  2.24 (the default) a `rank` is the unknown key, and both routes are served (NVIDIA's
  2.24 pages already point from the priorities to the ranks).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from reconciler.simulator import queries, schema, validator
from reconciler.simulator.errors import ApiError, issues_message, read_json
from reconciler.simulator.faults import committed
from reconciler.simulator.projects import DEFAULT_CLUSTER_ID
from reconciler.simulator.store import GONE, iso
from reconciler.simulator.validator import Issue, Obj

if TYPE_CHECKING:
    from reconciler.simulator.app import Simulator

TENANT_ID = 1001
DEFAULT_DEPARTMENT = "1"
CREATED = "2025-01-01T00:00:00.000Z"  # when the seeded things were made
CREATOR = "runai-sim"

# The seeded node pools (ids are strings, as in the API). "default" is the pool the
# default projects' quota is in.
NODE_POOLS = (
    {"id": "1", "name": "default", "labelKey": "run.ai/type", "labelValue": "default",
     "isDefault": True},
    {"id": "2", "name": "a100", "labelKey": "run.ai/type", "labelValue": "a100",
     "isDefault": False},
)
PRIORITIES = ({"name": "Low", "value": 50, "isDefault": False},
              {"name": "Normal", "value": 100, "isDefault": True},
              {"name": "High", "value": 150, "isDefault": False})
RANKS = tuple({"name": name, "value": 10 * (i + 1), "isDefault": name == "MediumLow"}
              for i, name in enumerate(("VeryLow", "Low", "MediumLow", "Medium",
                                        "MediumHigh", "High", "VeryHigh")))

# org-units.yml's filterBy patterns.
_DEPARTMENTS_FILTER = re.compile(
    r"^(name|clusterId|totalGpuQuota|gpuAllocated|createdAt|avgGpuAllocation24h|"
    r"avgGpuUtilization24h|avgGpuMemoryUtilization24h|avgGpuAllocation7d|"
    r"avgGpuUtilization7d|avgGpuMemoryUtilization7d|avgGpuAllocation30d|"
    r"avgGpuUtilization30d|avgGpuMemoryUtilization30d)(==|!=|<=|>=|=@|!@|=\^|=\$)(.+)$")
_NODE_POOLS_FILTER = re.compile(
    r"^(name|clusterId|phase|createdAt|updatedAt)(==|!=|<=|>=|=@|!@|=\^|=\$)(.+)$")


@dataclass(frozen=True)
class UnitType:
    type: str  # "project" | "department": the key its records are kept under
    path: str  # POST here; GET, PUT, DELETE on path/{id}; PUT, PATCH path/{id}/resources
    create: Obj
    update: Obj
    create_only: tuple[str, ...]  # create-body keys an update may not send
    list_key: str  # the list answer's key
    openapi: str  # the file, and the components of the unit answered and listed
    response: str
    list_item: str
    create_phases: tuple[str, ...] = ()  # () : no phase (departments)
    update_phases: tuple[str, ...] = ()
    delete_phases: tuple[str, ...] = ()  # (): gone at once, 204; else 202 and the phases
    in_department: bool = False  # has parentId, a namespace and enforceRunaiScheduler
    # (the list route of projects is `projects.py`'s, which also serves default ones)
    lists: bool = True


PROJECT = UnitType(
    type="project", path="/api/v1/org-unit/projects",
    create=schema.PROJECT_CREATE, update=schema.PROJECT_UPDATE,
    create_only=("name", "clusterId", "parentId", "requestedNamespace"),
    list_key="projects", openapi="org-units.yml", response="Project", list_item="Project",
    create_phases=("Creating", "Ready"), update_phases=("Updating", "Ready"),
    delete_phases=("Deleting", GONE), in_department=True, lists=False,
)
DEPARTMENT = UnitType(
    type="department", path="/api/v1/org-unit/departments",
    create=schema.DEPARTMENT_CREATE, update=schema.DEPARTMENT_UPDATE,
    create_only=("name", "clusterId"),
    list_key="departments", openapi="org-units.yml", response="Department",
    list_item="DepartmentForList",
)
UNITS: tuple[UnitType, ...] = (DEPARTMENT, PROJECT)


class Organisation:
    """The units, access rules and policies, kept as JSON in `store.org`:
    {"project": {id: unit}, "department": {...}, "accessRule": {...}, "policy": {...},
    "gone": {type: [ids]}, "nextId": n}. A unit is {"body", "phases", "since"}."""

    def __init__(self, sim: Simulator):
        self.sim = sim
        self._seed()

    def _seed(self) -> None:
        """What a fresh control plane has: the default department, empty tables."""
        org = self.sim.store.org
        for unit in UNITS:
            org.setdefault(unit.type, {})
        org.setdefault("accessRule", {})
        org.setdefault("policy", {})
        org.setdefault("gone", {})
        org.setdefault("nextId", 100)
        if DEFAULT_DEPARTMENT not in org["department"]:
            org["department"][DEFAULT_DEPARTMENT] = {"body": {
                "id": DEFAULT_DEPARTMENT, "name": "default",
                "clusterId": DEFAULT_CLUSTER_ID, "description": "",
                "resources": [], "createdAt": CREATED, "updatedAt": CREATED,
                "createdBy": CREATOR, "updatedBy": CREATOR}, "phases": [], "since": 0}

    @property
    def data(self) -> dict:
        return self.sim.store.org

    def next_id(self) -> int:
        """A fresh number for a unit's id, above every project id in use (made, defined,
        or a live workload's)."""
        used = [int(p) for p in (*self.data["project"], *self.sim.projects.defined,
                                 *(str(r.body.get("projectId"))
                                   for r in self.sim.store.live.values()))
                if p.isdigit()]
        n = max([self.data["nextId"], *(u + 1 for u in used)])
        self.data["nextId"] = n + 1
        return n

    def units(self, unit: UnitType) -> dict[str, dict]:
        return self.data[unit.type]

    def unit(self, unit: UnitType, uid: str) -> dict:
        found = self.data[unit.type].get(uid)
        if found is None:
            raise ApiError(404, f"{unit.type.capitalize()} {uid} not found")
        return found

    def is_gone(self, unit_type: str, uid: str) -> bool:
        return uid in self.data["gone"].get(unit_type, ())

    def phase(self, rec: dict) -> str | None:
        if not rec["phases"]:
            return None
        return self.sim.store.phase_of(rec["phases"], rec["since"])

    def settle(self) -> None:
        """Finish the project deletions the clock has reached: the project and every
        workload in it are gone."""
        for unit in UNITS:
            ending = [uid for uid, rec in self.data[unit.type].items()
                      if GONE in rec["phases"] and self.phase(rec) == GONE]
            for uid in ending:
                self.remove_now(unit, uid)

    def remove_now(self, unit: UnitType, uid: str) -> None:
        """The unit is gone (and a project's workloads with it)."""
        del self.data[unit.type][uid]
        self.data["gone"].setdefault(unit.type, []).append(uid)
        if unit is PROJECT:
            for rec in [r for r in self.sim.store.live.values()
                        if str(r.body.get("projectId")) == uid]:
                self.sim.store.remove_now(rec)
        self.sim.store.save()

    def clear(self) -> None:
        self.data.clear()
        self._seed()

    # --- answers ------------------------------------------------------------------

    def render(self, unit: UnitType, rec: dict) -> dict:
        """The `Project` or `Department` answer of a stored unit."""
        body = copy.deepcopy(rec["body"])
        total = {"gpuQuota": sum(r["gpu"]["deserved"] for r in body["resources"]),
                 "cpuQuota": _total(body["resources"], "cpu"),
                 "memoryQuota": _total(body["resources"], "memory")}
        body["totalResources"] = total
        body.setdefault("description", "")
        if unit.in_department:
            phase = self.phase(rec)
            status: dict = {"phase": phase, "phaseMessage": f"Project is {phase.lower()}"}
            if phase in ("Ready", "Updating"):
                status["namespace"] = body.get("requestedNamespace") or f"runai-{body['name']}"
            body["status"] = status
            parent = self.data["department"].get(body["parentId"])
            if parent is not None:
                body["parent"] = {"id": parent["body"]["id"], "name": parent["body"]["name"]}
            body["effective"] = {k: body[k] for k in ("schedulingRules", "defaultNodePools",
                                                      "nodeTypes") if body.get(k) is not None}
        else:
            body["children"] = [{"id": p["body"]["id"], "name": p["body"]["name"]}
                                for p in self.data["project"].values()
                                if p["body"].get("parentId") == body["id"]]
        return body

    def render_project(self, rec: dict) -> dict:
        return self.render(PROJECT, rec)

    def project_bodies(self) -> list[dict]:
        return [self.render(PROJECT, rec) for rec in self.data["project"].values()]

    def node_pool(self, pool: dict) -> dict:
        return {**pool, "clusterId": self.data["department"][DEFAULT_DEPARTMENT]["body"]
                ["clusterId"], "tenantId": TENANT_ID, "clusterName": "sim-cluster",
                "phase": "Ready", "createdBy": CREATOR, "createdAt": CREATED,
                "updatedBy": CREATOR, "updatedAt": CREATED}

    # --- checks -------------------------------------------------------------------

    @property
    def ranked(self) -> bool:
        """Whether it behaves as a 3.0 control plane: quotas take a `rank`, no priority."""
        return self.sim.control_plane == "3.0"

    def quotas(self, entries: list[dict], where: str) -> list[dict]:
        """The quota entries sent, checked, as stored: the pool's name filled in, and
        `gpu.deserved` 0 when not sent."""
        pools = {p["id"]: p for p in NODE_POOLS}
        order, names = ("rank", RANKS) if self.ranked else ("priority", PRIORITIES)
        allowed = {p["name"] for p in names}
        seen: set[str] = set()
        out = []
        for i, entry in enumerate(entries):
            at = f"{where}[{i}]"
            pool_id = (entry.get("nodePool") or {}).get("id")
            if pool_id is None:
                raise ApiError(400, f"{at}.nodePool.id: is required")
            if pool_id not in pools:
                raise ApiError(400, f"{at}.nodePool.id: no node pool has the id {pool_id!r}")
            if pool_id in seen:
                raise ApiError(400, f"{at}.nodePool.id: node pool {pool_id} is given twice")
            seen.add(pool_id)
            if entry.get(order) is not None and entry[order] not in allowed:
                raise ApiError(400, f"{at}.{order}: must be one of "
                                    f"{', '.join(sorted(allowed))}")
            stored = {k: v for k, v in entry.items() if v is not None}
            stored["nodePool"] = {"id": pool_id, "name": pools[pool_id]["name"]}
            stored["gpu"] = {"deserved": 0, **(entry.get("gpu") or {})}
            if stored["gpu"].get("deserved") is None:
                stored["gpu"]["deserved"] = 0
            out.append(stored)
        return out

    def check(self, unit: UnitType, schema_: Any, body: Any, *, update: bool) -> None:
        issues: list[Issue] = []
        if update and isinstance(body, dict):
            issues = [Issue(key, "cannot be changed: it is set when the "
                            f"{unit.type} is created") for key in unit.create_only
                      if key in body]
        issues = issues or validator.validate(
            schema.ranked(schema_) if self.ranked else schema_, body)
        if issues:
            raise ApiError(400, issues_message(issues, f"{unit.type} request"))


def _total(resources: list[dict], key: str) -> float | None:
    values = [(r.get(key) or {}).get("deserved") for r in resources]
    values = [v for v in values if v is not None]
    if not values:
        return None
    if key == "memory":  # MB, as TotalResources has it
        factor = {"MB": 1, "Mib": 1.048576, "GB": 1000}
        return sum(v * factor[(r.get("memory") or {}).get("units", "MB")]
                   for r, v in zip(resources, values))
    return sum(values)


# --- routes --------------------------------------------------------------------------


def routes(sim: Simulator) -> list[Route]:
    def bound(handler, *args):
        async def endpoint(request):
            return await handler(sim, *args, request)
        return endpoint

    out = []
    for unit in UNITS:
        out.append(Route(unit.path, bound(collection, unit),
                         methods=["POST", "GET"] if unit.lists else ["POST"]))
        # GET of a project by id is `projects.py`'s (default projects too)
        out.append(Route(unit.path + "/{unitId}", bound(one, unit),
                         methods=(["GET"] if unit.lists else []) + ["PUT", "DELETE"]))
        out.append(Route(unit.path + "/{unitId}/resources", bound(resources, unit),
                         methods=["PUT", "PATCH"]))
    out += [Route("/api/v1/node-pools", bound(node_pools), methods=["GET"]),
            Route("/api/v1/node-pools/{nodepoolId}", bound(node_pool), methods=["GET"]),
            Route("/api/v1/org-unit/ranks", bound(listed, "ranks", RANKS), methods=["GET"])]
    if not sim.org.ranked:  # a 3.0 control plane serves the ranks alone
        out.append(Route("/api/v1/org-unit/priorities",
                         bound(listed, "priorities", PRIORITIES), methods=["GET"]))
    return out


async def collection(sim: Simulator, unit: UnitType, request: Request) -> Response:
    if request.method == "GET":
        return await list_units(sim, unit, request)
    return await create(sim, unit, request)


async def create(sim: Simulator, unit: UnitType, request: Request) -> Response:
    claims = sim.auth(request)
    org = sim.org
    body = await read_json(request)
    org.check(unit, unit.create, body, update=False)
    taken = [r for r in org.units(unit).values()
             if (r["body"]["name"], r["body"]["clusterId"]) == (body["name"], body["clusterId"])]
    if taken or (unit is PROJECT and any(
            (p.name, p.cluster_id) == (body["name"], body["clusterId"])
            for p in sim.projects.defined.values())):
        raise ApiError(409, f"A {unit.type} named {body['name']!r} already exists in "
                            f"cluster {body['clusterId']}")
    stored = {k: v for k, v in body.items() if v is not None and k != "overtimeData"}
    stored["resources"] = org.quotas(body["resources"], "resources")
    if unit.in_department:
        parent = body.get("parentId") or DEFAULT_DEPARTMENT
        if parent not in org.units(DEPARTMENT):
            raise ApiError(400, f"parentId: no department has the id {parent!r}")
        stored["parentId"] = parent
        stored.setdefault("enforceRunaiScheduler", True)
    now = sim.clock()
    who = str(claims.get("sub", ""))
    stored.update(id=str(org.next_id()), createdAt=iso(now), updatedAt=iso(now),
                  createdBy=who, updatedBy=who)
    rec = {"body": stored, "phases": list(unit.create_phases), "since": now}
    org.units(unit)[stored["id"]] = rec
    sim.store.save()
    return committed(sim, JSONResponse(org.render(unit, rec), status_code=201))


async def list_units(sim: Simulator, unit: UnitType, request: Request) -> Response:
    sim.auth(request)
    q = request.query_params
    paging = queries.Paging.of(q)
    filters = queries.filters(q, _DEPARTMENTS_FILTER)
    items = [sim.org.render(unit, rec) for rec in sim.org.units(unit).values()]
    for item in items:
        item["totalGpuQuota"] = item["totalResources"]["gpuQuota"]
    items = [i for i in items if all(queries.match(i.get(f), op, v) for f, op, v in filters)]
    out = paging.page(items, unit.list_key, dict.get)
    for item in out[unit.list_key]:
        del item["totalGpuQuota"]
    return JSONResponse(out)


async def one(sim: Simulator, unit: UnitType, request: Request) -> Response:
    claims = sim.auth(request)
    org = sim.org
    uid = request.path_params["unitId"]
    rec = org.unit(unit, uid)
    if request.method == "GET":
        return JSONResponse(org.render(unit, rec))
    if request.method == "DELETE":
        if unit is DEPARTMENT:
            children = [p["body"]["name"] for p in org.units(PROJECT).values()
                        if p["body"]["parentId"] == uid]
            if children:
                raise ApiError(400, f"Department {uid} still has projects: "
                                    f"{', '.join(children)}")
        if not unit.delete_phases:
            org.remove_now(unit, uid)
            return committed(sim, Response(status_code=204))
        if GONE not in rec["phases"]:
            rec["phases"], rec["since"] = list(unit.delete_phases), sim.clock()
            sim.store.save()
        return committed(sim, Response(status_code=202))
    body = await read_json(request)
    org.check(unit, unit.update, body, update=True)
    if GONE in rec["phases"]:
        raise ApiError(409, f"{unit.type.capitalize()} {uid} is being deleted")
    kept = {k: rec["body"][k] for k in (*unit.create_only, "id", "createdAt", "createdBy",
                                         "parentId", "enforceRunaiScheduler")
            if k in rec["body"]}
    new = {**kept, **{k: v for k, v in body.items() if v is not None}}
    new["resources"] = org.quotas(body["resources"], "resources")
    _changed(sim, unit, rec, new, claims)
    return committed(sim, JSONResponse(org.render(unit, rec)))


async def resources(sim: Simulator, unit: UnitType, request: Request) -> Response:
    claims = sim.auth(request)
    org = sim.org
    uid = request.path_params["unitId"]
    rec = org.unit(unit, uid)
    body = await read_json(request)
    issues = validator.validate(schema.RESOURCES_UPDATE_RANKED if org.ranked
                                else schema.RESOURCES_UPDATE, body)
    if issues:
        raise ApiError(400, issues_message(issues, "resources request"))
    if GONE in rec["phases"]:
        raise ApiError(409, f"{unit.type.capitalize()} {uid} is being deleted")
    sent = org.quotas(body, "body")
    if request.method == "PATCH":  # the entries sent replace theirs; the others stay
        by_pool = {r["nodePool"]["id"]: r for r in rec["body"]["resources"]}
        for entry in sent:
            by_pool[entry["nodePool"]["id"]] = entry
        sent = list(by_pool.values())
    _changed(sim, unit, rec, {**rec["body"], "resources": sent}, claims)
    return committed(sim, JSONResponse(org.render(unit, rec)["resources"]))


def _changed(sim: Simulator, unit: UnitType, rec: dict, body: dict, claims: dict) -> None:
    body["updatedAt"] = iso(sim.store.stamp())
    body["updatedBy"] = str(claims.get("sub", ""))
    rec["body"] = body
    if unit.update_phases:
        rec["phases"], rec["since"] = list(unit.update_phases), sim.clock()
    sim.store.save()


async def node_pools(sim: Simulator, request: Request) -> Response:
    sim.auth(request)
    q = request.query_params
    paging = queries.Paging.of(q)
    filters = queries.filters(q, _NODE_POOLS_FILTER)
    pools = [sim.org.node_pool(p) for p in NODE_POOLS]
    pools = [p for p in pools if all(queries.match(p.get(f), op, v) for f, op, v in filters)]
    return JSONResponse({"nodepools": paging.page(pools, "nodepools", dict.get)["nodepools"]})


async def node_pool(sim: Simulator, request: Request) -> Response:
    sim.auth(request)
    pid = request.path_params["nodepoolId"]
    for pool in NODE_POOLS:
        if pool["id"] == pid:
            return JSONResponse(sim.org.node_pool(pool))
    raise ApiError(404, f"Node pool {pid} not found")


async def listed(sim: Simulator, key: str, items: tuple, request: Request) -> Response:
    sim.auth(request)
    return JSONResponse({key: list(items)})


__all__ = ["Organisation", "UnitType", "UNITS", "PROJECT", "DEPARTMENT", "NODE_POOLS",
           "PRIORITIES", "RANKS", "routes"]
