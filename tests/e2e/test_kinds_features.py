"""The rest of the engine for Training, Workspace and Inference against `sim serve`: saved
plans, markdown, masking, lifecycle, --target/--replace/--destroy, the drift command,
completion, and recovery from commit failures (the journal)."""

from __future__ import annotations

import collections
import json

import pytest

from tests.helpers.workspace import changes_by_address
from tests.helpers.kind_specs import INFERENCE, TRAINING, WORKSPACE, apply_kinds

pytestmark = pytest.mark.http

T, W, I = "Training/7/llama-lora", "Workspace/7/jupyter-ana", "Inference/7/mistral-chat"
SECRET = "hf_live_secret_value"
SECRET_INFERENCE = INFERENCE.replace(
    "      value: INFO\n", f"      value: INFO\n    - name: HF_TOKEN\n      value: {SECRET}\n"
) + "lifecycle:\n  sensitive: [spec.args]\n"


def _faults(sim, **settings) -> None:
    sim.admin.put("/_sim/faults", json=settings).raise_for_status()


def test_saved_plan_of_a_patch_applies_it_and_shows_it_in_markdown(ws, sim_server):
    wid = apply_kinds(ws, sim_server)["mistral-chat"]["id"]
    ws.write("serve.yaml", INFERENCE.replace("maxReplicas: 4", "maxReplicas: 6"))
    path = ws.root / "plan.bin"
    res = ws.plan("--out", str(path))
    assert res.exit_code == 0, res.output
    md = ws.cli("show", str(path), "--format", "markdown").output
    assert I in md and "spec.autoscaling.maxReplicas" in md and "update" in md.lower()
    sim_server.clear_requests()
    res = ws.cli("apply", str(path))
    assert res.exit_code == 0, res.output
    assert [(w["method"], w["path"], w["body"]["spec"]["autoscaling"]["maxReplicas"])
            for w in sim_server.writes()] == [
        ("PATCH", f"/api/v1/workloads/inferences/{wid}", 6)]
    assert ws.plan("--detailed-exitcode").exit_code == 0


def test_sensitive_values_of_an_inference_are_masked_in_every_format(ws, sim_server):
    ws.write("serve.yaml", SECRET_INFERENCE)
    assert ws.apply().exit_code == 0
    ws.write("serve.yaml", SECRET_INFERENCE.replace(SECRET, SECRET + "-2").replace(
        "--port 8000", "--port 8000 --api-key s3cr3t-args"))
    for fmt in ("text", "json", "markdown"):
        out = ws.plan("--format", fmt).output
        assert SECRET not in out and "s3cr3t-args" not in out, fmt
        assert "(sensitive)" in out, fmt
    sim_server.clear_requests()
    res = ws.apply()
    assert res.exit_code == 0 and SECRET not in res.output
    body = sim_server.writes()[0]["body"]
    assert set(body["spec"]) == {"args", "environmentVariables"}  # the API gets the values
    assert SECRET + "-2" in json.dumps(body)


def test_target_replace_and_destroy_on_the_new_kinds(ws, sim_server):
    before = apply_kinds(ws, sim_server)
    ws.write("ws.yaml", WORKSPACE.replace("gpuDevicesRequest: 1", "gpuDevicesRequest: 2"))
    ws.write("serve.yaml", INFERENCE.replace("v0.6.3", "v0.6.4"))
    doc = ws.plan_json("--target", W)
    assert [rc["address"] for rc in doc["resource_changes"]] == [W]

    doc = ws.plan_json("--target", T, "--replace", T)
    assert changes_by_address(doc)[T]["change"]["actions"] == ["delete", "create"]
    assert ws.apply("--target", T, "--replace", T).exit_code == 0
    after = {w["name"]: w for w in sim_server.live()}
    assert after["llama-lora"]["id"] != before["llama-lora"]["id"]
    assert after["jupyter-ana"]["id"] == before["jupyter-ana"]["id"]  # not targeted

    doc = ws.plan_json("--destroy")
    assert {rc["address"]: rc["change"]["actions"] for rc in doc["resource_changes"]} == {
        T: ["delete"], W: ["delete"], I: ["delete"]}
    assert ws.apply("--destroy").exit_code == 0
    assert sim_server.live() == [] and ws.state()["resources"] == {}


