"""The simulator's description of request bodies, and the validator that checks a body
against one.

Callers: `schema` describes each kind's bodies with `Obj`, `Arr`, `Map` and `Scalar` (and the
`text`, `integer`, `number` shorthands); `workloads` checks create and PATCH bodies with
`validate`, and `org`, `access` and `policies` the organisation's; `kinds` writes its
cross-field rules' findings as `Issue`s.

`validate(schema, body)` returns `Issue`s: the field path as the API names it
(`spec.numWorkers`, `spec.environmentVariables[0].name`), a message, and the
`PolicyRuleEnum` rule closest to what failed (min, max, options, required; None for
type, pattern and unknown-field errors). Unknown fields are issues, as on the real
control plane. A create body has a few hundred values: each scalar is first tried with
a quick test compiled from its description (`accepts`), and only one that fails it is
checked again to say why, and field paths are spelt out only for issues.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# --- the description language ------------------------------------------------------


@dataclass(frozen=True)
class Scalar:
    type: str  # "string" | "integer" | "number" | "boolean"
    nullable: bool = True
    enum: tuple[str, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    pattern: str | None = None
    min_length: int | None = None
    max_length: int | None = None
    format: str | None = None  # only "uuid" is checked

    def __post_init__(self) -> None:
        object.__setattr__(self, "accepts", _acceptor(self))


@dataclass(frozen=True)
class Obj:
    properties: dict[str, Any]
    required: tuple[str, ...] = ()
    nullable: bool = True


@dataclass(frozen=True)
class Arr:
    items: Any
    nullable: bool = True


@dataclass(frozen=True)
class Map:
    """An object of any keys, each value described by `values` (OpenAPI's
    `additionalProperties`)."""
    values: Any
    nullable: bool = True


ANY = ".*"
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def _acceptor(s: Scalar):
    """A quick test of a non-null value against `s`: True only when `_check_scalar` would
    find nothing wrong (False may also mean "check it properly")."""
    enum = frozenset(s.enum) if s.enum is not None else None
    lo, hi = s.minimum, s.maximum
    if s.type == "string":
        if lo is not None or hi is not None:
            return lambda v: False
        min_len, max_len = s.min_length, s.max_length
        rx = re.compile(s.pattern) if s.pattern is not None and s.pattern != ANY else None
        uuid = s.format == "uuid"

        def string(v) -> bool:
            return (v.__class__ is str
                    and (enum is None or v in enum)
                    and (min_len is None or len(v) >= min_len)
                    and (max_len is None or len(v) <= max_len)
                    and (rx is None or rx.search(v) is not None)
                    and (not uuid or _UUID.match(v) is not None))
        return string
    if enum is not None or s.pattern is not None or s.min_length is not None \
            or s.max_length is not None or s.format is not None:
        return lambda v: False
    if s.type == "boolean":
        return lambda v: v.__class__ is bool
    numbers = (int,) if s.type == "integer" else (int, float)

    def number(v) -> bool:
        return (v.__class__ in numbers
                and (lo is None or v >= lo) and (hi is None or v <= hi))
    return number


def text(pattern=None, min_length=None, max_length=None, enum=None, fmt=None, nullable=True):
    return Scalar("string", nullable, enum, pattern=pattern, min_length=min_length,
                  max_length=max_length, format=fmt)


def integer(minimum=None, maximum=None, nullable=True):
    return Scalar("integer", nullable, minimum=minimum, maximum=maximum)


def number(minimum=None, maximum=None, nullable=True):
    return Scalar("number", nullable, minimum=minimum, maximum=maximum)



def at(node: Any, path: str) -> Any:
    """The description of the dotted `path` under `node` (an `Obj`); KeyError if none."""
    for key in path.split("."):
        node = node.properties[key]
    return node



# --- the validator -----------------------------------------------------------------

_TYPE_NAMES = {"string": "a string", "integer": "an integer", "number": "a number",
               "boolean": "a boolean"}


@dataclass(frozen=True)
class Issue:
    field: str
    details: str
    rule: str | None = None

    def as_json(self) -> dict:
        out = {"field": self.field, "details": self.details}
        if self.rule is not None:
            out["rule"] = self.rule
        return out


def validate(schema: Obj, body: Any) -> list[Issue]:
    """Every problem of `body` against `schema`, in document order."""
    issues: list[Issue] = []
    _check(schema, body, "", issues)
    return issues


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _check(schema, value, path: str, out: list[Issue]) -> None:
    if value is None:
        if not schema.nullable:
            out.append(Issue(path or "body", "must not be null", "required"))
        return
    cls = schema.__class__
    if cls is Scalar:
        if not schema.accepts(value):
            _check_scalar(schema, value, path, out)
    elif cls is Obj:
        if not isinstance(value, dict):
            out.append(Issue(path or "body", "must be an object"))
            return
        required = schema.required
        for key in required:
            if value.get(key) is None:
                out.append(Issue(_join(path, key), "is required", "required"))
        properties = schema.properties
        for key, item in value.items():
            sub = properties.get(key)
            if sub is None:
                out.append(Issue(_join(path, key), "unknown field"))
            elif item is None:
                if not sub.nullable and key not in required:
                    out.append(Issue(_join(path, key), "must not be null", "required"))
            elif sub.__class__ is not Scalar or not sub.accepts(item):
                _check(sub, item, _join(path, key), out)
    elif cls is Map:
        if not isinstance(value, dict):
            out.append(Issue(path or "body", "must be an object"))
            return
        for key, item in value.items():
            _check(schema.values, item, _join(path, str(key)), out)
    else:
        if not isinstance(value, list):
            out.append(Issue(path or "body", "must be an array"))
            return
        items = schema.items
        for i, item in enumerate(value):
            if item is None or items.__class__ is not Scalar or not items.accepts(item):
                _check(items, item, f"{path}[{i}]", out)


def _check_scalar(s: Scalar, v: Any, path: str, out: list[Issue]) -> None:
    ok = {
        "string": isinstance(v, str),
        "boolean": isinstance(v, bool),
        "integer": isinstance(v, int) and not isinstance(v, bool)
        or isinstance(v, float) and v.is_integer(),
        "number": isinstance(v, (int, float)) and not isinstance(v, bool),
    }[s.type]
    if not ok:
        out.append(Issue(path, f"must be {_TYPE_NAMES[s.type]}"))
        return
    if s.enum is not None and v not in s.enum:
        out.append(Issue(path, f"must be one of {', '.join(s.enum)}", "options"))
    if s.minimum is not None and v < s.minimum:
        out.append(Issue(path, f"must be no less than {s.minimum:g}", "min"))
    if s.maximum is not None and v > s.maximum:
        out.append(Issue(path, f"must be no more than {s.maximum:g}", "max"))
    if isinstance(v, str):
        if s.min_length is not None and len(v) < s.min_length:
            out.append(Issue(path, f"must be at least {s.min_length} characters long", "min"))
        if s.max_length is not None and len(v) > s.max_length:
            out.append(Issue(path, f"must be at most {s.max_length} characters long", "max"))
        if s.pattern is not None and s.pattern != ANY and not re.search(s.pattern, v):
            out.append(Issue(path, f"must match the pattern {s.pattern}"))
        if s.format == "uuid" and not _UUID.match(v):
            out.append(Issue(path, "must be a UUID"))


__all__ = ["Scalar", "Obj", "Arr", "Map", "ANY", "text", "integer", "number", "at", "Issue",
           "validate"]
