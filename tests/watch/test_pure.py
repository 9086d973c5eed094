"""The watch loop's pure pieces: durations, health from phase and kind, sync from the
plan, which changes each mode performs, the cap, policy denials, log lines."""

from __future__ import annotations

import json

import pytest

from reconciler.plans import (
    REASON_DELETED_OUTSIDE,
    REASON_DRIFT,
    REASON_NEW,
    REASON_PHASE_DRIFT,
    REASON_REMOVED,
    REASON_SPEC_CHANGED,
    REASON_UNCHANGED,
    Action,
    FieldChange,
    Plan,
    ResourceChange,
)
from reconciler.watch import health, intervals, logs, modes, status


@pytest.mark.parametrize("text,seconds", [("60s", 60), ("2m", 120), ("500ms", 0.5),
                                          ("1h30m", 5400), ("1.5s", 1.5), ("45", 45)])
def test_intervals_parse(text, seconds):
    assert intervals.parse(text) == seconds


@pytest.mark.parametrize("text", ["", "0s", "-1s", "5x", "s", "1m 2s", "nan", "inf", "1sm"])
def test_intervals_refuse(text):
    with pytest.raises(ValueError, match="duration"):
        intervals.parse(text)


def test_intervals_show_reads_back():
    for s in (0.5, 1, 90, 120, 3600):
        assert intervals.parse(intervals.show(s)) == s


@pytest.mark.parametrize("kind,live,expected", [
    ("DistributedTraining", {"actualPhase": "Running"}, status.HEALTHY),
    ("DistributedTraining", {"actualPhase": "Completed"}, status.HEALTHY),
    ("Training", {"actualPhase": "Completed"}, status.HEALTHY),
    ("DistributedInference", {"actualPhase": "Completed"}, status.DEGRADED),
    ("Inference", {"actualPhase": "Creating"}, status.PROGRESSING),
    ("Inference", {"actualPhase": "Pending"}, status.PROGRESSING),
    ("Inference", {"actualPhase": "Initializing"}, status.PROGRESSING),
    ("Workspace", {"actualPhase": "Resuming"}, status.PROGRESSING),
    ("Workspace", {"actualPhase": "Stopped"}, status.SUSPENDED),
    ("Workspace", {"actualPhase": "Running", "desiredPhase": "Stopped"}, status.SUSPENDED),
    ("Training", {"actualPhase": "Failed"}, status.DEGRADED),
    ("Inference", {"actualPhase": "Degraded"}, status.DEGRADED),
    ("Inference", {"actualPhase": "Deleting", "desiredPhase": "Deleted"}, status.MISSING),
    ("Inference", None, status.MISSING),
    ("Inference", {"actualPhase": "Running", "runningPods": 1,
                   "spec": {"autoscaling": {"minReplicas": 2}}}, status.DEGRADED),
    ("Inference", {"actualPhase": "Running", "runningPods": 2,
                   "spec": {"autoscaling": {"minReplicas": 2}}}, status.HEALTHY),
    # No workload: it runs nothing. There, it is healthy unless its phase says otherwise.
    ("Project", {"actualPhase": "Ready"}, status.HEALTHY),
    ("Project", {"actualPhase": "Creating"}, status.PROGRESSING),
    ("Project", {"actualPhase": "NotReady"}, status.DEGRADED),
    ("Project", {"actualPhase": "Deleting", "desiredPhase": "Deleted"}, status.MISSING),
    ("Project", None, status.MISSING),
    ("Department", {"name": "research"}, status.HEALTHY),
    ("AccessRule", {"subjectId": "alice"}, status.HEALTHY),
    ("Policy", {"type": "training"}, status.HEALTHY),
    # A workload without a phase yet is on its way.
    ("Training", {"name": "t"}, status.PROGRESSING),
])
def test_health_from_phase_and_kind(kind, live, expected):
    assert health.health_of(kind, live)[0] == expected


def change(addr="DistributedInference/7/a", action=Action.UPDATE, reason=REASON_DRIFT,
           drift=True) -> ResourceChange:
    kind, project, name = addr.split("/")
    changes = [FieldChange("spec.replicas", 5, 2, drift=drift)] if action is Action.UPDATE else []
    return ResourceChange(addr, kind, name, project, action, reason, changes=changes)


def test_sync_status_from_the_plan():
    assert health.sync_of(change(action=Action.NOOP, reason=REASON_UNCHANGED))[0] == status.SYNCED
    assert health.sync_of(change())[0] == status.DRIFTED
    assert health.sync_of(change(action=Action.CREATE, reason=REASON_DELETED_OUTSIDE))[0] \
        == status.DRIFTED
    assert health.sync_of(change(reason=REASON_SPEC_CHANGED, drift=False))[0] == status.OUT_OF_SYNC
    assert health.sync_of(change(), acted=True)[0] == status.HEALING
    assert health.sync_of(change(), error="500 boom") == (status.FAILED, "500 boom")


