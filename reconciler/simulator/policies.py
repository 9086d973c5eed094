"""The simulator's workload policies (policies.yml, CONTRACT.md §13), and their routes
under /api/v2/policy/{kind}, one `PolicyKind` entry of `POLICY_KINDS` per kind:

    PUT    /api/v2/policy/{kind}[?validateOnly=true]     200, the policy (replaces it)
    PATCH  /api/v2/policy/{kind}[?validateOnly=true]     200, the policy (merged; `reset`)
    GET    /api/v2/policy/{kind}?scope=...&<scope id>=   200, the policy; 404 if none
    GET    /api/v2/policy[?workloadType=&scope=&<scope id>=]  200, {policies: [{type, meta}]}
    DELETE /api/v2/policy/{kind}?scope=...&<scope id>=   204; 404 if none

A policy is kept per kind, `meta.scope` and that scope's id (`clusterId`,
`departmentId` or `projectId`; none for the tenant), in `Store.org`, so in the data file.
Callers: `app` adds `routes(sim)`.

The bodies are described from the kind's workload spec (`schema.policy_request`): the
defaults take the spec's fields, the rules each field's rules. Choices where the API spec
is silent:
- `validateOnly=true` answers what the write would (200 and the policy, or the 400),
  and stores nothing.
- A policy is refused with a 400 `Error` naming the field when a key is unknown, a value
  has the wrong type, the scope's id is missing, or a rule's `min` is above its `max`.
- The list (`PolicyListResponse`) holds each stored policy's `type` and `meta` (no
  `status`: the simulator syncs to no cluster), filtered by the parameters given; it has
  no paging (the API's has none), so `limit` and `offset` are ignored.
- PATCH merges `policy` into the stored one (objects key by key; any other value
  replaced), after clearing the defaults and rules of each `reset` path; with nothing
  stored it creates the policy.
- `effective` is the policies of the kind merged down tenant → cluster → department →
  project (objects key by key, the narrower scope's value winning where two set one):
  a project's takes its department's (its `parentId`) and its cluster's. The policy
  itself (`policy`) is what was written at that scope alone.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from reconciler.simulator import schema, validator
from reconciler.simulator.errors import ApiError, issues_message, read_json
from reconciler.simulator.faults import committed
from reconciler.simulator.org import TENANT_ID
from reconciler.simulator.store import iso
from reconciler.simulator.validator import Issue, Obj

if TYPE_CHECKING:
    from reconciler.simulator.app import Simulator

# The id each scope is keyed by, in the body's `meta` and in GET/DELETE's query.
SCOPE_IDS = {"tenant": None, "cluster": "clusterId", "department": "departmentId",
             "project": "projectId"}


@dataclass(frozen=True)
class PolicyKind:
    path: str  # under /api/v2/policy/
    put: Obj  # the PUT body; the PATCH body adds `reset`
    patch: Obj
    openapi: str
    put_request: str  # component names, for the tests
    patch_request: str
    response: str
    list_type: str  # PolicyType


def _kind(path, spec, names, list_type, imposed=schema.IMPOSED_ASSETS):
    put_name, patch_name, answer = names
    return PolicyKind(path=path, put=schema.policy_request(spec, imposed),
                      patch=schema.policy_request(spec, imposed, change=True),
                      openapi="policies.yml", put_request=put_name, patch_request=patch_name,
                      response=answer, list_type=list_type)


def _v2(name):
    return (f"{name}PolicyOverwriteRequestV2", f"{name}PolicyChangeRequestV2",
            f"{name}PolicyV2")


_BY_REPLICA = Obj({"master": schema.IMPOSED_ASSETS, "worker": schema.IMPOSED_ASSETS})
POLICY_KINDS: tuple[PolicyKind, ...] = (
    _kind("trainings", schema.TRAINING_SPEC, _v2("Training"), "training"),
    _kind("workspaces", schema.WORKSPACE_SPEC, _v2("Workspace"), "workspace"),
    _kind("inferences", schema.INFERENCE_SPEC, _v2("Inference"), "inference"),
    _kind("distributed", Obj({"master": schema.MASTER_SPEC,
                              "worker": schema.DISTRIBUTED_SPEC}),
          _v2("Distributed"), "distributed", _BY_REPLICA),
    _kind("distributed-inferences", schema.DI_SPEC, _v2("DistributedInference"),
          "distributedInference",
          Obj({"leader": schema.IMPOSED_ASSETS, "worker": schema.IMPOSED_ASSETS})),
    _kind("nim-services", schema.NIM_SPEC, ("NimServicePolicyOverwriteRequest",
                                            "NimServicePolicyChangeRequest",
                                            "NimServicePolicy"), "nimService", None),
)


def routes(sim: Simulator) -> list[Route]:
    def bound(kind):
        async def endpoint(request):
            return await handle(sim, kind, request)
        return endpoint

    async def listing(request):
        return await list_policies(sim, request)

    return [Route("/api/v2/policy", listing, methods=["GET"]),
            *(Route(f"/api/v2/policy/{kind.path}", bound(kind),
                    methods=["GET", "PUT", "PATCH", "DELETE"]) for kind in POLICY_KINDS)]


# The list's `workloadType` filter, by the kind's path (policies.yml spells it so; NIM
# has none).
_WORKLOAD_TYPES = {"trainings": "Training", "workspaces": "Workspace",
                   "inferences": "Inference", "distributed": "Distributed",
                   "distributed-inferences": "DistributedInference"}


async def list_policies(sim: Simulator, request: Request) -> Response:
    sim.auth(request)
    q = request.query_params
    by_path = {k.path: k for k in POLICY_KINDS}
    out = []
    for key, made in sorted(sim.org.data["policy"].items()):
        kind = by_path[key.split("|", 1)[0]]
        meta = made["meta"]
        if q.get("workloadType") and _WORKLOAD_TYPES.get(kind.path) != q["workloadType"]:
            continue
        if q.get("scope") and meta.get("scope") != q["scope"]:
            continue
        if any(q.get(f) and str(meta.get(f)) != q[f]
               for f in ("projectId", "departmentId", "clusterId")):
            continue
        out.append({"type": kind.list_type, "meta": copy.deepcopy(meta)})
    return JSONResponse({"policies": out})


def _key(kind: PolicyKind, scope: str, scope_id: Any) -> str:
    return f"{kind.path}|{scope}|{'' if scope_id is None else scope_id}"


def _scope_of_query(request: Request) -> tuple[str, Any]:
    q = request.query_params
    scope = q.get("scope")
    if scope not in SCOPE_IDS:
        raise ApiError(400, "scope: must be one of tenant, cluster, department, project")
    id_name = SCOPE_IDS[scope]
    if id_name is None:
        return scope, None
    if not q.get(id_name):
        raise ApiError(400, f"{id_name}: is required with scope={scope}")
    return scope, q[id_name]


def _rule_issues(rules: Any, path: str) -> list[Issue]:
    """Rules whose min is above their max."""
    out: list[Issue] = []
    if not isinstance(rules, dict):
        return out
    low, high = rules.get("min"), rules.get("max")
    if (isinstance(low, (int, float)) and isinstance(high, (int, float))
            and not isinstance(low, bool) and low > high):
        out.append(Issue(f"{path}.min", f"must be no more than max ({high:g})", "min"))
    for key, sub in rules.items():
        if isinstance(sub, dict):
            out += _rule_issues(sub, f"{path}.{key}")
    return out


async def handle(sim: Simulator, kind: PolicyKind, request: Request) -> Response:
    claims = sim.auth(request)
    kept: dict = sim.org.data["policy"]
    if request.method in ("GET", "DELETE"):
        key = _key(kind, *_scope_of_query(request))
        if key not in kept:
            raise ApiError(404, "Policy not found")
        if request.method == "GET":
            return JSONResponse(_answer(kept[key], _wider(sim, kind, kept[key]["meta"])))
        del kept[key]
        sim.store.save()
        return committed(sim, Response(status_code=204))
    validate_only = request.query_params.get("validateOnly", "false").lower()
    if validate_only not in ("true", "false"):
        raise ApiError(400, "validateOnly must be true or false")
    body = await read_json(request)
    patching = request.method == "PATCH"
    issues = validator.validate(kind.patch if patching else kind.put, body)
    meta = (body or {}).get("meta") if isinstance(body, dict) else None
    if not issues and meta is None:
        issues = [Issue("meta", "is required", "required")]
    if not issues:
        id_name = SCOPE_IDS.get(meta["scope"], "")
        if id_name == "":
            issues = [Issue("meta.scope", "must be one of tenant, cluster, department, "
                            "project", "options")]
        elif id_name is not None and meta.get(id_name) is None:
            issues = [Issue(f"meta.{id_name}", f"is required with scope {meta['scope']}",
                            "required")]
    if not issues:
        issues = _rule_issues((body.get("policy") or {}).get("rules"), "policy.rules")
    if issues:
        raise ApiError(400, issues_message(issues, "policy"))
    scope_id = meta.get(SCOPE_IDS[meta["scope"]]) if SCOPE_IDS[meta["scope"]] else None
    key = _key(kind, meta["scope"], scope_id)
    old = kept.get(key)
    policy = {k: v for k, v in (body.get("policy") or {}).items()
              if v is not None and k != "status"}
    if patching and old is not None:
        base = copy.deepcopy(old["policy"])
        for path in body.get("reset") or ():
            for part in ("defaults", "rules"):
                _clear(base.get(part), path.split("."))
        policy = _merge(base, policy)
    now, who = iso(sim.store.stamp()), str(claims.get("sub", ""))
    made = {"meta": {**{k: v for k, v in meta.items() if v is not None},
                     "id": old["meta"]["id"] if old else sim.uuid(), "tenantId": TENANT_ID,
                     "createdAt": old["meta"]["createdAt"] if old else now,
                     "createdBy": old["meta"]["createdBy"] if old else who,
                     "updatedAt": now, "updatedBy": who},
            "policy": policy}
    wider = _wider(sim, kind, made["meta"])
    if validate_only == "true":
        return JSONResponse(_answer(made, wider))
    kept[key] = made
    sim.store.save()
    return committed(sim, JSONResponse(_answer(made, wider)))


def _wider(sim: Simulator, kind: PolicyKind, meta: dict) -> list[dict]:
    """The policies of `kind` stored at the scopes wider than `meta`'s that hold it,
    widest first: the tenant's, its cluster's, and a project's department's."""
    kept = sim.org.data["policy"]
    scope = meta.get("scope")
    cluster, department = meta.get("clusterId"), None
    if scope == "project":
        rec = sim.org.data["project"].get(str(meta.get("projectId")))
        body = rec["body"] if rec is not None else {}
        department = body.get("parentId")
        cluster = cluster or body.get("clusterId")
    elif scope == "department":
        rec = sim.org.data["department"].get(str(meta.get("departmentId")))
        cluster = cluster or (rec["body"].get("clusterId") if rec is not None else None)
    order = ["tenant", "cluster", "department", "project"]
    wanted = [("tenant", None), ("cluster", cluster), ("department", department)]
    found = []
    for wider, scope_id in wanted[:order.index(scope) if scope in order else 0]:
        if wider == "tenant" or scope_id is not None:
            policy = kept.get(_key(kind, wider, scope_id))
            if policy is not None:
                found.append(policy["policy"])
    return found


def _answer(made: dict, wider: list[dict] = ()) -> dict:
    effective: Any = {}
    for policy in (*wider, made["policy"]):
        effective = _merge(effective, policy)
    return {**made, "effective": effective, "effectiveUpdatedAt": made["meta"]["updatedAt"]}


def _clear(node: Any, path: list[str]) -> None:
    for key in path[:-1]:
        node = node.get(key) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(path[-1], None)


def _merge(base: Any, patch: Any) -> Any:
    if not isinstance(base, dict) or not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(base)
    for key, value in patch.items():
        out[key] = _merge(out.get(key), value)
    return out


__all__ = ["POLICY_KINDS", "PolicyKind", "SCOPE_IDS", "routes"]
