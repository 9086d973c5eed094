"""Query parameters of the simulator's list endpoints: `filterBy`, `limit`/`offset`,
`sortBy`/`sortOrder`, as NVIDIA's OpenAPI spells them.

Callers: `listing` (GET /api/v1/workloads) and `projects` (GET /api/v1/org-unit/projects).
A value the API would refuse is an `errors.ApiError` 400 naming the parameter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from reconciler.simulator.errors import ApiError

T = TypeVar("T")


def filters(q, pattern: re.Pattern) -> list[tuple[str, str, str]]:
    """The (field, op, value) of each comma-joined `filterBy` item; 400 for a bad one."""
    found = []
    for raw in q.getlist("filterBy"):
        for part in raw.split(","):
            m = pattern.match(part)
            if not m:
                raise ApiError(400, f"invalid filterBy item {part!r}: expected "
                                    "<field><op><value>, op one of == != <= >= =@ !@ =^ =$")
            found.append(m.groups())
    return found


def int_param(q, name: str, default: int, lo: int, hi: int | None) -> int:
    raw = q.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, f"{name} must be an integer") from None
    if value < lo or (hi is not None and value > hi):
        raise ApiError(400, f"{name} must be between {lo} and {hi}" if hi is not None
                       else f"{name} must be at least {lo}")
    return value


def match(actual: Any, op: str, value: str) -> bool:
    """Whether `actual` passes one `filterBy` comparison."""
    if actual is None:
        return op in ("!=", "!@")
    a = str(actual).lower() if isinstance(actual, bool) else str(actual)
    if op == "==":
        return a == value
    if op == "!=":
        return a != value
    if op == "=@":
        return value in a
    if op == "!@":
        return value not in a
    if op == "=^":
        return a.startswith(value)
    if op == "=$":
        return a.endswith(value)
    if isinstance(actual, (int, float)):
        try:
            num = float(value)
        except ValueError:
            return False
        return actual <= num if op == "<=" else actual >= num
    return a <= value if op == "<=" else a >= value


@dataclass(frozen=True)
class Paging:
    """`limit`, `offset` and `sortOrder` of a list request, checked (400 for a bad one)."""

    limit: int
    offset: int
    order: str
    sort_by: str | None

    @classmethod
    def of(cls, q) -> "Paging":
        limit = int_param(q, "limit", 50, 1, 500)
        offset = int_param(q, "offset", 0, 0, None)
        order = q.get("sortOrder", "asc")
        if order not in ("asc", "desc"):
            raise ApiError(400, "sortOrder must be asc or desc")
        return cls(limit, offset, order, q.get("sortBy"))

    def page(self, items: list[T], key: str, field: Callable[[T, str], Any]) -> dict:
        """`items` sorted by `sortBy` (each item's value read through `field`), in the
        order asked for, cut: {key: the page, "next": the next page's offset, if any}."""
        if self.sort_by:
            def sort_key(item: T) -> str:
                value = field(item, self.sort_by)
                return "" if value is None else str(value)
            items.sort(key=sort_key)
        if self.order == "desc":
            items.reverse()
        out: dict = {key: items[self.offset:self.offset + self.limit]}
        if self.offset + self.limit < len(items):
            out["next"] = self.offset + self.limit
        return out


__all__ = ["filters", "int_param", "match", "Paging"]
