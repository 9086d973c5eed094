"""The organisation's family: Department and Project (org-units.yml, CONTRACT.md §13).

An organisation unit is no workload: the workloads list does not show it (it is found in
its own collection), it runs no pods, and its address is `<kind>/<clusterId>/<name>` (a
unit's name is unique in its cluster). Its spec names things the API takes by id, and
the codec turns one into the other:

- a quota is written per node pool by the pool's name (`resources: {a100: {gpu:
  {deserved: 4}}}`); the API's `resources` list names the pool by id, so the API client
  looks the names up (`Codec.references`) before a create or update, and a live answer's
  list is read back into the mapping by the pool name it carries;
- a project's `department:` is its parent department's name (`parentId` on the wire; the
  answer's `parent.name` read back); without one, the API puts it in `default`.

Updates use the API's own verbs: a change of the quotas alone is a PUT of the unit's
`resources` sub-route (no other field is resent); any other updatable change is a PUT of
the unit with every updatable field. Name, cluster, department and requested namespace
are set at create: a change there replaces the unit. A project's create answers before
its namespace exists (phase Creating, then Ready: `Kind.ready_phase`), and its delete
answers 202 and finishes later (the engine polls until a GET answers 404). Both types are
protected by `preventDestroy` unless a spec opts out (`Kind.prevent_destroy`). Both
provide a GPU quota (`UnitQuota`, `Kind.quota`): a project's bounds its workloads' GPUs,
a department's its projects' deserved GPUs, per node pool.
Pure: a bottom layer of the import contracts.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from reconciler.kinds import pods
from reconciler.kinds.entry import (ORGANISATION_FOLDER, Codec, Hooks, Kind, Quota, Reference,
                                    fixed)

NODE_POOLS_PATH = "/api/v1/node-pools"
DEPARTMENTS_PATH = "/api/v1/org-unit/departments"
PROJECTS_PATH = "/api/v1/org-unit/projects"
# A quota's `priority` names one of these (2.x); its `rank`, in the place of the priority
# on a 3.0 control plane, one of the ranks.
PRIORITIES_PATH = "/api/v1/org-unit/priorities"
RANKS_PATH = "/api/v1/org-unit/ranks"

# The keys of one node pool's quota besides the pool (`Resources` in org-units.yml; `rank`
# from NVIDIA's 3.0 reference, CONTRACT.md §13, sent as written).
QUOTA_KEYS = ("gpu", "cpu", "memory", "priority", "rank")
# Where the quota's order names something (key, collection, its list key, what it is,
# and what a plan's error adds when the control plane does not serve the collection).
_ORDERS = (
    ("priority", PRIORITIES_PATH, "priorities",
     "a Run:ai 3.0 control plane ranks its units instead: write `rank`"),
    ("rank", RANKS_PATH, "ranks",
     "a control plane before Run:ai 3.0 takes a `priority` instead"),
)
# The fields a PUT of a unit replaces (`DataUpdatableFields`, and `resources`).
UPDATABLE = ("description", "resources", "defaultNodePools", "nodeTypes", "schedulingRules")
# What the unit answer holds that a spec writes as it is.
_AS_WRITTEN = ("requestedNamespace", "defaultNodePools", "nodeTypes", "schedulingRules")


def _pruned(value: Any) -> Any:
    """`value` without null members (the API answers an unset quota limit as null)."""
    if isinstance(value, dict):
        return {k: _pruned(v) for k, v in value.items() if v is not None}
    return value


class OrgCodec(Codec):
    """An organisation unit's wire form. The engine's flat body holds the spec's shape:
    `resources` a mapping by node pool name, `department` a name; `projectId` holds the
    cluster (the middle of the address)."""

    def references(self, kind: Kind, body: Mapping) -> tuple[Reference, ...]:
        cluster = str(body.get("clusterId") or "")
        out = [Reference("node pool", NODE_POOLS_PATH, "nodepools", pool, cluster,
                         field=f"resources.{pool}")
               for pool in body.get("resources") or {}]
        if body.get("department"):
            out.append(Reference("department", DEPARTMENTS_PATH, "departments",
                                 str(body["department"]), cluster, field="department"))
        return tuple(out)

    def names(self, kind: Kind, body: Mapping) -> tuple[Reference, ...]:
        quotas = body.get("resources")
        orders = [
            Reference(key, path, list_key, str(quota[key]), field=f"resources.{pool}.{key}",
                      unserved=unserved)
            for pool, quota in (quotas.items() if isinstance(quotas, Mapping) else ())
            for key, path, list_key, unserved in _ORDERS
            if isinstance(quota, Mapping) and quota.get(key) is not None]
        return (*self.references(kind, body), *orders)

    def resolve(self, kind: Kind, body: dict, ids: Mapping[Reference, str]) -> dict:
        by_name = {(ref.what, ref.name): found for ref, found in ids.items()}
        out = copy.deepcopy(dict(body))
        quotas = out.get("resources")
        if isinstance(quotas, Mapping):
            out["resources"] = [{"nodePool": {"id": by_name[("node pool", pool)],
                                              "name": pool}, **(quota or {})}
                                for pool, quota in quotas.items()]
        department = out.pop("department", None)
        if department:
            out["parentId"] = by_name[("department", str(department))]
        return out

    def create_body(self, kind: Kind, body: dict) -> dict:
        out: dict[str, Any] = {"name": body["name"], "clusterId": body["clusterId"]}
        for key in ("parentId", "requestedNamespace", *UPDATABLE):
            if body.get(key) is not None:
                out[key] = body[key]
        out.setdefault("resources", [])
        return out

    def update_request(self, kind: Kind, item: str, patch: dict,
                       whole: Mapping | None) -> tuple[str, str, Any, bool]:
        # `patch` holds the changed updatable fields (update_method PATCH, the planner's
        # form); the API's verbs are PUTs, made from the whole body.
        body = dict(whole) if whole is not None else dict(patch)
        if set(patch) <= {"resources"}:
            return "PUT", f"{item}/resources", body.get("resources") or [], True
        return "PUT", item, {**{k: body[k] for k in UPDATABLE if body.get(k) is not None},
                             "resources": body.get("resources") or []}, False

    def read(self, kind: Kind, answer: Any) -> Any:
        if not isinstance(answer, dict) or "id" not in answer:
            return answer
        out: dict[str, Any] = {"workloadId": str(answer["id"]), "name": answer.get("name"),
                               "projectId": answer.get("clusterId"),
                               "clusterId": answer.get("clusterId")}
        for key in ("createdAt", "updatedAt"):
            if answer.get(key) is not None:
                out[key] = answer[key]
        if answer.get("description"):
            out["description"] = answer["description"]
        if "department" in kind.body_keys:
            parent = answer.get("parent")
            if isinstance(parent, Mapping) and parent.get("name"):
                out["department"] = parent["name"]
        for key in _AS_WRITTEN:
            if key in kind.body_keys and answer.get(key) is not None:
                out[key] = answer[key]
        quotas = answer.get("resources")
        if isinstance(quotas, list):
            out["resources"] = {
                str((q.get("nodePool") or {}).get("name")): _pruned(
                    {k: q[k] for k in QUOTA_KEYS if q.get(k) is not None})
                for q in quotas if isinstance(q, Mapping)}
        status = answer.get("status")
        phase = status.get("phase") if isinstance(status, Mapping) else None
        # Read-only, never diffed (not a body key): what a deletion takes with it.
        namespace = status.get("namespace") if isinstance(status, Mapping) else None
        if namespace:
            out["namespace"] = namespace
        if phase:
            out["actualPhase"] = phase
            if phase == "Deleting":
                out["desiredPhase"] = "Deleted"
        return out


# The department a project without one is in (the API's).
DEFAULT_DEPARTMENT = "default"


class OrgHooks(Hooks):
    """What `export` writes of a unit, and what a plan lists of its create: no `projectId`
    (the engine's own: its address holds the cluster). Export writes a folder per
    department, `organisation/<department>/`, holding the department as
    `<department>.yaml` and its projects as `<project>.yaml` (a project of no department
    in `organisation/default/`), their access rules and policies beside them. A project's
    deletion takes its namespace with it."""

    export_units = True

    def export_shape(self, kind: Kind, doc: dict) -> dict:
        return {k: v for k, v in doc.items() if k != "projectId"}

    def export_unit(self, kind: Kind, doc: Mapping) -> tuple[tuple[str, str], str] | None:
        if not doc.get("name"):
            return None
        folder = str(doc.get("department") or DEFAULT_DEPARTMENT) \
            if "department" in kind.body_keys else str(doc["name"])
        return (kind.name.lower(), str(doc["name"])), f"{ORGANISATION_FOLDER}/{folder}"

    def export_path(self, kind: Kind, doc: dict,
                    folders: Mapping[tuple[str, str], str] | None = None) -> str | None:
        unit = self.export_unit(kind, doc)
        return None if unit is None else f"{unit[1]}/{doc['name']}.yaml"

    def takes_with(self, kind: Kind, live: Mapping | None) -> list[str]:
        namespace = live.get("namespace") if isinstance(live, Mapping) else None
        return [f"namespace {namespace}"] if namespace else []


def _gpus(value: Any) -> float | None:
    # A number as JSON gives one; anything else (a live body may hold text) is none.
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class UnitQuota(Quota):
    """A unit's GPU quota: `resources` by node pool name (the flat body's shape, spec and
    live alike), each pool's `gpu.deserved` and `gpu.limit`; a project's department is its
    `department`, the API's `default` when a body names none."""

    def pools(self, kind: Kind, body: Mapping | None) -> dict[str, tuple[float | None,
                                                                         float | None]]:
        quotas = body.get("resources") if isinstance(body, Mapping) else None
        out = {}
        for pool, quota in (quotas.items() if isinstance(quotas, Mapping) else ()):
            gpu = quota.get("gpu") if isinstance(quota, Mapping) else None
            gpu = gpu if isinstance(gpu, Mapping) else {}
            out[str(pool)] = (_gpus(gpu.get("deserved")), _gpus(gpu.get("limit")))
        return out

    def parent(self, kind: Kind, body: Mapping | None) -> str | None:
        if "department" not in kind.body_keys or not isinstance(body, Mapping):
            return None
        return str(body.get("department") or "default")


