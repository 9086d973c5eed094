"""A live workload as the spec a person would have written for it (pure).

`spec_from_live(kind, body)` turns a GET answer into a spec document: `kind`, `name`,
`project` (when its name is known) or `projectId`, `clusterId`, `desiredPhase: Stopped`
when suspended, and the kind's body keys; without what the server owns: read-only
fields (workloadId, createdAt, phases, ...), values it generated (a new PVC's
`claimName`, assigned `ports[].external`, exposed URLs), documented server defaults
(CONTRACT.md §5) whose live value equals the default, nulls and empty objects and
lists. Lists keep the API's order. A Manifest's manifest is the API's `rawManifest` (what
was submitted: nothing the server added) with its keys in Kubernetes' conventional order
(`manifests.conventional_order`). A sensitive environment variable's `value`
(`masking.secret_name`) becomes `masking.SECRET_PLACEHOLDER`, which `validate` refuses,
unless `include_secrets`.

The server's values are the kind entry's (`kinds.Kind.defaults`, read with
`without_server_values`): the same facts the diff uses, so that export and plan agree.
They are the engine's own: the simulator's `defaults` fills the same values into created
bodies from its own table, and the engine never imports the simulator.
Callers: `operations.export` (the `export` command) and `import`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from reconciler import kinds, masking, phases

_same = kinds.same  # JSON equality: a boolean is not a number


def kind_of_list_type(list_type: object) -> kinds.Kind | None:
    """The kind of a list item's `type` (`kinds.of_list_type`), or None when it is not a
    known spelling."""
    return kinds.of_list_type(list_type)


def skip_reason(kind: str, body: dict) -> str | None:
    """Why a live workload is not exported: "deleted" (being deleted), "completed" (a
    training that ran to its end), or None."""
    if phases.live_gone(body) or body.get("deletedAt"):
        return "deleted"
    if kinds.get(kind).runs_to_completion(body) and phases.live_completed(body):
        return "completed"
    return None


def spec_from_live(kind: str, body: dict, *, project_name: str | None = None,
                   include_secrets: bool = False, sensitive: Iterable[str] = ()) -> dict:
    """The spec document of live workload `body` (a GET answer) of kind `kind`.

    With `project_name`, the document names its project (`project:`) instead of giving
    `projectId`. `sensitive` are the paths the state marks sensitive (its record's
    `lifecycle.sensitive`): their values are withheld as a secret-looking variable's are,
    and the document lists them in `lifecycle.sensitive`. `body` is not changed."""
    k = kinds.get(kind)
    doc: dict[str, Any] = {"kind": k.name, "name": body.get("name")}
    if project_name:
        doc["project"] = project_name
    else:
        doc["projectId"] = None if body.get("projectId") is None else str(body["projectId"])
    doc["clusterId"] = body.get("clusterId")
    if k.can_suspend and phases.live_suspended(body):
        doc["desiredPhase"] = phases.STOPPED
    bare = k.without_server_values({key: body.get(key) for key in k.body_keys})
    for key in k.body_keys:
        value = bare.get(key)
        if isinstance(value, dict) and not include_secrets:
            _withhold_secrets(value)
        doc[key] = value
    paths = sorted(set(sensitive))
    if not include_secrets and paths:
        for key in k.body_keys:
            doc[key] = _withhold_paths(key, doc[key], paths)
    doc = _pruned(doc) or {}
    doc = k.export_shape(doc)
    if paths:
        doc["lifecycle"] = {"sensitive": paths}
    return doc


def withheld(doc: dict) -> list[str]:
    """The dotted paths of `doc` that hold `masking.SECRET_PLACEHOLDER` (the secrets to
    supply before the spec validates), e.g. `spec.environmentVariables[HF_TOKEN].value`."""
    found: list[str] = []

    def walk(path: str, value: Any) -> None:
        if value == masking.SECRET_PLACEHOLDER:
            found.append(path)
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(f"{path}.{key}" if path else key, item)
        elif isinstance(value, list):
            field = path.rsplit(".", 1)[-1]
            for item in value:
                item_key = kinds.item_key(field, item)
                walk(f"{path}[{item_key}]" if item_key is not None else path, item)

    walk("", doc)
    return found


def unit_folders(kind_and_docs: Iterable[tuple[kinds.Kind, Mapping]]
                 ) -> dict[tuple[str, str], str]:
    """The folder of each unit among `kind_and_docs` (exported specs, or flat live bodies)
    by (scope type, name): where the specs placed beside it go (`Hooks.export_unit`)."""
    out: dict[tuple[str, str], str] = {}
    for kind, doc in kind_and_docs:
        found = kind.hooks.export_unit(kind, doc)
        if found is not None:
            out[found[0]] = found[1]
    return out


def relative_path(doc: dict, folders: Mapping[tuple[str, str], str] | None = None) -> str:
    """Where `export` writes `doc` below its folder: `<project>/<kind>/<name>.yaml`, the
    project's name when the document names it, else its id; or where its kind's hooks put
    it (`Hooks.export_path`: the organisation's types under `organisation/`, beside the
    units of `folders`, `unit_folders`)."""
    kind = kinds.get(doc["kind"])
    found = kind.hooks.export_path(kind, doc, folders or {})
    if found is not None:
        return found
    where = doc.get("project") or doc.get("projectId") or kinds.ORGANISATION_FOLDER
    return f"{where}/{doc['kind']}/{doc['name']}.yaml"


def address(doc: dict, project_id: str, name: str | None = None) -> str:
    """The address of exported `doc` in the project (or scope) `project_id`; `name`, the
    live body's, for a document that holds none (a Run:ai policy's is its type)."""
    return kinds.address(doc["kind"], project_id, name or doc["name"])


# --- the walk -----------------------------------------------------------------------


def _withhold_secrets(value: Any) -> None:
    """Replace every sensitive environment variable's value, in place: of the API's
    `environmentVariables`, and of a Kubernetes container's `env` in a manifest."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("environmentVariables", "env") and isinstance(item, list):
                for var in item:
                    if (isinstance(var, dict) and masking.secret_name(var.get("name"))
                            and var.get("value") is not None):
                        var["value"] = masking.SECRET_PLACEHOLDER
            else:
                _withhold_secrets(item)
    elif isinstance(value, list):
        for item in value:
            _withhold_secrets(item)


