"""Planner tests: specs + state + live -> the action, reason and field changes per address."""

from __future__ import annotations

import pytest

from reconciler import errors, kinds, planner, plans
from reconciler.plans import Action

from tests.helpers.builders import (addr, desired, di_body, dt_body, edit, live_of, rstate, set_path,
                       state_of)

B = dt_body()
I = di_body()  # noqa: E741
A_B = addr(B)
A_I = addr(I)
WID = "3f1c1d2e-0000-4000-8000-000000000001"


def plan1(dw=None, rs=None, live=..., **kw) -> plans.ResourceChange:
    """Plan one address; `live=...` means not refreshed."""
    body = dw.body if dw is not None else rs.applied
    a = addr(body, dw.kind if dw is not None else rs.kind)
    lv = {} if live is ... else {a: live}
    p = planner.make_plan([dw] if dw else [], state_of(*([rs] if rs else [])), lv, **kw)
    assert [c.address for c in p.changes] == [a]
    return p.changes[0]


def summary(rc):
    return rc.action, rc.reason


# --- in specs, not in state ------------------------------------------------------------

def test_new_workload_is_created():
    rc = plan1(desired(B), live=None)
    assert summary(rc) == (Action.CREATE, plans.REASON_NEW)
    assert rc.after == B and rc.before is None and rc.workload_id is None
    assert rc.desired_phase == "Running" and rc.live_phase is None


def test_new_workload_without_refresh_is_created():
    assert summary(plan1(desired(B))) == (Action.CREATE, plans.REASON_NEW)


def test_adopting_an_identical_live_workload_is_a_noop():
    rc = plan1(desired(B), live=live_of(B))
    assert summary(rc) == (Action.NOOP, plans.REASON_UNCHANGED)
    assert rc.workload_id == WID


def test_adopting_a_different_training_replaces_it():
    rc = plan1(desired(set_path(B, "spec.image", "img:2")), live=live_of(B))
    assert summary(rc) == (Action.REPLACE, plans.REASON_SPEC_CHANGED)
    assert rc.replace_paths == ["spec.image"]


def test_adopting_an_inference_with_other_replicas_updates_it():
    rc = plan1(desired(set_path(I, "spec.replicas", 3)), live=live_of(I))
    assert summary(rc) == (Action.UPDATE, plans.REASON_SPEC_CHANGED)
    assert rc.patch == {"spec": {"replicas": 3}}


def test_adopting_a_running_training_that_should_be_stopped_suspends_it():
    rc = plan1(desired(B, phase="Stopped"), live=live_of(B))
    assert summary(rc) == (Action.SUSPEND, plans.REASON_PHASE)


# --- in specs and state, gone from live ---------------------------------------------------

def test_deleted_outside_is_recreated_and_reported_as_drift():
    rc = plan1(desired(B), rstate(B), live=None)
    assert summary(rc) == (Action.CREATE, plans.REASON_DELETED_OUTSIDE)
    assert rc.is_drift and rc.workload_id is None and rc.before is None


@pytest.mark.parametrize("rs", [rstate(B, completed=True), rstate(B, last_phase="Completed")],
                         ids=["completed-flag", "last-phase"])
def test_completed_training_auto_deleted_is_not_recreated(rs):
    rc = plan1(desired(B), rs, live=None)
    assert summary(rc) == (Action.NOOP, plans.REASON_COMPLETED)


def test_completed_training_auto_deleted_runs_again_when_its_spec_changed():
    rc = plan1(desired(set_path(B, "spec.numWorkers", 8)), rstate(B, completed=True), live=None)
    assert summary(rc) == (Action.CREATE, plans.REASON_SPEC_CHANGED)
    assert [c.path for c in rc.changes] == ["spec.numWorkers"]


def test_inference_gone_is_recreated_even_if_state_says_completed():
    rc = plan1(desired(I), rstate(I, last_phase="Completed"), live=None)
    assert summary(rc) == (Action.CREATE, plans.REASON_DELETED_OUTSIDE)


