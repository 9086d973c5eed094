"""The saved-plan encoding on its own: round trip, versions, damage, fingerprints."""

from __future__ import annotations

import json

import pytest

from reconciler import gpus, planfile
from reconciler.desired.types import DesiredWorkload, Lifecycle
from reconciler.plans import Action
from reconciler.state.model import State
from tests.helpers.examples import PLANS
from tests.helpers.plans import saved_plan


KEY = bytes(range(32))
HF_TOKEN = "hf_abcdefghijklmnop"  # the examples' secret value


def test_round_trip_keeps_every_field():
    """Every field comes back; the sensitive values of the bodies apply sends come back
    decrypted, those only shown (live's `before`, drift's `applied`, the field changes) stay
    hashed."""
    saved = saved_plan()
    text = planfile.encode(saved, KEY)
    back = planfile.reveal(planfile.decode(text), KEY, lambda folder: [], "plan")
    assert back.secrets is None
    for got, sent in zip(back.plan.changes, saved.plan.changes):
        assert (got.after, got.patch) == (sent.after, sent.patch)
        got.before, got.applied, got.changes = sent.before, sent.applied, sent.changes
    assert back == saved
    assert planfile.decode(planfile.encode(back, KEY)).plan.lineage == saved.plan.lineage


def test_a_plan_without_a_key_holds_hashes_and_resolves_them_from_the_specs_again():
    saved = saved_plan()
    saved.specs_path = "/specs"
    text = planfile.encode(saved)
    assert HF_TOKEN not in text
    assert planfile.decode(text).secrets["mode"] == planfile.RESOLVE

    def specs(token: str) -> list[DesiredWorkload]:
        found = {d.address: d for d in saved.desired}
        for rc in saved.plan.changes:
            if rc.after is not None and rc.address not in found:
                body = json.loads(json.dumps(rc.after).replace(HF_TOKEN, token))
                found[rc.address] = DesiredWorkload(rc.kind, rc.name, rc.project_id, "c1", body,
                                                    lifecycle=Lifecycle(sensitive=rc.sensitive))
        return list(found.values())

    # The specs as they are now give the values back; a value changed since is refused.
    back = planfile.reveal(planfile.decode(text), None, lambda folder: specs(HF_TOKEN), "plan")
    assert [rc.after for rc in back.plan.changes] == [rc.after for rc in saved.plan.changes]
    with pytest.raises(planfile.PlanFileError, match=r"HF_TOKEN\]\.value: differs from the "
                       "value the plan was made with; nothing was applied"):
        planfile.reveal(planfile.decode(text), None, lambda folder: specs("hf_other"), "plan")


def test_a_saved_plan_keeps_the_quotas_it_read_and_makes_the_same_gpu_impact():
    saved = planfile.SavedPlan(plan=PLANS["gpu_kinds"](), desired=[], live={})
    doc = json.loads(planfile.encode(saved))
    assert doc["gpu_quotas"] == {"7": 64, "12": 16, "9": None}
    back = gpus.impact_of(planfile.decode(json.dumps(doc)).plan)
    assert back == gpus.impact_of(saved.plan) and back.project("7").over_quota
    # Without a refresh no quota was read: the file says nothing, and the impact knows none.
    offline = PLANS["mixed"]()
    assert "gpu_quotas" not in json.loads(planfile.encode(
        planfile.SavedPlan(plan=offline, desired=[], live={})))


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(version=4), "newer runai-reconcile"),
    (lambda d: d.update(version=2), r"earlier runai-reconcile \(plan file version 2; this one "
                                    r"reads version 3\); make the plan again"),
    (lambda d: d.update(surprise=1), r"damaged or incomplete \(surprise: extra inputs"),
    (lambda d: d["options"].update(destroy="yes"), r"damaged or incomplete \(options: destroy"),
    (lambda d: d.update(format="terraform"), "is not a saved plan"),
    (lambda d: d.pop("changes"), "damaged or incomplete"),
    (lambda d: d["changes"][0].update(action="explode"), "damaged or incomplete"),
    (lambda d: d["changes"][0].update(kind="Nope"), "kind this version does not know"),
    (lambda d: d.update(gpu_quotas={"7": "lots"}),
     r"damaged or incomplete \(gpu_quotas: 7: input should be a valid number"),
    (lambda d: d.update(gpu_quotas=[16]), r"damaged or incomplete \(gpu_quotas"),
])
def test_damaged_or_foreign_files_are_refused_clearly(mutate, message):
    doc = json.loads(planfile.encode(saved_plan()))
    mutate(doc)
    with pytest.raises(planfile.PlanFileError, match=message):
        planfile.decode(json.dumps(doc), "plan.json")
    with pytest.raises(planfile.PlanFileError, match="not JSON"):
        planfile.decode("{", "plan.json")


