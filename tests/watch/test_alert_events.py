"""events.between: one alert per change of a workload's state, none on an unchanged
snapshot, one summary at start-up, nothing from a standby (pure; no server)."""

from __future__ import annotations

from dataclasses import replace

from reconciler.watch import events as ev
from reconciler.watch import status as st
from tests.helpers import snapshots as b

JOB = "Training/7/job-1"


def _start(workloads=None, mode="heal"):
    first = b.next_cycle(b.snapshot(workloads=workloads, mode=mode))
    assert ev.between(None, first) == [] or workloads is not None
    return first


def _then(snap, **fields):
    return b.next_cycle(snap, workloads=b.changed(snap, JOB, **fields))


def test_a_fleet_already_drifted_at_start_up_gives_one_summary_not_one_event_each():
    fleet = [b.workload(f"job-{i}", sync=st.DRIFTED if i % 3 == 0 else st.SYNCED,
                        reason="spec.image changed outside") for i in range(1000)]
    first = b.next_cycle(b.snapshot(workloads=fleet))

    found = ev.between(None, first)

    assert [e.event for e in found] == [ev.SUMMARY]
    doc = found[0].as_json()
    assert doc["needing_attention"] == 334 and doc["counts"] == {"Drifted": 334}
    assert "1,000 workloads, 334 Drifted" in doc["text"] and "and 324 more" in doc["text"]
    assert len(doc["addresses"]) == ev.SUMMARY_NAMES


def test_a_healthy_fleet_at_start_up_says_nothing():
    assert ev.between(None, b.next_cycle(b.snapshot())) == []


def test_drift_is_one_event_and_an_unchanged_next_cycle_none():
    first = _start()
    drifted = _then(first, sync=st.DRIFTED, reason="spec.compute.gpuDevicesRequest 2 -> 4")
    same = b.next_cycle(drifted)

    found = ev.between(first, drifted)

    assert [(e.event, e.workload.address) for e in found] == [(ev.DRIFTED, JOB)]
    doc = found[0].as_json()
    assert doc["severity"] == "warning" and doc["cycle"] == 2 and doc["mode"] == "heal"
    assert doc["workload"]["reason"] == "spec.compute.gpuDevicesRequest 2 -> 4"
    assert doc["previous"] == {"sync": "Synced", "health": "Healthy"}
    assert JOB in doc["text"] and "drifted" in doc["text"]
    assert ev.between(drifted, same) == []
    assert ev.between(drifted, drifted) == []  # the same cycle published twice


def test_a_drift_the_watch_heals_is_one_healed_event_once_the_next_cycle_confirms_it():
    first = _start()
    healing = _then(first, sync=st.HEALING, acted="update/ok", drift_found=True,
                    reason="spec.replicas changed outside: 2 -> 5 live; update sent to undo it")
    healed = _then(healing, sync=st.SYNCED, acted=None, drift_found=False, reason=None)

    assert ev.between(first, healing) == []
    found = ev.between(healing, healed)
    assert [e.event for e in found] == [ev.HEALED]
    assert found[0].severity == "info"
    assert found[0].text.startswith(f"{JOB} was healed: spec.replicas changed outside: 2 -> 5 "
                                    "live; update sent to undo it")
    assert ev.between(healed, b.next_cycle(healed)) == []


def test_a_heal_that_did_not_hold_is_told_as_drifted():
    first = _start()
    healing = _then(first, sync=st.HEALING, acted="update/ok", drift_found=True)
    again = _then(healing, sync=st.DRIFTED, acted="update/deferred", drift_found=True,
                  blocked_by="--max-actions 10")
    assert [e.event for e in ev.between(healing, again)] == [ev.DRIFTED]


def test_a_sync_mode_apply_is_no_drift():
    first = _start(mode="sync")
    applied = _then(first, sync=st.OUT_OF_SYNC, reason="update (spec changed)")
    healing = _then(applied, sync=st.HEALING, acted="update/ok")
    synced = _then(healing, sync=st.SYNCED, acted=None)
    assert ev.between(first, applied) == []
    assert ev.between(applied, healing) == []
    assert ev.between(healing, synced) == []


def test_failures_to_heal_and_to_apply_are_told_apart():
    first = _start()
    failed = _then(first, sync=st.FAILED, drift_found=True, acted="update/failed",
                   error="PATCH ...: answered 409")
    [event] = ev.between(first, failed)
    assert event.event == ev.HEAL_FAILED and "answered 409" in event.text
    assert event.severity == "error"
    assert ev.between(failed, b.next_cycle(failed)) == []

    first = _start(mode="sync")
    outofsync = _then(first, sync=st.OUT_OF_SYNC)
    failed = _then(outofsync, sync=st.FAILED, acted="update/failed", error="answered 422")
    assert [e.event for e in ev.between(outofsync, failed)] == [ev.APPLY_FAILED]
    back = _then(failed, sync=st.SYNCED, error=None)
    assert [e.event for e in ev.between(failed, back)] == [ev.HEALED]


def test_deleted_outside_is_one_event_naming_both_changes():
    first = _start()
    gone = _then(first, sync=st.DRIFTED, health=st.MISSING, phase=None,
                 reason="deleted outside the watch")

    [event] = ev.between(first, gone)

    assert event.event == ev.MISSING
    assert "drifted from what was applied and is Missing" in event.text
    assert event.as_json()["workload"]["health"] == "Missing"


def test_degraded_and_recovered():
    first = _start()
    degraded = _then(first, health=st.DEGRADED, phase="Failed", reason="phase Failed")
    running = _then(degraded, health=st.HEALTHY, phase="Running", reason=None)
    assert [e.event for e in ev.between(first, degraded)] == [ev.DEGRADED]
    assert [e.event for e in ev.between(degraded, running)] == [ev.RECOVERED]


