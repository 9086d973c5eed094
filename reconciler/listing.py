"""What the list-first refresh (`--refresh=auto`) decides from the workload list (pure).

Given what the state holds, what the specs want and the items the workload list showed,
`choose` says, for each address, whether the list vouches for it (unchanged since the
state last saw it: its phase is the list's, no GET), whether it must be read (its list
item moved, or it is new and the list holds its name), or whether it is gone; and the
list fingerprint of each address the list holds. `scopes` says which lists to read: one
per (project, cluster) scope, as each kind's registry entry scopes its list (`ScopeOf`,
`Kind.list_scope`: a NIM service's list is its project's, whatever its spec's
`clusterId`).
`fingerprint` is what of a list item a change of the workload moves; `match_listed`
finds the specs' names in a list; `cut_to` says what of the items to keep meanwhile.

The reads themselves are `reconciler.live.workloads`'s (`list_scopes`). Callers:
`reconciler.refresh` (`read_listed` before a plan, `sweep` after an apply: the same
scopes and the same choice), `reconciler.live.workloads` (`find_by_name`).
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

Scope = tuple[str, str]  # (project id, cluster id; "": every cluster of the project)

# (kind name, project id, the cluster id a spec or record names) -> the scope of the list
# that shows it (cluster "": the project's whole list). The registry's to say.
ScopeOf = Callable[[str, str, "str | None"], Scope]

DELETING = "Deleting"  # a list item's phase while it is being deleted: gone for planning

# List item fields that move without the workload's spec changing: its phase and what the
# cluster reports of it. A change of one of them alone does not call for a GET (the phase
# itself is read from the list); every other field of the item is fingerprinted.
VOLATILE = frozenset({
    "runningPods", "phase", "phaseUpdatedAt", "k8sPhase", "k8sPhaseUpdatedAt", "conditions",
    "phaseMessage", "phaseReason", "allocatedResources", "currentNodePools", "idleGpus",
    "idleAllocatedGpus", "totalPendingTimeSeconds", "totalRunningTimeSeconds", "completedAt",
    "urls", "childrenIds", "actionsSupport", "pendingSchedulingMessages",
})


class Known(Protocol):
    """What the state holds of a workload (`state.model.ResourceState`)."""
    kind: str
    project_id: str
    cluster_id: str | None
    workload_id: str | None
    listed: str | None  # its list item's fingerprint when the state last saw it match


class Wanted(Protocol):
    """A spec with its project resolved to an id (`desired.types.DesiredWorkload`)."""
    address: str
    kind: str
    name: str
    project_id: str
    cluster_id: str | None
    listed_name: str  # the name the list shows it under (its `name`, but a rule's identity)


def fingerprint(item: Mapping[str, Any]) -> str:
    """A stable hash of the list item less its `VOLATILE` fields: equal for two reads of
    a workload that nothing changed in between (the API moves `updatedAt`, and the images
    and requested resources an item carries, when its spec changes). An item cut
    (`Listed`) keeps the whole item's."""
    if type(item) is Listed:
        return item.fingerprint
    return _hashed(_kept(item))


def _kept(item: Mapping[str, Any]) -> dict[str, Any]:
    """The item less its `VOLATILE` fields (a copy)."""
    kept = dict(item)
    for key in VOLATILE:  # (quicker than keeping the others one by one)
        kept.pop(key, None)
    return kept


