"""The engine end to end: the CLI against `sim serve` over real HTTP."""

from __future__ import annotations

import json

import pytest

from tests.helpers.workspace import changes_by_address
from tests.helpers.specs import TRAINING, INFERENCE

pytestmark = pytest.mark.http


def _setup(ws, sim_server):
    ws.write("train.yaml", TRAINING)
    ws.write("serve.yaml", INFERENCE)
    first = ws.plan("--detailed-exitcode")
    assert first.exit_code == 2, first.output
    res = ws.apply()
    assert res.exit_code == 0, res.output
    return {w["name"]: w for w in sim_server.live()}


def test_first_plan_creates_then_apply_then_no_changes(ws, sim_server):
    ws.write("train.yaml", TRAINING)
    ws.write("serve.yaml", INFERENCE)
    first = ws.plan("--detailed-exitcode")
    assert first.exit_code == 2, first.output
    assert "DistributedTraining/7/bert-ddp will be created" in first.output
    assert "2 to create" in first.output
    assert sim_server.writes() == [], "plan must not write"

    res = ws.apply()
    assert res.exit_code == 0, res.output
    assert sorted(w["name"] for w in sim_server.live()) == ["bert-ddp", "llama-serve"]

    # the simulator filled server defaults (backoffLimit, imagePullPolicy, ...): still no diff
    again = ws.plan("--detailed-exitcode")
    assert again.exit_code == 0, again.output
    assert "No changes" in again.output
    assert set(ws.state()["resources"]) == {"DistributedTraining/7/bert-ddp",
                                             "DistributedInference/7/llama-serve"}


def test_create_bodies_hold_only_api_fields(ws, sim_server):
    ws.write("train.yaml", TRAINING.replace("spec:\n", "desiredPhase: Running\nlifecycle:\n  preventDestroy: false\nspec:\n", 1))
    ws.write("serve.yaml", INFERENCE)
    assert ws.apply().exit_code == 0
    creates = [r for r in sim_server.requests() if r["method"] == "POST" and r["path"] in (
        "/api/v1/workloads/distributed", "/api/v1/workloads/distributed-inferences")]
    assert len(creates) == 2
    for r in creates:
        assert set(r["body"]) <= {"name", "projectId", "clusterId", "spec", "masterSpec", "masterSpecSameAsWorker"}
        assert r["body"]["projectId"] == "7"


def test_reordering_list_items_is_no_change(ws, sim_server):
    _setup(ws, sim_server)
    reordered = TRAINING.replace(
        "    - name: NCCL_DEBUG\n      value: INFO\n    - name: HF_HOME\n      value: /data/hf\n",
        "    - name: HF_HOME\n      value: /data/hf\n    - name: NCCL_DEBUG\n      value: INFO\n")
    assert reordered != TRAINING
    ws.write("train.yaml", reordered)
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 0, res.output


def test_training_image_change_is_a_replace_naming_spec_image(ws, sim_server):
    before = _setup(ws, sim_server)
    ws.write("train.yaml", TRAINING.replace("pytorch:24.05-py3", "pytorch:24.10-py3"))
    doc = ws.plan_json()
    rc = changes_by_address(doc)["DistributedTraining/7/bert-ddp"]
    assert rc["change"]["actions"] == ["delete", "create"]
    assert rc["replace_paths"] == ["spec.image"]
    text = ws.plan().output
    assert "must be replaced" in text and "forces replacement" in text

    sim_server.clear_requests()
    assert ws.apply().exit_code == 0
    after = {w["name"]: w for w in sim_server.live()}
    assert after["bert-ddp"]["id"] != before["bert-ddp"]["id"]
    methods = [(r["method"], r["path"].rsplit("/", 1)[-1]) for r in sim_server.writes()]
    assert ("DELETE", before["bert-ddp"]["id"]) in methods
    assert ws.plan("--detailed-exitcode").exit_code == 0


def test_inference_replicas_change_is_one_patch_with_only_replicas(ws, sim_server):
    before = _setup(ws, sim_server)
    ws.write("serve.yaml", INFERENCE.replace("replicas: 2", "replicas: 4"))
    doc = ws.plan_json()
    rc = changes_by_address(doc)["DistributedInference/7/llama-serve"]
    assert rc["change"]["actions"] == ["update"]
    sim_server.clear_requests()
    assert ws.apply().exit_code == 0
    writes = sim_server.writes()
    assert [(w["method"], w["body"]) for w in writes] == [("PATCH", {"spec": {"replicas": 4}})]
    assert writes[0]["path"].endswith(before["llama-serve"]["id"])
    assert ws.plan("--detailed-exitcode").exit_code == 0


