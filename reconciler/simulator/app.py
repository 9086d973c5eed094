"""The simulated Run:ai control plane as a Starlette ASGI app: routes, auth, faults, log.

Callers: `create_app` is used by tests (through httpx's ASGI transport), by the CLI's
`--sim` mode and by `runai-reconcile sim serve` (uvicorn, `command.py`).

API routes (bearer JWT required, except the token route):

    POST   /api/v1/token                          client_credentials, app_token
    GET    /api/v1/workloads                      filterBy, limit, offset, deleted, sortBy, sortOrder
    GET    /api/v1/workloads/{id}                 WorkloadDetailed
    GET    /api/v1/org-unit/projects              filterBy, limit, offset, sortBy, sortOrder, search
    GET    /api/v1/org-unit/projects/{id}         Project (see `projects` for which are known)
    and for each kind of `kinds.KINDS`, under its path P:
    POST   P                                      202, the workload
    GET    P/{id}                                 200, the workload
    DELETE P/{id}                                 202 HttpResponse
    PATCH  P/{id}                                 202, the workload (kinds with an update body)
    POST   P/{id}/suspend|resume                  202 HttpResponse (kinds that suspend)

Every kind's routes and handlers read its entry in `kinds.KINDS`; nothing here names a
kind. To add a kind to the simulator: write its create body (and PATCH body, if any)
in `schema.py` with any cross-field rules, its `fill_*` defaults in `defaults.py`, and
one `kinds.Kind` entry in `kinds.KINDS`. The tests then check its routes and answers
against the OpenAPI file the entry names, once tests/simulator/test_kinds.py has a
sample body for it (and a PATCH body, if it has PATCH).

Admin routes (no auth, never faulted): GET|DELETE /_sim/requests, GET|DELETE
/_sim/workloads, GET|PATCH|DELETE /_sim/workloads/{id} (PATCH: JSON merge patch,
RFC 7386, on the stored body; DELETE: gone at once, out of band),
POST /_sim/workloads/{id}/phase, GET|PUT|DELETE /_sim/faults (DELETE: back to the
settings it started with), POST /_sim/projects (define one:
{"id", "name", "clusterId", "gpuQuota"}; 201, the Project).

Choices where the API spec is silent:
- Names are unique per project among live workloads of every kind (a Deleting workload
  still holds its name): a second create answers 409 with the `Error` shape.
- The list endpoint's `type` is the kind's `type` in the table ("distributed",
  "distributed-inference", "training", "workspace", "inference"): the spec enumerates
  none. A list item's `category` when the spec names none is the kind's: Train for
  trainings, Build for workspaces, Deploy for inferences (Run:ai's default categories).
- A PATCH replaces each updatable field it sends with the value sent (the spec does not
  say whether it merges) and the server's defaults are filled in again, as on create. A
  field it may not change is an unknown field: 400 with the `Error` shape.
- Suspend/resume/PATCH of a workload being deleted answer 409; repeating a delete,
  suspend or resume that is already in effect answers 202 and changes nothing.
- Commit-then-fail ("the write happens, the client sees an error"): the write is done
  and persisted, then the answer is a 500 `Error`, or a dropped connection. A drop is
  the app raising `SimulatedConnectionDrop` (an `httpx.RemoteProtocolError`) after the
  response headers went out: through httpx's ASGI transport the client receives that
  exception; under uvicorn the server closes the connection mid-response and the
  client sees a `RemoteProtocolError` of its own.
- Faults (latency, error rate) also apply to the token route unless `token_faults` is
  off; they never apply to /_sim/.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import functools
import json
import math
import pathlib
import random
import re
import time
import uuid
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Awaitable, Callable, Sequence

import httpx
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from reconciler.simulator import schema
from reconciler.simulator.projects import DEFAULT_CLUSTER_ID, FILTER as _PROJECT_FILTER, Projects
from reconciler.simulator.kinds import KINDS, Kind
from reconciler.simulator.store import (CREATE_PHASES, DELETE_PHASES, RESUME_PHASES,
                                        STOPPED_PHASES, SUSPEND_PHASES, UPDATE_PHASES, Record, SimulatorDataError,
                                        Store, iso)
from reconciler.simulator.tokens import Signer, TokenError

DEFAULT_CLIENT_ID = "runai-sim"
DEFAULT_CLIENT_SECRET = "runai-sim-secret"

PHASES = ("Creating", "Initializing", "Resuming", "Pending", "Deleting", "Running",
          "Updating", "Stopped", "Stopping", "Degraded", "Failed", "Completed",
          "Terminating", "Unknown")
DEPARTMENT_ID = "1"
TENANT_ID = 1001
REQUEST_LOG_SIZE = 200_000

_FILTER = re.compile(
    r"^(type|name|clusterId|projectId|projectName|departmentId|departmentName|createdAt|"
    r"deletedAt|submittedBy|phase|completedAt|nodepool|distributedFramework|allocatedGPU|"
    r"idleGpus|idleAllocatedGpus|phaseUpdatedAt|category|totalPendingTimeSeconds|"
    r"totalRunningTimeSeconds|priority|priorityClassName|guaranteedRuntimeEndsAt|"
    r"aiApplicationId|aiApplicationName)(==|!=|<=|>=|=@|!@|=\^|=\$)(.+)$")
_SECRET_KEY = re.compile(r"secret|password|token", re.IGNORECASE)
# List item fields that are a record's own values, as list_item() copies them.
_RECORD_FIELDS: dict[str, Callable[[Record], Any]] = {
    "type": lambda r: r.kind, "name": lambda r: r.body.get("name"),
    "projectId": lambda r: r.body.get("projectId"), "clusterId": lambda r: r.body.get("clusterId"),
    "createdAt": lambda r: r.body.get("createdAt"), "submittedBy": lambda r: r.body.get("createdBy"),
}
# What starlette's JSONResponse writes, for responses put together from cached parts.
_dumps = functools.partial(json.dumps, ensure_ascii=False, allow_nan=False, indent=None,
                           separators=(",", ":"))


# --- faults ------------------------------------------------------------------------


@dataclass
class Faults:
    """Injected faults. JSON names (GET/PUT /_sim/faults) are the camelCase forms."""

    latency_ms: float = 0.0  # added to each API request
    jitter_ms: float = 0.0  # plus uniform(0, jitter_ms)
    error_rate: float = 0.0  # share of API requests answered 503 or 429 (not performed)
    commit_fail_rate: float = 0.0  # share of writes performed, then answered 500 or dropped
    token_ttl: int = 3600  # lifetime of issued tokens, seconds
    retry_after_seconds: int = 1  # Retry-After of injected 503/429
    commit_fail_mode: str = "random"  # "random" | "500" | "drop"
    token_faults: bool = True  # latency and error_rate also apply to POST /api/v1/token

    _JSON = {"latency_ms": "latencyMs", "jitter_ms": "jitterMs", "error_rate": "errorRate",
             "commit_fail_rate": "commitFailRate", "token_ttl": "tokenTtl",
             "retry_after_seconds": "retryAfterSeconds", "commit_fail_mode": "commitFailMode",
             "token_faults": "tokenFaults"}

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """ValueError naming the first bad setting."""
        for f in fields(self):
            v = getattr(self, f.name)
            name = self._JSON[f.name]
            if f.name == "commit_fail_mode":
                if v not in ("random", "500", "drop"):
                    raise ValueError(f"{name} must be one of random, 500, drop")
            elif f.name == "token_faults":
                if not isinstance(v, bool):
                    raise ValueError(f"{name} must be a boolean")
            elif isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{name} must be a number")
            elif f.name in ("error_rate", "commit_fail_rate") and not 0 <= v <= 1:
                raise ValueError(f"{name} must be between 0 and 1")
            elif f.name == "token_ttl" and v < 1:
                raise ValueError(f"{name} must be at least 1 second")
            elif v < 0:
                raise ValueError(f"{name} must not be negative")

    def to_json(self) -> dict:
        return {self._JSON[k]: v for k, v in asdict(self).items()}

    def updated(self, patch: Any) -> "Faults":
        """A copy with the camelCase keys of `patch` applied; ValueError when invalid."""
        if not isinstance(patch, dict):
            raise ValueError("the body must be a JSON object")
        by_json = {v: k for k, v in self._JSON.items()}
        unknown = sorted(set(patch) - set(by_json))
        if unknown:
            raise ValueError(f"unknown fault setting(s): {', '.join(unknown)}; "
                             f"known: {', '.join(by_json)}")
        values = asdict(self)
        values.update({by_json[k]: v for k, v in patch.items()})
        return Faults(**values)



class SimulatedConnectionDrop(httpx.RemoteProtocolError):
    """Raised by the app to drop the connection after a committed write."""


class _DroppedResponse(Response):
    async def __call__(self, scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 202,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", b"4096")]})
        raise SimulatedConnectionDrop("simulated failure: connection dropped after the write")


# --- errors --------------------------------------------------------------------------


class ApiError(Exception):
    def __init__(self, status: int, message: str, issues: list[schema.Issue] | None = None,
                 headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.issues, self.headers = status, message, issues, headers

    def response(self) -> JSONResponse:
        body: dict = {"code": self.status, "message": self.message}
        if self.issues is not None:
            body["complianceIssues"] = [i.as_json() for i in self.issues]
        return JSONResponse(body, status_code=self.status, headers=self.headers)


def _issues_message(issues: list[schema.Issue]) -> str:
    head = "; ".join(f"{i.field}: {i.details}" for i in issues[:5])
    more = f" (and {len(issues) - 5} more)" if len(issues) > 5 else ""
    return f"The workload request is invalid: {head}{more}"


# --- the simulator -----------------------------------------------------------------


class Simulator:
    """State and handlers of one simulated control plane (`app.state.sim`)."""

    def __init__(self, *, data_path, client_id, client_secret, phase_seconds, faults, clock,
                 seed, sleep, kinds):
        self.client_id, self.client_secret = client_id, client_secret
        self.kinds: dict[str, Kind] = {k.type: k for k in kinds}
        self.faults = faults if faults is not None else Faults()
        self.start_faults = replace(self.faults)  # what DELETE /_sim/faults puts back
        self.clock = clock
        self.sleep = sleep
        self.rand = random.Random(seed)  # ids, name suffixes, generated values
        self.fault_rand = random.Random(None if seed is None else seed + 1)
        self.signer = Signer(client_secret)
        self.store = Store(clock=clock, phase_seconds=phase_seconds,
                           data_path=pathlib.Path(data_path) if data_path is not None else None,
                           kinds=frozenset(self.kinds))
        self.store.load()
        self.projects = Projects()
        for saved in self.store.projects.values():  # defined before, kept in the data file
            definition = dict(saved)
            try:
                self.projects.define(definition, str(definition.pop("created")))
            except (KeyError, ValueError) as exc:
                raise SimulatorDataError(f"cannot read simulator data {data_path}: project "
                                         f"{saved.get('id')!r}: {exc}") from None
        self.requests: collections.deque = collections.deque(maxlen=REQUEST_LOG_SIZE)
        self.api_routes: list[Route] = []  # set by create_app; names the log's routes

    # --- helpers ------------------------------------------------------------------

    def _uuid(self) -> str:
        return str(uuid.UUID(int=self.rand.getrandbits(128), version=4))

    def _suffix(self, n: int = 5) -> str:
        return "".join(self.rand.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(n))

    def _auth(self, request: Request) -> dict:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ApiError(401, "a bearer token is required")
        try:
            return self.signer.verify(token.strip(), self.clock())
        except TokenError as exc:
            raise ApiError(401, str(exc)) from None

    @staticmethod
    async def _json(request: Request, *, submission: bool) -> Any:
        raw = await request.body()
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            issues = [schema.Issue("body", "is not valid JSON")] if submission else None
            raise ApiError(400, "The request body is not valid JSON", issues) from None

    def _get_live(self, workload_id: str, kind: str | None = None) -> Record:
        rec = self.store.live.get(workload_id)
        if rec is None or (kind is not None and rec.kind != kind):
            raise ApiError(404, f"Workload {workload_id} not found")
        return rec

    def _commit(self, response: Response) -> Response:
        """The answer to a write that has been performed: as is, or a commit failure."""
        f = self.faults
        if f.commit_fail_rate > 0 and self.fault_rand.random() < f.commit_fail_rate:
            mode = f.commit_fail_mode
            if mode == "random":
                mode = self.fault_rand.choice(("500", "drop"))
            if mode == "500":
                return JSONResponse({"code": 500, "message": "Something went wrong."},
                                    status_code=500)
            return _DroppedResponse()
        return response

    # --- rendering ----------------------------------------------------------------

    def render(self, rec: Record, phase: str | None = None) -> dict:
        """The API body of `rec`. A copy of the top level only: nested values are the
        record's own, so the caller serialises it and never changes it."""
        body = dict(rec.body)
        body["actualPhase"] = phase or self.store.phase(rec)
        if rec.deleted_at is None:
            body.pop("deletedAt", None)
        return body

    def respond(self, rec: Record, phase: str | None = None, status_code: int = 200) -> Response:
        """`render(rec, phase)` as a JSON response. The record's own part is serialised
        once per body (see `Record`) and the phase, which the clock moves, added to it."""
        body = rec.body
        cached = rec.encoded
        if cached is None or cached[0] is not body:
            top = body
            if rec.deleted_at is None and "deletedAt" in body:
                top = {k: v for k, v in body.items() if k != "deletedAt"}
            if not top or "actualPhase" in top:
                return JSONResponse(self.render(rec, phase), status_code=status_code)
            cached = rec.encoded = (body, _dumps(top)[:-1])
        phase = phase or self.store.phase(rec)
        return Response(f'{cached[1]},"actualPhase":{_dumps(phase)}}}', status_code=status_code,
                        media_type="application/json")

    def list_item(self, rec: Record) -> dict:
        kind = self.kinds[rec.kind]
        b = rec.body
        spec = b.get("spec") or {}
        phase = self.store.phase(rec)
        phase_at = iso(self.store.phase_since(rec) if rec.deleted_at is None else rec.deleted_at)
        # A defined project's name (POST /_sim/projects), else the default `project-<id>`.
        project = self.projects.by_id(str(b["projectId"]), b["clusterId"])
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
            "category": spec.get("category") or kind.category,
            "preemptible": spec.get("preemptibility") == "preemptible",
        }
        for key in kind.list_fields:
            if spec.get(key):
                item[key] = spec[key]
        return item

    # --- token --------------------------------------------------------------------

    async def token(self, request: Request) -> Response:
        body = await self._json(request, submission=False)
        if not isinstance(body, dict):
            raise ApiError(400, "The token request must be a JSON object")
        fields_ = {str(k).lower(): v for k, v in body.items()}
        grant = fields_.get("granttype")
        if grant == "client_credentials":
            cid, secret = fields_.get("clientid"), fields_.get("clientsecret")
        elif grant == "app_token":
            cid, secret = fields_.get("appid"), fields_.get("appsecret")
        elif grant is None:
            raise ApiError(400, "grantType is required")
        else:
            raise ApiError(400, f"grantType {grant!r} is not supported by the simulator; "
                                "use client_credentials or app_token")
        if cid != self.client_id or secret != self.client_secret:
            raise ApiError(401, "invalid client credentials")
        ttl = int(self.faults.token_ttl)
        token = self.signer.issue(cid, self.clock(), ttl)
        return JSONResponse({"accessToken": token, "expiresIn": ttl, "idToken": token})

    # --- list ---------------------------------------------------------------------

    async def list_workloads(self, request: Request) -> Response:
        self._auth(request)
        q = request.query_params
        limit = _int_param(q, "limit", 50, 1, 500)
        offset = _int_param(q, "offset", 0, 0, None)
        deleted = q.get("deleted", "false").lower()
        if deleted not in ("true", "false"):
            raise ApiError(400, "deleted must be true or false")
        sort_order = q.get("sortOrder", "asc")
        if sort_order not in ("asc", "desc"):
            raise ApiError(400, "sortOrder must be asc or desc")
        filters = _filters(q, _FILTER)
        source = self.store.deleted if deleted == "true" else self.store.live
        records = sorted(source.values(), key=lambda r: r.created)
        # Filters on what a record holds as is need no list item built to be checked.
        direct = [(_RECORD_FIELDS[f], op, v) for f, op, v in filters if f in _RECORD_FIELDS]
        if direct:
            records = [r for r in records if all(_match(get(r), op, v) for get, op, v in direct)]
        items = [self.list_item(r) for r in records]
        items = [i for i in items if all(_match(i.get(f), op, v) for f, op, v in filters)]
        sort_by = q.get("sortBy")
        if sort_by:
            items.sort(key=lambda i: ("" if i.get(sort_by) is None else str(i.get(sort_by))))
        if sort_order == "desc":
            items.reverse()
        page = items[offset:offset + limit]
        out: dict = {"workloads": page}
        if offset + limit < len(items):
            out["next"] = offset + limit
        return JSONResponse(out)

    # --- projects (`projects` module) --------------------------------------------------

    async def list_projects(self, request: Request) -> Response:
        self._auth(request)
        q = request.query_params
        limit = _int_param(q, "limit", 50, 1, 500)
        offset = _int_param(q, "offset", 0, 0, None)
        sort_order = q.get("sortOrder", "asc")
        if sort_order not in ("asc", "desc"):
            raise ApiError(400, "sortOrder must be asc or desc")
        filters = _filters(q, _PROJECT_FILTER)
        in_use = [(r.body.get("projectId"), r.body.get("clusterId"))
                  for r in self.store.live.values() if r.body.get("projectId")]
        found = [p for p in self.projects.listed(filters, in_use)
                 if all(_match(p.field(f), op, v) for f, op, v in filters)]
        search = q.get("search")
        if search:
            found = [p for p in found if search in p.name]
        sort_by = q.get("sortBy")
        if sort_by:
            found.sort(key=lambda p: "" if p.field(sort_by) is None else str(p.field(sort_by)))
        if sort_order == "desc":
            found.reverse()
        out: dict = {"projects": [p.body() for p in found[offset:offset + limit]]}
        if offset + limit < len(found):
            out["next"] = offset + limit
        return JSONResponse(out)

    async def get_project(self, request: Request) -> Response:
        self._auth(request)
        pid = request.path_params["projectId"]
        cluster = next((r.body.get("clusterId") for r in self.store.live.values()
                        if r.body.get("projectId") == pid), DEFAULT_CLUSTER_ID)
        project = self.projects.by_id(pid, cluster)
        if project is None:
            raise ApiError(404, f"Project {pid} not found")
        return JSONResponse(project.body())

    async def admin_projects(self, request: Request) -> Response:
        body = await self._json(request, submission=False)
        try:
            project = self.projects.define(body, iso(self.clock()))
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None
        self.store.projects[project.id] = {**body, "created": project.created}
        self.store.save()
        return JSONResponse(project.body(), status_code=201)

    async def get_any(self, request: Request) -> Response:
        self._auth(request)
        rec = self._get_live(request.path_params["workloadId"])
        item = self.list_item(rec)
        item["pendingSchedulingMessages"] = []
        return JSONResponse(item)

    # --- kinds --------------------------------------------------------------------

    async def create(self, request: Request, kind: Kind) -> Response:
        claims = self._auth(request)
        listed = kind.issues_in_errors
        body = await self._json(request, submission=listed)
        issues = schema.validate(kind.create, body) or kind.rules(body)
        if issues:
            raise ApiError(400, _issues_message(issues), issues if listed else None)
        requested = body["name"]
        name = requested
        if body.get("useGivenNameAsPrefix"):
            name = f"{requested}-{self._suffix()}"
            while self.store.name_taken(body["projectId"], name):
                name = f"{requested}-{self._suffix()}"
        if self.store.name_taken(body["projectId"], name):
            raise ApiError(409, f"A workload named {name!r} already exists in project "
                                f"{body['projectId']}")
        now = self.clock()
        stored: dict = {
            "workloadId": self._uuid(), "name": name, "requestedName": requested,
            "projectId": body["projectId"], "departmentId": DEPARTMENT_ID,
            "clusterId": body["clusterId"], "createdBy": str(claims.get("sub", "")),
            "createdAt": iso(now), "desiredPhase": "Running",
        }
        for key in kind.body_keys:
            if body.get(key) is not None:
                stored[key] = body[key]  # parsed for this request alone: the record's own
        kind.fill(stored, self.rand)
        rec = Record(kind=kind.type, body=stored, phases=list(CREATE_PHASES), since=now,
                     created=now, updated=now)
        self.store.add(rec)
        self.store.save()
        return self._commit(self.respond(rec, CREATE_PHASES[0], 202))

    async def get(self, request: Request, kind: Kind) -> Response:
        self._auth(request)
        rec = self._get_live(request.path_params["workloadId"], kind.type)
        return self.respond(rec)

    async def delete(self, request: Request, kind: Kind) -> Response:
        self._auth(request)
        rec = self._get_live(request.path_params["workloadId"], kind.type)
        if rec.body["desiredPhase"] != "Deleted":
            rec.body = {**rec.body, "desiredPhase": "Deleted"}
            self.store.transition(rec, DELETE_PHASES)
            self.store.save()
        return self._commit(_accepted())

    async def suspend_resume(self, request: Request, kind: Kind, suspend: bool) -> Response:
        self._auth(request)
        rec = self._get_live(request.path_params["workloadId"], kind.type)
        if rec.body["desiredPhase"] == "Deleted":
            raise ApiError(409, f"Workload {rec.id} is being deleted")
        target = "Stopped" if suspend else "Running"
        # In effect already when asked for and not contradicted by the phase: a phase
        # forced through /_sim/ (a workload the cluster stopped, or started) gives way.
        stopped = self.store.phase(rec) in STOPPED_PHASES
        if rec.body["desiredPhase"] != target or stopped != suspend:
            rec.body = {**rec.body, "desiredPhase": target}
            self.store.transition(rec, SUSPEND_PHASES if suspend else RESUME_PHASES)
            self.store.save()
        return self._commit(_accepted())

    async def patch(self, request: Request, kind: Kind) -> Response:
        self._auth(request)
        rec = self._get_live(request.path_params["workloadId"], kind.type)
        body = await self._json(request, submission=False)
        issues = schema.validate(kind.update, body) or kind.update_rules(body)
        if issues:
            raise ApiError(400, _issues_message(issues).replace("workload request",
                                                                 "update request"))
        if rec.body["desiredPhase"] == "Deleted":
            raise ApiError(409, f"Workload {rec.id} is being deleted")
        # The values sent, with the server's defaults filled in as on create: filled in a
        # scratch body holding only them, so the record's other values stay as they are.
        scratch = {"name": rec.body["name"], "projectId": rec.body["projectId"]}
        sent = []
        for path in kind.updatable:
            value = _get_path(body, path)
            if value is not None:
                node = schema.at(kind.update, path)
                if isinstance(node, schema.Scalar) and node.type == "integer":
                    value = int(value)  # the validator takes 4.0 for an integer
                scratch = _with_path(scratch, path, value)
                sent.append(path)
        changed = bool(sent)
        if changed:
            kind.fill(scratch, self.rand)
            for path in sent:
                rec.body = _with_path(rec.body, path, _get_path(scratch, path))
            self.store.transition(rec, UPDATE_PHASES)
            self.store.save()
        return self._commit(self.respond(rec, rec.phases[0] if changed else None, 202))

    # --- admin ----------------------------------------------------------------------

    async def admin_requests(self, request: Request) -> Response:
        if request.method == "DELETE":
            self.requests.clear()
            return JSONResponse({"requests": [], "counts": {}})
        log = [entry.to_json(self.api_routes) for entry in self.requests]
        counts = collections.Counter(f"{r['method']} {r['route']}" for r in log)
        return JSONResponse({"requests": log, "counts": dict(sorted(counts.items()))})

    async def admin_workloads(self, request: Request) -> Response:
        if request.method == "DELETE":
            self.store.clear()  # the projects' definitions too
            self.projects.defined.clear()
        self.store.settle()
        return JSONResponse({
            "workloads": [self.render(r) | {"kind": r.kind} for r in self.store.live.values()],
            "deleted": [self.render(r) | {"kind": r.kind} for r in self.store.deleted.values()],
        })

    async def admin_workload(self, request: Request) -> Response:
        self.store.settle()
        wid = request.path_params["workloadId"]
        rec = self._get_live(wid)
        if request.method == "DELETE":
            self.store.remove_now(rec)
            return JSONResponse({"code": 200, "message": f"Workload {wid} removed"})
        if request.method == "PATCH":
            patch = await self._json(request, submission=False)
            if not isinstance(patch, dict):
                raise ApiError(400, "A merge patch must be a JSON object")
            if "workloadId" in patch:
                raise ApiError(400, "workloadId cannot be changed")
            phase = patch.pop("actualPhase", None)
            rec.body = merge_patch(rec.body, patch)
            self.store.names_changed()
            if phase is not None:
                self._force(rec, phase)
            rec.updated = self.clock()
            self.store.save()
        return JSONResponse(self.render(rec) | {"kind": rec.kind})

    async def admin_phase(self, request: Request) -> Response:
        self.store.settle()
        rec = self._get_live(request.path_params["workloadId"])
        body = await self._json(request, submission=False)
        if not isinstance(body, dict) or "phase" not in body:
            raise ApiError(400, 'The body must be {"phase": "<Phase>"}')
        self._force(rec, body["phase"])
        self.store.save()
        return JSONResponse(self.render(rec) | {"kind": rec.kind})

    def _force(self, rec: Record, phase: Any) -> None:
        if phase not in PHASES:
            raise ApiError(400, f"phase must be one of {', '.join(PHASES)}")
        self.store.transition(rec, [phase])

    async def admin_faults(self, request: Request) -> Response:
        if request.method == "DELETE":
            self.faults = replace(self.start_faults)
        elif request.method == "PUT":
            body = await self._json(request, submission=False)
            try:
                self.faults = self.faults.updated(body)
            except ValueError as exc:
                raise ApiError(400, str(exc)) from None
        return JSONResponse(self.faults.to_json())


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


