"""Run:ai's own workload policies (policies.yml, CONTRACT.md §13): the `Policy` type.

Not this tool's `--policy` files (`reconciler.policy`: rules that judge a plan): a Run:ai
policy is a resource of the control plane that sets the defaults and rules of the
workloads submitted at one scope, and imposes data sources on them.

A Run:ai policy is keyed by its workload type and its scope, not by an id of its own:
`PUT /api/v2/policy/{type}` writes (creates or replaces) the policy its body's `meta`
names, and `GET` / `DELETE /api/v2/policy/{type}?scope=...&<scope id>=...` read and
delete it. So:

- its address is `Policy/<scope>/<workloadType>`: `tenant`, `cluster:<clusterId>`,
  `department:<name>` or `project:<name>`, then the workload type (`training`,
  `workspace`, `inference`, `distributed`, `distributedInference`, `nimService`);
- its id, as the state records it, is the query that reads it (`trainings?scope=project&
  projectId=5`): `GET api_path/<id>` reads it, `DELETE api_path/<id>` deletes it;
- a spec names its department or project by name; the API takes their ids, so the client
  looks the name up before a write (`Codec.references`), and after a read looks the id up
  to name it again (`Codec.lookups`: one GET of the unit);
- create and update are the same PUT of the whole owned policy (`meta` and `policy`:
  `defaults`, `rules`, `imposedAssets`); the API's PATCH merges, so a rule removed from a
  spec would stay: PUT is what the contract advises;
- the server's dry run: the same PUT with `validateOnly=true` (`Codec.dry_run_request`),
  which plan sends for each policy it would write;
- what a read compares is the policy the spec owns (`policy`), never `effective` (the
  policy merged down from the wider scopes), without what the server owns in it
  (`status`, every rule's `sourceOfRule`).

Pure: a bottom layer of the import contracts.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any

from reconciler.kinds import pods
from reconciler.kinds.entry import ORGANISATION_FOLDER, Codec, Hooks, Kind, Reference

POLICIES_PATH = "/api/v2/policy"
PROJECTS_PATH = "/api/v1/org-unit/projects"
DEPARTMENTS_PATH = "/api/v1/org-unit/departments"

# The workload type as a spec writes it (the API's `PolicyType`) -> its path under
# /api/v2/policy.
TYPE_PATHS = {"training": "trainings", "workspace": "workspaces", "inference": "inferences",
              "distributed": "distributed", "distributedInference": "distributed-inferences",
              "nimService": "nim-services"}
_TYPE_OF_PATH = {v: k for k, v in TYPE_PATHS.items()}
SCOPES = ("tenant", "cluster", "department", "project")
# The id each scope is keyed by, in `meta` and in the read's query (none for the tenant).
SCOPE_IDS = {"tenant": None, "cluster": "clusterId", "department": "departmentId",
             "project": "projectId"}
# What a spec owns of a policy: the body of `policy`.
OWNED = ("defaults", "rules", "imposedAssets")
# The units a scope's name is looked up in: (what, collection path, list key).
_UNITS = {"department": ("department", DEPARTMENTS_PATH, "departments"),
          "project": ("project", PROJECTS_PATH, "projects")}


def scope_key(scope: str, name: str | None = None, cluster: str | None = None) -> str:
    """The middle of a policy's address: `tenant`, `cluster:<id>`, `department:<name>`,
    `project:<name>`."""
    if scope == "tenant":
        return "tenant"
    if scope == "cluster":
        return f"cluster:{cluster}"
    return f"{scope}:{name}"


def parse_scope_key(key: str) -> tuple[str, str | None]:
    """(scope, the department's or project's name, the cluster's id, or None)."""
    scope, _, name = str(key).partition(":")
    return scope, name or None


def _without_source(node: Any) -> Any:
    """`node` without the server's `sourceOfRule` (at any depth) and null members."""
    if isinstance(node, dict):
        return {k: _without_source(v) for k, v in node.items()
                if k != "sourceOfRule" and v is not None}
    if isinstance(node, list):
        return [_without_source(v) for v in node]
    return node


class PolicyCodec(Codec):
    """A Run:ai policy's wire form. The engine's flat body: `name` the workload type,
    `projectId` the scope key (the address's middle), `clusterId`, and the owned
    `defaults`, `rules`, `imposedAssets`. After `resolve`, `scopeId` holds the id of the
    department or project the scope names."""

    dry_runs = True

    def references(self, kind: Kind, body: Mapping) -> tuple[Reference, ...]:
        scope, name = parse_scope_key(body.get("projectId") or "")
        if scope in _UNITS and name:
            what, path, key = _UNITS[scope]
            return (Reference(what, path, key, name, str(body.get("clusterId") or "")),)
        return ()

    def resolve(self, kind: Kind, body: dict, ids: Mapping[Reference, str]) -> dict:
        out = dict(body)
        for ref, found in ids.items():
            out["scopeId"] = found
        return out

    def _meta(self, body: Mapping) -> dict:
        scope, name = parse_scope_key(body.get("projectId") or "")
        meta: dict[str, Any] = {"name": f"{body['name']}-{scope}" + (
            f"-{name}" if scope in _UNITS else ""), "scope": scope}
        if scope != "tenant" and body.get("clusterId"):
            meta["clusterId"] = body["clusterId"]
        if scope == "department":
            meta["departmentId"] = str(body["scopeId"])
        elif scope == "project":
            meta["projectId"] = int(body["scopeId"])  # int32 in PolicyCreationFields
        return meta

    def create_body(self, kind: Kind, body: dict) -> dict:
        return {"meta": self._meta(body),
                "policy": {k: body[k] for k in OWNED if body.get(k) is not None}}

    def create_request(self, kind: Kind, body: dict) -> tuple[str, str, dict]:
        return "PUT", f"{kind.api_path}/{TYPE_PATHS[body['name']]}", self.create_body(kind, body)

    def dry_run_request(self, kind: Kind, body: dict) -> tuple[str, str, dict] | None:
        method, path, json = self.create_request(kind, body)
        return method, f"{path}?validateOnly=true", json

    def update_request(self, kind: Kind, item: str, patch: dict,
                       whole: Mapping | None) -> tuple[str, str, Any, bool]:
        # The whole owned policy, PUT (the API's PATCH would keep what a spec removed).
        body = dict(whole) if whole is not None else dict(patch)
        method, path, json = self.create_request(kind, body)
        return method, path, json, False

    def items(self, kind: Kind, page: Any) -> list:
        found = page.get("policies") if isinstance(page, Mapping) else None
        return [i for i in found if isinstance(i, Mapping)
                and (i.get("type") in TYPE_PATHS)] if isinstance(found, list) else []

    def lookups(self, kind: Kind, answer: Any) -> tuple[str, ...]:
        meta = answer.get("meta") if isinstance(answer, Mapping) else None
        if not isinstance(meta, Mapping) or meta.get("scope") not in _UNITS:
            return ()
        scope = meta["scope"]
        found = meta.get(SCOPE_IDS[scope])
        if found is None:
            return ()
        return (f"{_UNITS[scope][1]}/{urllib.parse.quote(str(found), safe='')}",)

    def read_at(self, kind: Kind, answer: Any, path: str, found: Mapping[str, Any]) -> Any:
        if not isinstance(answer, Mapping) or not isinstance(answer.get("meta"), Mapping):
            return answer
        meta = answer["meta"]
        type_name = answer.get("type") if answer.get("type") in TYPE_PATHS else \
            _TYPE_OF_PATH.get(path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1])
        scope = meta.get("scope")
        if type_name is None or scope not in SCOPE_IDS:
            return answer
        id_name = SCOPE_IDS[scope]
        scope_id = None if id_name is None else meta.get(id_name)
        unit_name, cluster = None, meta.get("clusterId")
        for unit in found.values():
            if isinstance(unit, Mapping) and unit.get("name"):
                unit_name = str(unit["name"])
                # A project's or department's policy may leave its cluster out of `meta`:
                # the unit's is the policy's.
                cluster = cluster or unit.get("clusterId")
        query = {"scope": scope, **({id_name: scope_id} if id_name else {})}
        out: dict[str, Any] = {
            "workloadId": f"{TYPE_PATHS[type_name]}?{urllib.parse.urlencode(query)}",
            "name": type_name,
            "projectId": scope_key(scope, unit_name if scope in _UNITS else None, cluster),
            "clusterId": cluster if scope != "tenant" else None}
        if scope in _UNITS and unit_name is None:
            # The unit could not be named (gone since): the key keeps its id.
            out["projectId"] = f"{scope}:#{scope_id}"
        for key in ("createdAt", "updatedAt"):
            if meta.get(key) is not None:
                out[key] = meta[key]
        policy = answer.get("policy")
        if isinstance(policy, Mapping):
            for key in OWNED:
                value = _without_source(policy.get(key))
                if value not in (None, {}, []):
                    out[key] = value
        return out

    def read(self, kind: Kind, answer: Any) -> Any:
        return self.read_at(kind, answer, "", {})


