"""Kubernetes quantities (`20Gi`, `500m`, `1e3`) as numbers (pure, standard library only).

Callers: the spec models' limit-not-below-request rules (`desired.fields`) and GPU
memory requests (`gpus`), which the plan's parent process counts without loading the
spec models (pydantic).
"""

from __future__ import annotations

import re

_SUFFIX = {"": 1, "m": 1e-3, "u": 1e-6, "n": 1e-9, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9,
           "T": 1e12, "P": 1e15, "E": 1e18, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30,
           "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_QTY = re.compile(r"^\+?([0-9]+\.?[0-9]*|\.[0-9]+)(?:([eE][-+]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[munkKMGTPE])?)$")


def parse_quantity(text: str) -> float | None:
    """The value of a Kubernetes quantity, or None when it is not one we can compare."""
    m = _QTY.match(text)
    if not m:
        return None
    if m.group(2):
        return float(m.group(1) + m.group(2))
    return float(m.group(1)) * _SUFFIX[m.group(3) or ""]
