"""Planner tests of a project's replacement: the workloads whose specs name the project are
created again in the new one by the same plan (replaced, `goes_with` the project's change,
their projectId known after apply); the others are left as they are; a spec that gives
the old project's id cannot follow it."""

from __future__ import annotations

import dataclasses

import pytest

from reconciler import errors, planner
from reconciler.desired.types import DesiredWorkload, Lifecycle
from reconciler.plans import REASON_PROJECT_REPLACED, Action

from tests.helpers.builders import CLUSTER, addr, desired, dt_body, live_of, rstate, state_of

PROJECT_ID = "7"  # the builders' workloads are in project 7
PROJECT_BODY = {"name": "team-a", "projectId": CLUSTER, "clusterId": CLUSTER}
PROJECT_AT = f"Project/{CLUSTER}/team-a"


def project(**body) -> DesiredWorkload:
    return DesiredWorkload(kind="Project", name="team-a", project_id=CLUSTER,
                           cluster_id=CLUSTER, body={**PROJECT_BODY, **body},
                           lifecycle=Lifecycle(prevent_destroy=False), source="org.yaml")


MOVED = project(requestedNamespace="team-a-moved")


def named(body: dict, **kw) -> DesiredWorkload:
    """The spec of `body`, naming its project (`project: team-a`), resolved to its id."""
    return dataclasses.replace(desired(body, **kw), project_name="team-a")


def project_state():
    return dataclasses.replace(rstate(PROJECT_BODY, "Project", workload_id=PROJECT_ID),
                               prevent_destroy=False)


def project_live() -> dict:
    return {**PROJECT_BODY, "workloadId": PROJECT_ID}


def plan(specs, *states, live=None, **kw):
    live = {PROJECT_AT: project_live(), **(live or {})}
    return planner.make_plan(specs, state_of(project_state(), *states), live, **kw)


def test_a_workload_naming_the_replaced_project_is_replaced_with_it():
    body, gone, elsewhere = dt_body("bert"), dt_body("gone"), dt_body("other", project="8")
    p = plan([MOVED, named(body), desired(elsewhere)], rstate(body), rstate(gone),
             rstate(elsewhere), live={addr(b): live_of(b) for b in (body, gone, elsewhere)})
    by = {c.address: c for c in p.changes}
    # What the plan deletes keeps its delete (before the project's); another project's
    # workloads are left as they are.
    assert by[addr(gone)].action is Action.DELETE and by[addr(gone)].goes_with is None
    assert by[addr(elsewhere)].action is Action.NOOP
    assert by[PROJECT_AT].action is Action.REPLACE
    train = by[addr(body)]
    assert train.action is Action.REPLACE
    assert train.reason == REASON_PROJECT_REPLACED
    assert train.goes_with == PROJECT_AT
    assert train.known_after == {"projectId": PROJECT_AT}
    assert PROJECT_AT in train.waits_for
    assert "projectId" not in train.after and train.after["spec"] == body["spec"]
    assert train.replace_paths == ["projectId"]
    assert train.changes[0].before == PROJECT_ID


def test_a_suspended_workload_is_created_again_suspended():
    body = dt_body("bert")
    p = plan([MOVED, named(body, phase="Stopped")],
             rstate(body, desired_phase="Stopped", last_phase="Stopped"),
             live={addr(body): live_of(body, desired_phase="Stopped", actual_phase="Stopped")})
    train = next(c for c in p.changes if c.address == addr(body))
    assert train.action is Action.REPLACE and train.desired_phase == "Stopped"


def test_a_workload_not_live_is_created_in_the_new_project():
    # Deleted outside: a create, in the new project (not in the old one, going away).
    body = dt_body("bert")
    p = plan([MOVED, named(body)], rstate(body), live={addr(body): None})
    train = next(c for c in p.changes if c.address == addr(body))
    assert train.action is Action.CREATE
    assert train.known_after == {"projectId": PROJECT_AT}
    assert train.goes_with is None and train.changes == []


def test_a_completed_training_runs_again_in_the_new_project():
    body = dt_body("bert")
    p = plan([MOVED, named(body)], rstate(body, last_phase="Completed", completed=True),
             live={addr(body): live_of(body, actual_phase="Completed")})
    train = next(c for c in p.changes if c.address == addr(body))
    assert (train.action, train.reason) == (Action.REPLACE, REASON_PROJECT_REPLACED)


def test_a_protected_workload_in_the_replaced_project_refuses_the_plan():
    body = dt_body("bert")
    with pytest.raises(errors.PlanError, match=rf"{addr(body)} \(replace\): protected"):
        plan([MOVED, named(body, prevent_destroy=True)], rstate(body),
             live={addr(body): live_of(body)})


def test_a_spec_giving_the_old_projects_id_cannot_follow_it():
    body = dt_body("bert")
    with pytest.raises(errors.PlanError) as found:
        plan([MOVED, desired(body, source="specs/bert.yaml")], rstate(body),
             live={addr(body): live_of(body)})
    assert str(found.value).startswith(
        f"specs/bert.yaml:1: projectId: {addr(body)} is in project 7, which this plan "
        f"replaces ({PROJECT_AT})")
    assert "(project: team-a)" in str(found.value)