def test_a_new_spec_is_no_news_until_it_fails():
    first = _start(mode="sync")
    new = b.workload("job-new", sync=st.OUT_OF_SYNC, health=st.MISSING, phase=None)
    added = b.next_cycle(first, workloads=(*first.workloads, new))
    assert ev.between(first, added) == []
    creating = b.next_cycle(added, workloads=b.changed(added, new.address, sync=st.FAILED,
                                                        acted="create/failed",
                                                        error="answered 400"))
    assert [e.event for e in ev.between(added, creating)] == [ev.APPLY_FAILED]


def test_a_spec_the_watch_creates_itself_is_no_recovery():
    """`watch --mode sync --max-actions 1`: a new spec waits (Missing, OutOfSync, deferred)
    for its turn, is created (Healing), then runs: nothing to tell at any step."""
    first = _start(mode="sync")
    new = b.workload("job-new", sync=st.OUT_OF_SYNC, health=st.MISSING, phase=None,
                     blocked_by="--max-actions 1", acted="create/deferred")
    waiting = b.next_cycle(first, workloads=(*first.workloads, new))
    created = b.next_cycle(waiting, workloads=b.changed(
        waiting, new.address, sync=st.HEALING, health=st.PROGRESSING, phase="Creating",
        blocked_by=None, acted="create/ok"))
    running = b.next_cycle(created, workloads=b.changed(
        created, new.address, sync=st.SYNCED, health=st.HEALTHY, phase="Running", acted=None))
    assert ev.between(first, waiting) == []
    assert ev.between(waiting, created) == []
    assert ev.between(created, running) == []


def test_a_workload_deleted_outside_and_created_again_has_recovered():
    first = _start(mode="sync")
    gone = _then(first, sync=st.DRIFTED, health=st.MISSING, phase=None,
                 reason="deleted outside the watch")
    back = _then(gone, sync=st.HEALING, health=st.PROGRESSING, phase="Creating",
                 acted="create/ok", drift_found=True)
    [event] = ev.between(gone, back)
    assert event.event == ev.RECOVERED and "is Progressing now" in event.text


def test_a_workload_its_spec_keeps_stopped_is_fine_and_no_alarm():
    """desiredPhase: Stopped, live Stopped: Synced and Suspended is what was asked for:
    not listed as needing attention, in no summary, sorted with the healthy ones."""
    stopped = b.workload("job-stopped", sync=st.SYNCED, health=st.SUSPENDED, phase="Stopped")
    assert ev.is_fine(stopped) and not ev.needs_attention(stopped)
    first = b.next_cycle(b.snapshot(workloads=[stopped]))
    assert ev.between(None, first) == []
    healthy = b.workload("job-running")
    drifted = b.workload("job-drifted", sync=st.DRIFTED)
    order = sorted([drifted, stopped, healthy], key=ev.urgency)
    assert order[0] is drifted
    # Suspended outside (the spec says Running) is drift, and needs a look.
    outside = replace(stopped, sync=st.DRIFTED, reason="suspended outside")
    assert not ev.is_fine(outside) and ev.needs_attention(outside)


def test_a_policy_block_is_told_once_while_it_lasts():
    first = _start()
    blocked = _then(first, sync=st.DRIFTED, blocked_by="gpu-cap", acted="update/skipped")
    again = b.next_cycle(blocked)
    other = _then(again, blocked_by="gpu-cap, quota")

    [event] = ev.between(first, blocked)
    assert event.event == ev.BLOCKED and event.severity == "warning"
    assert "drifted from what was applied and was not changed: blocked by gpu-cap" in event.text
    assert event.as_json()["workload"]["blocked_by"] == "gpu-cap"
    assert ev.between(blocked, again) == []
    assert [e.event for e in ev.between(again, other)] == [ev.BLOCKED]


def test_the_cap_defers_without_a_blocked_event():
    first = _start()
    deferred = _then(first, sync=st.OUT_OF_SYNC, blocked_by="--max-actions 10",
                     acted="create/deferred")
    assert ev.between(first, deferred) == []


def test_cycles_failing_once_after_a_few_then_recovered():
    snap = _start()
    seen = []
    for _ in range(5):
        nxt = b.next_cycle(snap, result="failed", error="GET /api/v1/workloads: no answer")
        seen += [e.event for e in ev.between(snap, nxt)]
        snap = nxt
    ok = b.next_cycle(snap)
    assert seen == [ev.CYCLES_FAILING]
    [back] = ev.between(snap, ok)
    assert back.event == ev.CYCLES_RECOVERED and back.as_json()["failed_cycles"] == 5


def test_a_standby_says_nothing_and_a_takeover_summarises():
    drifted = b.next_cycle(b.snapshot(workloads=[b.workload("a", sync=st.DRIFTED)]))
    standby = replace(drifted, role=st.STANDBY)
    assert ev.between(None, standby) == []
    took_over = b.next_cycle(standby)
    took_over = replace(took_over, role=st.ACTIVE)
    [event] = ev.between(standby, took_over)
    assert event.event == ev.SUMMARY and "took over" in event.text


def test_the_slack_text_escapes_its_control_characters():
    first = _start()
    odd = _then(first, sync=st.DRIFTED, reason="label a<b & c>d")
    doc = ev.between(first, odd)[0].as_json()
    assert "a&lt;b &amp; c&gt;d" in doc["text"]
    assert doc["workload"]["reason"] == "label a<b & c>d"  # the data as it is
