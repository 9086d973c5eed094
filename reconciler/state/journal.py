"""The write-ahead journal beside the state: its line format and its replay (pure).

The executor appends, through the store, an *intent* before each API write and a *set*
(the address's new record, or its removal) or a *close* after it, so a run costs one
short appended line per step instead of a rewrite of the whole state. The store
replays the journal over the state file on every read and folds it into the file
(compaction) on the next full write. Callers: `store` (encode, replay), the executor
(builds entries with `intent`, `set_entry`, `close`) and its recovery (`Intent`).

    {"journal": 1, "lineage": "<uuid>"}                         first line
    {"op": "intent", "seq": 4, "action": "create", "address": "...",
     "workload_id": null, "body": {...}, "maybe": {ResourceState} | null,
     "prev": {ResourceState} | null}
    {"op": "set", "address": "...", "resource": {ResourceState} | null, "closes": 4}
    {"op": "close", "seq": 4}                                     failed, state unchanged

A body is written once: a ResourceState in the journal (an intent's `maybe`, a set's
`resource`) whose `applied` is the body of an intent before it holds `"applied_of": seq`
in its place (format version 2; version 1, where every record holds its own, is read
as before). A create's body is then on disk once, not in its intent, its `maybe` and
its record.

An intent with no set or close after it was in flight when the process died: the API
may or may not have performed it. Replay records its `maybe` (for a create: the address
with no workload id, the body as applied), which makes the next refresh look the
workload up by name; recovery at the start of the next apply resolves it for good.
A torn or garbled last line (a crash in the middle of an append) is ignored: nothing was
sent for it, since an intent is on disk (fsynced) before its API call starts. A garbled
line anywhere else (one holding an integer too long for Python included) is a StateError.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import orjson

from reconciler.errors import StateError
from reconciler.state.model import ResourceState, State

JOURNAL_VERSION = 2


@dataclass
class Intent:
    seq: int
    action: str
    address: str
    workload_id: str | None = None
    body: dict[str, Any] | None = None
    maybe: ResourceState | None = None  # what to record while the outcome is unknown
    prev: ResourceState | None = None  # the record before it (restored when it never happened)

    def to_json(self) -> dict[str, Any]:
        """The entry; a `maybe` whose `applied` is this intent's body names it by `seq`."""
        maybe = None
        if self.maybe is not None:
            maybe = _record(self.maybe, self.seq if self.body is not None
                            and self.maybe.applied is self.body else None)
        return {"op": "intent", "seq": self.seq, "action": self.action,
                "address": self.address, "workload_id": self.workload_id,
                "body": self.body, "maybe": maybe,
                "prev": self.prev.to_json() if self.prev else None}


def header(lineage: str) -> dict[str, Any]:
    return {"journal": JOURNAL_VERSION, "lineage": lineage}


def set_entry(address: str, resource: ResourceState | None, closes: int | None = None,
              applied_of: int | None = None) -> dict:
    """The address's new record (None: removed); `applied_of`: the seq of an intent earlier
    in this journal whose body is the record's `applied`, written there and not again."""
    return {"op": "set", "address": address,
            "resource": _record(resource, applied_of) if resource is not None else None,
            "closes": closes}


def _record(resource: ResourceState, applied_of: int | None) -> dict[str, Any]:
    out = resource.to_json()
    if applied_of is not None:
        del out["applied"]
        out["applied_of"] = applied_of
    return out


def close(seq: int) -> dict:
    return {"op": "close", "seq": seq}


def encode(entries: list[dict]) -> bytes:
    """One compact JSON line per entry, keys sorted (orjson; json for what it refuses)."""
    try:
        return b"".join(orjson.dumps(e, option=_ORJSON_LINE) for e in entries)
    except orjson.JSONEncodeError:  # e.g. an integer beyond 64 bits
        return b"".join(json.dumps(e, sort_keys=True, separators=(",", ":"),
                                   ensure_ascii=False).encode() + b"\n" for e in entries)


_ORJSON_LINE = orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE


def lineage_of(raw: bytes, where: str) -> str:
    """The lineage named on the journal's first line."""
    first = raw.split(b"\n", 1)[0]
    return _header(first, where)["lineage"]


