"""The admin surface under /_sim/, for tests and demos: no auth, never faulted or logged.

Callers: `app` adds `routes(sim)` (and `projects` its POST /_sim/projects).

    GET|DELETE        /_sim/requests              the API request log, with counts by route
    GET|DELETE        /_sim/workloads             every workload (DELETE: wipe everything,
                                                  defined projects and workload types too)
    GET|PATCH|DELETE  /_sim/workloads/{id}        PATCH: JSON merge patch (RFC 7386) on the
                                                  stored body, behind the client's back
                                                  (drift); DELETE: gone at once, out of band
    POST              /_sim/workloads/{id}/phase  force a phase: {"phase": "Completed"}
    GET|PUT|DELETE    /_sim/faults                the `faults.Faults` settings; PUT changes
                                                  those it names; DELETE puts back the ones
                                                  the simulator started with
    GET|PUT|DELETE    /_sim/workload-types        the registered workload types and the
                                                  status their list answers with
                                                  (`manifests.WorkloadTypes`): PUT
                                                  {"types": [...], "status": N}; DELETE puts
                                                  back the start's (so does DELETE
                                                  /_sim/workloads)
    GET               /_sim/org                   the organisation as stored: units,
                                                  access rules, policies
    PATCH|DELETE      /_sim/org/{units}/{id}      a project's or department's stored body
                                                  ({units}: projects, departments): PATCH,
                                                  a JSON merge patch (drift: a quota changed
                                                  behind the client's back); DELETE, gone
                                                  at once (a project's workloads too)
    DELETE            /_sim/org/access-rules/{id} an access rule deleted out of band
"""

from __future__ import annotations

import collections
import copy
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from reconciler.simulator import access, org
from reconciler.simulator.errors import ApiError, read_json
from reconciler.simulator.store import Record
from reconciler.simulator.workloads import render

if TYPE_CHECKING:
    from reconciler.simulator.app import Simulator

PHASES = ("Creating", "Initializing", "Resuming", "Pending", "Deleting", "Running",
          "Updating", "Stopped", "Stopping", "Degraded", "Failed", "Completed",
          "Terminating", "Unknown")


def routes(sim: Simulator) -> list[Route]:
    def bound(handler):
        async def endpoint(request):
            return await handler(sim, request)
        return endpoint

    return [
        Route("/_sim/requests", bound(requests), methods=["GET", "DELETE"]),
        Route("/_sim/workloads", bound(workloads), methods=["GET", "DELETE"]),
        Route("/_sim/workloads/{workloadId}", bound(workload), methods=["GET", "PATCH", "DELETE"]),
        Route("/_sim/workloads/{workloadId}/phase", bound(phase), methods=["POST"]),
        Route("/_sim/faults", bound(faults), methods=["GET", "PUT", "DELETE"]),
        Route("/_sim/workload-types", bound(workload_types), methods=["GET", "PUT", "DELETE"]),
        Route("/_sim/org", bound(organisation), methods=["GET"]),
        Route("/_sim/org/access-rules/{ruleId}", bound(access_rule), methods=["DELETE"]),
        Route("/_sim/org/{units}/{unitId}", bound(org_unit), methods=["PATCH", "DELETE"]),
    ]


def _shown(sim: Simulator, rec: Record) -> dict:
    return render(sim, rec) | {"kind": rec.kind}


async def requests(sim: Simulator, request: Request) -> Response:
    if request.method == "DELETE":
        sim.requests.clear()
        return JSONResponse({"requests": [], "counts": {}})
    log = [entry.to_json(sim.api_routes) for entry in sim.requests]
    counts = collections.Counter(f"{r['method']} {r['route']}" for r in log)
    return JSONResponse({"requests": log, "counts": dict(sorted(counts.items()))})


