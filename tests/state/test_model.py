"""State.from_json: a hand-edited or damaged state is refused with the field that is wrong."""

from __future__ import annotations

import copy

import pytest

from reconciler.errors import StateError
from reconciler.state import State

from tests.helpers.state import resource

ADDR = "DistributedTraining/7/bert-ddp"


def good() -> dict:
    s = State(lineage="6b0c5a52-9f57-4b5b-9d3c-7c2b1a0e4d11", serial=4)
    s.set(resource())
    return s.to_json()


def test_round_trip():
    doc = good()
    assert State.from_json(doc).to_json() == doc


def test_a_state_without_a_specs_folder_is_written_as_version_1_and_one_with_it_as_2():
    doc = good()
    assert doc["version"] == 1 and "specs_folder" not in doc
    state = State.from_json(doc)
    state.specs_folder = {"git": "specs", "state": "../specs", "path": "/r/specs"}
    newer = state.to_json()
    assert newer["version"] == 2
    assert State.from_json(newer).specs_folder == state.specs_folder


@pytest.mark.parametrize("folder", [{}, {"git": ""}, {"svn": "specs"}, ["specs"], "specs",
                                    {"git": 3}])
def test_a_malformed_specs_folder_is_refused_naming_it(folder):
    doc = good()
    doc["version"], doc["specs_folder"] = 2, folder
    with pytest.raises(StateError, match="specs_folder: expected an object of non-empty "
                                         "strings under git, state, path"):
        State.from_json(doc)


def test_a_specs_folder_in_a_version_1_state_is_refused():
    doc = good()
    doc["specs_folder"] = {"git": "specs"}
    with pytest.raises(StateError, match=r"specs_folder: .*\(state format version 2\)"):
        State.from_json(doc)


def test_optional_resource_fields_default():
    doc = good()
    for k in ("desired_phase", "last_phase", "prevent_destroy", "completed"):
        del doc["resources"][ADDR][k]
    rs = State.from_json(doc).get(ADDR)
    assert (rs.desired_phase, rs.last_phase, rs.prevent_destroy, rs.completed) == \
        ("Running", None, False, False)


def _set(path, value):
    def edit(doc):
        *head, last = path
        node = doc
        for k in head:
            node = node[k]
        if value is _DEL:
            del node[last]
        else:
            node[last] = value
    return edit


_DEL = object()


@pytest.mark.parametrize("edit, says", [
    (_set(["version"], "1"), "version: expected a positive integer"),
    (_set(["version"], _DEL), "version"),
    (_set(["lineage"], ""), "lineage: expected a non-empty string"),
    (_set(["serial"], 1.5), "serial: expected a non-negative integer"),
    (_set(["serial"], True), "serial"),
    (_set(["resources"], []), "resources: expected an object, got a list"),
    (_set(["extra"], 1), "unknown top-level field(s) extra"),
    (_set(["resources", ADDR], "x"), f"resources['{ADDR}']: expected an object"),
    (_set(["resources", ADDR, "applied"], None), f"resources['{ADDR}'].applied: expected an object"),
    (_set(["resources", ADDR, "name"], _DEL), f"resources['{ADDR}'].name: missing"),
    (_set(["resources", ADDR, "workload_id"], 5), "workload_id: expected a non-empty string or null"),
    (_set(["resources", ADDR, "completed"], "yes"), "completed: expected true or false"),
    (_set(["resources", ADDR, "token"], "s3cr3t"), "unknown field(s) token"),
    (_set(["resources", ADDR, "kind"], "Pod"), "unknown kind 'Pod'"),
    (_set(["resources", ADDR, "name"], "other"), "does not match"),
])
def test_wrong_shapes_are_refused_naming_the_field(edit, says):
    doc = copy.deepcopy(good())
    edit(doc)
    with pytest.raises(StateError) as err:
        State.from_json(doc)
    assert says in str(err.value)


def test_same_content_ignores_serial_only():
    a = State.from_json(good())
    b = a.copy()
    b.serial += 3
    assert a.same_content(b)
    b.get(ADDR).last_phase = "Stopped"
    assert not a.same_content(b)


def test_remove_of_an_unknown_address_is_a_clear_error():
    s = State.from_json(good())
    assert s.remove(ADDR).name == "bert-ddp"
    with pytest.raises(StateError, match="no workload 'DistributedTraining/7/bert-ddp' in the state"):
        s.remove(ADDR)
