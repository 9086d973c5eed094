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
"""

from __future__ import annotations

import datetime as dt
import json
import os
import pathlib
import tempfile
from dataclasses import dataclass, field
from typing import Callable, Collection

GONE = "__gone__"

CREATE_PHASES = ["Creating", "Initializing", "Running"]
SUSPEND_PHASES = ["Stopping", "Stopped"]
RESUME_PHASES = ["Resuming", "Running"]
UPDATE_PHASES = ["Updating", "Running"]
DELETE_PHASES = ["Deleting", GONE]
STOPPED_PHASES = frozenset({"Stopping", "Stopped"})  # suspended, or on its way there

FORMAT_VERSION = 1


def iso(ts: float) -> str:
    """RFC 3339 UTC with milliseconds, as the API writes its date-times."""
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


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
    _ending: set[str] = field(default_factory=set)  # live ids whose phases end in GONE
    # (projectId, name) -> how many live records hold it; rebuilt when `live` changed
    # size behind the store's back, so that a create need not scan every workload.
    _names: dict[tuple[str, str], int] = field(default_factory=dict)
    _names_of: int = -1  # len(live) when _names was last right

    # --- phases ---------------------------------------------------------------------

    def _index(self, rec: Record, now: float) -> int:
        last = len(rec.phases) - 1
        if self.phase_seconds <= 0:
            return last
        return max(0, min(last, int((now - rec.since) // self.phase_seconds)))

    def phase(self, rec: Record, now: float | None = None) -> str:
        return rec.phases[self._index(rec, self.clock() if now is None else now)]

    def phase_since(self, rec: Record) -> float:
        idx = self._index(rec, self.clock())
        return rec.since + idx * self.phase_seconds

    def transition(self, rec: Record, phases: list[str]) -> None:
        """Start moving through `phases` now. The write's own response should show
        `phases[0]` (see `app`); reads derive the rest from the clock."""
        now = self.clock()
        rec.phases, rec.since, rec.updated = list(phases), now, now
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
            del self.live[rec.id]
            self._unindex(rec)
            self._ending.discard(rec.id)
            rec.deleted_at = (rec.since + (len(rec.phases) - 1) * self.phase_seconds
                              if self.phase_seconds > 0 else now)
            rec.body = {**rec.body, "deletedAt": iso(rec.deleted_at)}
            rec.phases, rec.since = ["Deleting"], rec.deleted_at
            self.deleted[rec.id] = rec
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
        index = self._name_index()
        if rec.id not in self.live:
            key = (rec.body["projectId"], rec.body["name"])
            index[key] = index.get(key, 0) + 1
        self.live[rec.id] = rec
        self._names_of = len(self.live)

    def names_changed(self) -> None:
        """A live record's name or project was changed in place: rebuild the name index."""
        self._names_of = -1

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
        self._ending.clear()
        self.save()

    # --- persistence ----------------------------------------------------------------

    def load(self) -> None:
        if self.data_path is None or not self.data_path.exists():
            return
        try:
            data = json.loads(self.data_path.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            if data.get("version") != FORMAT_VERSION:
                raise ValueError(f"unsupported format version {data.get('version')!r}")
            live = [Record.from_json(d) for d in data["workloads"]]
            deleted = [Record.from_json(d) for d in data["deleted"]]
            projects = {str(p["id"]): dict(p) for p in data.get("projects", [])}
            unknown = sorted({r.kind for r in live + deleted} - set(self.kinds or ()))
            if self.kinds is not None and unknown:
                raise ValueError(f"unknown workload kind(s) {', '.join(map(repr, unknown))}")
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            why = str(exc)
            if "int_max_str_digits" in why:  # not Python's advice: the file's fault
                why = "an integer is too long"
            raise SimulatorDataError(
                f"cannot read simulator data {self.data_path}: {why}") from exc
        self.live = {r.id: r for r in live}
        self.deleted = {r.id: r for r in deleted}
        self.projects = projects
        self._ending = {r.id for r in live if GONE in r.phases}

    def save(self) -> None:
        if self.data_path is None:
            return
        path = self.data_path
        path.parent.mkdir(parents=True, exist_ok=True)
        # {"version": 1, "workloads": [Record.to_json()...], "deleted": [...],
        # "projects": [...]}, one workload a line.
        text = "".join((f'{{"version": {FORMAT_VERSION},\n"workloads": [\n',
                        ",\n".join(r.saved_text() for r in self.live.values()),
                        '\n],\n"deleted": [\n',
                        ",\n".join(r.saved_text() for r in self.deleted.values()),
                        '\n],\n"projects": ',
                        json.dumps(list(self.projects.values()), sort_keys=True),
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