def test_desired_stopped_suspends_then_no_change(ws, sim_server):
    _setup(ws, sim_server)
    ws.write("train.yaml", TRAINING.replace("spec:\n", "desiredPhase: Stopped\nspec:\n", 1))
    doc = ws.plan_json()
    rc = changes_by_address(doc)["DistributedTraining/7/bert-ddp"]
    assert (rc["change"]["actions"], rc["action"]) == (["update"], "suspend")
    sim_server.clear_requests()
    assert ws.apply().exit_code == 0
    assert [w["path"].rsplit("/", 1)[-1] for w in sim_server.writes()] == ["suspend"]
    assert ws.plan("--detailed-exitcode").exit_code == 0


def test_suspend_out_of_band_plans_a_resume_reported_as_drift(ws, sim_server):
    live = _setup(ws, sim_server)
    wid = live["bert-ddp"]["id"]
    assert sim_server.api("POST", f"/api/v1/workloads/distributed/{wid}/suspend").status_code == 202
    doc = ws.plan_json()
    rc = changes_by_address(doc)["DistributedTraining/7/bert-ddp"]
    assert (rc["change"]["actions"], rc["action"]) == (["update"], "resume")
    assert "DistributedTraining/7/bert-ddp" in {d["address"] for d in doc["resource_drift"]}
    assert "drift" in ws.plan().output
    assert ws.apply().exit_code == 0
    assert ws.plan("--detailed-exitcode").exit_code == 0


def test_a_phase_forced_to_stopped_gives_way_to_the_resume(ws, sim_server):
    """The admin surface stops a workload the way a cluster would (desiredPhase still
    Running): the plan resumes it, the resume takes, and the next plan has nothing to do."""
    live = _setup(ws, sim_server)
    wid = live["bert-ddp"]["id"]
    r = sim_server.admin.post(f"/_sim/workloads/{wid}/phase", json={"phase": "Stopped"})
    assert r.status_code == 200, r.text
    doc = ws.plan_json()
    change = changes_by_address(doc)["DistributedTraining/7/bert-ddp"]
    assert (change["action"], change["change"]["actions"]) == ("resume", ["update"])
    sim_server.clear_requests()
    res = ws.apply()
    assert res.exit_code == 0, res.output
    assert [w["path"].rsplit("/", 1)[-1] for w in sim_server.writes()] == ["resume"]
    again = ws.plan("--detailed-exitcode")
    assert again.exit_code == 0, again.output


def test_replicas_changed_out_of_band_plans_an_update_reported_as_drift(ws, sim_server):
    live = _setup(ws, sim_server)
    wid = live["llama-serve"]["id"]
    r = sim_server.admin.patch(f"/_sim/workloads/{wid}", json={"spec": {"replicas": 5}})
    assert r.status_code == 200, r.text
    doc = ws.plan_json()
    rc = changes_by_address(doc)["DistributedInference/7/llama-serve"]
    assert rc["change"]["actions"] == ["update"]
    drift = {d["address"]: d for d in doc["resource_drift"]}
    assert "DistributedInference/7/llama-serve" in drift
    out = ws.plan().output
    assert "drift" in out and "5" in out
    sim_server.clear_requests()
    assert ws.apply().exit_code == 0
    assert [w["body"] for w in sim_server.writes()] == [{"spec": {"replicas": 2}}]


def test_removing_a_spec_file_plans_a_delete(ws, sim_server):
    _setup(ws, sim_server)
    (ws.specs / "serve.yaml").unlink()
    doc = ws.plan_json()
    assert changes_by_address(doc)["DistributedInference/7/llama-serve"]["change"]["actions"] == ["delete"]
    assert changes_by_address(doc)["DistributedTraining/7/bert-ddp"]["change"]["actions"] == ["no-op"]
    assert ws.apply().exit_code == 0
    assert [w["name"] for w in sim_server.live()] == ["bert-ddp"]
    assert "DistributedInference/7/llama-serve" not in ws.state()["resources"]
    assert ws.plan("--detailed-exitcode").exit_code == 0


