"""Kubernetes quantities (`20Gi`, `500m`, `1e3`): their grammar, their exact value, and the
fields of the flat kinds that hold one (pure, standard library only).

The grammar is Kubernetes' own (`resource.Quantity`): a signed decimal number, then a
binary suffix (`Ki` .. `Ei`), a decimal one (`n`, `u`, `m`, none, `k`, `M` .. `E`) or a
decimal exponent (`e3`, `E-2`). `value` gives the exact value (a Fraction), None for
text that is not a quantity (`8gi`, `1.5.5Gi`, `0x10`, `NaN`, `1K`); a YAML number is a
quantity too, as Kubernetes reads one. `same` says whether two spellings are one value
(`256Gi`, `262144Mi`, `0.25Ti`).

`FIELDS` lists, from NVIDIA's OpenAPI schemas, the fields that hold a quantity in a
container of the flat kinds and of a NIM service (the `CpuMemory*`, `GpuMemory*`,
`PvcClaimSize`, `EmptyDir.sizeLimit` and `ExtendedResource.quantity` schemas), as paths
under the container (`[]`: every item of a list): the kinds registry places them in
each kind's containers (`kinds.Kind.quantities`) and the diff compares them by value.

Callers: kinds (where quantities sit), diff (by value), manifests (resources), the spec
models (`desired.fields`: grammar, limit not below request), `gpus` (GPU memory).
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

# k8s.io/apimachinery/pkg/api/resource: <signedNumber><suffix>, surrounding blanks
# trimmed as its JSON reader does.
_QUANTITY = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
                       r"(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# Past this the exponent says nothing a cluster could hold (and Fraction(10)**N is slow).
_EXPONENT_MAX = 400

# Quantity fields of a container (flat kinds), from NVIDIA's schemas.
COMPUTE_FIELDS = ("compute.cpuMemoryRequest", "compute.cpuMemoryLimit",
                  "compute.gpuMemoryRequest", "compute.gpuMemoryLimit")
FIELDS = COMPUTE_FIELDS + ("compute.extendedResources[].quantity",
                           "storage.emptyDirVolume[].sizeLimit",
                           "storage.pvc[].claimInfo.size")
# A NIM service's spec: no extendedResources, no storage; its model store's PVC.
NIM_FIELDS = COMPUTE_FIELDS + ("modelStore.pvc.claimInfo.size",)


def value(quantity: Any) -> Fraction | None:
    """The exact value of a Kubernetes quantity (text, or a YAML number), None when
    `quantity` is not one."""
    if isinstance(quantity, bool):
        return None
    if isinstance(quantity, int):
        return Fraction(quantity)
    if isinstance(quantity, float):
        return Fraction(quantity).limit_denominator(10**12) \
            if quantity == quantity and abs(quantity) != float("inf") else None
    if not isinstance(quantity, str):
        return None
    m = _QUANTITY.fullmatch(quantity.strip(" \t\n\r"))
    if not m:
        return None
    try:
        number = Fraction(m.group(1))
    except ValueError:  # past Python's 4,300 digits of an integer: no size a cluster has
        return None
    if m.group(2):
        exponent = int(m.group(2)[1:])
        if abs(exponent) > _EXPONENT_MAX:
            return None
        return number * Fraction(10) ** exponent
    suffix = m.group(3) or ""
    if suffix in _BINARY:
        return number * 1024 ** _BINARY[suffix]
    return number * Fraction(10) ** _DECIMAL[suffix]


def is_quantity(text: Any) -> bool:
    """Whether `text` is a quantity by Kubernetes' grammar."""
    return value(text) is not None


def same(a: Any, b: Any) -> bool:
    """Whether `a` and `b` are two spellings of one quantity (`1Gi` and `1024Mi`); False
    when either is not a quantity."""
    va = value(a)
    return va is not None and va == value(b)


def parse_quantity(text: str) -> float | None:
    """The value of a Kubernetes quantity as a float, or None when it is not one."""
    v = value(text)
    try:
        return None if v is None else float(v)
    except OverflowError:  # beyond a float: nothing a cluster holds
        return None
