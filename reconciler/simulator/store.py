"""The simulator's workload store: records, lazily derived phases, JSON persistence.

Callers: `reconciler.simulator.app`. No background task moves phases (httpx's ASGI
transport runs no lifespan or loops): a record keeps the list of phases it is moving
through and when it entered the first one; a read derives the current phase from the
clock. Each phase but the last lasts `phase_seconds`; with 0, the write's own response
shows the first phase and any later read the last one.

A deletion's phases end in GONE: when a read finds a record there, `settle()` moves it
to the deleted list (GET answers 404, the list endpoint shows it only with
deleted=true, and its name is free again).

With a data path, the whole store is written as JSON after every write: to a temporary
file in the same folder, fsynced, then renamed over the old one, so a reader never sees
a half-written file. Each record's JSON text is kept between writes and made again only
when the record changed, so a write costs one record's encoding plus copying the file,
not the encoding of every workload.

Every change of a workload moves its `updated` time (the list's `updatedAt`): a write
through the API, a drift patch or forced phase through /_sim/, a settled deletion
(`touch`); a phase the clock reached moves it too, derived like the phase
(`updated_at`). Times are in whole milliseconds, as the API writes them, and strictly
increase: a change in the same millisecond as the one before it (or a clock that stands
still) takes the next millisecond, so two changes in a row never show one `updatedAt`.

The list's order (by creation, then arrival) is kept, over all workloads, per project
and per (project, cluster), in an `Ordered` index for the live and for the deleted
workloads, updated on each add and settled deletion: a page costs what it returns, also
the last page of a large project read as a refresh reads it (`projectId` and
`clusterId`). A record placed in `live` or `deleted` directly, or a project changed in
place (`names_changed`), has the index rebuilt on its next use.
"""

from __future__ import annotations

import bisect
import datetime as dt
import functools
import json
import os
import pathlib
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Iterable

GONE = "__gone__"

CREATE_PHASES = ["Creating", "Initializing", "Running"]
SUSPEND_PHASES = ["Stopping", "Stopped"]
RESUME_PHASES = ["Resuming", "Running"]
UPDATE_PHASES = ["Updating", "Running"]
DELETE_PHASES = ["Deleting", GONE]
STOPPED_PHASES = frozenset({"Stopping", "Stopped"})  # suspended, or on its way there

FORMAT_VERSION = 1


@functools.lru_cache(maxsize=1 << 15)  # a list page repeats its workloads' times
def iso(ts: float) -> str:
    """RFC 3339 UTC with milliseconds, as the API writes its date-times."""
    at = dt.datetime.fromtimestamp(ts, dt.timezone.utc)
    return at.isoformat(timespec="milliseconds")[:-6] + "Z"  # "+00:00" as "Z"


def _ms(ts: float) -> int:
    return int(ts * 1000 + 0.5)


def filter_value(value: Any) -> str | None:
    """A value as `queries.match` compares it with `==`: the key of the per-project index."""
    if value is None:
        return None
    return str(value).lower() if isinstance(value, bool) else str(value)


@dataclass
class Record:
    """One workload. Once stored, `body` and `phases` are replaced, never changed in
    place: JSON text made from them is kept with the very objects it was made from and
    reused while they are still the record's (`encoded` for API responses, `saved` for
    the data file), so neither a GET nor a save serialises every body again."""

    kind: str  # its kind's `type` in the simulator's table: "distributed", ...
    body: dict  # the API body, without actualPhase (derived)
    phases: list[str]
    since: float  # when the first of `phases` began
    created: float
    updated: float
    deleted_at: float | None = None
    seq: int = field(default=0, compare=False, repr=False)  # arrival, for the list's order
    encoded: tuple[dict, str] | None = field(default=None, compare=False, repr=False)
    saved: tuple | None = field(default=None, compare=False, repr=False)

    @property
    def id(self) -> str:
        return self.body["workloadId"]

    def to_json(self) -> dict:
        return {"kind": self.kind, "body": self.body, "phases": self.phases,
                "since": self.since, "created": self.created, "updated": self.updated,
                "deletedAt": self.deleted_at}

    def saved_text(self) -> str:
        """`to_json()` as JSON text, made again only when the record changed."""
        scalars = (self.kind, self.since, self.created, self.updated, self.deleted_at)
        cached = self.saved
        if (cached is None or cached[0] is not self.body or cached[1] is not self.phases
                or cached[2] != scalars):
            cached = self.saved = (self.body, self.phases, scalars,
                                   json.dumps(self.to_json(), sort_keys=True))
        return cached[3]

    @classmethod
    def from_json(cls, d: dict) -> "Record":
        return cls(kind=d["kind"], body=d["body"], phases=list(d["phases"]),
                   since=float(d["since"]), created=float(d["created"]),
                   updated=float(d["updated"]), deleted_at=d.get("deletedAt"))


