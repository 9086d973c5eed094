"""The simulator's roles and access rules (access-rules.yml, CONTRACT.md §13), and their
routes:

    GET    /api/v1/authorization/roles                   the seeded roles, a bare array
    GET    /api/v1/authorization/roles/{roleIdPath}      one role
    POST   /api/v1/authorization/access-rules            201, the AccessRule
    GET    /api/v1/authorization/access-rules            {totalRecords, displayRecords,
                                                          accessRules}
    GET    /api/v1/authorization/access-rules/{id}       200, the AccessRuleById
    DELETE /api/v1/authorization/access-rules/{id}       204

There is no update: PUT or PATCH of a rule answers 405, as an API with no such route
does. Callers: `app` adds `routes(sim)`; `admin` deletes a rule out of band. The rules
are kept in `Store.org` (`org.Organisation`), so in the data file.

Choices where the API spec is silent:
- A role id that names no role, or a project or department scope that names none, is a
  404 (the create route documents 404). A cluster scope must be a UUID (400).
- The same (subject, role, scope) twice is a 400 (the route documents no 409).
- DELETE marks the rule deleted: GET answers 404 and the list shows it only with
  `includeDeleted=true`, with its `deletedAt`.
- The list filters by `subjectType`, `subjectIdFilter` (a part of the subject id),
  `subjectIds` (comma-separated), `scopeType`, `scopeId`, `roleId`, `clusterId`,
  `includeDeleted`, `search` (in the subject id, role name and scope name) and
  `filterBy` on the fields the spec's pattern names, and pages with `limit` (≤ 500) and `offset`;
  `totalRecords` counts every match, `displayRecords` the page.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from reconciler.simulator import queries, schema, validator
from reconciler.simulator.errors import ApiError, issues_message, read_json
from reconciler.simulator.faults import committed
from reconciler.simulator.org import CREATED, CREATOR, DEPARTMENT, PROJECT, TENANT_ID
from reconciler.simulator.store import iso

if TYPE_CHECKING:
    from reconciler.simulator.app import Simulator

# A few of Run:ai's built-in roles (ids as the simulator numbers them).
ROLES = tuple(
    {"id": i, "name": name, "description": f"Run:ai's built-in {name} role",
     "permissions": [{"resourceType": resource, "displayName": resource.capitalize(),
                      "groupId": group, "actions": list(actions)}],
     "createdAt": CREATED, "updatedAt": CREATED, "createdBy": CREATOR, "custom": False,
     "effectiveEnabled": True, "enabled": True}
    for i, (name, resource, group, actions) in enumerate((
        ("System administrator", "tenant", "organization", ("create", "read", "update",
                                                            "delete")),
        ("Department administrator", "department", "organization", ("read", "update")),
        ("Editor", "project", "organization", ("create", "read", "update", "delete")),
        ("Research manager", "project", "organization", ("read", "update")),
        ("L1 researcher", "workloads", "workload", ("create", "read", "update", "delete")),
        ("L2 researcher", "workloads", "workload", ("create", "read", "delete")),
        ("ML engineer", "inferences", "workload", ("create", "read", "update", "delete")),
        ("Viewer", "workloads", "workload", ("read",)),
    ), start=1))

# access-rules.yml's AccessRulesFilter pattern.
FILTER = re.compile(r"^(subjectId|subjectType|roleId|scopeId|scopeType|roleName|scopeName|"
                    r"createdAt|deletedAt|createdBy|phase)(==|!=|<=|>=|=@|!@|=\^|=\$)(.+)$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                   r"[0-9a-fA-F]{12}$")
_IDENTITY = ("subjectType", "subjectId", "roleId", "scopeType", "scopeId")


def routes(sim: Simulator) -> list[Route]:
    def bound(handler):
        async def endpoint(request):
            return await handler(sim, request)
        return endpoint

    base = "/api/v1/authorization"
    return [Route(f"{base}/roles", bound(roles), methods=["GET"]),
            Route(f"{base}/roles/{{roleIdPath}}", bound(role), methods=["GET"]),
            Route(f"{base}/access-rules", bound(rules), methods=["GET", "POST"]),
            Route(f"{base}/access-rules/{{accessRuleId}}", bound(rule),
                  methods=["GET", "DELETE"])]


async def roles(sim: Simulator, request: Request) -> Response:
    sim.auth(request)
    return JSONResponse(list(ROLES))


async def role(sim: Simulator, request: Request) -> Response:
    sim.auth(request)
    rid = request.path_params["roleIdPath"]
    for found in ROLES:
        if str(found["id"]) == rid:
            return JSONResponse(found)
    raise ApiError(404, f"Role {rid} not found")


def stored(sim: Simulator) -> dict[str, dict]:
    return sim.org.data["accessRule"]


def _scope_name(sim: Simulator, scope_type: str, scope_id: str) -> str:
    if scope_type in ("project", "department"):
        unit = PROJECT if scope_type == "project" else DEPARTMENT
        found = sim.org.units(unit).get(scope_id)
        if found is not None:
            return found["body"]["name"]
        project = (sim.projects.by_id(scope_id, "") if scope_type == "project"
                   and not sim.org.is_gone("project", scope_id) else None)
        if project is None:
            raise ApiError(404, f"{scope_type.capitalize()} {scope_id} not found")
        return project.name
    if scope_type == "cluster":
        if not _UUID.match(scope_id):
            raise ApiError(400, "scopeId: a cluster scope's id must be a UUID")
        return "sim-cluster"
    return scope_type  # tenant, system


async def rules(sim: Simulator, request: Request) -> Response:
    if request.method == "GET":
        return await list_rules(sim, request)
    claims = sim.auth(request)
    body = await read_json(request)
    issues = validator.validate(schema.ACCESS_RULE_CREATE, body)
    if issues:
        raise ApiError(400, issues_message(issues, "access rule request"))
    role_ = next((r for r in ROLES if r["id"] == body["roleId"]), None)
    if role_ is None:
        raise ApiError(404, f"Role {body['roleId']} not found")
    scope_name = _scope_name(sim, body["scopeType"], body["scopeId"])
    key = tuple(body[k] for k in _IDENTITY)
    if any(tuple(r[k] for k in _IDENTITY) == key and r.get("deletedAt") is None
           for r in stored(sim).values()):
        raise ApiError(400, "An access rule for this subject, role and scope already exists")
    now = iso(sim.store.stamp())
    rid = 1 + max((int(k) for k in stored(sim)), default=0)
    made = {**{k: v for k, v in body.items() if v is not None},
            "roleId": int(body["roleId"]), "id": rid, "tenantId": TENANT_ID,
            "roleName": role_["name"], "scopeName": scope_name, "createdAt": now,
            "updatedAt": now, "createdBy": str(claims.get("sub", "")), "deletedAt": None,
            "status": {"phase": "Ready"}}
    stored(sim)[str(rid)] = made
    sim.store.save()
    return committed(sim, JSONResponse(made, status_code=201))


async def list_rules(sim: Simulator, request: Request) -> Response:
    sim.auth(request)
    q = request.query_params
    paging = queries.Paging.of(q)
    filters = queries.filters(q, FILTER)
    deleted = q.get("includeDeleted", "false").lower()
    if deleted not in ("true", "false"):
        raise ApiError(400, "includeDeleted must be true or false")
    for name in ("subjectType", "scopeType", "scopeId", "roleId", "clusterId"):
        if q.get(name) is not None:
            filters.append((name, "==", q[name]))
    if q.get("subjectIdFilter") is not None:  # a part of the subject id
        filters.append(("subjectId", "=@", q["subjectIdFilter"]))
    found = [r for r in stored(sim).values()
             if (deleted == "true" or r.get("deletedAt") is None)
             and all(queries.match(_field(r, f), op, v) for f, op, v in filters)]
    if q.get("subjectIds"):
        wanted = set(q["subjectIds"].split(","))
        found = [r for r in found if r["subjectId"] in wanted]
    search = q.get("search")
    if search:
        found = [r for r in found if any(search in str(r.get(k) or "") for k in (
            "subjectId", "roleName", "scopeName"))]
    page = paging.page(found, "accessRules", _field)["accessRules"]
    return JSONResponse({"totalRecords": len(found), "displayRecords": len(page),
                         "accessRules": page})


def _field(rec: dict, name: str):
    return rec.get("status", {}).get("phase") if name == "phase" else rec.get(name)


async def rule(sim: Simulator, request: Request) -> Response:
    sim.auth(request)
    rid = request.path_params["accessRuleId"]
    found = stored(sim).get(rid)
    if found is None or found.get("deletedAt") is not None:
        raise ApiError(404, f"Access rule {rid} not found")
    if request.method == "DELETE":
        remove(sim, found)
        return committed(sim, Response(status_code=204))
    return JSONResponse(found)


def remove(sim: Simulator, found: dict) -> None:
    """Mark a rule deleted (through the API, or out of band by /_sim/)."""
    now = iso(sim.store.stamp())
    found.update(deletedAt=now, updatedAt=now)
    sim.store.save()


__all__ = ["ROLES", "routes", "remove", "stored"]
