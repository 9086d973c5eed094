"""Workloads V2 (Kubernetes manifests, CONTRACT.md §12) in the simulator: its routes, and
the server's additions to a manifest.

Callers: `app` adds `routes(sim, kind)` for the table entry whose `custom` is "manifest"
(`kinds.MANIFEST`); `listing` lists its records as every kind's. Routes:

    POST   /api/v2/workloads                202 WorkloadV2 (400 schema or unregistered type, 409 name)
    GET    /api/v2/workloads/{id}           200 WorkloadV2GetResponse {workload, syncInfo}
    PUT    /api/v2/workloads/{id}           202 WorkloadV2 (priority, category, manifest)
    DELETE /api/v2/workloads/{id}           202 WorkloadV2
    GET    /api/v1/workload-types           200 {types: [...]}: `WORKLOAD_TYPES`

Choices where the API spec is silent:
- `rawManifest` is the manifest as submitted; `workloadManifest` is it plus the server's
  additions: `spec.schedulerName: runai-scheduler` in every pod template, the labels
  `runai/queue` and `project` on the manifest's metadata, a `uid`, and Kubernetes'
  container defaults (`terminationMessagePath`, `terminationMessagePolicy`,
  `imagePullPolicy` by the image's tag). A record whose phase is Completed or Failed (forced
  through `/_sim/workloads/{id}/phase`) has the `status` its type's operator writes: a
  Job's condition Complete or Failed, a Kubeflow job's Succeeded or Failed, a RayJob's
  `jobDeploymentStatus` and `jobStatus`, another type's `phase`.
- `syncInfo.status` follows the record's phase: Queued (Creating), Applying
  (Initializing, Updating), Synced (Running), Deleting.
- A manifest whose apiVersion's group and kind are not a registered type answers 400. The
  registered types are `WORKLOAD_TYPES` at start; `PUT /_sim/workload-types` (`admin`)
  changes them, or makes their list answer another status (`WorkloadTypes`).
- The list endpoint's `type` of these workloads is "manifest".
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from reconciler.simulator import validator
from reconciler.simulator.errors import ApiError, issues_message, read_json
from reconciler.simulator.faults import committed
from reconciler.simulator.store import CREATE_PHASES, DELETE_PHASES, UPDATE_PHASES, Record, iso

if TYPE_CHECKING:
    from reconciler.simulator.app import Simulator
    from reconciler.simulator.kinds import Kind

DEPARTMENT_ID = "1"
TENANT_ID = 1001

# (name = the manifest's kind, group of its apiVersion, category, default priority).
WORKLOAD_TYPES: tuple[tuple[str, str, str, str], ...] = (
    ("PyTorchJob", "kubeflow.org", "Train", "low"),
    ("MPIJob", "kubeflow.org", "Train", "low"),
    ("TFJob", "kubeflow.org", "Train", "low"),
    ("XGBoostJob", "kubeflow.org", "Train", "low"),
    ("RayJob", "ray.io", "Train", "low"),
    ("RayCluster", "ray.io", "Build", "high"),
    ("RayService", "ray.io", "Deploy", "very-high"),
    ("LeaderWorkerSet", "leaderworkerset.x-k8s.io", "Deploy", "very-high"),
    ("InferenceService", "serving.kserve.io", "Deploy", "very-high"),
    ("Deployment", "apps", "Deploy", "very-high"),
    ("StatefulSet", "apps", "Deploy", "very-high"),
    ("Job", "batch", "Train", "low"),
    ("DynamoGraphDeployment", "nvidia.com", "Deploy", "very-high"),
)
_CATEGORY_IDS = {"Build": "1", "Train": "2", "Deploy": "3"}
_PRIORITY_IDS = {"very-low": "1", "low": "2", "medium-low": "3", "medium": "4",
                 "medium-high": "5", "high": "6", "very-high": "7"}

_TEXT = validator.text(validator.ANY)
# The manifest: any object (`_check` leaves it to `registered`), shown as an empty `Obj`.
_FREE = validator.Obj({})
CREATE = validator.Obj({
    "metadata": validator.Obj({
        "name": validator.text(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$", 1, 63),
        "useGivenNameAsPrefix": validator.Scalar("boolean"),
        "projectId": validator.text(r"^[0-9]+$"), "clusterId": validator.text(fmt="uuid"),
        "priority": _TEXT, "category": _TEXT,
        "preemptibility": validator.text(enum=("preemptible", "non-preemptible")),
    }, required=("name", "projectId", "clusterId"), nullable=False),
    "manifest": _FREE, "manifestBase64Encoded": _TEXT,
}, required=("metadata",))
UPDATE = validator.Obj({
    "metadata": validator.Obj({"priority": _TEXT, "category": _TEXT}),
    "manifest": _FREE, "manifestBase64Encoded": _TEXT,
})


def _check(schema: validator.Obj, body) -> list[validator.Issue]:
    """The schema's issues, the free-form `manifest` object apart."""
    if not isinstance(body, dict):
        return [validator.Issue("body", "must be an object")]
    rest = {k: v for k, v in body.items() if k != "manifest"}
    issues = validator.validate(schema, rest)
    if "manifest" in body and not isinstance(body["manifest"], dict):
        issues.append(validator.Issue("manifest", "must be an object"))
    return issues


