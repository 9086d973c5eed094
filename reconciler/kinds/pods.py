"""Pod accounting a kind's entry holds (`Kind.pods`): the groups of pods a body makes,
each as (fewest pods, most pods, their `compute`), and the reading of the counts a body
holds, which never takes a value it cannot count for 0.

The families hold their own rules (`flat`, `nim`, `manifests`); `reconciler.gpus` turns
the groups into GPUs. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

# A rule gives the pod groups of a body: (fewest pods, most pods, their compute).
PodGroups = list[tuple[float, float, Mapping[str, Any] | None]]
Rule = Callable[[Mapping[str, Any]], PodGroups]


def obj(x: Any) -> Mapping[str, Any]:
    return x if isinstance(x, Mapping) else {}


def compute(container: Any) -> Mapping[str, Any] | None:
    """The `compute` of a container-shaped object (None when it has none)."""
    return obj(container).get("compute")


# No count or size a body holds goes past it (a checked spec's stay far below): a body
# with NaN, an infinity or a 400-digit integer holds a value that cannot be counted, so
# that products and sums stay finite numbers (JSON has no NaN).
_LARGEST = 2.0 ** 53


def pods(x: Any, default: float) -> float:
    """A count of pods (replicas, workers) of a body: `default` when absent, NaN when it
    cannot be read (`count`), which makes every product with it NaN: not counted."""
    n = count(x, default)
    return math.nan if n is None else n


def count(x: Any, default: float, *, whole: bool = True) -> float | None:
    """`x` as a count (devices, pods: `whole`) or a portion: `default` when absent; None
    when it is there but not one (text, a boolean, negative, a fraction of a device, not
    finite or past +-2**53): a value that cannot be counted, never read as 0."""
    if x is None:
        return default
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 <= x <= _LARGEST:
        return None  # NaN fails the comparison
    if whole and x != int(x):
        return None
    return x


def none(body: Mapping[str, Any]) -> PodGroups:
    """No pods: a type that runs nothing (and so holds no GPUs), not a workload."""
    return []


def single(body: Mapping[str, Any]) -> PodGroups:
    """One pod of `spec.compute` (a Training, a Workspace)."""
    return [(1, 1, compute(body.get("spec")))]