# --- in specs and state, live present ---------------------------------------------------

def test_unchanged_with_server_defaults_is_a_noop():
    rc = plan1(desired(B), rstate(B), live=live_of(B))
    assert summary(rc) == (Action.NOOP, plans.REASON_UNCHANGED)
    assert rc.changes == [] and rc.patch is None


def test_training_image_change_replaces_and_names_the_path():
    new = set_path(B, "spec.image", "nvcr.io/nvidia/pytorch:24.10-py3")
    rc = plan1(desired(new), rstate(B), live=live_of(B))
    assert summary(rc) == (Action.REPLACE, plans.REASON_SPEC_CHANGED)
    assert rc.replace_paths == ["spec.image"]
    assert rc.after == new and rc.workload_id == WID
    assert "workloadId" not in rc.before and rc.before["spec"]["image"] == B["spec"]["image"]


def test_training_drift_replaces_reported_as_drift():
    rc = plan1(desired(B), rstate(B), live=set_path(live_of(B), "spec.numWorkers", 2))
    assert summary(rc) == (Action.REPLACE, plans.REASON_DRIFT)
    assert [(c.path, c.before, c.after, c.drift) for c in rc.changes] == [
        ("spec.numWorkers", 2, 4, True)]
    assert rc.is_drift


def test_inference_replicas_change_is_one_patch_of_replicas_only():
    rc = plan1(desired(set_path(I, "spec.replicas", 4)), rstate(I), live=live_of(I))
    assert summary(rc) == (Action.UPDATE, plans.REASON_SPEC_CHANGED)
    assert rc.patch == {"spec": {"replicas": 4}}
    assert rc.replace_paths == []


def test_inference_replicas_drift_is_an_update_reported_as_drift():
    rc = plan1(desired(I), rstate(I), live=set_path(live_of(I), "spec.replicas", 5))
    assert summary(rc) == (Action.UPDATE, plans.REASON_DRIFT)
    assert rc.patch == {"spec": {"replicas": 2}}
    assert rc.changes[0].drift


def test_inference_replicas_and_image_change_replaces_naming_only_the_image():
    new = set_path(set_path(I, "spec.replicas", 4), "spec.leader.image", "vllm/vllm-openai:v0.7.0")
    rc = plan1(desired(new), rstate(I), live=live_of(I))
    assert rc.action is Action.REPLACE and rc.patch is None
    assert rc.replace_paths == ["spec.leader.image"]
    assert [c.path for c in rc.changes] == ["spec.leader.image", "spec.replicas"]


def test_removing_replicas_replaces_the_inference():
    rc = plan1(desired(set_path(I, "spec.replicas", None)), rstate(I), live=live_of(I))
    assert rc.action is Action.REPLACE and rc.replace_paths == ["spec.replicas"]


def test_ignore_changes_keeps_a_changed_field_from_acting():
    d = desired(set_path(B, "spec.numWorkers", 8), ignore=("spec.numWorkers",))
    assert summary(plan1(d, rstate(B), live=set_path(live_of(B), "spec.numWorkers", 2))) == (
        Action.NOOP, plans.REASON_UNCHANGED)


def test_a_path_is_under_a_prefix_only_at_a_segment_boundary():
    """ignoreChanges, updatable paths and sensitive paths share one rule: `spec.image`
    covers `spec.image` and what lies under it, never `spec.imagePullPolicy`."""
    d = desired(set_path(B, "spec.imagePullPolicy", "Always"), ignore=("spec.image",))
    rc = plan1(d, rstate(B), live=live_of(B))
    assert rc.action is Action.REPLACE and rc.replace_paths == ["spec.imagePullPolicy"]
    assert kinds.under_any("spec.environmentVariables[HF].value", ["spec.environmentVariables"])
    assert kinds.under("spec.args", "spec.args") and not kinds.under("spec.argsX", "spec.args")


