"""Each kind's workload routes: create, get, delete, PATCH, suspend and resume.

Callers: `app` adds `routes(sim, kind)` for every entry of `kinds.KINDS` (each handler
reads its kind's entry; nothing here names a kind); `admin` and `listing` use
`render`. Under a kind's path P:

    POST   P                                      202, the workload
    GET    P/{id}                                 200, the workload
    DELETE P/{id}                                 202 HttpResponse
    PATCH  P/{id}                                 202, the workload (kinds with an update body)
    POST   P/{id}/suspend|resume                  202 HttpResponse (kinds that suspend)

Choices where the API spec is silent:
- Names are unique per project among live workloads of every kind (a Deleting workload
  still holds its name): a second create answers 409 with the `Error` shape.
- A PATCH replaces each updatable field it sends with the value sent (the spec does not
  say whether it merges) and the server's defaults are filled in again, as on create. A
  field it may not change is an unknown field: 400 with the `Error` shape.
- Suspend/resume/PATCH of a workload being deleted answer 409; repeating a delete,
  suspend or resume that is already in effect answers 202 and changes nothing. A
  resume of a workload whose phase was forced to Stopped through /_sim/ (desiredPhase
  still Running) resumes it, and a suspend of one forced to run stops it.
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from reconciler.simulator import projects, validator
from reconciler.simulator.errors import ApiError, issues_message, read_json
from reconciler.simulator.faults import committed
from reconciler.simulator.kinds import Kind
from reconciler.simulator.store import (CREATE_PHASES, DELETE_PHASES, RESUME_PHASES,
                                        STOPPED_PHASES, SUSPEND_PHASES, UPDATE_PHASES, Record,
                                        iso)

if TYPE_CHECKING:
    from reconciler.simulator.app import Simulator

DEPARTMENT_ID = "1"
# What starlette's JSONResponse writes, for responses put together from cached parts.
_dumps = functools.partial(json.dumps, ensure_ascii=False, allow_nan=False, indent=None,
                           separators=(",", ":"))


def routes(sim: Simulator, kind: Kind) -> list[Route]:
    """The routes of one kind, under its path."""
    async def create_(request):
        return await create(sim, kind, request)

    async def one(request):
        if request.method == "GET":
            return await get(sim, kind, request)
        if request.method == "DELETE":
            return await delete(sim, kind, request)
        return await patch(sim, kind, request)

    async def suspend(request):
        return await suspend_resume(sim, kind, request, True)

    async def resume(request):
        return await suspend_resume(sim, kind, request, False)

    async def delete_(request):
        # `DELETE /api/v2/workloads/{id}` is every v2 workload's delete: a record of
        # another kind there (a Manifest) is deleted by its own kind's route.
        rec = sim.store.live.get(request.path_params["workloadId"])
        other = sim.kinds.get(rec.kind) if rec is not None else None
        if other is not None and other is not kind and other.custom == "manifest":
            from reconciler.simulator import manifests
            return await manifests.delete(sim, other, request)
        return await delete(sim, kind, request)

    prefix = kind.path
    methods = (["GET"] + ([] if kind.delete_path else ["DELETE"])
               + (["PATCH"] if kind.update is not None else []))
    out = [Route(prefix, create_, methods=["POST"]),
           Route(prefix + "/{workloadId}", one, methods=methods)]
    if kind.delete_path:
        out.append(Route(kind.delete_path + "/{workloadId}", delete_, methods=["DELETE"]))
    if kind.suspends:
        out += [Route(prefix + "/{workloadId}/suspend", suspend, methods=["POST"]),
                Route(prefix + "/{workloadId}/resume", resume, methods=["POST"])]
    return out


# --- rendering -----------------------------------------------------------------------


def render(sim: Simulator, rec: Record, phase: str | None = None) -> dict:
    """The API body of `rec`. A copy of the top level only: nested values are the
    record's own, so the caller serialises it and never changes it."""
    if sim.kinds[rec.kind].envelope:
        return render_enveloped(sim, rec)
    body = dict(rec.body)
    body["actualPhase"] = phase or sim.store.phase(rec)
    if rec.deleted_at is None:
        body.pop("deletedAt", None)
    return body


