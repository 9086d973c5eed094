"""The registry of Run:ai resource types: one entry (`Kind`) per type, holding everything
the engine knows about it, facts and behaviour.

The entries come from their families, one module each: `flat` (the v1 workloads:
Training, Workspace, Inference, DistributedTraining, DistributedInference), `nim` (the v2
NIM services and their metadata envelope), `manifests` (Workloads V2: a Kubernetes
manifest as a workload), `org` (the organisation: Department, Project), `access`
(AccessRule: who may do what where) and `workload_policies` (Run:ai's own Policy, not this
tool's `--policy` rules). `entry` defines what an entry is: its facts, capabilities and
the behaviour objects it holds (`Codec`, `Hooks`); `lists` the list identity every kind
shares. The engine asks an entry (`kinds.get(name).<behaviour>`) and never names a type;
`register` adds one (a new type costs its entry here and its spec model in
`reconciler.desired.models`: docs/kinds.md).

Also addresses (`<kind>/<projectId>/<name>`), a kind spelled in any case, the kind of a
list item's `type`, and `QUANTITY_FIELDS`. Callers: every engine layer above; pure (a
bottom layer of the import contracts).
"""

from __future__ import annotations

from reconciler.kinds import access, flat, manifests, nim, org, pods
from reconciler.kinds.access import ACCESS_RULE
# Run:ai's own workload policies (not this tool's --policy rules)
from reconciler.kinds import workload_policies
from reconciler.kinds.entry import (
    BODY, FLAT, ORGANISATION_FOLDER, PLAIN, TYPE_FILLED, Codec, Hooks, Kind, Quota, Reference, ServerValue, Test,
    containers, fixed,
    generated, image_pull_policy, image_tag, labels, list_type_key, missing_facts,
    new_pvc_claim, same, under, under_any, workload_type)
from reconciler.kinds.flat import (
    DISTRIBUTED_INFERENCE, DISTRIBUTED_TRAINING, INFERENCE, TRAINING, WORKSPACE)
from reconciler.kinds.lists import (
    NAME_KEYED, ORDERED_LISTS, SET_LISTS, item_key, item_key_any, k8s_item_key)
from reconciler.kinds.manifests import MANIFEST
from reconciler.kinds.nim import NIM_SERVICE
from reconciler.kinds.org import DEPARTMENT, PROJECT
from reconciler.kinds.workload_policies import POLICY

__all__ = [
    # the entry, its behaviour objects and the helpers entries are written with
    "Kind", "Codec", "Hooks", "Quota", "Reference", "FLAT", "PLAIN", "ServerValue", "Test",
    "fixed", "generated",
    "same", "image_tag", "image_pull_policy", "new_pvc_claim", "workload_type", "BODY",
    "TYPE_FILLED", "missing_facts", "containers", "labels", "under", "under_any",
    "list_type_key", "pods", "ORGANISATION_FOLDER",
    # list identity
    "ORDERED_LISTS", "SET_LISTS", "NAME_KEYED", "item_key", "item_key_any", "k8s_item_key",
    # the families and their entries
    "flat", "nim", "manifests", "org", "DISTRIBUTED_TRAINING", "DISTRIBUTED_INFERENCE", "TRAINING",
    "WORKSPACE", "INFERENCE", "NIM_SERVICE", "MANIFEST", "DEPARTMENT", "PROJECT",
    "access", "ACCESS_RULE",
    "workload_policies", "POLICY",
    # the registry
    "KINDS", "QUANTITY_FIELDS", "register", "unregister", "get", "label", "of_list_type",
    "spelled", "address", "parse_address",
]

KINDS: dict[str, Kind] = {k.name: k for k in (*flat.KINDS, nim.NIM_SERVICE,
                                              manifests.MANIFEST, *org.KINDS,
                                              *access.KINDS, *workload_policies.KINDS)}


def _quantity_fields() -> frozenset[str]:
    # The names of the fields that hold a quantity (the last segment of every kind's
    # `quantities` paths, and a manifest's emptyDir `sizeLimit`): the diff compares two of
    # their values by value when both are quantities (`quantities.same`), wherever a body
    # holds them. A manifest's `resources` are aligned apart (`manifests.align_quantities`).
    return frozenset(path.rsplit(".", 1)[-1] for k in KINDS.values()
                     for paths in k.quantities.values() for path in paths) | {"sizeLimit"}


QUANTITY_FIELDS = _quantity_fields()


def register(kind: Kind) -> Kind:
    """Add `kind` to the registry (after checking its facts: `missing_facts`); returns it.
    ValueError when its name is taken or a fact is missing."""
    global QUANTITY_FIELDS
    if kind.name in KINDS:
        raise ValueError(f"a kind named {kind.name} is registered already")
    missing = missing_facts(kind)
    if missing:
        raise ValueError(f"{kind.name} lacks " + ", ".join(missing))
    KINDS[kind.name] = kind
    QUANTITY_FIELDS = _quantity_fields()
    return kind


def unregister(name: str) -> None:
    """Take the kind named `name` out of the registry (a test's throwaway kind)."""
    global QUANTITY_FIELDS
    del KINDS[name]
    QUANTITY_FIELDS = _quantity_fields()


def get(name: str) -> Kind:
    return KINDS[name]


def of_list_type(list_type: object) -> Kind | None:
    """The kind whose `list_types` holds a list item's `type`, or None when no kind knows
    that spelling (then the caller asks each kind's endpoint)."""
    if not isinstance(list_type, str):
        return None
    key = list_type_key(list_type)
    return next((k for k in KINDS.values() if key in k.list_types), None)


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




def label(kind: str, *bodies: object) -> str | None:
    """What every output shows beside an address of `kind` (`Kind.label`: a Manifest's own
    kind); None for a kind that shows nothing, or one the registry does not hold."""
    entry = KINDS.get(kind)
    return entry.label(*bodies) if entry is not None else None
