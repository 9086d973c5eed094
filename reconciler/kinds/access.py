"""The access rules' family: AccessRule (access-rules.yml, CONTRACT.md §13).

An access rule gives a subject (a user by e-mail, a group by name, a service account) a
role in a scope (a project, a department, the cluster). The API keeps no name for a rule:
its identity is (subject, role, scope). A spec gives it a handle of the user's choosing
(`name`), which with the cluster makes its address `AccessRule/<clusterId>/<name>`, as an
organisation unit's; the state ties the address to the rule's id.

Its spec names things the API takes by id, and the codec turns one into the other: the
role by its name (`GET /api/v1/authorization/roles`, a bare array), the scope by the name
of the project or department (their collections, as an organisation unit's department is
found); a cluster scope's id is the cluster's. A live answer carries `roleName` and
`scopeName`, which are read back as the spec writes them.

The API has no update of a rule (no PUT, no PATCH): the entry has no updatable path, so
every change is a replacement (delete, then create), shown with the reason. A rule runs
no pods, has no phases the engine waits on, and the workloads list does not show it (it
is found in its own collection, `accessRules`). As the server holds no handle, a rule
read from the server is named by its identity (`handle`): what `export` writes, and the
name the engine looks a spec's rule up by live (`Hooks.listed_name`: a new spec, `import
--all`, a create whose answer was lost), whatever handle the spec gives it; a plan shows
a live rule under its address's handle (`Hooks.addressed`), and the diff never compares
the two (`Hooks.normalise`).
Pure: a bottom layer of the import contracts.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.kinds import pods
from reconciler.kinds.entry import ORGANISATION_FOLDER, Codec, Hooks, Kind, Reference
from reconciler.kinds.org import DEPARTMENTS_PATH, PROJECTS_PATH

ACCESS_RULES_PATH = "/api/v1/authorization/access-rules"
ROLES_PATH = "/api/v1/authorization/roles"

# What a spec writes (body keys): the subject, the role by name, the scope by name.
BODY_KEYS = ("subjectType", "subjectId", "role", "scopeType", "scope")
SUBJECT_TYPES = ("user", "group", "service-account", "app")
# The scopes a spec can name, and where a named one is looked up (a cluster scope's id is
# the rule's cluster: it names nothing).
SCOPES: dict[str, tuple[str, str] | None] = {
    "project": (PROJECTS_PATH, "projects"),
    "department": (DEPARTMENTS_PATH, "departments"),
    "cluster": None,
}


def _slug(text: Any) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(text or "").lower()).strip("-") or "x"


def handle(body: Mapping) -> str:
    """The handle of a rule named by its identity: `<subject>.<role>.<scopeType>-<scope>`
    (a cluster scope: `<subject>.<role>.cluster`), each part lower case with every run of
    other characters a hyphen, e.g. `ml-team.l1-researcher.project-team-a`."""
    scope_type = str(body.get("scopeType") or "")
    scope = scope_type if scope_type == "cluster" else \
        f"{_slug(scope_type)}-{_slug(body.get('scope'))}"
    return f"{_slug(body.get('subjectId'))}.{_slug(body.get('role'))}.{scope}"


class AccessRuleCodec(Codec):
    """An access rule's wire form. The engine's flat body holds the spec's shape (`role`
    and `scope` by name); `projectId` holds the cluster (the middle of the address)."""

    def references(self, kind: Kind, body: Mapping) -> tuple[Reference, ...]:
        cluster = str(body.get("clusterId") or "")
        out = [Reference("role", ROLES_PATH, "", str(body.get("role") or ""),
                         field="role")]
        where = SCOPES.get(str(body.get("scopeType") or ""))
        if where is not None and body.get("scope"):
            out.append(Reference(str(body["scopeType"]), where[0], where[1],
                                 str(body["scope"]), cluster, field="scope"))
        return tuple(out)

    def resolve(self, kind: Kind, body: dict, ids: Mapping[Reference, str]) -> dict:
        by_what = {ref.what: found for ref, found in ids.items()}
        out = copy.deepcopy(dict(body))
        out["roleId"] = int(by_what["role"])  # int32 on the wire
        scope_type = str(out.get("scopeType") or "")
        out["scopeId"] = by_what.get(scope_type) if SCOPES.get(scope_type) is not None \
            else str(out.get("clusterId") or "")
        return out

    def create_body(self, kind: Kind, body: dict) -> dict:
        # `AccessRuleCreationFields`, no other key.
        return {key: body[key] for key in ("subjectId", "subjectType", "roleId", "scopeId",
                                           "scopeType", "clusterId")
                if body.get(key) is not None}

    def read(self, kind: Kind, answer: Any) -> Any:
        if not isinstance(answer, dict) or "id" not in answer:
            return answer
        cluster = answer.get("clusterId") or (
            answer.get("scopeId") if answer.get("scopeType") == "cluster" else None)
        out: dict[str, Any] = {"workloadId": str(answer["id"]),
                               "projectId": cluster, "clusterId": cluster}
        for key in ("subjectType", "subjectId", "scopeType"):
            if answer.get(key) is not None:
                out[key] = answer[key]
        if answer.get("roleName") is not None:
            out["role"] = answer["roleName"]
        if answer.get("scopeType") in SCOPES and SCOPES[answer["scopeType"]] is not None \
                and answer.get("scopeName") is not None:
            out["scope"] = answer["scopeName"]
        out["name"] = handle(out)
        for key in ("createdAt", "updatedAt", "deletedAt"):
            if answer.get(key) is not None:
                out[key] = answer[key]
        return out

    def items(self, kind: Kind, page: Any) -> list:
        found = page.get("accessRules") if isinstance(page, Mapping) else None
        return [i for i in found if isinstance(i, Mapping)] if isinstance(found, list) else []


class AccessRuleHooks(Hooks):
    """The server holds no handle: a live rule's is the one its spec or state gives it
    (its name read from the server is its identity's, `handle`), so the handle is never a
    change, and a plan shows the live rule under its address's name. What `export`
    writes: no `projectId` (its address holds the cluster)."""

    normalises = True

    def normalise(self, kind: Kind, bodies: Sequence[dict | None]) -> list[dict | None]:
        desired, applied, live = bodies
        named = desired if desired is not None else applied
        if live is not None and named is not None and "name" in named:
            live = {**live, "name": named["name"]}
        return [desired, applied, live]

    def listed_name(self, kind: Kind, body: Mapping) -> str:
        # A rule is listed under its identity's handle, whatever handle its spec gives.
        return handle(body)

    def addressed(self, kind: Kind, live: dict, name: str) -> dict:
        return {**live, "name": name}

    def export_shape(self, kind: Kind, doc: dict) -> dict:
        return {k: v for k, v in doc.items() if k != "projectId"}

    def export_path(self, kind: Kind, doc: dict,
                    folders: Mapping[tuple[str, str], str] | None = None) -> str | None:
        # Beside the unit it scopes, named so that it sorts with it:
        # `<unit>.access-<subject>.<role>.yaml` in the unit's folder; a cluster's at the
        # organisation's top, `cluster.access-<subject>.<role>.yaml`.
        rest = f"access-{_slug(doc.get('subjectId'))}.{_slug(doc.get('role'))}.yaml"
        scope_type, scope = str(doc.get("scopeType") or ""), doc.get("scope")
        if SCOPES.get(scope_type) is not None and scope:
            folder = (folders or {}).get((scope_type, str(scope)), ORGANISATION_FOLDER)
            return f"{folder}/{scope}.{rest}"
        return f"{ORGANISATION_FOLDER}/{_slug(scope_type)}.{rest}"


ACCESS_RULE = Kind(
    name="AccessRule",
    api_path=ACCESS_RULES_PATH,
    body_keys=BODY_KEYS,
    containers=(),
    defaults={},
    list_types=frozenset({"accessrule"}),
    pods=pods.none,
    # No update route: every change replaces the rule.
    updatable_paths=frozenset(),
    listed=False,
    address_scope="cluster",
    # After the department or project it scopes, before the workloads; deleted before it.
    rank=30,
    codec=AccessRuleCodec(),
    hooks=AccessRuleHooks(),
)

KINDS = (ACCESS_RULE,)