def _withhold_paths(path: str, value: Any, sensitive: list[str]) -> Any:
    """`value` (at dotted `path`) with each scalar at or under a `sensitive` path replaced
    by the placeholder; a keyed list item keeps its key field (its name)."""
    if value is None:
        return None
    if isinstance(value, dict):
        key_field = "name" if "[" in path.rsplit(".", 1)[-1] else None
        return {k: (v if k == key_field and kinds.under_any(path, sensitive)
                    else _withhold_paths(f"{path}.{k}", v, sensitive))
                for k, v in value.items()}
    if isinstance(value, list):
        field = path.rsplit(".", 1)[-1]
        out = []
        for item in value:
            key = kinds.item_key(field, item) if "[" not in field else None
            out.append(_withhold_paths(f"{path}[{key}]" if key is not None else path, item,
                                       sensitive))
        return out
    return masking.SECRET_PLACEHOLDER if kinds.under_any(path, sensitive) else value


def _pruned(value: Any) -> Any:
    """`value` without nulls, empty objects and empty lists (the diff's "absent")."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            item = _pruned(item)
            if item is not None:
                out[key] = item
        return out or None
    if isinstance(value, list):
        items = [p for p in (_pruned(item) for item in value) if p is not None]
        return items or None
    return value



def to_yaml(doc: dict, *, comment: str = "") -> str:
    """`doc` as a YAML file, keys in the document's order, under `comment` lines."""
    head = "".join(f"# {line}\n" if line else "#\n" for line in comment.splitlines())
    return head + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=1 << 16)


# --- folder defaults (export --defaults) -----------------------------------------------