def render_enveloped(sim: Simulator, rec: Record) -> dict:
    """A v2 NIM answer (`NimServiceResponse`): `{metadata, desiredPhase, spec}`, the
    metadata `WorkloadV2Metadata` (no phase: the v2 answers have none; the workloads list
    has it)."""
    b = rec.body
    kind = sim.kinds[rec.kind]
    spec = b.get("spec") or {}
    project = sim.projects.by_id(str(b["projectId"]), b["clusterId"])
    meta = {
        "name": b["name"], "projectId": b["projectId"],
        "priority": spec.get("priorityClass"), "category": spec.get("category") or kind.category,
        "preemptibility": spec.get("preemptibility"),
        "id": b["workloadId"],
        "gvk": dict(zip(("group", "version", "kind"), kind.gvk)),
        "projectName": project.name if project else f"project-{b['projectId']}",
        "clusterId": b["clusterId"], "tenantId": 1001,
        "departmentId": b.get("departmentId", DEPARTMENT_ID),
        "departmentName": f"department-{b.get('departmentId', DEPARTMENT_ID)}",
        "createdAt": b["createdAt"], "createdBy": b["createdBy"],
        "updatedAt": iso(rec.updated), "updatedBy": b.get("updatedBy") or b["createdBy"],
    }
    if rec.deleted_at is not None or b["desiredPhase"] == "Deleted":
        meta["deletedAt"] = iso(rec.deleted_at or rec.updated)
        meta["deletedBy"] = b.get("updatedBy") or b["createdBy"]
    return {"metadata": meta, "desiredPhase": b["desiredPhase"], "spec": spec}


def respond(sim: Simulator, rec: Record, phase: str | None = None,
            status_code: int = 200) -> Response:
    """`render(rec, phase)` as a JSON response. The record's own part is serialised
    once per body (see `Record`) and the phase, which the clock moves, added to it."""
    if sim.kinds[rec.kind].envelope:
        return JSONResponse(render_enveloped(sim, rec), status_code=status_code)
    body = rec.body
    cached = rec.encoded
    if cached is None or cached[0] is not body:
        top = body
        if rec.deleted_at is None and "deletedAt" in body:
            top = {k: v for k, v in body.items() if k != "deletedAt"}
        if not top or "actualPhase" in top:
            return JSONResponse(render(sim, rec, phase), status_code=status_code)
        cached = rec.encoded = (body, _dumps(top)[:-1])
    phase = phase or sim.store.phase(rec)
    return Response(f'{cached[1]},"actualPhase":{_dumps(phase)}}}', status_code=status_code,
                    media_type="application/json")


def _accepted() -> JSONResponse:
    return JSONResponse({"code": 202, "message": "Request has been accepted."}, status_code=202)


# --- handlers ------------------------------------------------------------------------


async def create(sim: Simulator, kind: Kind, request: Request) -> Response:
    claims = sim.auth(request)
    listed = kind.issues_in_errors
    body = await read_json(request, submission=listed)
    issues = validator.validate(kind.create, body) or kind.rules(body)
    if issues:
        raise ApiError(400, issues_message(issues), issues if listed else None)
    if kind.envelope:
        body = _unwrap(sim, body)
    requested = body["name"]
    name = requested
    if body.get("useGivenNameAsPrefix"):
        name = f"{requested}-{sim.suffix()}"
        while sim.store.name_taken(body["projectId"], name):
            name = f"{requested}-{sim.suffix()}"
    if sim.store.name_taken(body["projectId"], name):
        raise ApiError(409, f"A workload named {name!r} already exists in project "
                            f"{body['projectId']}")
    now = sim.clock()
    stored: dict = {
        "workloadId": sim.uuid(), "name": name, "requestedName": requested,
        "projectId": body["projectId"], "departmentId": DEPARTMENT_ID,
        "clusterId": body["clusterId"], "createdBy": str(claims.get("sub", "")),
        "createdAt": iso(now), "desiredPhase": "Running",
    }
    for key in kind.body_keys:
        if body.get(key) is not None:
            stored[key] = body[key]  # parsed for this request alone: the record's own
    kind.fill(stored, sim.rand)
    rec = Record(kind=kind.type, body=stored, phases=list(CREATE_PHASES), since=now,
                 created=now, updated=now)
    sim.store.add(rec)
    sim.store.save()
    return committed(sim, respond(sim, rec, CREATE_PHASES[0], 202))


def _unwrap(sim: Simulator, body: dict) -> dict:
    """A v2 create body as the flat one the handlers keep: its metadata's keys beside its
    spec, and the cluster of the project (a defined project's; else the cluster of another
    workload of the project; else the default one)."""
    flat = {**body["metadata"], **{k: v for k, v in body.items() if k != "metadata"}}
    pid = str(flat["projectId"])
    cluster = next((r.body["clusterId"] for r in sim.store.live.values()
                    if str(r.body.get("projectId")) == pid and r.body.get("clusterId")),
                   projects.DEFAULT_CLUSTER_ID)
    project = sim.projects.defined.get(pid)
    flat["clusterId"] = project.cluster_id if project else cluster
    return flat


