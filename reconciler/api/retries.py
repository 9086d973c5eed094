"""When to retry an API call and how long to wait: pure functions, no I/O.

Called by `reconciler.api.client.RunaiClient._send` after each failed attempt.

A write (POST, PATCH, DELETE) that failed with 429 or 503, or before the request left
(connection refused), was not performed and is retried like a read. A 500, 502, 504,
a timeout or a dropped connection after the request was sent leaves it *ambiguous*:
the write may have been committed. Which writes may then be re-sent is the client's
decision (PATCH, DELETE, suspend and resume are idempotent; create is not).

A refused connection (nothing listens at the URL's port) is retried a few times quickly,
then given up: a control plane restarting listens again within a second, and a wrong
URL never will, so it must not cost the full retry budget.

`Budget` is the command's one retry budget (`--timeout`), shared by every request of one
client: docs/api-and-retries.md says what it bounds and why.
"""

from __future__ import annotations

import email.utils
import random

import httpx

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
# Statuses that say the server did not perform the request.
NOT_PERFORMED_STATUSES = frozenset({429, 503})

# Transport errors raised before any byte of the request was sent.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)

BASE_DELAY_S = 0.5
MAX_DELAY_S = 20.0

REFUSED_ATTEMPTS = 3  # attempts in all at a refused connection
REFUSED_DELAY_S = 0.2  # before the 2nd attempt; doubled before each next one


class Budget:
    """How long one command keeps trying while the API fails, shared by all its requests.

    The clock starts when a request that then fails was sent (`failed`), runs while no
    request gets an answer other than a retryable failure, and stops at the first such
    answer (`answered`). A request's deadline is `seconds` after the earlier of its own
    first send and that start; no attempt is sent, and no attempt waits for an answer,
    past it. Once a request has given up at its deadline the budget is `spent` for good:
    every later request fails at once, without being sent. Pure: the caller passes the
    times (monotonic seconds).
    """

    def __init__(self, seconds: float):
        if not seconds > 0:
            raise ValueError("the retry budget must be positive")
        self.seconds = seconds
        self.failing_since: float | None = None
        self.spent: BaseException | None = None  # the failure that spent it
        self.noticed = False  # the first retry has been said on stderr

    def deadline(self, started: float) -> float:
        """The deadline of a request whose first attempt was sent at `started`."""
        since = started if self.failing_since is None else min(started, self.failing_since)
        return since + self.seconds

    def waited(self, started: float, now: float) -> float:
        """Seconds the command has been waiting, for a request first sent at `started`."""
        since = started if self.failing_since is None else min(started, self.failing_since)
        return max(0.0, now - since)

    def failed(self, sent: float) -> None:
        """An attempt sent at `sent` failed in a way a retry may cure."""
        if self.failing_since is None or sent < self.failing_since:
            self.failing_since = sent

    def answered(self) -> None:
        """The API answered (a success, or a refusal retrying cannot change)."""
        self.failing_since = None

    def spend(self, failure: BaseException) -> None:
        if self.spent is None:
            self.spent = failure


def is_ambiguous_status(status: int) -> bool:
    """A write answered with `status` may have been performed."""
    return status in RETRY_STATUSES and status not in NOT_PERFORMED_STATUSES


def is_ambiguous_transport(exc: httpx.TransportError) -> bool:
    """A write that failed with `exc` may have reached the server."""
    return not isinstance(exc, _NOT_SENT)


def is_retryable_transport(exc: httpx.TransportError) -> bool:
    """Network failures are worth another try; a malformed URL or protocol is not."""
    return not isinstance(exc, (httpx.UnsupportedProtocol, httpx.LocalProtocolError))


def is_refused(exc: BaseException) -> bool:
    """The connection was refused: `exc` or what it wraps is a ConnectionRefusedError."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def refused_delay(attempt: int) -> float:
    """The wait after the `attempt`-th refused connection (counting from 1)."""
    return REFUSED_DELAY_S * (2 ** (attempt - 1))


def backoff(attempt: int, rng: random.Random, *, base: float = BASE_DELAY_S,
            cap: float = MAX_DELAY_S) -> float:
    """Exponential backoff with full jitter: uniform in [0, min(cap, base * 2**(attempt-1))].

    `attempt` counts from 1 (the delay after the first failure).
    """
    return rng.uniform(0.0, min(cap, base * (2 ** (attempt - 1))))


def retry_after(value: str | None, *, now: float) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date), or None.

    `now` is the wall-clock time (epoch seconds), used for the date form.
    """
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - now)