DEFAULTS_FILE = "_defaults.yaml"
# What a folder's `_defaults.yaml` may take from its specs (the typical fields):
# top-level scalars, keyed lists of `spec` (merged by item key: the items every spec has
# alike) and `spec.nodePools` (an ordered list: replaced whole, so only when all agree).
_SHARED_SCALARS = ("clusterId", "project", "projectId")
_SHARED_ITEMS = ("labels", "annotations", "environmentVariables")
_SHARED_WHOLE = ("nodePools",)


def factor_defaults(docs: dict[str, dict], *, folders: Iterable[str] | None = None
                    ) -> tuple[dict[str, dict], dict[str, dict]]:
    """(`docs` without what their folders' `_defaults.yaml` now hold, those files by
    path): the fields every document at or below a folder has alike move to the folder
    (outermost first), for the folders of two or more documents. `docs` are keyed by
    relative path (`relative_path`); `folders` limits the folders that may get one ("" is
    the top). Items holding a withheld secret stay in their spec. Merging the defaults
    back (docs/specs.md, "Folder defaults") gives each document again, keyed lists perhaps in
    another order."""
    out = copy.deepcopy(docs)
    defaults: dict[str, dict] = {}
    allowed = None if folders is None else set(folders)
    tree = sorted({"/".join(p.split("/")[:n]) for p in out for n in range(p.count("/") + 1)},
                  key=lambda f: (f.count("/") if f else -1, f))
    for folder in tree:
        below = [doc for path, doc in out.items() if folder == "" or path.startswith(folder + "/")]
        if len(below) < 2 or (allowed is not None and folder not in allowed):
            continue
        shared = _shared(below)
        if shared:
            defaults[f"{folder}/{DEFAULTS_FILE}" if folder else DEFAULTS_FILE] = shared
            for doc in below:
                _take(doc, shared)
    return out, defaults


def same_workload(a: dict, b: dict) -> bool:
    """Whether spec documents `a` and `b` ask for the same workload: equal but for
    `lifecycle` (the reconciler's own controls), nulls (absent) and the order of keyed
    lists (compared by item key, as the diff does)."""
    return _normal({k: v for k, v in a.items() if k != "lifecycle"}) == _normal(
        {k: v for k, v in b.items() if k != "lifecycle"})


def _normal(value: Any, field: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _normal(v, k) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        items = [_normal(v, field) for v in value]
        keys = [kinds.item_key(field, v) for v in value]
        if items and None not in keys and len(set(keys)) == len(keys):
            return sorted(zip(keys, map(repr, items)))
        return items
    return value


def _shared(docs: list[dict]) -> dict:
    first, rest = docs[0], docs[1:]
    # A project is shared only by specs in one (workloads): a folder of the organisation's
    # specs (units, rules, policies) keeps a policy's `project:` in its file, where a
    # project spec added beside it later would not take it.
    in_projects = all(kinds.get(d["kind"]).in_project for d in docs
                      if d.get("kind") in kinds.KINDS)
    shared: dict[str, Any] = {k: first[k] for k in _SHARED_SCALARS
                              if k in first and all(_same(d.get(k), first[k]) for d in rest)
                              and (k == "clusterId" or in_projects)}
    spec: dict[str, Any] = {}
    for field in _SHARED_WHOLE:
        value = first.get("spec", {}).get(field)
        if value is not None and all(d.get("spec", {}).get(field) == value for d in rest):
            spec[field] = value
    for field in _SHARED_ITEMS:
        items = [item for item in first.get("spec", {}).get(field) or ()
                 if kinds.item_key(field, item) is not None
                 and masking.SECRET_PLACEHOLDER not in repr(item)
                 and all(item in (d.get("spec", {}).get(field) or ()) for d in rest)]
        if items:
            spec[field] = items
    if spec:
        shared["spec"] = spec
    return shared


def _take(doc: dict, shared: dict) -> None:
    """Remove from `doc` what `shared` (its folder's defaults) now gives it."""
    for key in _SHARED_SCALARS:
        if key in shared:
            del doc[key]
    spec = doc.get("spec", {})
    for field, value in shared.get("spec", {}).items():
        if field in _SHARED_WHOLE:
            del spec[field]
            continue
        spec[field] = [item for item in spec[field] if item not in value]
        if not spec[field]:
            del spec[field]
