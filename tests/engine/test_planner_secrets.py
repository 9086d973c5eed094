"""The planner against a state that holds sensitive values as keyed hashes: a changed
secret is a change, an unchanged one none, live's compared hashed alike, and a hash is
never what a change sends."""

from __future__ import annotations

import copy

from reconciler import masking, planner
from reconciler.desired.types import DesiredWorkload, Lifecycle
from reconciler.plans import Action
from reconciler.state.model import ResourceState, State


def body(secret: str, image: str = "busybox") -> dict:
    return {"name": "t1", "projectId": "1", "clusterId": "c1", "spec": {
        "image": image, "environmentVariables": [{"name": "API_TOKEN", "value": secret},
                                                 {"name": "MODE", "value": "fast"}]}}


def state_with(applied_secret: str, **lifecycle) -> tuple[State, DesiredWorkload]:
    state = State()
    key = state.secret_key(create=True)
    state.set(ResourceState("Training", "t1", "1", "c1", "w1",
                            masking.hash_sensitive(body(applied_secret), (), key)))
    return state, DesiredWorkload("Training", "t1", "1", "c1", body(applied_secret),
                                  lifecycle=Lifecycle(**lifecycle))


def test_the_same_secret_plans_nothing_and_a_changed_one_a_change():
    state, dw = state_with("s3cret-1")
    live = {dw.address: {**body("s3cret-1"), "workloadId": "w1", "actualPhase": "Running"}}
    assert planner.make_plan([dw], state, live).changes[0].action is Action.NOOP
    changed = DesiredWorkload("Training", "t1", "1", "c1", body("s3cret-2"))
    rc = planner.make_plan([changed], state, live).changes[0]
    assert rc.action is Action.REPLACE
    assert [c.path for c in rc.changes] == ["spec.environmentVariables[API_TOKEN].value"]
    assert rc.after == body("s3cret-2")  # what is sent: the value itself


def test_a_secret_changed_in_live_is_drift():
    state, dw = state_with("s3cret-1")
    live = {dw.address: {**body("changed-in-live"), "workloadId": "w1", "actualPhase": "Running"}}
    rc = planner.make_plan([dw], state, live).changes[0]
    assert rc.action is Action.REPLACE and all(c.drift for c in rc.changes)


def test_an_ignored_sensitive_path_sends_the_specs_value_never_the_states_hash():
    state, _ = state_with("s3cret-1")
    dw = DesiredWorkload("Training", "t1", "1", "c1", body("s3cret-2", image="other"),
                         lifecycle=Lifecycle(ignore_changes=("spec.environmentVariables",)))
    rc = planner.make_plan([dw], state, {}).changes[0]
    assert rc.action is Action.REPLACE  # the image
    assert rc.after == body("s3cret-2", image="other")
    assert "hmac-sha256:" not in repr(rc.after)


def test_a_state_of_before_the_hashes_compares_its_clear_values():
    state = State()
    state.set(ResourceState("Training", "t1", "1", "c1", "w1", copy.deepcopy(body("s3cret-1"))))
    dw = DesiredWorkload("Training", "t1", "1", "c1", body("s3cret-1"))
    assert planner.make_plan([dw], state, {}).changes[0].action is Action.NOOP
    state.secret_key(create=True)  # a key made since (another workload's secret)
    assert planner.make_plan([dw], state, {}).changes[0].action is Action.NOOP
