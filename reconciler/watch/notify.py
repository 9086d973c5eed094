"""`--notify URL`: the watch's alerts POSTed as JSON, in the background.

`Notifier(urls).observe(snapshot)` asks `events.between` what changed since the snapshot
it saw last and queues each event for every URL; it never waits on the network, so a
slow or dead receiver never delays a cycle. One sender thread per URL posts its queue
in order: an answer 2xx is delivered, a 5xx or 429 or no answer is retried after an
exponential backoff up to a number of attempts, another 4xx is given up at once (the
receiver refuses it; retrying will not help). A queue is bounded: when a receiver has
been down long enough to fill it, the oldest events are dropped and counted.
`close(timeout)` lets the senders drain for a moment at shutdown and returns how many
events were left undelivered.

Every string of an event comes from the snapshot, which the loop has masked; a `redact`
function given here is applied to each string as well. A URL is only ever shown as its
scheme and host (a Slack webhook's path is its secret). The document sent is in
docs/watch.md ("Alerts"). Callers: the watch loop (operations), tests.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any

import httpx
import orjson

from reconciler import errors
from reconciler.watch import events as ev
from reconciler.watch import status as st

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


def shown(url: str) -> str:
    """How a --notify URL is named in logs and errors: its scheme and host only."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or "?"
    if ":" in host:
        host = f"[{host}]"
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    return f"{parts.scheme}://{host}{port}/…" if parts.path not in ("", "/") else \
        f"{parts.scheme}://{host}{port}"