class Ordered:
    """Records in the list's default order, (created, arrival), over all, per project and
    per (project, cluster) (by `filter_value` of the projectId and the clusterId): insert
    and remove by bisection."""

    def __init__(self, records: Iterable[Record] = ()):
        self.keys: list[tuple[float, int]] = []
        self.records: list[Record] = []
        self.projects: dict[str | None, tuple[list, list]] = {}
        self.scopes: dict[tuple[str | None, str | None], tuple[list, list]] = {}
        self._scope_of: dict[str, tuple[str | None, str | None]] = {}
        for rec in sorted(records, key=lambda r: (r.created, r.seq)):
            self.keys.append((rec.created, rec.seq))
            self.records.append(rec)
            scope = self._scope_of[rec.id] = _scope(rec)
            for keys, recs in (self.projects.setdefault(scope[0], ([], [])),
                               self.scopes.setdefault(scope, ([], []))):
                keys.append((rec.created, rec.seq))
                recs.append(rec)

    def __len__(self) -> int:
        return len(self.records)

    def of_project(self, project: str) -> list[Record]:
        return self.projects.get(project, ((), []))[1]

    def of_scope(self, project: str, cluster: str) -> list[Record]:
        """The records of `project` in `cluster`, as filters `projectId==project` and
        `clusterId==cluster` pass them."""
        return self.scopes.get((project, cluster), ((), []))[1]

    def insert(self, rec: Record) -> None:
        key = (rec.created, rec.seq)
        scope = self._scope_of[rec.id] = _scope(rec)
        for keys, recs in ((self.keys, self.records), self.projects.setdefault(scope[0], ([], [])),
                           self.scopes.setdefault(scope, ([], []))):
            i = bisect.bisect_right(keys, key)
            keys.insert(i, key)
            recs.insert(i, rec)

    def remove(self, rec: Record) -> None:
        key = (rec.created, rec.seq)
        scope = self._scope_of.pop(rec.id)
        for keys, recs in ((self.keys, self.records), self.projects[scope[0]],
                           self.scopes[scope]):
            i = bisect.bisect_left(keys, key)
            while recs[i] is not rec:
                i += 1
            del keys[i], recs[i]
        if not self.projects[scope[0]][1]:
            del self.projects[scope[0]]
        if not self.scopes[scope][1]:
            del self.scopes[scope]


def _scope(rec: Record) -> tuple[str | None, str | None]:
    return filter_value(rec.body.get("projectId")), filter_value(rec.body.get("clusterId"))