LIVE = {"workloadId": "w1", "name": "s", "projectId": "7", "clusterId": "c1",
        "spec": {"replicas": 2}, "actualPhase": "Creating", "desiredPhase": "Running",
        "createdAt": "2024-01-01T00:00:00Z"}


def test_fingerprint_follows_what_the_planner_uses():
    fp = planfile.fingerprint("DistributedInference", LIVE)
    assert fp.startswith("sha256:")
    same = dict(LIVE, actualPhase="Running", createdAt="later")
    assert planfile.fingerprint("DistributedInference", same) == fp
    for changed in (dict(LIVE, spec={"replicas": 3}), dict(LIVE, workloadId="w2"),
                    dict(LIVE, desiredPhase="Stopped"), dict(LIVE, actualPhase="Completed")):
        assert planfile.fingerprint("DistributedInference", changed) != fp
    assert planfile.fingerprint("DistributedInference", None) == planfile.ABSENT


def test_staleness_checks():
    saved = saved_plan()
    saved.plan.lineage, saved.plan.serial = "L", 3
    assert planfile.state_problems(saved, State(lineage="L", serial=3)) == []
    assert "lineage" in planfile.state_problems(saved, State(lineage="M", serial=3))[0]
    assert "serial 3 then, 4 now" in planfile.state_problems(saved, State(lineage="L", serial=4))[0]
    addr = saved.plan.changes[0].address
    assert saved.plan.changes[0].action is not Action.NOOP
    saved.live = {addr: planfile.fingerprint("DistributedInference", LIVE)}
    assert planfile.live_problems(saved, {addr: dict(LIVE, actualPhase="Running")}) == []
    assert planfile.live_problems(saved, {addr: None}) == [f"{addr} was deleted since the plan was made"]


def test_a_plan_made_before_any_state_adopts_the_new_state():
    saved = saved_plan()
    saved.plan.lineage, saved.plan.serial = "L", 0
    fresh = State()
    planfile.adopt_new_state(saved, fresh)
    assert fresh.lineage == "L" and planfile.state_problems(saved, fresh) == []


def test_a_journal_that_changed_the_records_since_the_plan_makes_it_stale():
    """A run killed after the plan journals its changes without moving the serial: the
    digest of the records and open intents tells; the same reads give the same digest."""
    from reconciler.state import ResourceState, journal

    saved = saved_plan()
    state = State(lineage="L", serial=3)
    saved.plan.lineage, saved.plan.serial = "L", 3
    saved.state_digest = planfile.state_digest(state, [])
    assert planfile.state_problems(saved, State(lineage="L", serial=3), []) == []
    maybe = ResourceState(kind="DistributedTraining", name="x", project_id="7", cluster_id="c1",
                          workload_id=None, applied={"name": "x"})
    moved = State(lineage="L", serial=3, resources={maybe.address: maybe})
    intent = journal.Intent(1, "create", maybe.address, body={"name": "x"}, maybe=maybe)
    assert "interrupted or killed" in planfile.state_problems(saved, moved, [intent])[0]
    # A plan made after that run saw the same journal: it is not stale.
    saved.state_digest = planfile.state_digest(moved, [intent])
    assert planfile.state_problems(saved, moved, [intent]) == []
    assert planfile.decode(planfile.encode(saved)).state_digest == saved.state_digest
    saved.state_digest = None  # a file from before the digest: lineage and serial only
    assert planfile.state_problems(saved, moved, [intent]) == []


def test_a_plan_is_written_whole_beside_the_old_one_then_renamed(tmp_path, monkeypatch):
    """`plan --out` over an existing plan: a failure while writing (a full disk, a kill
    before the rename) leaves the old file as it was and no temporary file behind; a
    write that succeeds replaces the file by a rename (a new inode), mode 0600."""
    import os

    path = tmp_path / "plan.json"
    planfile.write(path, saved_plan())
    old = path.read_bytes()
    inode = path.stat().st_ino

    def full(fd):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(planfile.os, "fsync", full)
        with pytest.raises(OSError, match="No space left"):
            planfile.write(path, planfile.SavedPlan(plan=PLANS["mixed"](), desired=[], live={}))
    assert path.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json"]

    again = saved_plan()
    again.plan_id = "another"
    planfile.write(path, again)
    assert path.stat().st_ino != inode and oct(path.stat().st_mode & 0o777) == "0o600"
    assert planfile.read(path).plan_id == "another"
    assert sorted(os.listdir(tmp_path)) == ["plan.json"]