async def workloads(sim: Simulator, request: Request) -> Response:
    if request.method == "DELETE":
        sim.store.clear()  # the projects' definitions and the organisation too
        sim.projects.defined.clear()
        sim.org.clear()
        sim.store.save()
        sim.workload_types.reset()
    sim.store.settle()
    return JSONResponse({
        "workloads": [_shown(sim, r) for r in sim.store.live.values()],
        "deleted": [_shown(sim, r) for r in sim.store.deleted.values()],
    })


async def workload(sim: Simulator, request: Request) -> Response:
    sim.store.settle()
    wid = request.path_params["workloadId"]
    rec = sim.live(wid)
    if request.method == "DELETE":
        sim.store.remove_now(rec)
        return JSONResponse({"code": 200, "message": f"Workload {wid} removed"})
    if request.method == "PATCH":
        patch = await read_json(request)
        if not isinstance(patch, dict):
            raise ApiError(400, "A merge patch must be a JSON object")
        if "workloadId" in patch:
            raise ApiError(400, "workloadId cannot be changed")
        forced = patch.pop("actualPhase", None)
        if forced is not None and forced not in PHASES:
            raise ApiError(400, f"phase must be one of {', '.join(PHASES)}")
        rec.body = merge_patch(rec.body, patch)
        sim.store.names_changed(rec)
        if forced is not None:
            _force(sim, rec, forced)  # moves its updatedAt, as a change of phase does
        else:
            sim.store.touch(rec)
        sim.store.save()
    return JSONResponse(_shown(sim, rec))


async def phase(sim: Simulator, request: Request) -> Response:
    sim.store.settle()
    rec = sim.live(request.path_params["workloadId"])
    body = await read_json(request)
    if not isinstance(body, dict) or "phase" not in body:
        raise ApiError(400, 'The body must be {"phase": "<Phase>"}')
    _force(sim, rec, body["phase"])
    sim.store.save()
    return JSONResponse(_shown(sim, rec))


def _force(sim: Simulator, rec: Record, forced: Any) -> None:
    if forced not in PHASES:
        raise ApiError(400, f"phase must be one of {', '.join(PHASES)}")
    sim.store.transition(rec, [forced])


async def faults(sim: Simulator, request: Request) -> Response:
    if request.method == "DELETE":
        sim.faults = replace(sim.start_faults)
    elif request.method == "PUT":
        body = await read_json(request)
        try:
            sim.faults = sim.faults.updated(body)
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None
    return JSONResponse(sim.faults.to_json())


async def workload_types(sim: Simulator, request: Request) -> Response:
    if request.method == "DELETE":
        sim.workload_types.reset()
    elif request.method == "PUT":
        try:
            sim.workload_types.update(await read_json(request))
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None
    return JSONResponse(sim.workload_types.to_json())


async def organisation(sim: Simulator, request: Request) -> Response:
    return JSONResponse(sim.store.org)


_UNITS = {unit.list_key: unit for unit in org.UNITS}


async def org_unit(sim: Simulator, request: Request) -> Response:
    unit = _UNITS.get(request.path_params["units"])
    if unit is None:
        raise ApiError(404, f"no such units: {request.path_params['units']} (one of "
                            f"{', '.join(_UNITS)})")
    uid = request.path_params["unitId"]
    rec = sim.org.unit(unit, uid)
    if request.method == "DELETE":
        sim.org.remove_now(unit, uid)
        return JSONResponse({"code": 200, "message": f"{unit.type.capitalize()} {uid} removed"})
    patch = await read_json(request)
    if not isinstance(patch, dict):
        raise ApiError(400, "A merge patch must be a JSON object")
    if "id" in patch:
        raise ApiError(400, "id cannot be changed")
    rec["body"] = merge_patch(rec["body"], patch)
    sim.store.save()
    return JSONResponse(sim.org.render(unit, rec))


async def access_rule(sim: Simulator, request: Request) -> Response:
    rid = request.path_params["ruleId"]
    found = access.stored(sim).get(rid)
    if found is None or found.get("deletedAt") is not None:
        raise ApiError(404, f"Access rule {rid} not found")
    access.remove(sim, found)
    return JSONResponse({"code": 200, "message": f"Access rule {rid} removed"})


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out