def test_lifecycle_prevent_destroy_and_ignore_changes(ws, sim_server):
    protected = INFERENCE + "lifecycle:\n  preventDestroy: true\n  ignoreChanges: [spec.autoscaling.maxReplicas]\n"
    ws.write("serve.yaml", protected)
    assert ws.apply().exit_code == 0
    wid = sim_server.live()[0]["id"]
    sim_server.admin.patch(f"/_sim/workloads/{wid}", json={"spec": {"autoscaling": {"maxReplicas": 9}}})
    assert ws.plan("--detailed-exitcode").exit_code == 0  # ignored
    ws.write("serve.yaml", protected.replace("container: 8000", "container: 8080"))
    sim_server.clear_requests()
    res = ws.plan()
    assert res.exit_code == 1 and I in res.stderr and "preventDestroy" in res.stderr
    assert ws.apply().exit_code == 1
    assert sim_server.writes() == []


def test_drift_command_reports_the_new_kinds(ws, sim_server):
    live = apply_kinds(ws, sim_server)
    assert ws.cli("drift", str(ws.specs), "--detailed-exitcode").exit_code == 0
    sim_server.api("POST", f"/api/v1/workloads/workspaces/{live['jupyter-ana']['id']}/suspend")
    sim_server.admin.patch(f"/_sim/workloads/{live['mistral-chat']['id']}",
                           json={"spec": {"image": "vllm/vllm-openai:nightly"}})
    res = ws.cli("drift", str(ws.specs), "--detailed-exitcode")
    assert res.exit_code == 2, res.output
    assert W in res.output and I in res.output and "nightly" in res.output
    assert T not in res.output
    md = ws.cli("drift", str(ws.specs), "--format", "markdown").output
    assert W in md and I in md


def test_a_completed_training_is_left_alone_and_not_recreated(ws, sim_server):
    live = apply_kinds(ws, sim_server)
    wid = live["llama-lora"]["id"]
    sim_server.admin.post(f"/_sim/workloads/{wid}/phase", json={"phase": "Completed"})
    assert ws.apply().exit_code == 0  # records that it completed
    assert ws.state()["resources"][T]["completed"] is True
    assert sim_server.api("DELETE", f"/api/v1/workloads/trainings/{wid}").status_code == 202
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 0, res.output
    # a spec change runs it again
    ws.write("train.yaml", TRAINING.replace("backoffLimit: 2", "backoffLimit: 3"))
    assert changes_by_address(ws.plan_json())[T]["change"]["actions"] == ["create"]


def test_a_workspace_never_completes(ws, sim_server):
    live = apply_kinds(ws, sim_server)
    wid = live["jupyter-ana"]["id"]
    assert sim_server.api("DELETE", f"/api/v1/workloads/workspaces/{wid}").status_code == 202
    rc = changes_by_address(ws.plan_json())[W]
    assert rc["change"]["actions"] == ["create"]


def test_commit_failures_converge_with_no_duplicates(ws, sim_server):
    _faults(sim_server, errorRate=0.2, commitFailRate=0.3, retryAfterSeconds=0)
    # At these rates 44 % of a write's attempts fail, so the default 8 attempts give up on
    # one write in about 700 and the test failed now and then for that alone; with 16 one
    # in about 500,000. What is tested is convergence, not the retry limit.
    ws.env = {**ws.env, "RUNAI_MAX_ATTEMPTS": "16"}
    ws.write("train.yaml", TRAINING)
    ws.write("ws.yaml", WORKSPACE.replace("spec:\n", "desiredPhase: Stopped\nspec:\n", 1))
    ws.write("serve.yaml", INFERENCE)
    res = ws.apply()
    assert res.exit_code == 0, res.output
    ws.write("serve.yaml", INFERENCE.replace("v0.6.3", "v0.6.4"))
    ws.write("train.yaml", TRAINING.replace("pytorch:24.05", "pytorch:24.10"))
    res = ws.apply()
    assert res.exit_code == 0, res.output
    _faults(sim_server, errorRate=0.0, commitFailRate=0.0)
    workloads = [w for w in sim_server.admin.get("/_sim/workloads").json()["workloads"]
                 if w["desiredPhase"] != "Deleted"]
    assert collections.Counter(w["name"] for w in workloads) == {
        "llama-lora": 1, "jupyter-ana": 1, "mistral-chat": 1}
    state = ws.state()["resources"]
    assert {w["workloadId"] for w in workloads} == {r["workload_id"] for r in state.values()}
    assert ws.plan("--detailed-exitcode").exit_code == 0
