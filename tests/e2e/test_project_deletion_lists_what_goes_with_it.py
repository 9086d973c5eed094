"""Deleting or replacing a project deletes its namespace and every workload in it: through
the CLI against `sim serve` over HTTP, the plan lists them (text, markdown, JSON
`takes_with`), the ones no state records marked so, and preventDestroy's refusal names
them too."""

from __future__ import annotations

from reconciler.simulator.projects import DEFAULT_CLUSTER_ID as CLUSTER
from tests.helpers import organisation
from tests.helpers.organisation import OPT_OUT

PROJECT = organisation.project(deserved=4)
TRAINING = organisation.training()
PROJECT_AT = f"Project/{CLUSTER}/team-a"


def _applied(ws, sim_server) -> str:
    """The project and its training applied, and a workload in it that no spec names;
    the project's id."""
    ws.write("team-a.yaml", PROJECT)
    assert ws.apply().exit_code == 0
    ws.write("train.yaml", TRAINING)
    res = ws.apply()
    assert res.exit_code == 0, res.output
    [project] = [p for p in sim_server.api("GET", "/api/v1/org-unit/projects").json()["projects"]
                 if p["name"] == "team-a"]
    pid = str(project["id"])
    sim_server.api("POST", "/api/v1/workloads/trainings", json={
        "name": "by-hand", "projectId": pid, "clusterId": CLUSTER,
        "spec": {"image": "busybox:1.36"}}).raise_for_status()
    return pid


def test_a_project_replacement_is_refused_naming_its_namespace_and_workloads(ws, sim_server):
    pid = _applied(ws, sim_server)
    sim_server.clear_requests()
    # The training its spec names the project in is created again in the new one.
    going = (f"namespace runai-team-a, workload Training/{pid}/by-hand (not managed here), "
             f"workload Training/{pid}/train-1 (created again by this plan)")
    ws.write("team-a.yaml", PROJECT + "requestedNamespace: team-a-ns\n")
    res = ws.plan()
    assert res.exit_code == 1, res.output
    assert f"{PROJECT_AT} (replace): protected by lifecycle.preventDestroy" in res.output
    assert f"it would take with it: {going}" in res.output, res.output
    assert "Traceback" not in res.output

    ws.write("team-a.yaml", PROJECT + "requestedNamespace: team-a-ns\n" + OPT_OUT)
    res = ws.plan()
    assert res.exit_code == 0, res.output
    assert f"# takes with it: {going}" in res.output, res.output
    res = ws.plan("--format", "markdown")
    assert f"# takes with it: {going}" in res.output, res.output
    [change] = [rc for rc in ws.plan_json()["resource_changes"] if rc["address"] == PROJECT_AT]
    assert change["action"] == "replace"
    assert change["takes_with"] == going.split(", ")
    assert sim_server.writes() == []  # plans only


def test_a_project_deletion_lists_its_namespace_and_workloads(ws, sim_server):
    pid = _applied(ws, sim_server)
    ws.write("team-a.yaml", PROJECT + OPT_OUT)
    res = ws.plan("--destroy")
    assert res.exit_code == 0, res.output
    assert f"# {PROJECT_AT} will be destroyed" in res.output, res.output
    assert (f"# takes with it: namespace runai-team-a, workload Training/{pid}/by-hand "
            f"(not managed here), workload Training/{pid}/train-1") in res.output, res.output
    # A workload's own deletion takes nothing with it.
    [train] = [rc for rc in ws.plan_json("--destroy")["resource_changes"]
               if rc["address"] == f"Training/{pid}/train-1"]
    assert train["action"] == "delete" and "takes_with" not in train
