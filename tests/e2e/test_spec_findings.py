"""The spec loader's small findings, through the CLI: a `project:` from a
`_defaults.yaml` that does not resolve names that file and line; a spec with a duplicate key
is not counted valid; `projectId: 7` unquoted is the project "7", every other way to write
a number there is refused with the quoting hint (docs/spec-values.md)."""

from __future__ import annotations

import json

import pytest

from tests.helpers.constants import CLUSTER
from tests.helpers.projects import define, serve

pytestmark = pytest.mark.http


def test_an_unresolved_project_from_a_folder_default_names_the_defaults_file(ws, sim_server):
    define(sim_server, "7", "team-b")
    ws.write("team-a/_defaults.yaml", f"clusterId: {CLUSTER}\nproject: team-a\n")
    for name in ("one", "two"):
        ws.write(f"team-a/{name}.yaml", f"kind: DistributedInference\nname: {name}\n"
                 "spec:\n  replicas: 1\n  leader:\n    image: vllm/vllm-openai:v0.6.3\n")
    ws.write("fine.yaml", serve(name="fine", project="project: team-b"))
    res = ws.plan()
    assert res.exit_code == 1, res.output
    defaults = ws.specs / "team-a" / "_defaults.yaml"
    one, two = (ws.specs / "team-a" / f"{n}.yaml" for n in ("one", "two"))
    assert res.stderr.splitlines()[0] == (
        f"{defaults}:2: project: 'team-a' does not resolve in cluster {CLUSTER}: no project "
        f"of that name (a default for {one}, {two})")
    assert "Error: 1 problem in the specs" in res.stderr
    assert sim_server.writes() == []

    # In the spec itself: the spec's file and the line of the document, as before.
    ws.write("solo.yaml", serve(name="solo", project="project: nowhere"))
    res = ws.plan()
    assert f"{ws.specs / 'solo.yaml'}:1: project: 'nowhere' does not resolve" in res.stderr


def test_a_spec_with_a_duplicate_key_is_not_counted_valid(ws, sim_server):
    good = f"kind: Training\nname: {{}}\nprojectId: \"7\"\nclusterId: {CLUSTER}\nspec:\n  image: x\n"
    ws.write("dup.yaml", good.format("dup") + "  image: y\n---\n" + good.format("other"))
    ws.write("dup.json", json.dumps({"kind": "Training", "name": "j", "projectId": "7",
                                     "clusterId": CLUSTER, "spec": {"image": "x"}})
             .replace('"name": "j"', '"name": "j", "name": "k"'))
    res = ws.cli("validate", str(ws.specs))
    assert res.exit_code == 1
    assert f"{ws.specs / 'dup.yaml'}:7: image: duplicate key" in res.stderr
    assert f"{ws.specs / 'dup.json'}:1: name: duplicate key" in res.stderr
    assert res.stderr.splitlines()[-1] == "Error: 2 problems in the specs; 1 spec valid."


@pytest.mark.parametrize("written,read", [("0x7", "7"), ("+7", "7"), ("7_0", "70"),
                                          ("1:30", "90")])
def test_a_project_id_written_as_another_number_is_refused_with_the_quoting_hint(
        ws, sim_server, written, read):
    ws.write("t.yaml", f"kind: Training\nname: t\nprojectId: {written}\nclusterId: {CLUSTER}\n"
             "spec:\n  image: x\n")
    for command in (("validate", str(ws.specs)), ("plan", str(ws.specs))):
        res = ws.cli(*command)
        assert res.exit_code == 1, res.output
        assert res.stderr.splitlines()[0] == (
            f"{ws.specs / 't.yaml'}:3: projectId: must be a project id, a string of digits, "
            f"got {written} (YAML reads it as the number {read}; quote the id meant, e.g. "
            f"\"{read}\")"), res.stderr
    assert sim_server.writes() == []


def test_a_plain_unquoted_project_id_is_the_project_of_those_digits(ws, sim_server):
    ws.write("team/_defaults.yaml", "projectId: 7\n")
    ws.write("team/t.yaml", f"kind: Training\nname: t\nclusterId: {CLUSTER}\nspec:\n  image: x\n")
    ws.write("u.yaml", f"kind: Training\nname: u\nprojectId: 7\nclusterId: {CLUSTER}\n"
             "spec:\n  image: x\n")
    res = ws.cli("validate", str(ws.specs))
    assert (res.exit_code, res.stderr) == (0, ""), res.output
    doc = ws.plan_json()
    assert sorted(rc["address"] for rc in doc["resource_changes"]) == [
        "Training/7/t", "Training/7/u"]
    assert {rc["change"]["after"]["projectId"] for rc in doc["resource_changes"]} == {"7"}
