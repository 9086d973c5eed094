"""The one bounded-concurrency reader of live workloads: at most `parallelism` reads (GETs
and list pages) in flight however many callers share it, a 404 read as "not there" (None).
A kind whose GET answer holds no phase (`Kind.phase_source`, a NIM service) has its
`actualPhase` from the workloads API: the list item's phase when the caller has it, else
`GET /api/v1/workloads/{id}` beside the GET. So health reads the same phase whether a
workload was vouched for by the list or read by id.

Callers: `reconciler.refresh.read_live` (plan, apply, drift), `operations.importing`
(`import`, `import --all`) and `operations.exporting` (`export`).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable
from typing import Any

from reconciler import diff, kinds
from reconciler.api import errors as api_errors


class Reader:
    """GETs of workloads through `client`, at most `parallelism` at once. `progress` (a
    `reconciler.progress.Progress`, or None) counts each GET answered."""

    def __init__(self, client, parallelism: int, *, progress=None):
        self.client = client
        self.progress = progress
        self._slots = asyncio.Semaphore(max(1, parallelism))
        self._strings: dict[str, str] = {}  # the answers' short strings (`share_alike`)

    async def get(self, kind: kinds.Kind, workload_id: str, *,
                  listed_phase: str | None = None,
                  like: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """The workload's GET body, None when the kind's endpoint does not know it. For a
        kind whose answer has no phase, `actualPhase` is `listed_phase` (its list item's)
        or, without one, the workloads API's. `like`: the body the state last applied,
        whose equal parts the answer takes for its own (`share_alike`)."""
        async with self._slots:
            try:
                if kind.phase_source == "workloads" and listed_phase is None:
                    body, summary = await asyncio.gather(
                        self.client.get(kind, workload_id), self._summary(workload_id))
                    listed_phase = summary.get("phase") if summary else None
                else:
                    body = await self.client.get(kind, workload_id)
            except api_errors.NotFound:
                body = None
        if body is not None and kind.phase_source == "workloads" \
                and isinstance(listed_phase, str):
            body["actualPhase"] = listed_phase
        if like is not None and body is not None:
            share_alike(body, like, self._strings)
        if self.progress is not None:
            self.progress.step()
        return body

    async def _summary(self, workload_id: str) -> dict[str, Any] | None:
        try:
            return await self.client.get_workload_summary(workload_id)
        except api_errors.NotFound:
            return None

    async def list_page(self, filter_by: list[str], offset: int) -> dict[str, Any]:
        """One page (`MAX_PAGE` items) of the workload list, in one of the reader's slots."""
        async with self._slots:
            return await self.client.list_workloads(filter_by=filter_by, offset=offset)

    async def collection(self, kind: kinds.Kind) -> list[dict[str, Any]]:
        """Every item of `kind`'s own collection (`Kind.listed` false), in one slot."""
        async with self._slots:
            return await self.client.iter_collection(kind)

    async def get_any(self, workload_id: str, candidates: Iterable[kinds.Kind]
                      ) -> tuple[kinds.Kind, dict[str, Any]] | None:
        """(kind, GET body) of the workload, asking each candidate kind's endpoint in turn
        (one slot for them all); None when none has it (another error than a 404 is
        raised)."""
        async with self._slots:
            for kind in candidates:
                try:
                    return kind, await self.client.get(kind, workload_id)
                except api_errors.NotFound:
                    continue
        return None


def share_alike(body: Any, like: Any, strings: dict[str, str] | None = None) -> None:
    """Each part of `body` (a GET answer, just decoded) equal to the part of `like` at the
    same place (the state's applied body) replaced by that part, in place: an unchanged
    workload's answer holds little of its own, not a second copy of its spec, while a
    refresh holds a fleet's answers (a plan keeps what it shows of each). Bodies are read,
    never changed in place (what changes one copies it), so sharing is safe.

    What stays the answer's own is held small too: a short string that is not the state's
    (a phase, a default the server fills in, "Always") is the first equal one `strings`
    saw (the reader's, for one refresh), and a dict of more than 8 keys is rebuilt key by
    key, which sizes it as `json` would (orjson sizes it for more keys)."""
    if type(body) is dict:
        if type(like) is not dict:
            like = _NOTHING
        for key, value in body.items():
            other = like.get(key)
            if other is not value:
                body[key] = _alike(value, other, strings)
        if len(body) > 8:
            items = list(body.items())
            body.clear()
            body.update(items)
    elif type(body) is list:
        same = type(like) is list and len(body) == len(like)
        for i, value in enumerate(body):
            other = like[i] if same else None
            if other is not value:
                body[i] = _alike(value, other, strings)


_NOTHING: dict = {}


def _alike(value: Any, other: Any, strings: dict[str, str] | None) -> Any:
    """`value` as `share_alike` holds it, where the state's body holds `other`."""
    if type(value) is type(other) and value == other and _same(value, other):
        return other
    if type(value) is str:
        if strings is not None and len(value) <= 32:
            return strings.setdefault(value, value)
    elif type(value) is dict or type(value) is list:
        share_alike(value, other, strings)
    return value


def _same(value: Any, other: Any) -> bool:
    """Whether `value` and `other`, equal and of one type, read the same: `==` holds 0.0
    and -0.0 equal, and deep in a dict or list 0 and false, 1 and 1.0 too, which
    `diff.identical` tells apart; for a float, the sign is told here."""
    if type(value) is float:
        return math.copysign(1.0, value) == math.copysign(1.0, other)
    return diff.identical(value, other)