def _accepted() -> JSONResponse:
    return JSONResponse({"code": 202, "message": "Request has been accepted."}, status_code=202)


def _k8s_phase(phase: str) -> str:
    return {"Running": "Running", "Completed": "Succeeded", "Failed": "Failed",
            "Creating": "Pending", "Initializing": "Pending", "Pending": "Pending"}.get(phase,
                                                                                          phase)


def _filters(q, pattern: re.Pattern) -> list[tuple[str, str, str]]:
    """The (field, op, value) of each comma-joined `filterBy` item; 400 for a bad one."""
    filters = []
    for raw in q.getlist("filterBy"):
        for part in raw.split(","):
            m = pattern.match(part)
            if not m:
                raise ApiError(400, f"invalid filterBy item {part!r}: expected "
                                    "<field><op><value>, op one of == != <= >= =@ !@ =^ =$")
            filters.append(m.groups())
    return filters


def _int_param(q, name: str, default: int, lo: int, hi: int | None) -> int:
    raw = q.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, f"{name} must be an integer") from None
    if value < lo or (hi is not None and value > hi):
        raise ApiError(400, f"{name} must be between {lo} and {hi}" if hi is not None
                       else f"{name} must be at least {lo}")
    return value


def _match(actual: Any, op: str, value: str) -> bool:
    if actual is None:
        return op in ("!=", "!@")
    a = str(actual).lower() if isinstance(actual, bool) else str(actual)
    if op == "==":
        return a == value
    if op == "!=":
        return a != value
    if op == "=@":
        return value in a
    if op == "!@":
        return value not in a
    if op == "=^":
        return a.startswith(value)
    if op == "=$":
        return a.endswith(value)
    if isinstance(actual, (int, float)):
        try:
            num = float(value)
        except ValueError:
            return False
        return actual <= num if op == "<=" else actual >= num
    return a <= value if op == "<=" else a >= value


