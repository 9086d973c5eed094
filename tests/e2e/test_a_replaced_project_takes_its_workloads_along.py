"""A project that a plan replaces (a create-only field changed, preventDestroy off) takes
its workloads with it; the workloads whose specs name it are created again in the new
project by the same plan, through the CLI against `sim serve` over HTTP: the plan shows
both replacements (text, markdown, JSON), apply sends no DELETE of the training (the
project's deletion took it) and creates it in the new project once that is Ready, and the
next plan is empty. A saved plan does the same. A spec that gives the old project's id
instead of its name cannot follow it, and says so."""

from __future__ import annotations

import json

from reconciler.simulator.projects import DEFAULT_CLUSTER_ID as CLUSTER
from tests.helpers import organisation
from tests.helpers.organisation import UNITS
from tests.helpers.organisation import project_id as _project_id

PROJECT = organisation.project(deserved=4, destroyable=True)
MOVED = PROJECT + "requestedNamespace: team-a-moved\n"
TRAINING = organisation.training()
PROJECT_AT = f"Project/{CLUSTER}/team-a"


def _applied(ws, sim_server) -> str:
    """The project and its training applied; the project's id."""
    ws.write("team-a.yaml", PROJECT)
    ws.write("train.yaml", TRAINING)
    res = ws.apply()
    assert res.exit_code == 0, res.output
    return _project_id(sim_server)


def _check_applied(ws, sim_server, old: str, output: str) -> None:
    """The project was replaced and the training created again in it, without a DELETE
    of the training; the next plan is empty."""
    new = _project_id(sim_server)
    assert new != old
    writes = [(r["method"], r["path"]) for r in sim_server.writes()]
    assert writes == [("DELETE", f"{UNITS}/projects/{old}"), ("POST", f"{UNITS}/projects"),
                      ("POST", "/api/v1/workloads/trainings")], output
    [sent] = [r["body"] for r in sim_server.writes() if r["path"].endswith("/trainings")]
    assert str(sent["projectId"]) == new
    # The project replaced first; then, once the old training is gone, the new one.
    order = [output.index(f"{PROJECT_AT}: replaced"),
             output.index(f"Training/{old}/train-1: deleted with {PROJECT_AT}"),
             output.index(f"Training/{old}/train-1: its project is {new} now: creating it "
                          f"as Training/{new}/train-1"),
             output.index(f"Training/{old}/train-1: replaced")]
    assert order == sorted(order), output
    [live] = [w for w in sim_server.live() if w["name"] == "train-1"]
    assert str(live["projectId"]) == new
    assert [p for p in sim_server.api("GET", f"{UNITS}/projects").json()["projects"]
            if p["name"] == "team-a"][0]["requestedNamespace"] == "team-a-moved"
    resources = ws.state()["resources"]
    assert f"Training/{new}/train-1" in resources
    assert f"Training/{old}/train-1" not in resources
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 0, res.output


def test_one_plan_replaces_the_project_and_its_training_and_the_next_is_empty(ws, sim_server):
    old = _applied(ws, sim_server)
    sim_server.clear_requests()
    ws.write("team-a.yaml", MOVED)

    res = ws.plan()
    assert res.exit_code == 0, res.output
    assert f"# {PROJECT_AT} must be replaced" in res.output, res.output
    assert f"# Training/{old}/train-1 must be replaced: its project is replaced" in res.output
    assert "-/+ Training train-1 (project (known after apply), team-a)" in res.output
    assert f'~ projectId: "{old}" -> (known after apply)  # forces replacement' in res.output
    assert (f"# takes with it: namespace runai-team-a, workload Training/{old}/train-1 "
            "(created again by this plan)") in res.output, res.output
    assert "Plan: 0 to create, 0 to update, 2 to replace, 0 to delete" in res.output

    md = ws.plan("--format", "markdown").output
    assert f"Training/{old}/train-1</b> (project team-a) must be replaced: its project is " \
        "replaced" in md, md
    assert f'- projectId: "{old}"\n+ projectId: (known after apply)  # forces replacement' \
        in md, md

    by = {rc["address"]: rc for rc in ws.plan_json()["resource_changes"]}
    train = by[f"Training/{old}/train-1"]
    assert train["action"] == "replace"
    assert train["action_reason"] == "project_replaced"
    assert train["change"]["actions"] == ["delete", "create"]
    assert train["change"]["after_unknown"] == {"projectId": True, "workloadId": True}
    assert "projectId" not in train["change"]["after"]
    assert train["replace_paths"] == ["projectId"]
    assert by[PROJECT_AT]["action"] == "replace"
    # `drift` lists it among the pending changes the same way.
    res = ws.cli("drift", str(ws.specs))
    assert f'~ projectId: "{old}" -> (known after apply)' in res.output, res.output
    assert sim_server.writes() == []  # plans only

    res = ws.apply()
    assert res.exit_code == 0, res.output
    _check_applied(ws, sim_server, old, res.output)


def test_a_saved_plan_replaces_the_training_with_its_project(ws, sim_server):
    old = _applied(ws, sim_server)
    sim_server.clear_requests()
    ws.write("team-a.yaml", MOVED)
    saved = ws.root / "moved.plan"
    res = ws.plan("--out", str(saved))
    assert res.exit_code == 0, res.output
    res = ws.cli("show", str(saved))
    assert f'~ projectId: "{old}" -> (known after apply)  # forces replacement' in res.output

    res = ws.cli("apply", str(saved), "--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    _check_applied(ws, sim_server, old, res.stderr)
    # What became of it names the workload created in the new project.
    [outcome] = [o for o in doc["outcomes"] if o["address"] == f"Training/{old}/train-1"]
    [live] = [w for w in sim_server.live() if w["name"] == "train-1"]
    assert (outcome["outcome"], outcome["workload_id"]) == ("done", live["id"])


def test_a_spec_giving_the_replaced_projects_id_is_told_to_name_it(ws, sim_server):
    old = _applied(ws, sim_server)
    ws.write("train.yaml", TRAINING.replace("project: team-a", f'projectId: "{old}"'))
    assert ws.plan("--detailed-exitcode").exit_code == 0  # the same workload
    sim_server.clear_requests()
    ws.write("team-a.yaml", MOVED)

    res = ws.plan()
    assert res.exit_code == 1, res.output
    assert (f"train.yaml:1: projectId: Training/{old}/train-1 is in project {old}, which "
            f"this plan replaces ({PROJECT_AT})") in res.output, res.output
    assert "Name the project instead (project: team-a)" in res.output
    assert "Traceback" not in res.output
    assert sim_server.writes() == []
