"""A state record may carry the project's name; files written without it still read."""

from __future__ import annotations

import pytest

from reconciler.errors import StateError
from reconciler.state.model import State

RECORD = {"kind": "DistributedInference", "name": "serve", "project_id": "12",
          "cluster_id": "71f69d83-ba66-4822-adf5-55ce55efd210", "workload_id": "w-1",
          "applied": {"name": "serve"}}


def doc(**extra) -> dict:
    return {"version": 1, "lineage": "l-1", "serial": 3,
            "resources": {"DistributedInference/12/serve": {**RECORD, **extra}}}


def test_a_record_without_a_project_name_reads_and_is_written_as_it_was():
    state = State.from_json(doc())
    assert state.resources["DistributedInference/12/serve"].project_name is None
    written = state.to_json()["resources"]["DistributedInference/12/serve"]
    assert "project_name" not in written
    assert State.from_json(state.to_json()).to_json() == state.to_json()


def test_a_record_with_a_project_name_round_trips():
    state = State.from_json(doc(project_name="team-a"))
    assert state.resources["DistributedInference/12/serve"].project_name == "team-a"
    written = state.to_json()["resources"]["DistributedInference/12/serve"]
    assert written["project_name"] == "team-a"
    assert State.from_json(state.to_json()).resources == state.resources


def test_an_empty_project_name_is_refused_naming_the_field():
    with pytest.raises(StateError, match="project_name"):
        State.from_json(doc(project_name=""))