def _hashed(kept: dict[str, Any]) -> str:
    """The fingerprint of an item less its volatile fields (`_kept`)."""
    # The text json.dumps(sort_keys, compact, ensure_ascii) writes, as orjson writes it
    # (in C), so that the fingerprints a state recorded still match: json's own where
    # orjson would write otherwise, text not ASCII, and what it refuses (an integer beyond
    # 64 bits). A float below 1e-4 is spelled otherwise (1e-07, 0.00001): an item holding
    # one is read by GET once.
    try:
        text: bytes | None = orjson.dumps(kept, option=orjson.OPT_SORT_KEYS, default=str)
    except orjson.JSONEncodeError:
        text = None
    if text is None or not text.isascii():
        text = json.dumps(kept, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.blake2b(text, digest_size=16).hexdigest()


class Listed(dict):
    """A list item cut to what `choose` and `match_listed` read of it (its id, name,
    project and phase) and the whole item's `fingerprint` (`cut_to`)."""
    __slots__ = ("fingerprint",)


_READ = ("id", "workloadId", "name", "projectId", "phase")  # what `choose` reads of an item


def cut_to(known: Iterable[Known], *, remember: dict[str, tuple[bytes, str]] | None = None,
           ) -> Callable[[Mapping[str, Any]], Mapping[str, Any]]:
    """What to keep of each list item as it arrives, for `choose`: an item of one of
    `known` (by its id) cut to a `Listed`, a few fields and not the whole item; any other
    item whole (a new spec may be found in it by name). A big fleet's lists are held at
    a few fields a workload until the choice is made.

    `remember`: a dict the caller keeps from one list of the same `known` to the next (a
    watch's cycles over one state), filled here: id -> (the text orjson writes of the
    item less its volatile fields, its keys in the order they came, and its fingerprint).
    An item whose text is the one remembered has the fingerprint remembered, without the
    sorted text and its hash: the same text is the same item, and the fingerprint is made
    from the item alone. At most one entry per id of `known`."""
    # Each id to the state's own string: the cut item holds that one, which the lookups
    # of `choose` then find by identity, not by comparing the text of two strings (in a
    # big fleet, each a read from memory not in the processor's cache).
    ids = {r.workload_id: r.workload_id for r in known if r.workload_id}

    def cut(item: Mapping[str, Any]) -> Mapping[str, Any]:
        workload_id = item.get("id")
        ours = ids.get(workload_id if type(workload_id) is str else str(workload_id))
        if ours is None:
            return item
        out = Listed()
        for key in _READ:  # (quicker than a comprehension, or a dict made and copied)
            if key in item:
                out[key] = item[key]
        if type(workload_id) is str:
            out["id"] = ours
        phase = out.get("phase")
        if type(phase) is str:  # one string a phase (compared by identity next cycle too)
            out["phase"] = sys.intern(phase)
        kept = _kept(item)
        if remember is None:
            out.fingerprint = _hashed(kept)
            return out
        try:
            text: bytes | None = orjson.dumps(kept)
        except orjson.JSONEncodeError:  # (an integer beyond 64 bits: made each time)
            text = None
        was = remember.get(ours)
        if text is not None and was is not None and was[0] == text:
            out.fingerprint = was[1]
        else:
            out.fingerprint = _hashed(kept)
            if text is not None:  # (a copy of its size: orjson's text holds about 8 KB)
                remember[ours] = (bytes(memoryview(text)), out.fingerprint)
        return out

    return cut


def match_listed(wanted: Iterable[Wanted], items: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """address -> workload id, for each of `wanted` whose project and name (`listed_name`)
    a list item has (names are unique per project across kinds)."""
    by_key = {(d.project_id, d.listed_name): d.address for d in wanted}
    found: dict[str, str] = {}
    if not by_key:
        return found
    for item in items:
        project = item.get("projectId")
        address = by_key.get(("" if project is None else str(project), item.get("name")))
        workload_id = item.get("id") or item.get("workloadId")
        if address is not None and workload_id:
            found[address] = str(workload_id)
    return found


def scopes(known: Iterable[Known], wanted: Iterable[Wanted],
           scope_of: ScopeOf) -> tuple[dict[Scope, int], dict[Scope, int]]:
    """The lists to read, each scope with the workloads expected in it: (those of the
    state's workloads, to read at once; those only the specs add)."""
    first: dict[Scope, int] = {}
    for r in known:
        scope = scope_of(r.kind, r.project_id, r.cluster_id)
        first[scope] = first.get(scope, 0) + 1
    more: dict[Scope, int] = {}
    for d in wanted:
        scope = scope_of(d.kind, d.project_id, d.cluster_id)
        if scope not in first:
            more[scope] = more.get(scope, 0) + 1
    return first, more


@dataclass(frozen=True)
class Read:
    """A workload to read by GET: its address, kind, id and the phase its list item shows."""
    address: str
    kind: str
    workload_id: str
    listed_phase: str | None


@dataclass
class Choice:
    """What `choose` decided. `vouched`: address -> its listed phase, for each workload
    the list shows unchanged (not read); `read`: what to GET, in address order; `gone`:
    the addresses that do not exist (not listed, listed under another id, being deleted,
    or new and not listed); `found`: the new addresses the list holds by name (their GET
    may still answer that another kind holds the name); `fingerprints`: address -> its
    list item's fingerprint, for every address the list holds."""
    vouched: dict[str, str | None] = field(default_factory=dict)
    read: list[Read] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    found: dict[str, str] = field(default_factory=dict)
    fingerprints: dict[str, str] = field(default_factory=dict)


def choose(known: Mapping[str, Known], items: Iterable[Mapping[str, Any]],
           wanted: Mapping[str, Wanted] | None = None) -> Choice:
    """Each address of `known` (the state's) and `wanted` (the specs') against the items
    the lists of their scopes showed. A known workload is vouched for when its list item's
    fingerprint is the one the state recorded, read when it moved, gone when the list
    lacks its id or shows it being deleted; an address without an id (new, or lost by the
    state) is read when the list holds its name, else gone."""
    wanted = wanted or {}
    items = list(items)
    by_id = {str(workload_id): i for i in items if (workload_id := i.get("id"))}
    out = Choice()
    unknown: list[str] = []
    fingerprints, vouched = out.fingerprints, out.vouched  # (one lookup, not one an item)
    for addr in sorted(known):
        record = known[addr]
        workload_id = record.workload_id
        if not workload_id:
            unknown.append(addr)
            continue
        item = by_id.get(workload_id)
        phase = None if item is None else item.get("phase")
        if item is None or phase == DELETING:
            out.gone.append(addr)  # gone, or deleted and created again outside
            continue
        fp = item.fingerprint if type(item) is Listed else fingerprint(item)
        if record.listed == fp:
            # the record's own string (the next cycle's comparisons find it by identity)
            fingerprints[addr] = record.listed
            vouched[addr] = phase
        else:
            fingerprints[addr] = fp
            out.read.append(Read(addr, record.kind, workload_id, phase))
    unknown = sorted(unknown + [a for a in wanted if a not in known])
    out.found = match_listed((wanted[a] for a in unknown if a in wanted),
                             (i for i in items if i.get("phase") != DELETING))
    for addr in unknown:
        workload_id = out.found.get(addr)
        if workload_id is None or workload_id not in by_id:
            out.found.pop(addr, None)
            out.gone.append(addr)
            continue
        item = by_id[workload_id]
        out.read.append(Read(addr, wanted[addr].kind, workload_id, item.get("phase")))
        out.fingerprints[addr] = fingerprint(item)
    return out
