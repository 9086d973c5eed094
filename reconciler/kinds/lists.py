"""List identity, shared by every kind: which lists compare as sets, which in order, and
the key of an item in a keyed list (CONTRACT.md §6), Kubernetes' strategic-merge keys of a
manifest's lists among them.

Callers: the diff (walking lists by key), the kinds' server values (aligning defaults in
keyed items), the manifests family (quantities and pod templates), masking and render.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


# --- strategic merge keys -------------------------------------------------------------

NAME_KEYED = frozenset({"containers", "initContainers", "ephemeralContainers", "env",
                        "volumes", "volumeMounts", "volumeDevices", "imagePullSecrets",
                        "workerGroupSpecs", "hostAliases"})


def k8s_item_key(field: str, item: Mapping) -> str | None:
    """A Kubernetes list item's strategic-merge key in the list named `field`, or None."""
    if field in NAME_KEYED and item.get("name") is not None:
        return str(item["name"])
    if field in ("ports",) and item.get("containerPort") is not None:
        return str(item["containerPort"])
    if field == "workerGroupSpecs" and item.get("groupName") is not None:
        return str(item["groupName"])
    return None


def item_key_any(item: Any) -> str | None:
    """A list item's key by its own members (for walks that do not know the field)."""
    if not isinstance(item, dict):
        return None
    for k in ("name", "groupName", "containerPort"):
        if item.get(k) is not None:
            return f"{k}={item[k]}"
    return None


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
    if field in NAME_KEYED or (field == "ports" and "containerPort" in item):
        return k8s_item_key(field, item)
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
