"""`drift`: refresh-only, exit codes, drifted paths with state and live values, pending apart."""

from __future__ import annotations

import json

import pytest

from tests.helpers.specs import INFERENCE, TRAINING

pytestmark = pytest.mark.http


def _drift(ws, *extra):
    return ws.cli("drift", str(ws.specs), "--detailed-exitcode", *extra)


def test_no_drift_right_after_apply(ws, sim_server, applied):
    res = _drift(ws)
    assert res.exit_code == 0, res.output
    assert "No drift" in res.stdout
    doc = json.loads(_drift(ws, "--format", "json").stdout)
    assert doc["has_drift"] is False and doc["drift"] == [] and doc["pending_changes"] == []


def test_out_of_band_change_is_drift_with_state_and_live_values(ws, sim_server, applied):
    wid = applied["llama-serve"]["id"]
    assert sim_server.admin.patch(f"/_sim/workloads/{wid}",
                                  json={"spec": {"replicas": 5}}).status_code == 200
    state_before = ws.state_path.read_bytes()
    sim_server.clear_requests()
    res = _drift(ws)
    assert res.exit_code == 2, res.output
    assert "DistributedInference/7/llama-serve was changed outside runai-reconcile" in res.stdout
    assert "spec.replicas: state 2, live 5" in res.stdout
    # 2 replicas of a leader and a worker of 8 GPUs each were applied; 5 run live.
    assert "GPUs: state 32, live 80 (+48)" in res.stdout
    assert "GPUs: drift took 48 and freed 0 (live against the state)." in res.stdout
    doc = json.loads(_drift(ws, "--format", "json").stdout)
    amount = {"min": 0, "max": 0, "memory_bytes_min": 0, "memory_bytes_max": 0}
    assert doc["drift"] == [{
        "address": "DistributedInference/7/llama-serve", "kind": "DistributedInference",
        "name": "llama-serve", "project_id": "7", "workload_id": wid, "reason": "drift",
        "paths": [{"path": "spec.replicas", "state": 2, "live": 5, "added": False}],
        "gpus": {"state": {**amount, "min": 32, "max": 32},
                 "live": {**amount, "min": 80, "max": 80}}}]
    assert (doc["summary"]["gpus_taken"], doc["summary"]["gpus_freed"]) == (48, 0)
    md = _drift(ws, "--format", "markdown")
    assert md.exit_code == 2 and "llama-serve</b> changed outside" in md.stdout
    assert "· GPUs 32 → 80 (+48)" in md.stdout
    assert "**GPUs:** drift took 48 and freed 0 (live against the state)." in md.stdout
    # Refresh only: no API write, the state untouched.
    assert sim_server.writes() == []
    assert ws.state_path.read_bytes() == state_before


def test_suspended_and_deleted_outside_are_drift(ws, sim_server, applied):
    wid = applied["bert-ddp"]["id"]
    assert sim_server.api("POST", f"/api/v1/workloads/distributed/{wid}/suspend").status_code == 202
    assert sim_server.admin.delete(f"/_sim/workloads/{applied['llama-serve']['id']}").status_code < 300
    res = _drift(ws)
    assert res.exit_code == 2
    assert "DistributedTraining/7/bert-ddp was suspended or resumed outside" in res.stdout
    assert 'desiredPhase: state "Running", live "Stopped"' in res.stdout
    assert "DistributedInference/7/llama-serve was deleted outside" in res.stdout
    # The suspended training (2 workers and a master of 8) and the deleted inference free theirs.
    assert "GPUs: state 24, live 0 (-24)" in res.stdout
    assert "GPUs: state 32, live 0 (-32)" in res.stdout
    assert "GPUs: drift took 0 and freed 56 (live against the state)." in res.stdout
    # apply puts things back; drift is 0 again.
    assert ws.apply().exit_code == 0
    assert _drift(ws).exit_code == 0


def test_spec_changes_are_pending_not_drift(ws, sim_server, applied):
    ws.write("serve.yaml", INFERENCE.replace("replicas: 2", "replicas: 4"))
    ws.write("new.yaml", TRAINING.replace("bert-ddp", "new-job"))
    sim_server.clear_requests()
    res = _drift(ws)
    assert res.exit_code == 0, res.output
    assert "No drift" in res.stdout
    assert "Pending (not drift)" in res.stdout
    assert "DistributedInference/7/llama-serve (update)" in res.stdout
    assert "spec.replicas: 2 -> 4" in res.stdout
    assert "DistributedTraining/7/new-job (create)" in res.stdout
    doc = json.loads(_drift(ws, "--format", "json").stdout)
    assert {p["address"]: p["actions"] for p in doc["pending_changes"]} == {
        "DistributedInference/7/llama-serve": ["update"],
        "DistributedTraining/7/new-job": ["create"]}
    assert doc["summary"] == {"drifted": 0, "pending": 2, "interrupted": 0,
                              "gpus_taken": 0, "gpus_freed": 0, "gpus_taken_min": 0,
                              "gpus_freed_min": 0}
    assert sim_server.writes() == []


def test_ignored_paths_are_not_drift(ws, sim_server):
    ws.write("serve.yaml", INFERENCE + "lifecycle:\n  ignoreChanges: [spec.replicas]\n")
    assert ws.apply().exit_code == 0
    wid = sim_server.live()[0]["id"]
    assert sim_server.admin.patch(f"/_sim/workloads/{wid}",
                                  json={"spec": {"replicas": 7}}).status_code == 200
    assert _drift(ws).exit_code == 0


def test_drift_errors_exit_1(ws, sim_server, applied):
    ws.state_path.write_text('{"version": 1, "lineage": ')
    res = _drift(ws)
    assert res.exit_code == 1
    assert res.stderr.startswith("Error:") and "state.json" in res.stderr
    assert "Traceback" not in res.output


def test_example_specs_show_no_drift_right_after_apply(ws, sim_server):
    ws.copy_examples()
    assert ws.apply().exit_code == 0
    res = _drift(ws)
    assert res.exit_code == 0, res.output
    assert json.loads(_drift(ws, "--format", "json").stdout)["drift"] == []


def test_drift_against_a_state_never_written_is_an_error(ws, sim_server):
    ws.write("train.yaml", TRAINING)
    res = ws.cli("--state", str(ws.root / "nowhere" / "state.json"), "drift", str(ws.specs))
    assert res.exit_code == 1
    assert "no state at" in res.stderr and "nothing can drift" in res.stderr
    assert sim_server.requests() == []
