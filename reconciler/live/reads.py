"""The one bounded-concurrency reader of live workloads: at most `parallelism` GETs in
flight however many callers share it, a 404 read as "not there" (None).

Callers: `reconciler.refresh.read_live` (plan, apply, drift), `operations.importing`
(`import`, `import --all`) and `operations.exporting` (`export`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from reconciler import kinds
from reconciler.api import errors as api_errors


class Reader:
    """GETs of workloads through `client`, at most `parallelism` at once. `progress` (a
    `reconciler.progress.Progress`, or None) counts each GET answered."""

    def __init__(self, client, parallelism: int, *, progress=None):
        self.client = client
        self.progress = progress
        self._slots = asyncio.Semaphore(max(1, parallelism))

    async def get(self, kind: kinds.Kind, workload_id: str) -> dict[str, Any] | None:
        """The workload's GET body, None when the kind's endpoint does not know it."""
        async with self._slots:
            try:
                body = await self.client.get(kind, workload_id)
            except api_errors.NotFound:
                body = None
        if self.progress is not None:
            self.progress.step()
        return body

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
