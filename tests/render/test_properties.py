"""Properties of both renderers over arbitrary plans the planner could produce."""

from __future__ import annotations

import json

import jsonpatch
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler import plans
from reconciler.plans import Action, FieldChange, Plan, ResourceChange
from reconciler.render import json as json_render
from reconciler.render import text as text_render
from tests.helpers.finishing import finished

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=4)
reasons = st.sampled_from([v for k, v in vars(plans).items() if k.startswith("REASON_")]
                          + ["some_future_reason"])
field_changes = st.builds(FieldChange,
                          path=st.sampled_from(["spec.image", "spec.replicas", "desiredPhase",
                                                "spec.environmentVariables[HF_TOKEN].value"]),
                          before=values, after=values, drift=st.booleans(),
                          forces_replacement=st.booleans())

bodies = st.none() | st.dictionaries(st.text(max_size=6), values, max_size=4)


@st.composite
def plan_strategy(draw):
    names = draw(st.lists(st.sampled_from(["a", "bert", "llama", "mpi", "z-9", "serve"]),
                          unique=True, max_size=5))
    changes = []
    for name in names:
        kind = draw(st.sampled_from(["DistributedTraining", "DistributedInference"]))
        before = draw(bodies)
        after = draw(st.just(before) | bodies)
        changes.append(ResourceChange(
            address=f"{kind}/7/{name}", kind=kind, name=name, project_id="7",
            action=draw(st.sampled_from(list(Action))), reason=draw(reasons),
            changes=draw(st.lists(field_changes, max_size=3)), before=before, after=after))
    return Plan(changes=changes, lineage="l", serial=1)


@settings(max_examples=30, deadline=None)
@given(plan_strategy())
def test_text_has_one_header_per_action_and_the_right_summary(plan):
    out = text_render.render_plan(finished(plan))
    todo = plan.actionable()
    headers = [ln for ln in out.splitlines() if ln.startswith("  # ")]
    assert [h.split()[1] for h in headers] == sorted(rc.address for rc in todo)
    if todo:
        c = plan.counts()
        assert out.splitlines()[-1] == (
            f"Plan: {c['create']} to create, {c['update']} to update, {c['replace']} to replace, "
            f"{c['delete']} to delete, {c['suspend']} to suspend, {c['resume']} to resume.")
    else:
        assert out == text_render.NO_CHANGES + "\n"


@settings(max_examples=30, deadline=None)
@given(plan_strategy())
def test_json_lists_every_address_with_its_terraform_actions(plan):
    doc = json.loads(json_render.render_plan(finished(plan)))
    got = {rc["address"]: (rc["action"], rc["change"]["actions"])
           for rc in doc["resource_changes"]}
    # Only what docs/plan-format.md lists from Terraform's JSON output format; ours beside it.
    terraform = {("no-op",), ("create",), ("update",), ("delete",), ("delete", "create")}
    assert all(tuple(actions) in terraform for _, actions in got.values())
    assert {a: ours for a, (ours, _) in got.items()} == {
        rc.address: rc.action.value for rc in plan.changes}
    assert sum(doc["summary"].values()) == len(plan.changes)


def _keys_sorted(value):
    if type(value) is dict:
        return {k: _keys_sorted(value[k]) for k in sorted(value)}
    if type(value) is list:
        return [_keys_sorted(v) for v in value]
    return value


@settings(max_examples=100, deadline=None)
@given(plan_strategy())
def test_json_change_patch_turns_before_into_after(plan):
    doc = json.loads(json_render.render_plan(finished(plan)))
    unsorted = json_render.plan_document(finished(plan))["resource_changes"]  # ops follow the bodies' order
    for rc, same in zip(doc["resource_changes"], unsorted):
        change = rc["change"]
        if rc["action"] in ("update", "replace"):
            assert {op["op"] for op in change["patch"]} <= {"add", "remove", "replace", "move"}
            got = jsonpatch.apply_patch(change["before"], change["patch"])
            assert json.dumps(got, sort_keys=True) == json.dumps(change["after"], sort_keys=True)
            # Leaving out what both share changes nothing in jsonpatch's patch, made from
            # the bodies with their members in key order.
            assert same["change"]["patch"] == jsonpatch.make_patch(
                _keys_sorted(same["change"]["before"]),
                _keys_sorted(same["change"]["after"])).patch
        else:
            assert change["patch"] is None