# --- ASGI plumbing -------------------------------------------------------------------


class _Logged:
    """One API request in the log. Its body is kept as received and parsed (secrets
    masked), like its route, only when the log is read: most entries never are."""

    __slots__ = ("method", "path", "query", "raw", "time", "status")

    def __init__(self, method: str, path: str, query: bytes, raw: bytes, time: float):
        self.method, self.path, self.query, self.raw, self.time = method, path, query, raw, time
        self.status: int | None = None

    def to_json(self, routes: list[Route]) -> dict:
        return {"method": self.method, "path": self.path, "query": self.query.decode("latin-1"),
                "status": self.status, "body": _log_body(self.raw),
                "route": _route_of(routes, self.path), "time": self.time}


def _route_of(routes: list[Route], path: str) -> str:
    for r in routes:
        if r.path_regex.match(path):
            return r.path
    return path


class _ApiMiddleware:
    """For /api/ requests: inject latency and errors, settle deletions, log the request,
    and call the route's endpoint directly, past Starlette's router and exception
    layers (docs/performance.md, "The simulator"); those still answer what no API route
    takes (404, 405, HEAD)."""

    def __init__(self, app, sim: Simulator, routes: list[Route]):
        self.app, self.sim, self.routes = app, sim, routes

    def _endpoint(self, scope) -> tuple[Callable, dict] | None:
        """The first route that takes this path and method, as Starlette's router picks it."""
        path, method = scope["path"], scope["method"]
        if method == "HEAD":
            return None
        for r in self.routes:
            m = r.path_regex.match(path)
            if m and method in r.methods:
                return r.endpoint, {k: r.param_convertors[k].convert(v)
                                    for k, v in m.groupdict().items()}
        return None

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/api/"):
            await self.app(scope, receive, send)
            return
        sim = self.sim
        chunks = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        raw = b"".join(chunks)
        path = scope["path"]
        entry = _Logged(scope["method"], path, scope.get("query_string", b""), raw, sim.clock())
        sim.requests.append(entry)

        f = sim.faults
        faultable = f.token_faults or path != "/api/v1/token"
        if faultable and (f.latency_ms or f.jitter_ms):
            await sim.sleep((f.latency_ms + sim.fault_rand.uniform(0, f.jitter_ms)) / 1000)
        if faultable and f.error_rate > 0 and sim.fault_rand.random() < f.error_rate:
            status = sim.fault_rand.choice((503, 429))
            message = ("Please try again in few minutes." if status == 503
                       else "Too many requests.")
            response = JSONResponse({"code": status, "message": message}, status_code=status,
                                    headers={"Retry-After": str(int(f.retry_after_seconds))})
            entry.status = status
            await response(scope, receive, send)
            return

        sim.store.settle()
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()

        found = self._endpoint(scope)
        if found is None:
            async def capture(message):
                if message["type"] == "http.response.start":
                    entry.status = message["status"]
                await send(message)

            await self.app(scope, replay, capture)
            return
        endpoint, scope["path_params"] = found
        try:
            response = await endpoint(Request(scope, replay))
        except ApiError as exc:
            response = exc.response()
        entry.status = response.status_code
        try:
            await response(scope, replay, send)
        except SimulatedConnectionDrop:
            entry.status = None
            raise


