"""A workload's `project:` naming a Project the same plan creates, through the CLI against
`sim serve` over HTTP: the plan shows the project id as `(known after apply)` (JSON:
`after_unknown`), apply creates the department, then the project, waits for it to be
Ready, then creates the training with the project's new id, and the next plan is empty;
a saved plan does the same; `--timeout` bounds the wait for Ready, and a training whose
project never got there is not created."""

from __future__ import annotations

import time

from reconciler.simulator.projects import DEFAULT_CLUSTER_ID as CLUSTER
from tests.helpers import organisation
from tests.helpers.constants import CLIENT_ID, CLIENT_SECRET
from tests.helpers.organisation import UNITS
from tests.helpers.organisation import project_id as _project_id
from tests.helpers.organisation import writes as _writes
from tests.helpers.simserve import sim_serve
from tests.helpers.workspace import SimServer, Workspace

ORG = (organisation.department() + "---\n"
       + organisation.project(deserved=4, department="research"))
TRAINING = organisation.training()
DEPARTMENT_AT = f"Department/{CLUSTER}/research"
PROJECT_AT = f"Project/{CLUSTER}/team-a"
PLANNED_AT = "Training/project=team-a/train-1"  # its address while its project is planned


def _check_applied_in_order(ws, sim_server, output: str) -> None:
    # Department, then project, then the training: in the request log and in the output.
    assert _writes(sim_server) == [("POST", f"{UNITS}/departments"),
                                   ("POST", f"{UNITS}/projects"),
                                   ("POST", "/api/v1/workloads/trainings")], output
    pid = _project_id(sim_server)
    [sent] = [r["body"] for r in sim_server.writes() if r["path"].endswith("/trainings")]
    assert str(sent["projectId"]) == pid
    order = [output.index(f"{DEPARTMENT_AT}: created"), output.index(f"{PROJECT_AT}: created"),
             output.index(f"{PLANNED_AT}: its project is {pid} now"),
             output.index(f"{PLANNED_AT}: created")]
    assert order == sorted(order), output
    # The training was created only once its project was Ready.
    assert output.index(f"{PROJECT_AT}: Creating, waiting for Ready") < order[2], output
    [live] = [w for w in sim_server.live() if w["name"] == "train-1"]
    assert str(live["projectId"]) == pid
    assert f"Training/{pid}/train-1" in ws.state()["resources"]
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 0, res.output


def test_one_plan_that_creates_a_department_a_project_and_a_training_in_it_applies_in_order_and_ends_empty(
        ws, sim_server):
    ws.write("org.yaml", ORG)
    ws.write("train.yaml", TRAINING)

    res = ws.plan()
    assert res.exit_code == 0, res.output
    assert "+ Training train-1 (project (known after apply), team-a)" in res.output
    assert "+ projectId: (known after apply)" in res.output
    # The GPU impact names the project by its name until it has an id.
    assert "  project team-a (new): 0 -> 1 (+1)" in res.output, res.output
    # An organisation unit's create lists no projectId (it holds the cluster).
    unit_lines = res.output[res.output.index(PROJECT_AT):res.output.index(PLANNED_AT)]
    assert "projectId" not in unit_lines, res.output
    md = ws.plan("--format", "markdown")
    assert "+ projectId: (known after apply)" in md.output, md.output

    doc = ws.plan_json()
    by = {rc["address"]: rc for rc in doc["resource_changes"]}
    assert by[PLANNED_AT]["change"]["after_unknown"] == {"projectId": True, "workloadId": True}
    assert "projectId" not in by[PLANNED_AT]["change"]["after"]
    assert by[PROJECT_AT]["change"]["after_unknown"] == {"workloadId": True}
    # Its quota is not read (there is nothing to read yet): it is the one its spec plans.
    [planned] = [p for p in doc["gpu_impact"]["projects"] if p["project_name"] == "team-a"]
    assert planned["quota"] == 4 and planned["planned_by"] == PROJECT_AT
    assert planned["quota_before"] is None and not planned.get("quota_unknown")
    assert _writes(sim_server) == []  # a plan writes nothing

    res = ws.apply()
    assert res.exit_code == 0, res.output
    _check_applied_in_order(ws, sim_server, res.output)


def test_a_saved_plan_creates_the_project_then_its_training_with_the_new_id(ws, sim_server):
    ws.write("org.yaml", ORG)
    ws.write("train.yaml", TRAINING)
    saved = ws.root / "org.plan"
    res = ws.plan("--out", str(saved))
    assert res.exit_code == 0, res.output
    res = ws.cli("show", str(saved))
    assert "+ projectId: (known after apply)" in res.output, res.output

    res = ws.cli("apply", str(saved))
    assert res.exit_code == 0, res.output
    _check_applied_in_order(ws, sim_server, res.output)


def test_the_wait_for_a_project_to_be_ready_is_bounded_by_timeout(tmp_path):
    # A control plane whose projects stay Creating for a minute.
    with sim_serve(tmp_path, "--phase-seconds", "60") as served:
        server = SimServer(served.url, served.proc)
        ws = Workspace(tmp_path / "project", {
            "RUNAI_URL": served.url, "RUNAI_CLIENT_ID": CLIENT_ID,
            "RUNAI_CLIENT_SECRET": CLIENT_SECRET, "RUNAI_TOKEN": None, "NO_COLOR": "1"})
        ws.write("org.yaml", ORG)
        ws.write("train.yaml", TRAINING)
        started = time.monotonic()
        res = ws.cli("--timeout", "1", "apply", str(ws.specs), "--auto-approve")
        took = time.monotonic() - started
        assert res.exit_code == 1, res.output
        assert took < 20, took
        assert f"{PROJECT_AT}: Creating, waiting for Ready (at most 1s)" in res.output
        assert "is still Creating 1s after its creation" in res.output, res.output
        assert f"{PLANNED_AT}: create failed: not sent: its projectId is the id of " \
            f"{PROJECT_AT}, whose create did not finish" in res.output, res.output
        assert "Traceback" not in res.output
        assert not [w for w in server.writes() if w["path"].endswith("/trainings")]
        server.admin.close()