class PolicyHooks(Hooks):
    """What `export` writes of a Run:ai policy: its scope as a spec says it."""

    def shown(self, kind: Kind, body: dict) -> dict:
        # Its `name` is its workload type, which the line above the fields shows already
        # (`+ Policy training (scope ...)`), and `projectId` its scope: neither is a field
        # of the spec.
        return {k: v for k, v in body.items() if k not in ("name", "projectId")}

    def export_shape(self, kind: Kind, doc: dict) -> dict:
        scope, name = parse_scope_key(doc.get("projectId") or "")
        out: dict[str, Any] = {"kind": doc.get("kind", kind.name),
                               "workloadType": doc.get("name"), "scope": scope}
        if scope in _UNITS:
            out[scope] = name
        if doc.get("clusterId") and scope != "tenant":
            out["clusterId"] = doc["clusterId"]
        for key in OWNED:
            if doc.get(key) is not None:
                out[key] = doc[key]
        for key, value in doc.items():
            if key not in out and key not in ("name", "projectId", "clusterId", "kind"):
                out[key] = value
        return out

    def export_path(self, kind: Kind, doc: dict,
                    folders: Mapping[tuple[str, str], str] | None = None) -> str | None:
        # Beside the unit of its scope, named so that it sorts with it:
        # `<unit>.policy-<type>.yaml` in the unit's folder; a cluster's or the tenant's at
        # the organisation's top, `<scope>.policy-<type>.yaml`.
        scope = str(doc.get("scope") or "")
        rest = f"policy-{doc.get('workloadType')}.yaml"
        if scope in _UNITS and doc.get(scope):
            unit = str(doc[scope])
            folder = (folders or {}).get((scope, unit), ORGANISATION_FOLDER)
            return f"{folder}/{unit}.{rest}"
        return f"{ORGANISATION_FOLDER}/{scope}.{rest}"


POLICY = Kind(
    name="Policy",
    api_path=POLICIES_PATH,
    body_keys=OWNED,
    containers=(),
    defaults={},
    list_types=frozenset({"policy"}),
    pods=pods.none,
    updatable_paths=frozenset(OWNED),
    update_method="PUT",
    listed=False,
    address_scope="scope",
    # After the department or project it is on, before the workloads; deleted before it.
    rank=30,
    codec=PolicyCodec(),
    hooks=PolicyHooks(),
)

KINDS = (POLICY,)