ORG = OrgCodec()
ORG_HOOKS = OrgHooks()

DEPARTMENT = Kind(
    name="Department",
    api_path=DEPARTMENTS_PATH,
    body_keys=("description", "resources", "defaultNodePools", "schedulingRules"),
    containers=(),
    defaults={},
    list_types=frozenset({"department"}),
    pods=pods.none,
    updatable_paths=frozenset({"description", "resources", "defaultNodePools",
                               "schedulingRules"}),
    update_method="PATCH",
    listed=False,
    prevent_destroy=True,
    address_scope="cluster",
    rank=10,
    codec=ORG,
    hooks=ORG_HOOKS,
    quota=UnitQuota("department"),
)

PROJECT = Kind(
    name="Project",
    api_path=PROJECTS_PATH,
    body_keys=("department", "requestedNamespace", "description", "resources",
               "defaultNodePools", "nodeTypes", "schedulingRules"),
    containers=(),
    # Without a department, the API puts a project in the one named "default".
    defaults={"": (fixed("department", DEFAULT_DEPARTMENT),)},
    list_types=frozenset({"project"}),
    pods=pods.none,
    updatable_paths=frozenset({"description", "resources", "defaultNodePools", "nodeTypes",
                               "schedulingRules"}),
    update_method="PATCH",
    listed=False,
    ready_phase="Ready",
    prevent_destroy=True,
    address_scope="cluster",
    rank=20,
    holds_workloads=True,
    codec=ORG,
    hooks=ORG_HOOKS,
    quota=UnitQuota("project"),
)

KINDS = (DEPARTMENT, PROJECT)