def _log_body(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    if isinstance(body, dict):
        body = {k: ("***" if _SECRET_KEY.search(str(k)) and k.lower() != "granttype" else v)
                for k, v in body.items()}
    return body


async def _api_error(request: Request, exc: ApiError) -> Response:
    return exc.response()


async def _http_error(request: Request, exc: HTTPException) -> Response:
    message = {404: "Resource not found.", 405: "Method not allowed."}.get(
        exc.status_code, str(exc.detail))
    return JSONResponse({"code": exc.status_code, "message": message},
                        status_code=exc.status_code, headers=exc.headers)


def create_app(data_path: str | pathlib.Path | None = None, *,
               client_id: str = DEFAULT_CLIENT_ID, client_secret: str = DEFAULT_CLIENT_SECRET,
               phase_seconds: float = 0.0, faults: Faults | None = None,
               clock: Callable[[], float] = time.time, seed: int | None = None,
               sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
               kinds: Sequence[Kind] = KINDS) -> Starlette:
    """A simulated control plane. `app.state.sim` is its `Simulator` (state, faults, log).
    `kinds` are the workload kinds it serves (tests may pass a table of their own).

    Raises `store.SimulatorDataError` when `data_path` exists but cannot be read.
    """
    if len({k.type for k in kinds}) != len(kinds) or len({k.path for k in kinds}) != len(kinds):
        raise ValueError("each kind needs a type and a path of its own")
    sim = Simulator(data_path=data_path, client_id=client_id, client_secret=client_secret,
                    phase_seconds=phase_seconds, faults=faults, clock=clock, seed=seed,
                    sleep=sleep, kinds=kinds)

    def kind_routes(kind: Kind) -> list[Route]:
        async def create(r):
            return await sim.create(r, kind)

        async def one(r):
            if r.method == "GET":
                return await sim.get(r, kind)
            if r.method == "DELETE":
                return await sim.delete(r, kind)
            return await sim.patch(r, kind)

        async def suspend(r):
            return await sim.suspend_resume(r, kind, True)

        async def resume(r):
            return await sim.suspend_resume(r, kind, False)

        prefix = kind.path
        methods = ["GET", "DELETE"] + (["PATCH"] if kind.update is not None else [])
        routes = [Route(prefix, create, methods=["POST"]),
                  Route(prefix + "/{workloadId}", one, methods=methods)]
        if kind.suspends:
            routes += [Route(prefix + "/{workloadId}/suspend", suspend, methods=["POST"]),
                       Route(prefix + "/{workloadId}/resume", resume, methods=["POST"])]
        return routes

    api_routes = [
        Route("/api/v1/token", sim.token, methods=["POST"]),
        Route("/api/v1/workloads", sim.list_workloads, methods=["GET"]),
        *(route for kind in kinds for route in kind_routes(kind)),
        Route("/api/v1/workloads/{workloadId}", sim.get_any, methods=["GET"]),
        Route("/api/v1/org-unit/projects", sim.list_projects, methods=["GET"]),
        Route("/api/v1/org-unit/projects/{projectId}", sim.get_project, methods=["GET"]),
    ]
    admin_routes = [
        Route("/_sim/requests", sim.admin_requests, methods=["GET", "DELETE"]),
        Route("/_sim/workloads", sim.admin_workloads, methods=["GET", "DELETE"]),
        Route("/_sim/workloads/{workloadId}", sim.admin_workload,
              methods=["GET", "PATCH", "DELETE"]),
        Route("/_sim/workloads/{workloadId}/phase", sim.admin_phase, methods=["POST"]),
        Route("/_sim/faults", sim.admin_faults, methods=["GET", "PUT", "DELETE"]),
        Route("/_sim/projects", sim.admin_projects, methods=["POST"]),
    ]
    app = Starlette(
        routes=api_routes + admin_routes,
        middleware=[Middleware(_ApiMiddleware, sim=sim, routes=api_routes)],
        exception_handlers={ApiError: _api_error, HTTPException: _http_error},
    )
    sim.api_routes = api_routes
    app.state.sim = sim
    return app


__all__ = ["create_app", "Faults", "Simulator", "SimulatedConnectionDrop",
           "DEFAULT_CLIENT_ID", "DEFAULT_CLIENT_SECRET"]
