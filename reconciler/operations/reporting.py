"""What a watch cycle says: each workload's sync status and health (with the reason, the
GPUs it holds, since when, and what this cycle did to it), each project's GPUs against its
quota, and the cycle's summary (actions by result, drift found and healed), kept from one
cycle to the next (`Report`: the last error of each workload's action, the statuses seen,
and the last cycle's result, reused while its inputs are the same).

Caller: the package's `watching` (one `Report` per watch).
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable

from reconciler import errors, gpus
from reconciler.operations.judging import finish
from reconciler.plans import Action, Plan
from reconciler.watch import health, status


class Report:
    def __init__(self, log: Callable[..., None]) -> None:
        self.log = log
        self.failures: dict[str, str] = {}  # address -> its last action's error
        self.seen: dict[str, tuple[str, str, float]] = {}  # address -> sync, health, since
        self.impact_for: tuple | None = None  # what the plan's GPU impact was made for
        self.statuses: tuple | None = None  # (what they were worked out from, the result)


    def summarise(self, number, started, refresh, the_plan: Plan, live, selection, outcomes,
                  note, *, commit: str | None):
        """This cycle's summary, its workloads' statuses and its projects'."""
        now = time.time()
        # The impact of a plan made again (or reused) with the same quotas is the same.
        made_for = (id(the_plan), sorted((the_plan.gpu_quotas or {}).items()),
                    sorted((the_plan.project_names or {}).items()))
        if the_plan.gpu_impact is None or made_for != self.impact_for:
            finish(the_plan, None, ())
            self.impact_for = made_for
        impact = the_plan.gpu_impact
        # The same plan, live, selection and failures as the last cycle, nothing done:
        # every workload's status is the last one (no need to work it out again).
        inputs = (the_plan, made_for, live, selection.skipped, selection.blocked,
                  selection.deferred, dict(self.failures))
        last = self.statuses
        if not outcomes and last is not None and last[0][0] is the_plan \
                and last[0][1:] == inputs[1:]:
            workloads, projects, counts, drift, healed = last[1]
        else:
            workloads, projects, counts, drift, healed = self._statuses(
                the_plan, impact, live, selection, outcomes, now)
            self.statuses = None if outcomes else (
                (*inputs[:2], dict(live or {}) if live is not None else None,
                 *inputs[3:]), (workloads, projects, counts, drift, healed))
        result = "ok" if not any(k.endswith("/failed") for k in counts) else "failed"
        summary = status.CycleSummary(
            number=number, started_at=started, duration_s=0.0, result=result,
            error=note if result == "ok" else "some actions failed",
            refresh=refresh, commit=commit, actions=dict(counts), drift_found=drift,
            healed=healed, deferred=len(selection.deferred))
        return summary, workloads, projects

    def _statuses(self, the_plan: Plan, impact, live, selection, outcomes, now):
        """Each workload's status (logging each change of its sync or health), the
        projects', this cycle's actions by `<action>/<result>`, drift found and healed."""
        held_by = {w.address: w for w in impact.workloads}
        counts: dict[str, int] = collections.Counter()
        healed = drift = 0
        workloads = []
        for change in the_plan.changes:
            address = change.address
            outcome = outcomes.get(address)
            acted = outcome is not None and outcome.ok
            drifting = health.is_healing(change)
            done = None  # this cycle's action on it, "<action>/<ok|failed|skipped|deferred>"
            if outcome is not None:
                key = "ok" if outcome.ok else "failed"
                if change.action is not Action.NOOP:
                    done = f"{change.action.value}/{key}"
                if outcome.ok:
                    self.failures.pop(address, None)
                    healed += drifting
                else:
                    self.failures[address] = outcome.message or outcome.status
                    self.log("action_failed", address=address,
                             action=change.action.value, error=outcome.message)
            elif change.action is not Action.NOOP and address in selection.blocked:
                done = (f"{change.action.value}/deferred" if address in selection.deferred
                        else f"{change.action.value}/skipped")
            if done is not None:
                counts[done] += 1
            drift += drifting
            sync, why = health.sync_of(change, acted=acted, error=self.failures.get(address))
            blocked = selection.blocked.get(address) if not acted else None
            if sync == status.SYNCED:
                self.failures.pop(address, None)
                blocked = None
            elif blocked is not None and sync != status.FAILED:
                if address in selection.deferred:
                    why = f"{why}; deferred: over --max-actions this cycle"
                else:
                    why = f"{why}; not done: {selection.skipped[address]}"
            body = live.get(address) if live else None
            if body is None and live is not None and address not in live \
                    and change.live_phase:
                # Vouched for by the workload list (--refresh=auto): not read, but listed
                # in this phase, which the plan carries.
                body = {"actualPhase": change.live_phase}
            state_health, health_why = health.health_of(change.kind, body)
            if body is None and change.reason == "completed":
                state_health, health_why = status.HEALTHY, "completed, then removed"
            if acted and change.action in _MOVES:  # live was read before the action
                state_health, health_why = _MOVES[change.action]
            phase = body.get("actualPhase") if body else None
            held = held_by.get(address)
            previous = self.seen.get(address)
            since = previous[2] if previous and previous[:2] == (sync, state_health) else now
            if previous and previous[:2] != (sync, state_health):
                self.log("workload", address=address, sync=sync, health=state_health,
                         was_sync=previous[0], was_health=previous[1], reason=why)
            self.seen[address] = (sync, state_health, since)
            workloads.append(status.WorkloadStatus(
                address=address, kind=change.kind, project=change.project_id,
                name=change.name, sync=sync, health=state_health, phase=phase,
                gpus=_gpus_text(held.before) if held is not None else None,
                reason=why or health_why,
                error=self.failures.get(address) if sync == status.FAILED else None,
                changed_at=since, acted=done, drift_found=drifting, blocked_by=blocked))
        known = {c.address for c in the_plan.changes}
        for gone in [a for a in self.seen if a not in known]:
            del self.seen[gone]
        projects = tuple(status.ProjectStatus(
            project=p.project_id, name=p.project_name, gpus_held=p.before.high,
            gpus_planned=p.after.high, quota=p.quota,
            quota_why=None if p.quota is not None else "not read, or not readable")
            for p in impact.projects)
        return tuple(workloads), projects, dict(counts), drift, healed


# The health of a workload an action of this cycle moved (its live body predates it).
_MOVES = {
    Action.CREATE: (status.PROGRESSING, "created, awaiting the next cycle"),
    Action.REPLACE: (status.PROGRESSING, "replaced, awaiting the next cycle"),
    Action.RESUME: (status.PROGRESSING, "resumed, awaiting the next cycle"),
    Action.SUSPEND: (status.SUSPENDED, None),
}


def _gpus_text(g: gpus.Gpus) -> str:
    def num(x: float) -> str:
        return f"{x:g}"
    out = num(g.low) if not g.is_range else f"{num(g.low)}..{num(g.high)}"
    return f"{out} + unknown" if g.unknown else out


def requests_since(client, before: dict[str, int]) -> dict[str, int]:
    """The client's requests by answer since it counted `before` (the cycle's)."""
    now = getattr(client, "requests_by_status", {})
    return {k: n - before.get(k, 0) for k, n in sorted(now.items()) if n > before.get(k, 0)}


def one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, errors.SpecError):
        n = len(exc.problems)
        first = exc.problems[0] if exc.problems else ""
        return f"{n} problem{'s' if n != 1 else ''} in the specs: {first}"
    lines = text.splitlines()
    return lines[0] + (f" (and {len(lines) - 1} more lines)" if len(lines) > 1 else "")