def registered(sim: Simulator, manifest: dict) -> bool:
    """Whether the manifest's kind and apiVersion group are a type `sim` registers."""
    api_version = manifest.get("apiVersion")
    group = api_version.rpartition("/")[0] if isinstance(api_version, str) else None
    return any(t["name"] == manifest.get("kind") and t["group"] == group
               for t in sim.workload_types.types)


class WorkloadTypes:
    """The registered types `GET /api/v1/workload-types` lists and a create or PUT is
    checked against (`WORKLOAD_TYPES` at start), and the status that list answers with (200,
    or another the admin surface sets: a control plane whose list is forbidden to the
    caller's role, or missing). `PUT /_sim/workload-types` changes both, `DELETE` (and
    `DELETE /_sim/workloads`) puts them back."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.types: list[dict] = [
            {"name": name, "group": group, "categoryName": category, "priorityName": priority}
            for name, group, category, priority in WORKLOAD_TYPES]
        self.status = 200

    def to_json(self) -> dict:
        return {"types": self.types, "status": self.status}

    def update(self, body) -> None:
        """Take `{"types": [{"name", "group", "categoryName"?, "priorityName"?}],
        "status": N}` (either key); ValueError naming what is wrong."""
        if not isinstance(body, dict) or not set(body) <= {"types", "status"}:
            raise ValueError('the body must be {"types": [...], "status": N} (either key)')
        status = body.get("status", self.status)
        if isinstance(status, bool) or not isinstance(status, int) or not 200 <= status <= 599:
            raise ValueError("status must be an HTTP status, 200 to 599")
        types = body.get("types", self.types)
        if not isinstance(types, list) or not all(
                isinstance(t, dict) and isinstance(t.get("name"), str)
                and isinstance(t.get("group"), str)
                and t.get("categoryName", "Train") in _CATEGORY_IDS
                and t.get("priorityName", "low") in _PRIORITY_IDS for t in types):
            raise ValueError("types must be a list of {name, group} objects, with a "
                             "categoryName of " + ", ".join(_CATEGORY_IDS) + " and a "
                             "priorityName of " + ", ".join(_PRIORITY_IDS) + " if given")
        self.types = [{"name": t["name"], "group": t["group"],
                       "categoryName": t.get("categoryName", "Train"),
                       "priorityName": t.get("priorityName", "low")} for t in types]
        self.status = status


def _with_server_additions(manifest: dict, project_name: str, uid: str) -> dict:
    out = copy.deepcopy(manifest)
    meta = out.setdefault("metadata", {})
    meta["uid"] = uid
    meta.setdefault("labels", {}).update({"runai/queue": project_name, "project": project_name})
    _fill_templates(out)
    return out


def _fill_templates(node) -> None:
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "template" and isinstance(v, dict) and isinstance(v.get("spec"), dict):
                pod = v["spec"]
                pod.setdefault("schedulerName", "runai-scheduler")
                for c in pod.get("containers") or ():
                    if isinstance(c, dict):
                        c.setdefault("terminationMessagePath", "/dev/termination-log")
                        c.setdefault("terminationMessagePolicy", "File")
                        image = str(c.get("image", ""))
                        c.setdefault("imagePullPolicy", "Always" if image.endswith(":latest")
                                     or ":" not in image.rsplit("/", 1)[-1] else "IfNotPresent")
            else:
                _fill_templates(v)
    elif isinstance(node, list):
        for v in node:
            _fill_templates(v)


# A finished workload's Kubernetes status by its type (what each operator writes), when
# the record's phase is Completed or Failed (`/_sim/workloads/{id}/phase` forces one).
_KUBEFLOW = ("PyTorchJob", "TFJob", "XGBoostJob", "MPIJob")


def _status(manifest_type: str, phase: str) -> dict | None:
    if phase not in ("Completed", "Failed"):
        return None
    ok = phase == "Completed"
    if manifest_type == "Job":
        return {"conditions": [{"type": "Complete" if ok else "Failed", "status": "True"}]}
    if manifest_type in _KUBEFLOW:
        return {"conditions": [{"type": "Created", "status": "True"},
                               {"type": "Succeeded" if ok else "Failed", "status": "True"}]}
    if manifest_type == "RayJob":
        return {"jobDeploymentStatus": "Complete" if ok else "Failed",
                "jobStatus": "SUCCEEDED" if ok else "FAILED"}
    return {"phase": phase}


def _sync_status(phase: str) -> str:
    return {"Creating": "Queued", "Initializing": "Applying", "Updating": "Applying",
            "Deleting": "Deleting", "Failed": "Failed"}.get(phase, "Synced")


def workload(sim: Simulator, rec: Record) -> dict:
    """The `WorkloadV2` of a record."""
    b = rec.body
    project = sim.projects.by_id(str(b["projectId"]), b["clusterId"])
    project_name = project.name if project else f"project-{b['projectId']}"
    group, _, version = str(b["rawManifest"].get("apiVersion", "")).rpartition("/")
    meta = {
        "name": b["name"], "projectId": b["projectId"], "priority": b.get("priority"),
        "category": b.get("category"), "preemptibility": b.get("preemptibility"),
        "id": b["workloadId"],
        "gvk": {"group": group, "version": version, "kind": b["rawManifest"].get("kind")},
        "projectName": project_name, "clusterId": b["clusterId"], "tenantId": TENANT_ID,
        "departmentId": DEPARTMENT_ID, "departmentName": f"department-{DEPARTMENT_ID}",
        "createdAt": b["createdAt"], "createdBy": b["createdBy"],
        "updatedAt": b["updatedAt"], "updatedBy": b["updatedBy"],
    }
    running = _with_server_additions(b["rawManifest"], project_name, b["workloadId"])
    status = _status(str(b["rawManifest"].get("kind")), sim.store.phase(rec))
    if status is not None:
        running["status"] = status
    return {"metadata": {k: v for k, v in meta.items() if v is not None},
            "desiredPhase": b["desiredPhase"], "rawManifest": b["rawManifest"],
            "workloadManifest": running}


def routes(sim: Simulator, kind: Kind) -> list[Route]:
    async def create_(request: Request) -> Response:
        return await create(sim, kind, request)

    async def one(request: Request) -> Response:
        if request.method == "GET":
            return await get(sim, kind, request)
        if request.method == "DELETE":
            return await delete(sim, kind, request)
        return await put(sim, kind, request)

    async def types(request: Request) -> Response:
        sim.auth(request)
        registry = sim.workload_types
        if registry.status != 200:
            raise ApiError(registry.status, "workload types cannot be listed"
                           if registry.status == 403 else "workload types are unavailable")
        return JSONResponse({"types": [
            {"name": t["name"], "group": t["group"],
             "categoryId": _CATEGORY_IDS[t["categoryName"]],
             "priorityId": _PRIORITY_IDS[t["priorityName"]],
             "categoryName": t["categoryName"], "priorityName": t["priorityName"]}
            for t in registry.types]})

    return [Route(kind.path, create_, methods=["POST"]),
            Route(kind.path + "/{workloadId}", one, methods=["GET", "PUT", "DELETE"]),
            Route("/api/v1/workload-types", types, methods=["GET"])]


async def create(sim: Simulator, kind: Kind, request: Request) -> Response:
    claims = sim.auth(request)
    body = await read_json(request)
    issues = _check(CREATE, body)
    if not issues and not isinstance(body.get("manifest"), dict):
        issues = [validator.Issue("manifest", "is required", "required")]
    if issues:
        raise ApiError(400, issues_message(issues))
    manifest = body["manifest"]
    if not registered(sim, manifest):
        raise ApiError(400, f"workload type {manifest.get('apiVersion')!r} "
                            f"{manifest.get('kind')!r} is not registered")
    meta = body["metadata"]
    name = meta["name"]
    if meta.get("useGivenNameAsPrefix"):
        name = f"{name}-{sim.suffix()}"
    if sim.store.name_taken(meta["projectId"], name):
        raise ApiError(409, f"A workload named {name!r} already exists in project "
                            f"{meta['projectId']}")
    now = sim.clock()
    user = str(claims.get("sub", ""))
    stored = {
        "workloadId": sim.uuid(), "name": name, "projectId": meta["projectId"],
        "clusterId": meta["clusterId"], "departmentId": DEPARTMENT_ID, "createdBy": user,
        "createdAt": iso(now), "updatedAt": iso(now), "updatedBy": user,
        "desiredPhase": "Running", "rawManifest": manifest,
    }
    for key in ("priority", "category", "preemptibility"):
        if meta.get(key) is not None:
            stored[key] = meta[key]
    rec = Record(kind=kind.type, body=stored, phases=list(CREATE_PHASES), since=now,
                 created=now, updated=now)
    sim.store.add(rec)
    sim.store.save()
    return committed(sim, JSONResponse(workload(sim, rec), status_code=202))


async def get(sim: Simulator, kind: Kind, request: Request) -> Response:
    sim.auth(request)
    rec = sim.live(request.path_params["workloadId"], kind.type)
    return JSONResponse({"workload": workload(sim, rec),
                         "syncInfo": {"status": _sync_status(sim.store.phase(rec)),
                                      "message": ""}})


async def put(sim: Simulator, kind: Kind, request: Request) -> Response:
    claims = sim.auth(request)
    rec = sim.live(request.path_params["workloadId"], kind.type)
    body = await read_json(request)
    issues = _check(UPDATE, body)
    if issues:
        raise ApiError(400, issues_message(issues, "update request"))
    if rec.body["desiredPhase"] == "Deleted":
        raise ApiError(409, f"Workload {rec.id} is being deleted")
    manifest = body.get("manifest")
    if manifest is not None and not registered(sim, manifest):
        raise ApiError(400, "workload type is not registered")
    now = sim.clock()
    new = {**rec.body, "updatedAt": iso(now), "updatedBy": str(claims.get("sub", ""))}
    for key in ("priority", "category"):
        value = (body.get("metadata") or {}).get(key)
        if value is not None:
            new[key] = value
    if manifest is not None:
        new["rawManifest"] = manifest
    rec.body = new
    rec.updated = now
    sim.store.transition(rec, UPDATE_PHASES)
    sim.store.save()
    return committed(sim, JSONResponse(workload(sim, rec), status_code=202))


async def delete(sim: Simulator, kind: Kind, request: Request) -> Response:
    sim.auth(request)
    rec = sim.live(request.path_params["workloadId"], kind.type)
    if rec.body["desiredPhase"] != "Deleted":
        rec.body = {**rec.body, "desiredPhase": "Deleted"}
        sim.store.transition(rec, DELETE_PHASES)
        sim.store.save()
    return committed(sim, JSONResponse(workload(sim, rec), status_code=202))
