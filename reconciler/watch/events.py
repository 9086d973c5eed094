"""What changed between two watch snapshots that a person should hear about (pure).

`between(previous, current)` compares two `Snapshot`s of the loop and returns the alerts
`--notify` sends: one `Event` per change of a workload's state (its sync status, its
health, the policy rule blocking it), never one per cycle, so an unchanged next snapshot
yields nothing. Which changes count, and the JSON an event becomes, are in docs/watch.md
("Alerts"):

- drifted: the workload moved into Drifted (report mode, or a heal not taken: blocked,
  deferred, or one that did not hold); a drift the watch heals is told once, as healed;
- healed: it is Synced again after a drift (healed: the cycle after the heal confirms
  it; or put back outside the watch) or after a failure;
- heal_failed / apply_failed: it turned Failed (a heal when it was drifting or the mode
  is heal, an apply otherwise);
- degraded / missing: its health turned Degraded or Missing;
- recovered: its health left Degraded or Missing, when that was news (Degraded, or
  Missing once it existed: a spec not created yet is Missing and OutOfSync, and its
  creation, by the watch or by anyone, is no recovery);
- blocked: a policy deny, `preventDestroy` or sync mode without `--prune` skipped its
  action (a new `blocked_by`; the cap, `--max-actions`, only defers it: no event);
- cycles_failing / cycles_recovered: the last few cycles all failed, and the first
  success after that;
- summary: the first snapshot of an active process (at start-up, or on taking over from
  another replica) says what already needs attention in one event, not one per workload.

A standby process says nothing (the active one speaks for the fleet). When one change
of a workload matches several words (deleted outside: Drifted and Missing), the event
takes the most severe one and its text names both. Values come from the snapshot, which
the loop has already masked. Callers: reconciler.watch.notify (the notifier), tests.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

from reconciler.watch import status as st

DRIFTED = "drifted"
HEALED = "healed"
HEAL_FAILED = "heal_failed"
APPLY_FAILED = "apply_failed"
DEGRADED = "degraded"
MISSING = "missing"
RECOVERED = "recovered"
BLOCKED = "blocked"
CYCLES_FAILING = "cycles_failing"
CYCLES_RECOVERED = "cycles_recovered"
SUMMARY = "summary"

# The most severe first: the word an event takes when one change matches several.
_PRIORITY = (HEAL_FAILED, APPLY_FAILED, MISSING, DEGRADED, BLOCKED, DRIFTED, HEALED, RECOVERED)
SEVERITY = {
    HEAL_FAILED: "error", APPLY_FAILED: "error", MISSING: "error", DEGRADED: "error",
    CYCLES_FAILING: "error", DRIFTED: "warning", BLOCKED: "warning", SUMMARY: "warning",
    HEALED: "info", RECOVERED: "info", CYCLES_RECOVERED: "info",
}

# Cycles failing in a row before `cycles_failing` is sent (once, until one succeeds).
FAILING_AFTER = 3
# Workloads a summary names by address (the rest are counted).
SUMMARY_NAMES = 10

_DRIFTING = (st.DRIFTED, st.HEALING)
_BAD_HEALTH = (st.DEGRADED, st.MISSING)
# What a workload first seen in a later snapshot is compared with: a new spec, not yet
# created (so its creation is no news, and its failure is).
_NEW = st.WorkloadStatus(address="", kind="", project="", name="", sync=st.OUT_OF_SYNC,
                         health=st.MISSING)


@dataclass(frozen=True)
class Event:
    event: str  # one of the words above
    text: str  # one line for a person (Slack's `text`)
    at: float  # epoch seconds: when the cycle that saw it ended
    cycle: int | None
    mode: str
    commit: str | None
    workload: st.WorkloadStatus | None = None
    previous_sync: str | None = None
    previous_health: str | None = None
    details: dict[str, Any] = field(default_factory=dict)  # summary and cycle events

    @property
    def severity(self) -> str:
        return SEVERITY[self.event]

    def as_json(self) -> dict[str, Any]:
        """The document POSTed to a --notify URL (docs/watch.md, "Alerts")."""
        doc: dict[str, Any] = {
            "text": slack_escape(self.text),
            "event": self.event,
            "severity": self.severity,
            "at": iso(self.at),
            "cycle": self.cycle,
            "mode": self.mode,
            "commit": self.commit,
            "source": "runai-reconcile watch",
        }
        w = self.workload
        if w is not None:
            doc["workload"] = {
                "address": w.address, "kind": w.kind, "project": w.project, "name": w.name,
                "sync": w.sync, "health": w.health, "phase": w.phase, "gpus": w.gpus,
                "reason": w.reason, "error": w.error, "blocked_by": w.blocked_by,
                "action": w.acted,
            }
            doc["previous"] = {"sync": self.previous_sync, "health": self.previous_health}
        doc.update(self.details)
        return doc


def between(previous: st.Snapshot | None, current: st.Snapshot) -> list[Event]:
    """The events of `current` given the `previous` snapshot (None: the first)."""
    if current.role != st.ACTIVE or not current.cycles:
        return []
    first = previous is None or previous.role != st.ACTIVE or not previous.cycles
    if not first and previous.cycles[-1].number == current.cycles[-1].number:
        return []  # the same cycle published again (a role change, a re-publish)
    if first:
        summary = _summary(current, took_over=previous is not None)
        return [summary] if summary is not None else []
    events = _cycle_events(previous, current)
    before = {w.address: w for w in previous.workloads}
    for w in current.workloads:
        event = _workload_event(before.get(w.address), w, current)
        if event is not None:
            events.append(event)
    return events


def needs_attention(w: st.WorkloadStatus) -> bool:
    """What a summary counts (a spec not yet created is no alarm in itself)."""
    return (w.sync in (st.DRIFTED, st.HEALING, st.FAILED) or _alarming_health(w)
            or w.blocked_by is not None)


def is_fine(w: st.WorkloadStatus) -> bool:
    """Nothing to look at: in sync, not blocked, and Healthy, or Suspended as its spec
    asks (`desiredPhase: Stopped`: in sync and suspended is what was asked for)."""
    return (w.sync == st.SYNCED and w.health in (st.HEALTHY, st.SUSPENDED)
            and w.blocked_by is None)


def _alarming_health(w: st.WorkloadStatus) -> bool:
    """Degraded, or Missing once it existed: a spec not yet created (Missing and
    OutOfSync, a create pending) is no alarm, and its creation no recovery."""
    return w.health == st.DEGRADED or (w.health == st.MISSING and w.sync != st.OUT_OF_SYNC)


def failing_streak(cycles: tuple[st.CycleSummary, ...]) -> int:
    """How many of the last cycles failed in a row."""
    n = 0
    for c in reversed(cycles):
        if c.result != "failed":
            break
        n += 1
    return n


def _ended(snapshot: st.Snapshot) -> tuple[float, int]:
    last = snapshot.cycles[-1]
    return last.started_at + last.duration_s, last.number


def _workload_event(p: st.WorkloadStatus | None, c: st.WorkloadStatus,
                    snapshot: st.Snapshot) -> Event | None:
    seen = p is not None
    p = p or _NEW
    mode = snapshot.mode
    was = _drifting(p, mode)
    words: list[str] = []
    # Healing a drift is no news yet: the next cycle says healed, or drifted again.
    if c.sync == st.DRIFTED and p.sync not in (st.DRIFTED, st.FAILED):
        words.append(DRIFTED)
    if c.sync == st.FAILED and p.sync != st.FAILED:
        words.append(HEAL_FAILED if was or c.drift_found or mode == "heal" else APPLY_FAILED)
    if c.sync == st.SYNCED and (was or p.sync == st.FAILED
                                or (p.sync == st.SYNCED and c.drift_found)):
        words.append(HEALED)
    if c.health == st.DEGRADED and p.health != st.DEGRADED:
        words.append(DEGRADED)
    if c.health == st.MISSING and p.health != st.MISSING:
        words.append(MISSING)
    if seen and _alarming_health(p) and c.health not in _BAD_HEALTH:
        words.append(RECOVERED)
    if c.blocked_by is not None and c.blocked_by != p.blocked_by \
            and not c.blocked_by.startswith(DEFERRED_BY):
        words.append(BLOCKED)
    if not words:
        return None
    word = min(words, key=_PRIORITY.index)
    at, number = _ended(snapshot)
    return Event(event=word, text=_workload_text(word, words, p, c, snapshot), at=at,
                 cycle=number, mode=snapshot.mode, commit=snapshot.commit, workload=c,
                 previous_sync=p.sync if seen else None,
                 previous_health=p.health if seen else None)


# The `blocked_by` of an action the cap (`--max-actions`) left to the next cycle.
DEFERRED_BY = "--max-actions"


def _drifting(w: st.WorkloadStatus, mode: str) -> bool:
    """Drifted, or Healing a drift (Healing is any action that succeeded this cycle; in
    heal mode every action undoes drift, elsewhere `drift_found` says so)."""
    return w.sync == st.DRIFTED or (w.sync == st.HEALING and (w.drift_found or mode == "heal"))


def _workload_text(word: str, words: list[str], p: st.WorkloadStatus,
                   c: st.WorkloadStatus, snapshot: st.Snapshot) -> str:
    said = {
        DRIFTED: "drifted from what was applied",
        HEALED: ("drifted and was healed" if p.sync == st.SYNCED else
                 "is Synced again" if p.sync == st.FAILED else
                 "was healed" if p.sync == st.HEALING or (c.acted or "").endswith("/ok") else
                 "is back in sync (changed outside the watch)"),
        HEAL_FAILED: "failed to heal",
        APPLY_FAILED: "failed to apply",
        DEGRADED: "is Degraded",
        MISSING: "is Missing",
        RECOVERED: f"is {c.health} now",
        BLOCKED: f"was not changed: blocked by {c.blocked_by}",
    }
    # The words in the order of what happened (drifted, then what came of it).
    head = f"{c.address} {' and '.join(said[w] for w in words)}"
    why = c.error if word in (HEAL_FAILED, APPLY_FAILED) and c.error else c.reason
    if word == HEALED and p.reason:  # what was healed (Synced says nothing more)
        why = p.reason
    tail = f"{p.sync}/{p.health} → {c.sync}/{c.health}, {snapshot.mode} mode"
    return f"{head}: {why} ({tail})" if why else f"{head} ({tail})"


def _cycle_events(previous: st.Snapshot, current: st.Snapshot) -> list[Event]:
    before, now = failing_streak(previous.cycles), failing_streak(current.cycles)
    at, number = _ended(current)
    last = current.cycles[-1]
    common = dict(at=at, cycle=number, mode=current.mode, commit=current.commit)
    if now >= FAILING_AFTER > before:
        return [Event(event=CYCLES_FAILING,
                      text=f"the last {now} watch cycles failed: {last.error or 'no reason given'}",
                      details={"failed_cycles": now, "error": last.error}, **common)]
    if before >= FAILING_AFTER and now == 0:
        return [Event(event=CYCLES_RECOVERED,
                      text=f"watch cycle {number} succeeded after {before} failed in a row",
                      details={"failed_cycles": before}, **common)]
    return []


def _summary(snapshot: st.Snapshot, *, took_over: bool) -> Event | None:
    """One event for what needs attention at start-up (None when nothing does)."""
    attention = [w for w in snapshot.workloads if needs_attention(w)]
    last = snapshot.cycles[-1]
    if not attention and last.result != "failed":
        return None
    counts: dict[str, int] = {}
    for w in attention:
        for word in _summary_words(w):
            counts[word] = counts.get(word, 0) + 1
    named = [w.address for w in _by_urgency(attention)[:SUMMARY_NAMES]]
    how = "took over as the active watch" if took_over else "started"
    parts = [f"{n:,} {word}" for word, n in counts.items()]
    text = (f"runai-reconcile watch {how} ({snapshot.mode} mode"
            + (f", commit {snapshot.commit[:12]}" if snapshot.commit else "") + "): "
            + f"{len(snapshot.workloads):,} workloads")
    if parts:
        text += f", {', '.join(parts)}: {', '.join(named)}"
        if len(attention) > len(named):
            text += f" and {len(attention) - len(named):,} more"
    if last.result == "failed":
        text += f"; its first cycle failed: {last.error or 'no reason given'}"
    at, number = _ended(snapshot)
    return Event(event=SUMMARY, text=text, at=at, cycle=number, mode=snapshot.mode,
                 commit=snapshot.commit,
                 details={"workloads": len(snapshot.workloads),
                          "needing_attention": len(attention), "counts": counts,
                          "addresses": named, "error": last.error})


def _summary_words(w: st.WorkloadStatus) -> list[str]:
    out = []
    if w.sync in (st.DRIFTED, st.HEALING, st.FAILED):
        out.append(w.sync)
    if w.health in _BAD_HEALTH and (w.health == st.DEGRADED or w.sync != st.OUT_OF_SYNC):
        out.append(w.health)
    if w.blocked_by is not None:
        out.append("blocked")
    return out


_SYNC_RANK = {s: i for i, s in enumerate((st.FAILED, st.DRIFTED, st.HEALING, st.OUT_OF_SYNC,
                                          st.SYNCED))}
_HEALTH_RANK = {h: i for i, h in enumerate((st.MISSING, st.DEGRADED, st.PROGRESSING,
                                            st.SUSPENDED, st.HEALTHY))}


def urgency(w: st.WorkloadStatus) -> tuple:
    """A sort key: the workload that most needs a person first (the page uses it too)."""
    return (is_fine(w), _SYNC_RANK.get(w.sync, 0), _HEALTH_RANK.get(w.health, 0),
            w.blocked_by is None, -(w.changed_at or 0.0), w.address)


def _by_urgency(workloads) -> list[st.WorkloadStatus]:
    return sorted(workloads, key=urgency)


def iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return (datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc)
            .isoformat(timespec="seconds").replace("+00:00", "Z"))


def slack_escape(text: str) -> str:
    """Slack's three control characters written as it asks (`<`, `>`, `&`)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