def check_url(url: str) -> str:
    """The URL if a --notify can post to it; else one clear error (without its path)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise errors.ReconcileError(
            f"--notify {shown(url) if parts.hostname else '(the URL given)'}: "
            "give an http:// or https:// URL with a host")
    if parts.username or parts.password:
        raise errors.ReconcileError(
            f"--notify {shown(url)}: a URL with credentials before its host is refused "
            "(put a webhook's token in its path, as Slack does)")
    return url


class Notifier:
    """Computes the events of each snapshot and posts them to every URL in the background."""

    def __init__(self, urls: Iterable[str], *, timeout_s: float = 5.0, attempts: int = 6,
                 backoff_s: float = 1.0, max_backoff_s: float = 60.0,
                 queue_size: int = 1000, redact: Callable[[str], str] | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        self._lock = threading.Lock()
        self._previous: st.Snapshot | None = None
        self._redact = redact
        self._senders = [
            _Sender(check_url(url), timeout_s=timeout_s, attempts=max(1, attempts),
                    backoff_s=backoff_s, max_backoff_s=max_backoff_s,
                    queue_size=queue_size, transport=transport)
            for url in dict.fromkeys(urls)]
        for sender in self._senders:
            sender.start()

    def observe(self, snapshot: st.Snapshot) -> list[ev.Event]:
        """Queue the events of `snapshot` (against the one observed before); returns them.
        Quick and never blocking: fit to be a `StatusBoard.subscribe` listener."""
        with self._lock:
            found = ev.between(self._previous, snapshot)
            self._previous = snapshot
        for event in found:
            self.send(event)
        return found

    def send(self, event: ev.Event) -> None:
        payload = orjson.dumps(_redacted(event.as_json(), self._redact))
        for sender in self._senders:
            sender.put(payload, event.event)

    @property
    def delivered(self) -> int:
        return sum(s.delivered for s in self._senders)

    @property
    def undelivered(self) -> int:
        """Given up, dropped from a full queue, or still waiting."""
        return sum(s.given_up + s.dropped + s.pending for s in self._senders)

    def close(self, timeout: float = 5.0) -> int:
        """Let the senders drain for up to `timeout` seconds; returns the events left
        undelivered (given up, dropped, or still queued when time ran out)."""
        deadline = time.monotonic() + max(0.0, timeout)
        for sender in self._senders:
            sender.close_by(deadline)
        for sender in self._senders:
            sender.join(max(0.0, deadline - time.monotonic()))
        left = self.undelivered
        if left:
            log.warning("alerts: %d event(s) not delivered at shutdown", left)
        return left


class _Sender(threading.Thread):
    """One URL's queue and the thread that posts it, in order, with retries."""

    def __init__(self, url: str, *, timeout_s: float, attempts: int, backoff_s: float,
                 max_backoff_s: float, queue_size: int,
                 transport: httpx.BaseTransport | None) -> None:
        super().__init__(name=f"notify {shown(url)}", daemon=True)
        self.url = url
        self._attempts = attempts
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._queue: collections.deque[tuple[bytes, str]] = collections.deque()
        self._queue_size = max(1, queue_size)
        self._cond = threading.Condition()
        self._deadline: float | None = None  # set by close_by: drain until then
        self._sending = False
        self._closing = threading.Event()
        self.delivered = 0
        self.given_up = 0
        self.dropped = 0
        self._http = httpx.Client(timeout=timeout_s, transport=transport,
                                  headers={"Content-Type": "application/json",
                                           "User-Agent": "runai-reconcile-watch"})

    @property
    def pending(self) -> int:
        with self._cond:
            return len(self._queue) + (1 if self._sending else 0)

    def put(self, payload: bytes, word: str) -> None:
        with self._cond:
            if self._deadline is not None:
                self.dropped += 1
                return
            if len(self._queue) >= self._queue_size:
                _, oldest = self._queue.popleft()
                self.dropped += 1
                log.warning("alerts to %s: queue full, dropped a %s event", shown(self.url),
                            oldest)
            self._queue.append((payload, word))
            self._cond.notify()

    def close_by(self, deadline: float) -> None:
        with self._cond:
            self._deadline = deadline
            self._cond.notify_all()
        self._closing.set()

    def _time_left(self) -> float | None:
        return None if self._deadline is None else self._deadline - time.monotonic()

    def run(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._queue and self._deadline is None:
                        self._cond.wait()
                    left = self._time_left()
                    if not self._queue or (left is not None and left <= 0):
                        return
                    payload, word = self._queue.popleft()
                    self._sending = True
                try:
                    if self._deliver(payload, word):
                        self.delivered += 1
                    else:
                        self.given_up += 1
                finally:
                    with self._cond:
                        self._sending = False
        finally:
            self._http.close()

    def _deliver(self, payload: bytes, word: str) -> bool:
        for attempt in range(1, self._attempts + 1):
            why = self._post(payload)
            if why is None:
                return True
            if why.startswith("refused"):
                log.warning("alerts to %s: %s event %s; not retried", shown(self.url), word, why)
                return False
            wait = min(self._backoff_s * 2 ** (attempt - 1), self._max_backoff_s)
            left = self._time_left()
            if attempt == self._attempts or (left is not None and left <= wait):
                log.warning("alerts to %s: %s event not delivered after %d attempt(s): %s",
                            shown(self.url), word, attempt, why)
                return False
            log.info("alerts to %s: %s; retrying in %.1f s", shown(self.url), why, wait)
            started = time.monotonic()
            if self._closing.wait(wait):  # closing: finish the wait only if time allows
                rest = wait - (time.monotonic() - started)
                left = self._time_left()
                if rest > 0 and left is not None and left <= rest:
                    log.warning("alerts to %s: %s event not delivered by shutdown: %s",
                                shown(self.url), word, why)
                    return False
                time.sleep(max(0.0, rest))
        return False

    def _post(self, payload: bytes) -> str | None:
        """None when delivered; else why not ("refused ..." when not worth retrying)."""
        try:
            resp = self._http.post(self.url, content=payload)
        except httpx.HTTPError as exc:
            return f"no answer ({type(exc).__name__})"
        if resp.status_code < 300:
            return None
        if resp.status_code in RETRY_STATUSES:
            return f"answered {resp.status_code}"
        return f"refused: answered {resp.status_code}"


def _redacted(value: Any, redact: Callable[[str], str] | None) -> Any:
    if redact is None:
        return value
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v, redact) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v, redact) for v in value]
    return value
