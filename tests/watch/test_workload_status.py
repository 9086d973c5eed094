"""`watch.workload.status_of`, one workload's status in a cycle from the cycle's facts
alone: a failed heal is Failed with its error until an action succeeds, a vouched-for
workload's health comes from its listed phase, a change held back says why, and the time
since when a status holds moves only when the sync or health does."""

from __future__ import annotations

from types import SimpleNamespace

from reconciler.plans import REASON_DRIFT, Action, FieldChange, ResourceChange
from reconciler.watch import modes, status, workload

ADDR = "Training/7/a"


def _drifted(**more) -> ResourceChange:
    return ResourceChange(ADDR, "Training", "a", "7", Action.UPDATE, REASON_DRIFT,
                          changes=[FieldChange("spec.image", "b", "a", drift=True)], **more)


def _of(change, *, outcome=None, selection=None, live=None, last_error=None,
        last_seen=None, now=100.0):
    return workload.status_of(change, outcome=outcome, selection=selection or modes.Selection(),
                              live=live, held=None, last_error=last_error,
                              last_seen=last_seen, now=now)


def test_a_failed_heal_stays_failed_with_its_error_until_an_action_succeeds():
    failed = SimpleNamespace(ok=False, message="500 boom", status="failed")
    first = _of(_drifted(), outcome=failed, live={ADDR: {"actualPhase": "Running"}})
    assert (first.status.sync, first.status.error, first.done) == \
        (status.FAILED, "500 boom", "update/failed")
    assert first.error == "500 boom" and not first.healed
    # The next cycle does not act: still failed, the error kept, since the first cycle.
    again = _of(_drifted(), live={ADDR: {"actualPhase": "Running"}}, last_error=first.error,
                last_seen=first.seen, now=160.0)
    assert (again.status.sync, again.status.error, again.status.changed_at) == \
        (status.FAILED, "500 boom", 100.0)
    healed = _of(_drifted(), outcome=SimpleNamespace(ok=True, message=None, status="ok"),
                 live={ADDR: {"actualPhase": "Running"}}, last_error=again.error,
                 last_seen=again.seen, now=220.0)
    assert (healed.status.sync, healed.error, healed.healed, healed.status.changed_at) == \
        (status.HEALING, None, True, 220.0)


def test_a_workload_the_list_vouched_for_takes_its_health_from_the_listed_phase():
    vouched = _drifted(live_phase="Stopped")
    got = _of(vouched, live={})  # refreshed, but not read: the list vouched for it
    assert (got.status.health, got.status.phase) == (status.SUSPENDED, "Stopped")
    assert _of(vouched, live=None).status.health == status.MISSING  # not refreshed at all


def test_a_vouched_for_item_without_a_phase_is_not_missing():
    """A project's (or an access rule's, a policy's) collection item has no phase: vouched
    for, it reads as it does when its GET body is read, not as gone."""
    project = ResourceChange("Project/c1/team-a", "Project", "team-a", "", Action.NOOP, None)
    vouched = _of(project, live={})
    read = _of(project, live={"Project/c1/team-a": {"name": "team-a", "id": "4"}})
    assert vouched.status.health == read.status.health == status.HEALTHY
    assert vouched.status.reason is None and read.status.reason is None
    gone = _of(project, live={"Project/c1/team-a": None})
    assert gone.status.health == status.MISSING


def test_an_action_held_back_says_why_and_counts_as_deferred_or_skipped():
    over_cap = modes.Selection(deferred=[ADDR], blocked={ADDR: "--max-actions 0"})
    got = _of(_drifted(), selection=over_cap)
    assert got.done == "update/deferred" and got.status.blocked_by == "--max-actions 0"
    assert got.status.reason.endswith("deferred: over --max-actions this cycle")
    denied = modes.Selection(skipped={ADDR: "denied by policy cap"},
                             blocked={ADDR: "policy cap"})
    got = _of(_drifted(), selection=denied)
    assert got.done == "update/skipped"
    assert got.status.reason.endswith("not done: denied by policy cap")
