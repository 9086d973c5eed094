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

from reconciler import errors
from reconciler.operations.judging import finish
from reconciler.plans import Plan
from reconciler.watch import status, workload


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
        """Each workload's status (`watch.workload.status_of`), logging each change of
        its sync or health and each failed action; the projects', this cycle's actions by
        `<action>/<result>`, drift found and healed."""
        held_by = {w.address: w.before for w in impact.workloads}
        counts: dict[str, int] = collections.Counter()
        healed = drift = 0
        workloads = []
        for change in the_plan.changes:
            address = change.address
            outcome = outcomes.get(address)
            previous = self.seen.get(address)
            worked = workload.status_of(
                change, outcome=outcome, selection=selection, live=live,
                held=held_by.get(address), last_error=self.failures.get(address),
                last_seen=previous, now=now)
            if outcome is not None and not outcome.ok:
                self.log("action_failed", address=address, action=change.action.value,
                         error=outcome.message)
            if worked.error is None:
                self.failures.pop(address, None)
            else:
                self.failures[address] = worked.error
            if previous and previous[:2] != worked.seen[:2]:
                self.log("workload", address=address, sync=worked.seen[0],
                         health=worked.seen[1], was_sync=previous[0], was_health=previous[1],
                         reason=worked.status.reason)
            self.seen[address] = worked.seen
            if worked.done is not None:
                counts[worked.done] += 1
            drift += worked.status.drift_found
            healed += worked.healed
            workloads.append(worked.status)
        known = {c.address for c in the_plan.changes}
        for gone in [a for a in self.seen if a not in known]:
            del self.seen[gone]
        projects = tuple(status.ProjectStatus(
            project=p.project_id, name=p.project_name, gpus_held=p.before.high,
            gpus_planned=p.after.high, quota=p.quota,
            quota_why=None if p.quota is not None else "not read, or not readable")
            for p in impact.projects)
        return tuple(workloads), projects, dict(counts), drift, healed


def requests_since(client, before: dict[str, int]) -> dict[str, int]:
    """The client's requests by answer since it counted `before` (the cycle's)."""
    now = client.requests_by_status
    return {k: n - before.get(k, 0) for k, n in sorted(now.items()) if n > before.get(k, 0)}


def one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, errors.SpecError):
        n = len(exc.problems)
        first = exc.problems[0] if exc.problems else ""
        return f"{n} problem{'s' if n != 1 else ''} in the specs: {first}"
    lines = text.splitlines()
    return lines[0] + (f" (and {len(lines) - 1} more lines)" if len(lines) > 1 else "")