def test_patch_holds_the_full_desired_value_of_each_changed_updatable_field(monkeypatch):
    fake = kinds.Kind(name="FakeInference", api_path="/api/v1/workloads/fake",
                      body_keys=("spec",), containers=("spec",), defaults={},
                      list_types=frozenset(), pods=kinds.pods.single,
                      updatable_paths=frozenset({"spec.environmentVariables", "spec.image"}))
    monkeypatch.setitem(kinds.KINDS, fake.name, fake)
    body = {"name": "svc", "projectId": "7", "clusterId": B["clusterId"],
            "spec": {"image": "img:1", "environmentVariables": [
                {"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}}
    new = edit(body, lambda b: b["spec"]["environmentVariables"][1].update(value="3"))
    rc = plan1(desired(new, "FakeInference"), rstate(body, "FakeInference"),
               live=live_of(body, defaults=False))
    assert rc.action is Action.UPDATE
    assert rc.patch == {"spec": {"environmentVariables": new["spec"]["environmentVariables"]}}


def test_an_addition_in_a_list_the_spec_does_not_set_is_patched_away_with_an_empty_list():
    """An Inference whose spec sets no environment variables, and one added outside: the
    PATCH sends an empty list (null would leave it), in place; an `args` added outside
    cannot be unset by a PATCH, so it replaces."""
    body = {"name": "chat", "projectId": "7", "clusterId": B["clusterId"],
            "spec": {"image": "vllm/vllm-openai:v0.6.3"}}
    added = {"name": "LD_PRELOAD", "value": "/tmp/hook.so"}
    live = live_of(edit(body, lambda b: b["spec"].update(environmentVariables=[added])),
                   kind="Inference")
    rc = plan1(desired(body, "Inference"), rstate(body, "Inference"), live=live)
    assert summary(rc) == (Action.UPDATE, plans.REASON_DRIFT)
    assert [(c.path, c.before, c.after, c.added) for c in rc.changes] == [
        ("spec.environmentVariables[LD_PRELOAD]", added, None, True)]
    assert rc.patch == {"spec": {"environmentVariables": []}}

    live = live_of(edit(body, lambda b: b["spec"].update(args="--trust-remote-code")),
                   kind="Inference")
    rc = plan1(desired(body, "Inference"), rstate(body, "Inference"), live=live)
    assert summary(rc) == (Action.REPLACE, plans.REASON_DRIFT)
    assert [(c.path, c.added, c.forces_replacement) for c in rc.changes] == [
        ("spec.args", True, True)]


# --- completed trainings -----------------------------------------------------------------

def test_completed_training_ignores_drift_and_phase():
    live = set_path(live_of(B, actual_phase="Completed"), "spec.numWorkers", 2)
    rc = plan1(desired(B, phase="Stopped"), rstate(B), live=live)
    assert summary(rc) == (Action.NOOP, plans.REASON_COMPLETED)
    assert rc.live_phase == "Completed"


def test_completed_training_with_changed_spec_is_replaced_with_user_changes_only():
    live = set_path(live_of(B, actual_phase="Completed"), "spec.numWorkers", 2)
    rc = plan1(desired(set_path(B, "spec.image", "img:2")), rstate(B), live=live)
    assert summary(rc) == (Action.REPLACE, plans.REASON_SPEC_CHANGED)
    assert [c.path for c in rc.changes] == ["spec.image"]


def test_completed_training_without_refresh_is_left_alone():
    rc = plan1(desired(B), rstate(B, last_phase="Completed"))
    assert summary(rc) == (Action.NOOP, plans.REASON_COMPLETED)


# --- phases -------------------------------------------------------------------------------

def test_desired_stopped_suspends_a_running_training():
    rc = plan1(desired(B, phase="Stopped"), rstate(B), live=live_of(B))
    assert summary(rc) == (Action.SUSPEND, plans.REASON_PHASE)
    assert [(c.path, c.before, c.after, c.drift) for c in rc.changes] == [
        ("desiredPhase", "Running", "Stopped", False)]
    assert rc.desired_phase == "Stopped" and rc.live_phase == "Running"


@pytest.mark.parametrize("desired_phase,actual", [("Stopped", "Stopped"), ("Running", "Stopping"),
                                                  ("Stopped", "Running")])
def test_suspended_training_that_should_be_stopped_is_a_noop(desired_phase, actual):
    live = live_of(B, desired_phase=desired_phase, actual_phase=actual)
    rc = plan1(desired(B, phase="Stopped"), rstate(B, desired_phase="Stopped"), live=live)
    assert summary(rc) == (Action.NOOP, plans.REASON_UNCHANGED)


def test_suspended_outside_is_resumed_as_drift():
    live = live_of(B, desired_phase="Stopped", actual_phase="Stopped")
    rc = plan1(desired(B), rstate(B), live=live)
    assert summary(rc) == (Action.RESUME, plans.REASON_PHASE_DRIFT)
    assert [(c.path, c.before, c.after, c.drift) for c in rc.changes] == [
        ("desiredPhase", "Stopped", "Running", True)]
    assert rc.is_drift


def test_resumed_outside_is_suspended_again_as_drift():
    rc = plan1(desired(B, phase="Stopped"), rstate(B, desired_phase="Stopped"),
               live=live_of(B))
    assert summary(rc) == (Action.SUSPEND, plans.REASON_PHASE_DRIFT)


def test_spec_back_to_running_resumes():
    live = live_of(B, desired_phase="Stopped", actual_phase="Stopped")
    rc = plan1(desired(B), rstate(B, desired_phase="Stopped"), live=live)
    assert summary(rc) == (Action.RESUME, plans.REASON_PHASE)


def test_without_refresh_the_phase_comes_from_state():
    rc = plan1(desired(B), rstate(B, desired_phase="Stopped", last_phase="Stopped"))
    assert summary(rc) == (Action.RESUME, plans.REASON_PHASE)
    assert rc.live_phase == "Stopped" and rc.workload_id == WID


def test_replace_wins_over_a_phase_change():
    rc = plan1(desired(set_path(B, "spec.image", "img:2"), phase="Stopped"), rstate(B),
               live=live_of(B))
    assert rc.action is Action.REPLACE
    assert "desiredPhase" not in [c.path for c in rc.changes]


def test_inference_cannot_suspend_so_its_phase_is_left_alone():
    live = live_of(I, desired_phase="Stopped", actual_phase="Stopped")
    assert plan1(desired(I), rstate(I), live=live).action is Action.NOOP


# --- without refresh ----------------------------------------------------------------------

def test_without_refresh_state_stands_in_for_live():
    rc = plan1(desired(set_path(B, "spec.image", "img:2")), rstate(B))
    assert rc.action is Action.REPLACE
    assert rc.before == B and rc.workload_id == WID
    assert rc.changes[0].before == B["spec"]["image"] and not rc.changes[0].drift


def test_without_refresh_unchanged_is_a_noop():
    rc = plan1(desired(B), rstate(B))
    assert summary(rc) == (Action.NOOP, plans.REASON_UNCHANGED) and rc.before == B


# --- in state, not in specs ----------------------------------------------------------------

def test_removed_spec_deletes_the_workload():
    rc = plan1(None, rstate(B), live=live_of(B), targets=[A_B])
    assert summary(rc) == (Action.DELETE, plans.REASON_REMOVED)
    assert rc.after is None and rc.workload_id == WID and rc.desired_phase is None


def test_no_specs_at_all_never_plans_to_delete_everything():
    with pytest.raises(errors.PlanError, match="delete all 1 workloads.*--destroy"):
        planner.make_plan([], state_of(rstate(B)), {A_B: live_of(B)})
    # deliberate: --destroy (or naming the address with --target) goes ahead
    assert planner.make_plan([], state_of(rstate(B)), {A_B: live_of(B)},
                             destroy=True).changes[0].action is Action.DELETE


def test_removed_spec_already_gone_is_a_noop():
    rc = plan1(None, rstate(B), live=None)
    assert summary(rc) == (Action.NOOP, plans.REASON_GONE)


def test_removed_spec_without_refresh_deletes_by_state_id():
    rc = plan1(None, rstate(B), targets=[A_B])
    assert rc.action is Action.DELETE and rc.workload_id == WID and rc.before == B


# --- whole plans --------------------------------------------------------------------------

def _world():
    """Three specs (one new) and three state entries (one removed from the specs)."""
    b2, b3, old = dt_body("resnet-mpi"), dt_body("gpt-new"), dt_body("old-job")
    specs = [desired(b3), desired(I), desired(b2), desired(B)]
    st = state_of(rstate(B), rstate(b2), rstate(I), rstate(old))
    live = {A_B: live_of(B), addr(b2): live_of(b2), A_I: live_of(I),
            addr(old): live_of(old), addr(b3): None}
    return specs, st, live


def test_plan_has_every_address_sorted_with_noops_and_state_identity():
    specs, st, live = _world()
    p = planner.make_plan(specs, st, live)
    assert [(c.address, c.action) for c in p.changes] == [
        ("DistributedInference/7/llama-70b-serve", Action.NOOP),
        ("DistributedTraining/7/bert-ddp", Action.NOOP),
        ("DistributedTraining/7/gpt-new", Action.CREATE),
        ("DistributedTraining/7/old-job", Action.DELETE),
        ("DistributedTraining/7/resnet-mpi", Action.NOOP),
    ]
    assert (p.lineage, p.serial) == (st.lineage, st.serial)
    assert p.has_changes and p.targets == []


def test_targets_restrict_the_plan():
    specs, st, live = _world()
    p = planner.make_plan(specs, st, live, targets=["DistributedTraining/7/old-job", A_B])
    assert [c.address for c in p.changes] == [A_B, "DistributedTraining/7/old-job"]
    assert p.targets == [A_B, "DistributedTraining/7/old-job"]


@pytest.mark.parametrize("target,message", [
    ("DistributedTraining/7/nope", "no spec or state entry"),
    ("Nonsense/7/x", "invalid address"),
    ("DistributedTraining/bert", "invalid address"),
])
def test_bad_targets_are_plan_errors(target, message):
    specs, st, live = _world()
    with pytest.raises(errors.PlanError, match=message) as exc:
        planner.make_plan(specs, st, live, targets=[target])
    assert target in str(exc.value)


def test_destroy_deletes_everything_in_state_only():
    specs, st, live = _world()
    live[A_I] = None
    p = planner.make_plan(specs, st, live, destroy=True)
    assert [(c.address, c.action, c.reason) for c in p.changes] == [
        (A_I, Action.NOOP, plans.REASON_GONE),
        (A_B, Action.DELETE, plans.REASON_DESTROY),
        ("DistributedTraining/7/gpt-new", Action.NOOP, plans.REASON_GONE),
        ("DistributedTraining/7/old-job", Action.DELETE, plans.REASON_DESTROY),
        ("DistributedTraining/7/resnet-mpi", Action.DELETE, plans.REASON_DESTROY),
    ]
    assert all(c.after is None for c in p.changes)


def test_replace_request_replaces_an_unchanged_workload():
    rc = plan1(desired(B), rstate(B), live=live_of(B), replace=[A_B])
    assert summary(rc) == (Action.REPLACE, plans.REASON_REPLACE_REQUESTED)


def test_replace_request_for_a_missing_workload_creates_it():
    rc = plan1(desired(B), rstate(B), live=None, replace=[A_B])
    assert summary(rc) == (Action.CREATE, plans.REASON_REPLACE_REQUESTED)


@pytest.mark.parametrize("kw,message", [
    ({"replace": ["DistributedTraining/7/old-job"]}, "no spec for it"),
    ({"replace": [A_B], "destroy": True}, "--destroy"),
    ({"replace": [A_B], "targets": [A_I]}, "outside the --target"),
])
def test_bad_replace_requests_are_plan_errors(kw, message):
    specs, st, live = _world()
    with pytest.raises(errors.PlanError, match=message):
        planner.make_plan(specs, st, live, **kw)


def test_two_specs_with_one_address_are_a_plan_error():
    with pytest.raises(errors.PlanError, match="a.yaml.*b.yaml"):
        planner.make_plan([desired(B, source="a.yaml"), desired(B, source="b.yaml")],
                          state_of(), {})


# --- preventDestroy -----------------------------------------------------------------------

def test_prevent_destroy_blocks_a_replace_naming_the_spec_file():
    d = desired(set_path(B, "spec.image", "img:2"), prevent_destroy=True,
                source="specs/bert.yaml")
    with pytest.raises(errors.PlanError) as exc:
        planner.make_plan([d], state_of(rstate(B)), {A_B: live_of(B)})
    msg = str(exc.value)
    assert A_B in msg and "specs/bert.yaml" in msg and "preventDestroy" in msg


def test_prevent_destroy_in_state_blocks_deleting_a_removed_spec():
    with pytest.raises(errors.PlanError) as exc:
        planner.make_plan([], state_of(rstate(B, prevent_destroy=True)), {A_B: live_of(B)})
    assert A_B in str(exc.value) and f"state rm {A_B}" in str(exc.value)


def test_prevent_destroy_names_every_blocked_address_and_applies_to_destroy():
    st = state_of(rstate(B, prevent_destroy=True), rstate(I))
    with pytest.raises(errors.PlanError) as exc:
        planner.make_plan([desired(I, prevent_destroy=True)], st,
                          {A_B: live_of(B), A_I: live_of(I)}, destroy=True)
    assert A_B in str(exc.value) and A_I in str(exc.value)


def test_spec_lifting_prevent_destroy_overrides_the_state():
    d = desired(set_path(B, "spec.image", "img:2"), prevent_destroy=False)
    p = planner.make_plan([d], state_of(rstate(B, prevent_destroy=True)), {A_B: live_of(B)})
    assert p.changes[0].action is Action.REPLACE


@pytest.mark.parametrize("make", [
    lambda: ([desired(set_path(I, "spec.replicas", 4), prevent_destroy=True)],
             state_of(rstate(I)), {A_I: live_of(I)}),
    lambda: ([desired(B, phase="Stopped", prevent_destroy=True)], state_of(rstate(B)),
             {A_B: live_of(B)}),
    lambda: ([desired(B, prevent_destroy=True)], state_of(rstate(B)), {A_B: None}),
    lambda: ([], state_of(rstate(B, prevent_destroy=True)), {A_B: None}),
], ids=["update", "suspend", "recreate", "already-gone"])
def test_prevent_destroy_allows_actions_that_destroy_nothing(make):
    planner.make_plan(*make())


def test_prevent_destroy_outside_targets_does_not_block():
    st = state_of(rstate(B, prevent_destroy=True), rstate(I))
    p = planner.make_plan([desired(I)], st, {A_B: live_of(B), A_I: live_of(I)}, targets=[A_I])
    assert [c.action for c in p.changes] == [Action.NOOP]


def test_a_create_waits_for_the_deletion_that_frees_its_name():
    training = dt_body("shared-name")
    inference = di_body("shared-name")
    p = planner.make_plan([desired(inference)], state_of(rstate(training)),
                          {addr(training): live_of(training), addr(inference): None})
    by = {c.address: c for c in p.changes}
    assert by[addr(inference)].action is Action.CREATE
    assert by[addr(inference)].waits_for == [addr(training)]
    assert by[addr(training)].action is Action.DELETE and by[addr(training)].waits_for == []


def test_state_of_an_unknown_kind_is_a_plan_error():
    st = state_of(rstate(B))
    st.resources["Notebook/7/ws"] = rstate(dt_body("ws"), "Notebook")
    with pytest.raises(errors.PlanError, match="Notebook/7/ws"):
        planner.make_plan([], st, {})
