"""Values checked as the control plane would check them, before anything is sent: image
references (every kind) and a manifest's resources (the Manifest kind).

- `is_image_reference`: the OCI distribution reference grammar
  (`[registry[:port]/]repository[:tag][@algorithm:hex]`), which the kubelet's image pull
  applies: `busybox:1\\nFOO bar` is no image.
- `manifest_problems`: every `resources.requests` and `resources.limits` of a manifest
  (every container and init container of every pod template, wherever it sits) and
  every `emptyDir.sizeLimit`, by Kubernetes' own rules (`ValidateResourceRequirements`):
  a quantity by its grammar (`quantities`), not negative; an extended resource
  (`nvidia.com/gpu`, any name with a domain outside `kubernetes.io`) a whole number, its
  request equal to its limit; any other request not above its limit. And each
  container's `image` an image reference.

Callers: the spec models (`desired.fields`: images of the flat kinds and NIM services)
and the loader (`manifest_problems`, with the file and line of each path).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

from reconciler import quantities

# github.com/distribution/reference, regexp.go (its names).
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])"
_DOMAIN = rf"{_HOST}(?::[0-9]+)?"
_NAME = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(rf"({_NAME})(?::{_TAG})?(?:@{_DIGEST})?", re.ASCII)
NAME_MAX = 255  # the repository name's length, registry included

IMAGE_HINT = ("must be an image reference such as nvcr.io/nvidia/pytorch:24.05-py3 "
              "([registry/]repository[:tag][@digest])")
QUANTITY_HINT = "must be a Kubernetes quantity such as 500m, 16Gi or 2"


def is_image_reference(text: Any) -> bool:
    """Whether `text` is an image reference by the OCI distribution grammar."""
    if not isinstance(text, str):
        return False
    m = _REFERENCE.fullmatch(text)
    return m is not None and len(m.group(1)) <= NAME_MAX


def is_extended_resource(name: str) -> bool:
    """A resource name outside Kubernetes' own (`cpu`, `memory`, `kubernetes.io/...`):
    a device plugin's count, such as `nvidia.com/gpu`."""
    return "/" in name and not name.startswith(("kubernetes.io/", "requests."))


# (path under the manifest, message start, the value it is about).
Problem = tuple[tuple, str, Any]

_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def manifest_problems(manifest: Any) -> list[Problem]:
    """What Kubernetes would refuse in `manifest`'s resources, sizes and images, each
    (path under the manifest, what it must be, the value found), in the manifest's order."""
    return list(_walk(manifest, ()))


def _walk(node: Any, path: tuple) -> Iterator[Problem]:
    if isinstance(node, dict):
        for key, value in node.items():
            here = (*path, key)
            if key == "resources" and isinstance(value, dict):
                yield from _resources(value, here)
            if key == "emptyDir" and isinstance(value, dict) and "sizeLimit" in value:
                yield from _quantity(value["sizeLimit"], (*here, "sizeLimit"))
            if key in _CONTAINER_LISTS and isinstance(value, list):
                for i, c in enumerate(value):
                    if isinstance(c, dict) and "image" in c and not is_image_reference(c["image"]):
                        yield (*here, i, "image"), IMAGE_HINT, c["image"]
            yield from _walk(value, here)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, (*path, i))


def _quantity(value: Any, path: tuple) -> Iterator[Problem]:
    q = quantities.value(value)
    if q is None:
        yield path, QUANTITY_HINT, value
    elif q < 0:
        yield path, "must be >= 0", value


def _resources(resources: dict, path: tuple) -> Iterator[Problem]:
    read: dict[str, dict[str, Fraction]] = {}
    for part, amounts in resources.items():  # in the order written
        if part not in ("limits", "requests") or not isinstance(amounts, dict):
            continue
        read[part] = {}
        for name, value in amounts.items():
            at = (*path, part, name)
            bad = list(_quantity(value, at))
            if bad:
                yield from bad
                continue
            q = quantities.value(value)
            if is_extended_resource(str(name)) and q.denominator != 1:
                yield at, (f"must be a whole number: {name} counts devices (a fraction of a "
                           "GPU is Run:ai's GPU fraction, not a Kubernetes quantity)"), value
                continue
            read[part][name] = q
    limits, requests = read.get("limits", {}), read.get("requests", {})
    for name, q in requests.items():
        limit = limits.get(name)
        if limit is None:
            continue
        if is_extended_resource(str(name)) and q != limit:
            yield ((*path, "requests", name), f"must be equal to its limit (limits.{name})",
                   resources["requests"][name])
        elif q > limit:
            yield ((*path, "requests", name),
                   f"must be less than or equal to its limit (limits.{name})",
                   resources["requests"][name])