async def get(sim: Simulator, kind: Kind, request: Request) -> Response:
    sim.auth(request)
    return respond(sim, sim.live(request.path_params["workloadId"], kind.type))


async def delete(sim: Simulator, kind: Kind, request: Request) -> Response:
    claims = sim.auth(request)
    rec = sim.live(request.path_params["workloadId"], kind.type)
    if rec.body["desiredPhase"] != "Deleted":
        rec.body = {**rec.body, "desiredPhase": "Deleted",
                    **_updated_by(kind, claims)}
        sim.store.transition(rec, DELETE_PHASES)
        sim.store.save()
    if kind.envelope:  # the generic v2 delete answers the WorkloadV2
        answer = render_enveloped(sim, rec)
        return committed(sim, JSONResponse({
            "metadata": answer["metadata"], "desiredPhase": "Deleted",
            "workloadManifest": {}, "rawManifest": {}}, status_code=202))
    return committed(sim, _accepted())


async def suspend_resume(sim: Simulator, kind: Kind, request: Request,
                         suspend: bool) -> Response:
    sim.auth(request)
    rec = sim.live(request.path_params["workloadId"], kind.type)
    if rec.body["desiredPhase"] == "Deleted":
        raise ApiError(409, f"Workload {rec.id} is being deleted")
    target = "Stopped" if suspend else "Running"
    # In effect already when asked for and not contradicted by the phase: a phase
    # forced through /_sim/ (a workload the cluster stopped, or started) gives way.
    stopped = sim.store.phase(rec) in STOPPED_PHASES
    if rec.body["desiredPhase"] != target or stopped != suspend:
        rec.body = {**rec.body, "desiredPhase": target}
        sim.store.transition(rec, SUSPEND_PHASES if suspend else RESUME_PHASES)
        sim.store.save()
    return committed(sim, _accepted())


async def patch(sim: Simulator, kind: Kind, request: Request) -> Response:
    claims = sim.auth(request)
    rec = sim.live(request.path_params["workloadId"], kind.type)
    body = await read_json(request)
    issues = validator.validate(kind.update, body) or kind.update_rules(body)
    if issues:
        raise ApiError(400, issues_message(issues, "update request"))
    if rec.body["desiredPhase"] == "Deleted":
        raise ApiError(409, f"Workload {rec.id} is being deleted")
    # The values sent, with the server's defaults filled in as on create: filled in a
    # scratch body holding only them, so the record's other values stay as they are.
    scratch = {"name": rec.body["name"], "projectId": rec.body["projectId"],
               "clusterId": rec.body["clusterId"]}
    sent = []
    for path in kind.updatable:
        value = _get_path(body, path)
        if value is not None:
            node = validator.at(kind.update, path)
            if isinstance(node, validator.Scalar) and node.type == "integer":
                value = int(value)  # the validator takes 4.0 for an integer
            scratch = _with_path(scratch, path, value)
            sent.append(path)
    changed = bool(sent)
    if changed:
        kind.fill(scratch, sim.rand)
        for path in sent:
            rec.body = _with_path(rec.body, path, _get_path(scratch, path))
        rec.body = {**rec.body, **_updated_by(kind, claims)}
        sim.store.transition(rec, UPDATE_PHASES)
        sim.store.save()
    return committed(sim, respond(sim, rec, rec.phases[0] if changed else None, 202))


def _updated_by(kind: Kind, claims: dict) -> dict:
    # Kept for the v2 answers' metadata.updatedBy; the v1 bodies have no such field.
    return {"updatedBy": str(claims.get("sub", ""))} if kind.envelope else {}


def _get_path(body: dict, path: str) -> Any:
    """The value at the dotted `path` of a validated body, None when absent."""
    for key in path.split("."):
        body = body.get(key) if isinstance(body, dict) else None
    return body


def _with_path(body: dict, path: str, value: Any) -> dict:
    """A copy of `body` with `value` at the dotted `path`; only the dicts on the way are
    copied (a record's body is replaced, never changed in place)."""
    key, _, rest = path.partition(".")
    return {**body, key: _with_path(body.get(key) or {}, rest, value) if rest else value}