def test_lost_state_adopts_existing_workloads_without_creating(ws, sim_server):
    _setup(ws, sim_server)
    ws.state_path.unlink()
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 2, res.output  # a change to the state alone is a change
    assert "apply adopts them" in res.output
    assert "  = DistributedTraining/7/bert-ddp" in res.output
    assert "0 to resume, 2 to adopt." in res.output
    doc = ws.plan_json()
    assert all(rc["adopted"] for rc in doc["resource_changes"])
    assert doc["has_changes"] and doc["summary"]["adopt"] == 2
    sim_server.clear_requests()
    res = ws.apply()
    assert res.exit_code == 0, res.output
    assert "2 adopted" in res.output
    assert sim_server.writes() == []
    assert len(ws.state()["resources"]) == 2
    assert ws.plan("--detailed-exitcode").exit_code == 0


def test_deleted_outside_is_recreated_and_said(ws, sim_server):
    live = _setup(ws, sim_server)
    wid = live["bert-ddp"]["id"]
    assert sim_server.api("DELETE", f"/api/v1/workloads/distributed/{wid}").status_code == 202
    out = ws.plan().output
    assert "deleted outside" in out
    doc = ws.plan_json()
    assert changes_by_address(doc)["DistributedTraining/7/bert-ddp"]["change"]["actions"] == ["create"]


def test_completed_training_that_disappears_is_not_recreated(ws, sim_server):
    live = _setup(ws, sim_server)
    wid = live["bert-ddp"]["id"]
    sim_server.admin.post(f"/_sim/workloads/{wid}/phase", json={"phase": "Completed"})
    assert ws.plan("--detailed-exitcode").exit_code == 0
    assert ws.apply().exit_code == 0  # records that it completed
    assert ws.state()["resources"]["DistributedTraining/7/bert-ddp"]["completed"] is True
    assert sim_server.api("DELETE", f"/api/v1/workloads/distributed/{wid}").status_code == 202
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 0, res.output


def test_apply_without_tty_or_auto_approve_refuses(ws, sim_server):
    ws.write("train.yaml", TRAINING)
    res = ws.cli("apply", str(ws.specs))
    assert res.exit_code == 1
    assert "--auto-approve" in res.output
    assert sim_server.writes() == []


def test_apply_prompt_accepts_only_yes(ws, sim_server, monkeypatch):
    import sys

    ws.write("train.yaml", TRAINING)
    monkeypatch.setattr("reconciler.cli._stdin_is_tty", lambda: True)
    res = ws.cli("apply", str(ws.specs), input="no\n")
    assert res.exit_code == 1 and "cancelled" in res.output
    assert sim_server.writes() == []
    res = ws.cli("apply", str(ws.specs), input="yes\n")
    assert res.exit_code == 0, res.output
    assert [w["name"] for w in sim_server.live()] == ["bert-ddp"]
    del sys


def test_state_list_show_rm(ws, sim_server):
    _setup(ws, sim_server)
    res = ws.cli("state", "list")
    assert res.output.split() == ["DistributedInference/7/llama-serve", "DistributedTraining/7/bert-ddp"]
    show = json.loads(ws.cli("state", "show", "DistributedTraining/7/bert-ddp").output)
    assert show["applied"]["spec"]["image"] == "nvcr.io/nvidia/pytorch:24.05-py3"
    env = {e["name"]: e["value"] for e in show["applied"]["spec"]["environmentVariables"]}
    assert env["WANDB_API_KEY"] == "(sensitive)" and env["NCCL_DEBUG"] == "INFO"
    raw = json.loads(ws.cli("state", "show", "--show-sensitive", "DistributedTraining/7/bert-ddp").output)
    assert {e["name"]: e["value"] for e in raw["applied"]["spec"]["environmentVariables"]}[
        "WANDB_API_KEY"].startswith("hmac-sha256:")  # the state holds the value's keyed hash
    assert "token" not in ws.state_path.read_text().lower()
    res = ws.cli("state", "rm", "DistributedTraining/7/bert-ddp")
    assert res.exit_code == 0
    assert ws.cli("state", "list").output.split() == ["DistributedInference/7/llama-serve"]
    assert ws.cli("state", "show", "DistributedTraining/7/nope").exit_code == 1


def test_after_adoption_nothing_is_adopted_again(ws, sim_server):
    _setup(ws, sim_server)
    assert not any(rc["adopted"] for rc in ws.plan_json()["resource_changes"])
    assert "adopt" not in ws.plan().output
