"""Which values are never shown, and a copy of a value with them masked.

DESIGN.md: sensitive values are masked in every output format, error messages included
(the state and saved plan files keep them). Two rules: the `value` of an environment
variable whose name looks like a secret (the API's `environmentVariables`, and a
Kubernetes container's `env` inside a Manifest), and any value at or under a path the
spec lists in `lifecycle.sensitive`. Pure; callers: the renderers (`render.words`), the spec
loader's messages (`desired.loader`), and the API client (`secret_values`: what to mask
in an error the API answers to a request body).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from reconciler import kinds

MASK = "(sensitive)"
# What `export` writes in place of a sensitive value; `validate` refuses it.
SECRET_PLACEHOLDER = "<secret not exported: give a secret reference or the value>"
_SECRET_NAME = re.compile(r"secret|token|passw(or)?d|pwd|credential|key", re.IGNORECASE)
# The Run:ai API's `environmentVariables[NAME].value`, and a Kubernetes container's
# `env[NAME].value` (inside a Manifest's pod templates).
_ENV_VALUE = re.compile(r"(?:environmentVariables|(?:^|\.)env)\[(?P<name>[^\]]*)\]\.value$")
_LAST_FIELD = re.compile(r"(?:^|\.)(?P<field>[A-Za-z0-9_]+)(?:\[[^\]]*\])?$")


def secret_name(name: Any) -> bool:
    return isinstance(name, str) and bool(_SECRET_NAME.search(name))


def is_masked(path: str, sensitive: Sequence[str] = ()) -> bool:
    """True when the value at dotted `path` is never shown."""
    if path.endswith("].value") and ("environmentVariables[" in path or "env[" in path):
        m = _ENV_VALUE.search(path)
        if m and secret_name(m.group("name")):
            return True
    if not sensitive:
        return False
    return kinds.under_any(path, sensitive)


def mask_body(value: Any, sensitive: Sequence[str] = ()) -> Any:
    """A copy of a create body (or PATCH body) with its sensitive values masked."""
    return mask_at("", value, sensitive)


def mask_at(path: str, value: Any, sensitive: Sequence[str] = ()) -> Any:
    """A copy of `value`, found at dotted `path`, with what is sensitive in it masked.

    Keyed list items are named as the diff names them (`spec.environmentVariables[NAME]`),
    so a sensitive path can select one item."""
    if value is None:
        return None
    if path and is_masked(path, sensitive):
        return MASK
    if isinstance(value, dict):
        return {k: mask_at(f"{path}.{k}" if path else k, v, sensitive) for k, v in value.items()}
    if isinstance(value, list):
        m = _LAST_FIELD.search(path)
        list_field = m.group("field") if m and not path.endswith("]") else ""
        out = []
        for item in value:
            key = kinds.item_key(list_field, item) if list_field else None
            out.append(mask_at(f"{path}[{key}]" if key is not None else path, item, sensitive))
        return out
    return value


# Shorter values are not searched for in text: masking every "1" would garble a message.
MIN_SECRET_LEN = 4


def secret_values(value: Any, sensitive: Sequence[str] = ()) -> list[str]:
    """The values in a body (as text) that `mask_body` hides, to mask them in a message
    that may quote them (an API error answering that body); leaves only, longest first."""
    found: set[str] = set()

    def leaves(v: Any) -> None:
        if isinstance(v, dict):
            for x in v.values():
                leaves(x)
        elif isinstance(v, list):
            for x in v:
                leaves(x)
        elif v is not None and not isinstance(v, bool):
            text = str(v)
            if len(text) >= MIN_SECRET_LEN:
                found.add(text)

    def walk(original: Any, masked: Any) -> None:
        if masked == MASK and original != MASK:
            leaves(original)
        elif isinstance(original, dict) and isinstance(masked, dict):
            for k, v in original.items():
                walk(v, masked.get(k))
        elif isinstance(original, list) and isinstance(masked, list):
            for o, m in zip(original, masked):
                walk(o, m)

    walk(value, mask_body(value, sensitive))
    return sorted(found, key=len, reverse=True)