def test_heal_takes_only_drift_and_sync_does_not_prune():
    plan = Plan(changes=[
        change("DistributedInference/7/a"),                                        # PATCHed
        change("DistributedTraining/7/b", Action.RESUME, REASON_PHASE_DRIFT),      # suspended
        change("DistributedInference/7/c", Action.CREATE, REASON_DELETED_OUTSIDE),  # deleted
        change("DistributedInference/7/d", reason=REASON_SPEC_CHANGED, drift=False),
        change("DistributedInference/7/e", Action.CREATE, REASON_NEW),
        change("DistributedInference/7/f", Action.DELETE, REASON_REMOVED),
        change("DistributedInference/7/g", Action.NOOP, REASON_UNCHANGED),
    ])
    took = lambda sel: [c.address.rsplit("/", 1)[1] for c in sel.take]  # noqa: E731
    assert took(modes.select(plan, modes.REPORT, max_actions=10)) == []
    heal = modes.select(plan, modes.HEAL, max_actions=10)
    assert took(heal) == ["a", "c", "b"]  # address order
    assert "spec change" in heal.skipped["DistributedInference/7/d"]
    assert sorted(took(modes.select(plan, modes.SYNC, max_actions=10))) == ["a", "b", "c", "d", "e"]
    assert sorted(took(modes.select(plan, modes.SYNC, prune=True, max_actions=10))) == \
        ["a", "b", "c", "d", "e", "f"]


def test_the_cap_defers_the_rest_in_address_order():
    plan = Plan(changes=[change(f"DistributedInference/7/w{i}") for i in range(5)])
    sel = modes.select(plan, modes.HEAL, max_actions=2)
    assert [c.name for c in sel.take] == ["w0", "w1"]
    assert sel.deferred == [f"DistributedInference/7/w{i}" for i in (2, 3, 4)]


def test_a_workload_waiting_for_its_project_waits_while_the_project_is_held_back():
    # The project's replacement is protected: the training that would follow it into the
    # new project is not sent either.
    project = change("Project/c1/team-a", Action.REPLACE, REASON_SPEC_CHANGED, drift=False)
    training = change("Training/7/train-1", Action.REPLACE, REASON_SPEC_CHANGED, drift=False)
    training.known_after = {"projectId": project.address}
    plan = Plan(changes=[project, training])
    sel = modes.select(plan, modes.SYNC, max_actions=10,
                       protected={project.address: "protected by its spec"})
    assert sel.take == []
    assert sel.blocked == {project.address: modes.PROTECTED, training.address: project.address}
    assert sel.skipped[training.address] == \
        "waits for Project/c1/team-a, which this cycle does not act on"
    assert [c.address for c in modes.select(plan, modes.SYNC, max_actions=10).take] == \
        [project.address, training.address]
    # Under the cap, a workload that sorts before its project does not take the project's
    # turn; one whose project the cap defers (a delay, not a block) is deferred with it.
    first = change("DistributedTraining/7/bert", Action.REPLACE, REASON_SPEC_CHANGED,
                   drift=False)
    first.known_after = {"projectId": project.address}
    sel = modes.select(Plan(changes=[first, project]), modes.SYNC, max_actions=1)
    assert [c.address for c in sel.take] == [project.address]
    assert sel.deferred == [first.address]
    early = change("DistributedInference/7/a", reason=REASON_SPEC_CHANGED, drift=False)
    sel = modes.select(Plan(changes=[early, first, project]), modes.SYNC, max_actions=1)
    assert [c.address for c in sel.take] == [early.address]
    assert sel.deferred == [project.address, first.address]
    assert sel.blocked[first.address] == "--max-actions 1"


def test_a_denial_skips_its_workload_its_project_or_all():
    a, b = change("DistributedInference/7/a"), change("DistributedInference/8/b")
    assert modes.denied_by([("DistributedInference/7/a", "too big")], [a, b]).keys() == {a.address}
    assert modes.denied_by([("project 8 (team)", "over quota")], [a, b]).keys() == {b.address}
    assert modes.denied_by([("plan", "too destructive")], [a, b]).keys() == {a.address, b.address}
    sel = modes.select(Plan(changes=[a, b]), modes.HEAL, max_actions=5,
                       denied=modes.denied_by([("plan", "x")], [a, b]))
    assert sel.take == [] and set(sel.skipped) == {a.address, b.address}


def test_log_lines_are_one_line_each():
    j = json.loads(logs.line("cycle", {"cycle": 3, "error": "a\nb", "skip": None}, fmt="json",
                             now=0))
    assert j == {"ts": "1970-01-01T00:00:00.000Z", "event": "cycle", "cycle": 3, "error": "a\nb"}
    text = logs.line("cycle", {"cycle": 3, "reason": "two words", "actions": {"create/ok": 2}},
                     fmt="text", now=0)
    assert text == '1970-01-01T00:00:00.000Z cycle cycle=3 reason="two words" actions=create/ok:2'
    assert "\n" not in logs.line("x", {"error": "a\nb"}, fmt="text", now=0)
