"""`apply --format json`: one JSON document on stdout (the plan and what became of each
change), the text summary on stderr; and changes to the state alone (adoption, lifecycle
flags only the state records) counted as changes in every format."""

from __future__ import annotations

import json

from tests.helpers.constants import CLUSTER
from tests.helpers.specs import INFERENCE


def training(name: str, image: str = "nvcr.io/nvidia/pytorch:24.05-py3", extra: str = "") -> str:
    return (f"kind: DistributedTraining\nname: {name}\nprojectId: \"7\"\nclusterId: {CLUSTER}\n"
            f"{extra}spec:\n  image: {image}\n  distributedFramework: PyTorch\n  numWorkers: 2\n")


def apply_json(ws, *extra: str):
    res = ws.cli("apply", str(ws.specs), "--auto-approve", "--format", "json", *extra)
    return res, json.loads(res.stdout)


def test_apply_json_is_one_document_with_each_outcome_and_the_counts(ws, sim_server):
    ws.write("a.yaml", training("keep"))
    ws.write("b.yaml", training("swap"))
    ws.write("c.yaml", training("drop"))
    assert ws.apply().exit_code == 0
    ws.write("b.yaml", training("swap", image="nvcr.io/nvidia/pytorch:24.10-py3"))
    (ws.specs / "c.yaml").unlink()
    ws.write("d.yaml", training("new"))
    old = {w["name"]: w["id"] for w in sim_server.live()}

    res, doc = apply_json(ws)
    assert res.exit_code == 0, res.stderr
    assert doc["format_version"] == "1.2"
    assert "Apply complete! Resources: 1 created, 0 updated, 1 replaced, 1 deleted" in res.stderr
    assert "Apply complete!" not in res.stdout
    state = ws.state()["resources"]
    by_addr = {o["address"]: o for o in doc["outcomes"]}
    assert sorted(by_addr) == ["DistributedTraining/7/drop", "DistributedTraining/7/new",
                               "DistributedTraining/7/swap"]  # the no-op is not listed
    assert by_addr["DistributedTraining/7/new"]["action"] == "create"
    assert by_addr["DistributedTraining/7/new"]["workload_id"] == \
        state["DistributedTraining/7/new"]["workload_id"]
    assert by_addr["DistributedTraining/7/swap"]["actions"] == ["delete", "create"]
    new_id = by_addr["DistributedTraining/7/swap"]["workload_id"]
    assert new_id == state["DistributedTraining/7/swap"]["workload_id"] != old["swap"]
    assert by_addr["DistributedTraining/7/drop"]["workload_id"] == old["drop"]  # the one deleted
    assert all(o["outcome"] == "done" and o["error"] is None for o in doc["outcomes"])
    assert doc["summary"] == {"done": 3, "failed": 0, "not_started": 0, "unknown": 0,
                              "create": 1, "update": 0, "replace": 1, "delete": 1,
                              "suspend": 0, "resume": 0, "adopt": 0, "state_only": 0}
    assert doc["interrupted"] is False and doc["signal"] is None
    assert doc["plan"]["summary"]["replace"] == 1  # the plan performed, as `plan` shows it


def test_a_failed_action_is_in_the_result_with_its_error_and_exit_1(ws, sim_server):
    # The name is held by a workload of another kind in the project: the create gets a 409.
    ws.write("serve.yaml", INFERENCE)
    assert ws.apply().exit_code == 0
    (ws.specs / "serve.yaml").unlink()
    ws.root.joinpath("state", "state.json").unlink()
    ws.write("a.yaml", training("llama-serve"))
    res, doc = apply_json(ws)
    assert res.exit_code == 1
    (o,) = doc["outcomes"]
    assert o["outcome"] == "failed" and o["action"] == "create" and o["workload_id"] is None
    assert "409" in o["error"] or "exists" in o["error"]
    assert doc["summary"]["failed"] == 1 and doc["summary"]["create"] == 0
    assert "Apply failed!" in res.stderr


def test_apply_json_with_nothing_to_do_is_still_one_document(ws, sim_server):
    ws.write("a.yaml", training("keep"))
    assert ws.apply().exit_code == 0
    res, doc = apply_json(ws)
    assert res.exit_code == 0
    assert doc["outcomes"] == [] and doc["plan"]["has_changes"] is False


def test_adoption_alone_is_a_change_counted_in_every_format_then_done(ws, sim_server):
    ws.write("a.yaml", training("found"))
    assert ws.apply().exit_code == 0
    ws.state_path.unlink()  # lost state: the workload is live, the state does not know it
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 2, res.output
    assert "Plan: 0 to create, 0 to update, 0 to replace, 0 to delete, 0 to suspend, " \
           "0 to resume, 1 to adopt." in res.output
    md = ws.plan("--format", "markdown").stdout
    assert "1 to adopt." in md and "No changes" not in md
    assert ws.plan_json()["summary"]["adopt"] == 1
    res, doc = apply_json(ws)
    assert res.exit_code == 0, res.stderr
    (o,) = doc["outcomes"]
    assert o["adopted"] is True and o["action"] == "no-op" and o["outcome"] == "done"
    assert o["workload_id"] == sim_server.live()[0]["id"]
    assert doc["summary"]["adopt"] == 1
    assert "1 adopted." in res.stderr
    assert ws.plan("--detailed-exitcode").exit_code == 0


def test_a_lifecycle_flag_only_the_state_records_is_a_change(ws, sim_server):
    ws.write("a.yaml", training("guarded"))
    assert ws.apply().exit_code == 0
    ws.write("a.yaml", training("guarded", extra="lifecycle:\n  preventDestroy: true\n"))
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 2, res.output
    assert "DistributedTraining/7/guarded: lifecycle.preventDestroy" in res.output
    assert "1 to record in the state." in res.output
    doc = ws.plan_json()
    assert doc["has_changes"] and doc["summary"]["state_only"] == 1
    (rc,) = doc["resource_changes"]
    assert rc["state_changes"] == ["lifecycle.preventDestroy"]
    drift = ws.cli("drift", str(ws.specs), "--detailed-exitcode")
    assert drift.exit_code == 0, drift.output  # pending, not drift
    assert "= DistributedTraining/7/guarded (state only: lifecycle.preventDestroy)" in drift.output
    (pending,) = json.loads(ws.cli("drift", str(ws.specs), "--format", "json").stdout
                            )["pending_changes"]
    assert pending["state_changes"] == ["lifecycle.preventDestroy"]
    sim_server.clear_requests()
    res = ws.apply()
    assert res.exit_code == 0, res.output
    assert "1 recorded in the state." in res.output
    assert sim_server.writes() == []  # no API call
    assert ws.state()["resources"]["DistributedTraining/7/guarded"]["prevent_destroy"] is True
    assert ws.plan("--detailed-exitcode").exit_code == 0
