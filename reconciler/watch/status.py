"""What a watch cycle knows, as plain data: the contract between the loop and its readers.

The loop (operations' watch command) builds one `Snapshot` after every cycle and hands
it to a `StatusBoard`; the HTTP endpoint (metrics, probes, /api/status, the page) and
the alerts read the board and never compute a plan. Nothing here does I/O; masking is
done before a value reaches a snapshot (a reason or an error is already safe to show).

Words (docs/watch.md has the tables):
- health, from the live phase and kind: Healthy, Progressing, Suspended, Degraded,
  Missing;
- sync, from the plan and the last action: Synced, OutOfSync (the spec changed),
  Drifted (live moved away from what was applied), Healing (an action undoing drift is
  under way), Failed (the last action failed; `error` says why).
Callers: operations (the watch loop), watch's HTTP endpoint and notifier, tests.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field, replace

HEALTHY = "Healthy"
PROGRESSING = "Progressing"
SUSPENDED = "Suspended"
DEGRADED = "Degraded"
MISSING = "Missing"
HEALTHS = (HEALTHY, PROGRESSING, SUSPENDED, DEGRADED, MISSING)

SYNCED = "Synced"
OUT_OF_SYNC = "OutOfSync"
DRIFTED = "Drifted"
HEALING = "Healing"
FAILED = "Failed"
SYNCS = (SYNCED, OUT_OF_SYNC, DRIFTED, HEALING, FAILED)

log = logging.getLogger(__name__)

REPORT = "report"  # the modes (reconciler.watch.modes: what each one performs)
HEAL = "heal"
SYNC = "sync"
MODES = (REPORT, HEAL, SYNC)

ACTIVE = "active"
STANDBY = "standby"


@dataclass(frozen=True)
class WorkloadStatus:
    address: str
    kind: str
    project: str  # the project's id
    name: str
    sync: str  # one of SYNCS
    health: str  # one of HEALTHS
    phase: str | None = None  # the live actualPhase, None when missing
    gpus: str | None = None  # GPUs held now, as the plan renders them ("8", "2..6")
    reason: str | None = None  # why it is not Synced/Healthy, or what last changed it
    error: str | None = None  # the last action's error (masked)
    changed_at: float | None = None  # when sync or health last changed (epoch seconds)
    # What this cycle did, for the alerts (reconciler.watch.events) and the page:
    acted: str | None = None  # this cycle's action, "<action>/<ok|failed|skipped|deferred>"
    # This cycle's change for it undoes drift only (live moved, the spec did not), whether
    # or not it was healed: tells a heal's Healing/Failed from an apply's in sync mode.
    drift_found: bool = False
    # What held back this cycle's action: "policy <rules>", "preventDestroy",
    # "sync without --prune" or "--max-actions N" (watch.modes).
    blocked_by: str | None = None


@dataclass(frozen=True)
class ProjectStatus:
    project: str  # id
    name: str | None
    gpus_held: float
    gpus_planned: float
    quota: float | None  # None: unknown (the read failed; `quota_why` says why)
    quota_why: str | None = None


@dataclass(frozen=True)
class CycleSummary:
    number: int
    started_at: float
    duration_s: float
    result: str  # "ok", "failed", "standby"
    error: str | None = None  # masked, when failed
    # HTTP requests the cycle sent to the API by answer ("200", "429", ...; "error": none
    # came), every attempt and token request counted (the difference of the client's
    # RunaiClient.requests_by_status across the cycle): /metrics' api_requests_total.
    requests_by_status: dict[str, int] = field(default_factory=dict)
    refresh: str = "auto"  # "auto" or "full"
    commit: str | None = None
    actions: dict[str, int] = field(default_factory=dict)  # "<action>/<ok|failed|skipped>"
    drift_found: int = 0
    healed: int = 0
    deferred: int = 0  # actions over --max-actions, left to the next cycle
    requests: int = 0  # HTTP requests the cycle sent (token and retries included)
    cpu_s: float = 0.0  # CPU seconds the watch process spent on the cycle


@dataclass(frozen=True)
class Snapshot:
    mode: str  # report, heal, sync
    role: str  # ACTIVE or STANDBY
    specs_dir: str
    state: str  # where the state is (a path or a masked URL with its state name)
    commit: str | None = None  # the git commit the last cycle planned at
    workloads: tuple[WorkloadStatus, ...] = ()
    projects: tuple[ProjectStatus, ...] = ()
    cycles: tuple[CycleSummary, ...] = ()  # the most recent last, a bounded number
    last_success_at: float | None = None
    interval_s: float = 60.0
    backoff_s: float = 0.0  # the wait before the next cycle after failed ones (0: none)
    failed_in_row: int = 0  # cycles failed in a row (an API outage shows here)

    @property
    def ready(self) -> bool:
        """The first cycle is done (for /readyz); a standby is ready once it has looked."""
        return bool(self.cycles)


class StatusBoard:
    """The latest snapshot, a heartbeat and a stopping flag, shared by the loop's thread
    and the HTTP endpoint's. Writers replace the snapshot whole; readers get it whole."""

    def __init__(self, snapshot: Snapshot, *, clock=time.time) -> None:
        self._lock = threading.Lock()
        self._snapshot = snapshot
        self._clock = clock
        self._beat = clock()
        self._listeners: list = []
        self.stopping = False

    def subscribe(self, listener) -> None:
        """Call `listener(snapshot)` after every publish, in the publishing thread (keep it
        quick: the metrics' counters and the notifier's queue use it, so none misses a
        cycle that a bounded `cycles` tuple dropped before anyone read it)."""
        with self._lock:
            self._listeners.append(listener)

    def publish(self, snapshot: Snapshot) -> None:
        with self._lock:
            self._snapshot = snapshot
            self._beat = self._clock()
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(snapshot)
            except Exception:  # a publisher's bug must not stop the loop
                log.exception("a listener of the status board failed")

    def beat(self) -> None:
        """The loop is alive (called between cycles while it waits or backs off)."""
        with self._lock:
            self._beat = self._clock()

    def stop(self) -> None:
        with self._lock:
            self.stopping = True

    @property
    def last_beat_at(self) -> float:
        """When a cycle last finished or the loop last beat (the board's clock)."""
        with self._lock:
            return self._beat

    def now(self) -> float:
        """The board's clock (what `alive` measures against)."""
        return self._clock()

    @property
    def snapshot(self) -> Snapshot:
        with self._lock:
            return self._snapshot

    def alive(self, *, within_intervals: float = 3.0) -> bool:
        """A cycle finished or the loop beat within a few intervals (for /healthz)."""
        with self._lock:
            limit = max(self._snapshot.interval_s * within_intervals, 10.0)
            return not self.stopping and self._clock() - self._beat <= limit

    def with_role(self, role: str) -> None:
        with self._lock:
            self._snapshot = replace(self._snapshot, role=role)