@dataclass
class Store:
    clock: Callable[[], float]
    phase_seconds: float = 0.0
    data_path: pathlib.Path | None = None
    kinds: Collection[str] | None = None  # the record kinds a data file may hold; None: any
    live: dict[str, Record] = field(default_factory=dict)
    deleted: dict[str, Record] = field(default_factory=dict)
    # The projects defined with POST /_sim/projects, as posted (plus "created"), by id:
    # kept in the data file so that `sim serve --data` and `--sim` share them.
    projects: dict[str, dict] = field(default_factory=dict)
    # The organisation made through the API (`org.Organisation` keeps it): JSON, kept in
    # the data file as it is.
    org: dict[str, Any] = field(default_factory=dict)
    _ending: set[str] = field(default_factory=set)  # live ids whose phases end in GONE
    # (projectId, name) -> how many live records hold it; rebuilt when `live` changed
    # size behind the store's back, so that a create need not scan every workload.
    _names: dict[tuple[str, str], int] = field(default_factory=dict)
    _names_of: int = -1  # len(live) when _names was last right
    _last_ms: int = 0  # the latest `updated` given, in milliseconds
    _seq: int = 0  # the latest arrival number given
    # The list's order of live and of deleted records; None: rebuilt on its next use.
    _orders: dict[bool, Ordered | None] = field(default_factory=lambda: {False: None,
                                                                          True: None})

    # --- change times ---------------------------------------------------------------

    def stamp(self, after: float | None = None) -> float:
        """A change time now: the clock's millisecond, or the one after the latest given
        (and after `after`) when the clock has not moved past it."""
        ms = max(_ms(self.clock()), self._last_ms + 1,
                 _ms(after) + 1 if after is not None else 0)
        self._last_ms = ms
        return ms / 1000

    def touch(self, rec: Record) -> None:
        """`rec` changed now: its `updated` moves past every time it has shown."""
        rec.updated = self.stamp(self.updated_at(rec))

    def updated_at(self, rec: Record, now: float | None = None) -> float:
        """When `rec` last changed: its last write, or the start of the phase the clock
        has brought it to since (a millisecond a phase at least, so each phase moves it)."""
        if rec.deleted_at is not None or self.phase_seconds <= 0:
            return rec.updated
        idx = self._index(rec, self.clock() if now is None else now)
        if idx == 0:
            return rec.updated
        return (max(_ms(rec.since + idx * self.phase_seconds), _ms(rec.updated)) + idx) / 1000

    def _arrival(self) -> int:
        self._seq += 1
        return self._seq

    def ordered(self, deleted: bool = False) -> Ordered:
        """The live (or deleted) records in the list's order, all and per project."""
        source = self.deleted if deleted else self.live
        order = self._orders[deleted]
        if order is None or len(order) != len(source):
            for position, rec in enumerate(source.values()):  # as they came: their dict order
                rec.seq = position
            self._seq = max(self._seq, len(source))
            order = self._orders[deleted] = Ordered(source.values())
        return order

    def _ordered_if_built(self, deleted: bool) -> Ordered | None:
        order = self._orders[deleted]
        source = self.deleted if deleted else self.live
        if order is not None and len(order) != len(source):
            self._orders[deleted] = None
            return None
        return order

    # --- phases ---------------------------------------------------------------------

    def _index(self, rec: Record, now: float) -> int:
        return self._phase_index(rec.phases, rec.since, now)

    def _phase_index(self, phases: list, since: float, now: float) -> int:
        last = len(phases) - 1
        if self.phase_seconds <= 0:
            return last
        return max(0, min(last, int((now - since) // self.phase_seconds)))

    def phase_of(self, phases: list, since: float) -> str:
        """The phase now of something moving through `phases` since `since` (an org
        unit: `org` keeps its phases as a record does)."""
        return phases[self._phase_index(phases, since, self.clock())]

    def phase(self, rec: Record, now: float | None = None) -> str:
        return rec.phases[self._index(rec, self.clock() if now is None else now)]

    def phase_since(self, rec: Record, now: float | None = None) -> float:
        idx = self._index(rec, self.clock() if now is None else now)
        return rec.since + idx * self.phase_seconds

    def transition(self, rec: Record, phases: list[str]) -> None:
        """Start moving through `phases` now. The write's own response should show
        `phases[0]` (see `app`); reads derive the rest from the clock."""
        now = self.clock()
        self.touch(rec)
        rec.phases, rec.since = list(phases), now
        if GONE in phases:
            self._ending.add(rec.id)
        else:
            self._ending.discard(rec.id)

    def settle(self) -> None:
        """Move finished deletions to the deleted list."""
        now = self.clock()
        gone = [self.live[i] for i in sorted(self._ending)
                if i in self.live and self.phase(self.live[i], now) == GONE]
        for rec in gone:
            live_order = self._ordered_if_built(False)
            deleted_order = self._ordered_if_built(True)
            if live_order is not None:
                live_order.remove(rec)
            del self.live[rec.id]
            self._unindex(rec)
            self._ending.discard(rec.id)
            rec.deleted_at = (rec.since + (len(rec.phases) - 1) * self.phase_seconds
                              if self.phase_seconds > 0 else now)
            rec.body = {**rec.body, "deletedAt": iso(rec.deleted_at)}
            rec.updated = self.stamp(max(rec.updated, rec.deleted_at - 0.001))
            rec.phases, rec.since = ["Deleting"], rec.deleted_at
            rec.seq = self._arrival()
            self.deleted[rec.id] = rec
            if deleted_order is not None:
                deleted_order.insert(rec)
        if gone:
            self.save()

    def remove_now(self, rec: Record) -> None:
        """Delete out of band: gone at once."""
        self.transition(rec, [GONE])
        rec.body = {**rec.body, "desiredPhase": "Deleted"}
        self.settle()

    # --- lookups --------------------------------------------------------------------

    def name_taken(self, project_id: str, name: str) -> bool:
        return (project_id, name) in self._name_index()

    def add(self, rec: Record) -> None:
        """Store a new record: its `updated` becomes a change time of its own (`stamp`)."""
        index = self._name_index()
        order = self._ordered_if_built(False)
        old = self.live.get(rec.id)
        if old is None:
            key = (rec.body["projectId"], rec.body["name"])
            index[key] = index.get(key, 0) + 1
            rec.seq = self._arrival()
        else:
            self._names_of = -1
            rec.seq = old.seq
            if order is not None:
                order.remove(old)
        rec.updated = self.stamp(rec.updated - 0.001)
        self.live[rec.id] = rec
        if order is not None:
            order.insert(rec)
        self._names_of = len(self.live) if old is None else -1

    def names_changed(self, rec: Record | None = None) -> None:
        """A live record's (`rec`'s, or any) name or project was changed in place: the
        name index is rebuilt, and `rec` moves to its project in the list's order (which
        is rebuilt when `rec` is not given)."""
        self._names_of = -1
        order = self._ordered_if_built(False)
        if order is not None and rec is not None and rec.id in self.live:
            order.remove(rec)
            order.insert(rec)
        elif rec is None:
            self._orders[False] = None

    def _name_index(self) -> dict[tuple[str, str], int]:
        if self._names_of != len(self.live):
            self._names = {}
            for r in self.live.values():
                key = (r.body["projectId"], r.body["name"])
                self._names[key] = self._names.get(key, 0) + 1
            self._names_of = len(self.live)
        return self._names

    def _unindex(self, rec: Record) -> None:
        if self._names_of != len(self.live) + 1:
            self._names_of = -1  # out of step: rebuilt on the next lookup
            return
        key = (rec.body["projectId"], rec.body["name"])
        if self._names.get(key, 0) > 1:
            self._names[key] -= 1
        else:
            self._names.pop(key, None)
        self._names_of = len(self.live)

    def clear(self) -> None:
        self.live.clear()
        self.deleted.clear()
        self.projects.clear()
        self.org.clear()
        self._ending.clear()
        self._orders = {False: None, True: None}
        self.save()

    # --- persistence ----------------------------------------------------------------

    def load(self) -> None:
        if self.data_path is None or not self.data_path.exists():
            return
        where = f"cannot read simulator data {self.data_path}"
        try:
            text = self.data_path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise SimulatorDataError(f"{where}: the file is damaged (not UTF-8 text)") from None
        except OSError as exc:
            raise SimulatorDataError(f"{where}: {exc.strerror or exc}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SimulatorDataError(f"{where}: the file is damaged (not JSON: line "
                                     f"{exc.lineno}, column {exc.colno}: {exc.msg})") from None
        except (ValueError, RecursionError):  # a number too long to read, nesting too deep
            raise SimulatorDataError(f"{where}: the file is damaged (a number too long or "
                                     "nesting too deep for JSON the simulator writes)") from None
        try:
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            if data.get("version") != FORMAT_VERSION:
                raise ValueError(f"unsupported format version {data.get('version')!r}")
            live = [Record.from_json(d) for d in data["workloads"]]
            deleted = [Record.from_json(d) for d in data["deleted"]]
            projects = {str(p["id"]): dict(p) for p in data.get("projects", [])}
            org = data.get("org", {})
            if not isinstance(org, dict):
                raise ValueError("org: not a JSON object")
            unknown = sorted({r.kind for r in live + deleted} - set(self.kinds or ()))
            if self.kinds is not None and unknown:
                raise ValueError(f"unknown workload kind(s) {', '.join(map(repr, unknown))}")
            last_ms = max([self._last_ms, *(_ms(r.updated) for r in live + deleted)])
        except (OSError, ValueError, KeyError, TypeError, AttributeError, OverflowError) as exc:
            why = str(exc)
            if "int_max_str_digits" in why:  # not Python's advice: the file's fault
                why = "an integer is too long"
            raise SimulatorDataError(
                f"cannot read simulator data {self.data_path}: {why}") from exc
        self.live = {r.id: r for r in live}
        self.deleted = {r.id: r for r in deleted}
        self.projects = projects
        self.org = org
        self._ending = {r.id for r in live if GONE in r.phases}
        self._orders = {False: None, True: None}
        self._last_ms = last_ms

    def save(self) -> None:
        if self.data_path is None:
            return
        path = self.data_path
        path.parent.mkdir(parents=True, exist_ok=True)
        # {"version": 1, "workloads": [Record.to_json()...], "deleted": [...],
        # "projects": [...], "org": {...}}, one workload a line.
        text = "".join((f'{{"version": {FORMAT_VERSION},\n"workloads": [\n',
                        ",\n".join(r.saved_text() for r in self.live.values()),
                        '\n],\n"deleted": [\n',
                        ",\n".join(r.saved_text() for r in self.deleted.values()),
                        '\n],\n"projects": ',
                        json.dumps(list(self.projects.values()), sort_keys=True),
                        ',\n"org": ', json.dumps(self.org, sort_keys=True),
                        "}\n"))
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise


class SimulatorDataError(Exception):
    """The --data file exists but cannot be used."""