def replay(state: State, raw: bytes, where: str) -> list[Intent]:
    """Apply the journal's records to `state` in place; return the intents still open.

    StateError naming `where` (and the line) when the journal is not ours or is corrupt
    anywhere but in its torn last line."""
    lines = raw.split(b"\n")
    complete = raw.endswith(b"\n")
    if not complete:
        lines = lines[:-1]  # torn by a kill during the append: never acknowledged
    elif lines and lines[-1] == b"":
        lines = lines[:-1]
    if not lines:
        return []
    head = _header(lines[0], where)
    if head["lineage"] != state.lineage:
        raise StateError(
            f"journal {where} belongs to another state (lineage {head['lineage']}, the state "
            f"file has {state.lineage}); both were left unchanged: move the journal away if "
            "the state file was replaced on purpose")
    open_: dict[int, Intent] = {}
    bodies: dict[int, dict] = {}  # seq -> its intent's body, which later records may name
    last = len(lines) - 1
    for n, line in enumerate(lines[1:], start=2):
        try:
            entry = _entry(line, f"{where} line {n}")
        except StateError:
            if n - 1 == last:
                break  # torn by a crash during the append: never acted upon
            raise
        op = entry["op"]
        if op == "intent":
            open_[entry["seq"]] = _intent(entry, bodies, f"{where} line {n}")
        elif op == "set":
            address = entry["address"]
            if entry.get("resource") is None:
                state.resources.pop(address, None)
            else:
                res = _resource(entry["resource"], bodies, f"{where} line {n}")
                state.resources[address] = res
            if entry.get("closes") is not None:
                open_.pop(entry["closes"], None)
        elif op == "close":
            open_.pop(entry.get("seq"), None)
    pending = [open_[k] for k in sorted(open_)]
    for intent in pending:
        current = state.resources.get(intent.address)
        if intent.maybe is not None and (current is None or current.workload_id is None):
            state.resources[intent.address] = intent.maybe
    return pending


def _header(line: bytes, where: str) -> dict[str, Any]:
    hint = "the state file was left unchanged; move the journal away to discard it"
    try:
        head = json.loads(line.decode("utf-8"))
    except ValueError:  # not UTF-8, not JSON, or an integer too long for Python
        raise StateError(f"journal {where} does not start with a journal header; {hint}") from None
    if not isinstance(head, dict) or not isinstance(head.get("lineage"), str) \
            or not isinstance(head.get("journal"), int) or isinstance(head.get("journal"), bool):
        raise StateError(f"journal {where} does not start with a journal header; {hint}")
    if head["journal"] > JOURNAL_VERSION:
        raise StateError(f"journal {where} has format version {head['journal']}, written by a "
                         f"newer runai-reconcile; this one reads up to {JOURNAL_VERSION}")
    return head


def _entry(line: bytes, where: str) -> dict[str, Any]:
    try:
        entry = json.loads(line.decode("utf-8"))
    except ValueError:  # not UTF-8, not JSON, or an integer too long for Python
        raise StateError(f"journal {where} is corrupt (not a JSON record); the state file "
                         "was left unchanged") from None
    ok = isinstance(entry, dict) and (
        (entry.get("op") == "intent" and _int(entry.get("seq"))
         and isinstance(entry.get("address"), str) and isinstance(entry.get("action"), str))
        or (entry.get("op") == "set" and isinstance(entry.get("address"), str)
            and (entry.get("closes") is None or _int(entry.get("closes"))))
        or (entry.get("op") == "close" and _int(entry.get("seq"))))
    if not ok:
        raise StateError(f"journal {where} is corrupt (not a journal record); the state file "
                         "was left unchanged")
    return entry


def _intent(entry: dict, bodies: dict[int, dict], where: str) -> Intent:
    maybe = entry.get("maybe")
    prev = entry.get("prev")
    body = entry.get("body")
    wid = entry.get("workload_id")
    if (body is not None and not isinstance(body, dict)) or \
            (wid is not None and not isinstance(wid, str)):
        raise StateError(f"journal {where} is corrupt (a malformed intent); the state file "
                         "was left unchanged")
    if body is not None:  # its `maybe`, and the records after it, may name it
        bodies[entry["seq"]] = body
    return Intent(seq=entry["seq"], action=entry["action"], address=entry["address"],
                  workload_id=wid, body=body,
                  maybe=_resource(maybe, bodies, where) if maybe is not None else None,
                  prev=ResourceState.from_json(prev, where=where) if prev is not None else None)


def _resource(data: Any, bodies: dict[int, dict], where: str) -> ResourceState:
    """A record as the journal holds it: its `applied` in place, or named by `applied_of`
    (the body of an intent before it)."""
    if isinstance(data, dict) and "applied_of" in data:
        seq = data["applied_of"]
        if not _int(seq) or seq not in bodies or "applied" in data:
            raise StateError(f"journal {where} is corrupt (a record names the body of no "
                             "intent before it); the state file was left unchanged")
        data = {k: v for k, v in data.items() if k != "applied_of"}
        data["applied"] = bodies[seq]
    return ResourceState.from_json(data, where=where)


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)
