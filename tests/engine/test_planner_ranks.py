"""Planner tests of order across types: creates and updates go by their types' rank
(`Kind.rank`: a department, then a project, then the workloads), deletes in reverse, and a
workload whose `project:` names a project the same plan creates waits for that create,
its projectId known after apply."""

from __future__ import annotations

import dataclasses

import pytest

from reconciler import errors, planner
from reconciler.desired.types import DesiredWorkload, Lifecycle
from reconciler.plans import Action

from tests.helpers.builders import addr, desired, dt_body, live_of, rstate, state_of

CLUSTER = "00000000-0000-4000-8000-000000000001"


def unit(kind: str, name: str, **body) -> DesiredWorkload:
    return DesiredWorkload(kind=kind, name=name, project_id=CLUSTER, cluster_id=CLUSTER,
                           body={"name": name, "projectId": CLUSTER, "clusterId": CLUSTER,
                                 **body},
                           lifecycle=Lifecycle(prevent_destroy=False), source="org.yaml")


def in_planned_project(name: str) -> DesiredWorkload:
    """A training whose `project: team-a` names no project that exists yet."""
    body = {k: v for k, v in dt_body(name).items() if k != "projectId"}
    body["clusterId"] = CLUSTER
    return DesiredWorkload(kind="DistributedTraining", name=name, project_id="",
                           cluster_id=CLUSTER, body=body, project_name="team-a",
                           source="train.yaml")


DEPARTMENT = unit("Department", "research")
PROJECT = unit("Project", "team-a", department="research")


def test_creates_go_department_then_project_then_the_workloads_in_it():
    training = in_planned_project("bert")
    other = desired(dt_body("elsewhere"))
    p = planner.make_plan([DEPARTMENT, PROJECT, training, other], state_of(), {})
    by = {c.address: c for c in p.changes}
    assert all(c.action is Action.CREATE for c in p.changes)
    assert by[DEPARTMENT.address].waits_for == []
    assert by[PROJECT.address].waits_for == [DEPARTMENT.address]
    assert sorted(by[training.address].waits_for) == sorted([DEPARTMENT.address,
                                                             PROJECT.address])
    assert by[training.address].known_after == {"projectId": PROJECT.address}
    assert "projectId" not in by[training.address].after
    # A workload in a project that exists waits for the organisation's changes too, but
    # knows its project id.
    assert by[addr(other.body)].known_after == {}
    assert PROJECT.address in by[addr(other.body)].waits_for


def test_deletes_go_in_reverse():
    training = dt_body("bert")
    st = state_of(rstate(training),
                  *(dataclasses.replace(rstate({**u.body}, u.kind), prevent_destroy=False)
                    for u in (DEPARTMENT, PROJECT)))
    p = planner.make_plan([], st, {addr(training): live_of(training),
                                   DEPARTMENT.address: dict(DEPARTMENT.body, workloadId="1"),
                                   PROJECT.address: dict(PROJECT.body, workloadId="2")},
                          destroy=True)
    by = {c.address: c for c in p.changes}
    assert all(c.action is Action.DELETE for c in p.changes)
    assert by[addr(training)].waits_for == []
    assert by[PROJECT.address].waits_for == [addr(training)]
    assert sorted(by[DEPARTMENT.address].waits_for) == sorted([PROJECT.address,
                                                               addr(training)])


def test_a_workload_in_a_project_that_the_plan_does_not_create_is_an_error():
    training = in_planned_project("bert")
    with pytest.raises(errors.PlanError, match="add --target " + PROJECT.address):
        planner.make_plan([PROJECT, training], state_of(), {}, targets=[training.address])
