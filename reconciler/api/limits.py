"""Adaptive concurrency for the API client: fewer requests in flight when the API says 429.

Caller: `reconciler.api.client.RunaiClient._send`, around each HTTP request. The limit
starts at the client's `max_connections` (the CLI's --parallelism). A 429 halves it
(never below 1), once per round: the other 429s answered to requests sent before the cut
do not cut again. Every other answer adds 1/limit, so a full round of successes raises
the limit by one until it is back at the maximum (additive increase, multiplicative
decrease, as TCP does). Requests waiting out a Retry-After hold no slot.
"""

from __future__ import annotations

import asyncio
import collections


class AdaptiveLimit:
    def __init__(self, maximum: int, *, minimum: int = 1):
        if maximum < 1 or not 1 <= minimum <= maximum:
            raise ValueError("need 1 <= minimum <= maximum")
        self.maximum, self.minimum = maximum, minimum
        self.limit = float(maximum)
        self.in_flight = 0
        self.cuts = 0  # times the limit was cut (for the log and tests)
        self._round = 0
        self._waiters: collections.deque[asyncio.Future] = collections.deque()

    async def acquire(self) -> int:
        """Wait for a slot; returns a ticket to give back to `release`."""
        while self.in_flight >= int(self.limit):
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                raise
        self.in_flight += 1
        return self._round

    def release(self, ticket: int, *, throttled: bool) -> None:
        """Give the slot back, saying whether the answer was a 429."""
        self.in_flight -= 1
        if throttled:
            if ticket == self._round:
                self._round += 1
                self.cuts += 1
                self.limit = max(float(self.minimum), self.limit / 2)
        elif self.limit < self.maximum:
            self.limit = min(float(self.maximum), self.limit + 1 / self.limit)
        free = int(self.limit) - self.in_flight
        while free > 0 and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                free -= 1
