"""The registry of workload kinds and what each can do.

Everything kind-specific that the engine needs is here, so that adding a kind is one
entry (plus its spec model in `reconciler.desired.models`); also the path syntax every
module shares (`under`: a dotted path at or under a prefix) and the item keys of lists.
Callers: desired (which model validates a document), diff and planner (update in place
or replace, suspend/resume), api (which URL), executor, render (masking), state.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    name: str  # the `kind:` of a spec document, e.g. "DistributedTraining"
    api_path: str  # collection path, e.g. "/api/v1/workloads/distributed"
    # Top-level keys of the create body besides name/projectId/clusterId.
    body_keys: tuple[str, ...]
    # Dotted paths that PATCH can change; a change under any other path replaces.
    updatable_paths: frozenset[str] = frozenset()
    can_suspend: bool = False
    # Trainings run to completion (live phase Completed) and may be auto-deleted then.
    completes: bool = False

    @property
    def can_update(self) -> bool:
        return bool(self.updatable_paths)

    def is_updatable(self, path: str) -> bool:
        """True when the dotted `path` (e.g. "spec.replicas") lies under an updatable path."""
        return under_any(path, self.updatable_paths)


DISTRIBUTED_TRAINING = Kind(
    name="DistributedTraining",
    api_path="/api/v1/workloads/distributed",
    body_keys=("spec", "masterSpec", "masterSpecSameAsWorker"),
    can_suspend=True,
    completes=True,
)

DISTRIBUTED_INFERENCE = Kind(
    name="DistributedInference",
    api_path="/api/v1/workloads/distributed-inferences",
    body_keys=("spec",),
    updatable_paths=frozenset({"spec.replicas"}),
)

TRAINING = Kind(
    name="Training",
    api_path="/api/v1/workloads/trainings",
    body_keys=("spec",),
    can_suspend=True,
    completes=True,
)

WORKSPACE = Kind(
    name="Workspace",
    api_path="/api/v1/workloads/workspaces",
    body_keys=("spec",),
    can_suspend=True,
)

INFERENCE = Kind(
    name="Inference",
    api_path="/api/v1/workloads/inferences",
    body_keys=("spec",),
    # InferenceUpdateSpec (CONTRACT.md §4): each top-level field is sent whole.
    updatable_paths=frozenset(f"spec.{key}" for key in (
        "args", "category", "command", "compute", "createHomeDir", "environmentVariables",
        "image", "imagePullPolicy", "imagePullSecrets", "nodeAffinityRequired", "nodePools",
        "nodeType", "podAffinity", "preemptibility", "priorityClass", "probes", "workingDir",
        "autoscaling", "servingConfiguration")),
)


def under(path: str, prefix: str) -> bool:
    """True when dotted `path` is `prefix` or lies under it: `prefix.member` or
    `prefix[item key]` (the path syntax of `plans.FieldChange.path`)."""
    return path == prefix or (path.startswith(prefix) and path[len(prefix)] in ".[")


def under_any(path: str, prefixes: Iterable[str]) -> bool:
    """True when dotted `path` is at or under one of `prefixes`."""
    return any(under(path, p) for p in prefixes)


KINDS: dict[str, Kind] = {k.name: k for k in (
    DISTRIBUTED_TRAINING, DISTRIBUTED_INFERENCE, TRAINING, WORKSPACE, INFERENCE)}


def get(name: str) -> Kind:
    return KINDS[name]


def spelled(name: str, *, cutoff: float = 0.6) -> tuple[str | None, str | None]:
    """(the kind `name` spells in any case, None), or (None, the closest kind name or
    None): for flags and specs that name a kind, and their did-you-mean."""
    import difflib

    by_lower = {k.lower(): k for k in KINDS}
    if name.lower() in by_lower:
        return by_lower[name.lower()], None
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=cutoff)
    return None, by_lower[close[0]] if close else None


def address(kind: str, project_id: str, name: str) -> str:
    """A workload's identity: `<kind>/<projectId>/<name>`."""
    return f"{kind}/{project_id}/{name}"


def parse_address(addr: str) -> tuple[str, str, str]:
    """Split an address into (kind, projectId, name); ValueError when malformed."""
    parts = addr.split("/")
    if len(parts) != 3 or not all(parts) or parts[0] not in KINDS:
        raise ValueError(
            f"invalid address {addr!r}: expected <kind>/<projectId>/<name> with kind one of "
            + ", ".join(sorted(KINDS)))
    return parts[0], parts[1], parts[2]


# --- list identity (CONTRACT.md §6) -------------------------------------------------
#
# Arrays of objects compare as maps from an item key to the item, so reordering YAML is
# no change. The key is chosen by the array's own field name (the last path segment),
# which is the same in every kind and every container (spec, masterSpec, leader, worker).

ORDERED_LISTS = frozenset({"nodePools"})  # compare as a whole, order matters
SET_LISTS = frozenset({"capabilities", "authorizedUsers", "authorizedGroups", "values"})

_STORAGE_TARGET = {
    "configMapVolume": "mountPath", "secretVolume": "mountPath", "hostPath": "mountPath",
    "nfs": "mountPath", "emptyDirVolume": "path", "git": "path", "pvc": "path", "s3": "path",
}


def item_key(field: str, item: dict) -> str | None:
    """The identity of `item` within the array named `field`, or None when that array
    has no item identity (compare it as a whole value)."""
    if not isinstance(item, dict):
        return None
    if field in ("environmentVariables", "labels", "annotations", "imagePullSecrets"):
        return _s(item.get("name"))
    if field == "extendedResources":
        return _s(item.get("resource"))
    if field in ("ports", "exposedUrls"):
        return _s(item.get("container"))
    if field == "relatedUrls":
        return f"{item.get('type')}:{item.get('url')}"
    if field == "tolerations":
        if item.get("name"):
            return str(item["name"])
        return ":".join(str(item.get(k) or "") for k in ("key", "operator", "value", "effect"))
    if field in _STORAGE_TARGET:
        return _s(item.get("name") or item.get(_STORAGE_TARGET[field]))
    if field == "dataVolume":
        return f"{item.get('id')}:{item.get('mountPath')}"
    if field == "addedAttrValues":
        return _s(item.get("key"))
    return None


def _s(v) -> str | None:
    return None if v is None else str(v)
