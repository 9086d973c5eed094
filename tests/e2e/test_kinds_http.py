"""Training, Workspace and Inference end to end: the CLI against `sim serve` over HTTP.
Every create and PATCH body the reconciler sends is checked
against NVIDIA's schema for its kind, with no key the schema does not define."""

from __future__ import annotations

import jsonschema
import pytest
import yaml
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from tests.helpers.workspace import changes_by_address
from tests.helpers.kind_specs import INFERENCE, TRAINING, WORKSPACE, apply_kinds, undefined_keys

pytestmark = pytest.mark.http


SUSPENDING = {"Training": ("train.yaml", TRAINING, "llama-lora", "trainings"),
              "Workspace": ("ws.yaml", WORKSPACE, "jupyter-ana", "workspaces")}
OPENAPI = {"trainings": ("trainings.yml", "TrainingCreationRequest", None),
           "workspaces": ("workspaces.yml", "WorkspaceCreationRequest", None),
           "inferences": ("inferences.yml", "InferenceCreationRequest", "InferenceUpdateRequest")}


# --- the bodies sent, against NVIDIA's schema ----------------------------------------

@pytest.fixture(scope="module")
def schema_check(shared_api_dir):
    docs = {f: yaml.safe_load((shared_api_dir / f).read_text())
            for f, _, _ in OPENAPI.values()}
    registry = Registry().with_resources(
        (name, Resource.from_contents(doc, default_specification=DRAFT202012))
        for name, doc in docs.items())

    def check(file: str, name: str, body: dict) -> None:
        validator = jsonschema.Draft202012Validator(
            {"$ref": f"{file}#/components/schemas/{name}"}, registry=registry)
        errors = [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(body)]
        components = docs[file]["components"]["schemas"]
        undefined_keys(components[name], body, components, "", errors)
        assert not errors, f"{name}: " + "\n".join(errors[:5])

    return check


@pytest.fixture
def sim(sim_server, schema_check, monkeypatch):
    """The simulator; every create and PATCH body of a new kind that reaches it (before
    each clearing of its log, and at the end) is checked against the OpenAPI."""
    seen = {"create": 0, "patch": 0}

    def check_log() -> None:
        for r in sim_server.requests():
            parts = r["path"].split("/")
            if len(parts) < 5 or parts[4] not in OPENAPI or r["status"] >= 400:
                continue
            file, create, update = OPENAPI[parts[4]]
            if r["method"] == "POST" and len(parts) == 5:
                schema_check(file, create, r["body"])
                seen["create"] += 1
            elif r["method"] == "PATCH":
                schema_check(file, update, r["body"])
                seen["patch"] += 1

    clear = sim_server.clear_requests

    def checked_clear() -> None:
        check_log()
        clear()

    monkeypatch.setattr(sim_server, "clear_requests", checked_clear)
    yield sim_server
    check_log()
    assert seen["create"], "no create body was checked"


def test_create_then_no_changes_although_the_simulator_filled_defaults(ws, sim):
    live = apply_kinds(ws, sim)
    assert {live[n]["type"] for n in ("llama-lora", "jupyter-ana", "mistral-chat")} == {
        "training", "workspace", "inference"}
    # the server filled defaults the specs do not set (autoscaling's, imagePullPolicy, ...)
    wid = live["mistral-chat"]["id"]
    body = sim.api("GET", f"/api/v1/workloads/inferences/{wid}").json()
    assert body["spec"]["autoscaling"]["metricThresholdPercentage"] == 70
    assert body["spec"]["servingPort"]["protocol"] == "http"
    again = ws.plan("--detailed-exitcode")
    assert again.exit_code == 0, again.output
    assert set(ws.state()["resources"]) == {
        "Training/7/llama-lora", "Workspace/7/jupyter-ana", "Inference/7/mistral-chat"}


def test_an_inference_created_without_autoscaling_is_no_change_after(ws, sim):
    spec = INFERENCE[:INFERENCE.index("  autoscaling:")]
    ws.write("serve.yaml", spec)
    assert ws.apply().exit_code == 0
    assert ws.plan("--detailed-exitcode").exit_code == 0


def _swap(text: str, first: str, second: str) -> str:
    out = text.replace(first, "\0").replace(second, first).replace("\0", second)
    assert out != text
    return out


@pytest.mark.parametrize("file,text,first,second", [
    ("train.yaml", TRAINING, "    - name: HF_HOME\n      value: /data/hf\n",
     "    - name: WANDB_PROJECT\n      value: llama-lora\n"),
    ("ws.yaml", WORKSPACE, "    - name: team\n      value: research\n",
     "    - name: owner\n      value: ana\n"),
    ("serve.yaml", INFERENCE, "    - name: HF_HOME\n      value: /models/hf\n",
     "    - name: VLLM_LOGGING_LEVEL\n      value: INFO\n"),
    ("serve.yaml", INFERENCE, "    - name: team\n      value: serving\n",
     "    - name: model\n      value: mistral-7b\n"),
])
def test_reordering_keyed_lists_is_no_change(ws, sim, file, text, first, second):
    apply_kinds(ws, sim)
    ws.write(file, _swap(text, first, second))
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("kind", sorted(SUSPENDING))
def test_image_change_is_a_replace_naming_spec_image(ws, sim, kind):
    file, text, name, _ = SUSPENDING[kind]
    before = apply_kinds(ws, sim)
    old_image = yaml.safe_load(text)["spec"]["image"]
    ws.write(file, text.replace(old_image, old_image + "-r2"))
    rc = changes_by_address(ws.plan_json())[f"{kind}/7/{name}"]
    assert rc["change"]["actions"] == ["delete", "create"]
    assert rc["replace_paths"] == ["spec.image"]
    sim.clear_requests()
    assert ws.apply().exit_code == 0
    after = {w["name"]: w for w in sim.live()}
    assert after[name]["id"] != before[name]["id"]
    assert ws.plan("--detailed-exitcode").exit_code == 0


@pytest.mark.parametrize("kind", sorted(SUSPENDING))
def test_desired_stopped_is_a_suspend_then_no_change(ws, sim, kind):
    file, text, name, path = SUSPENDING[kind]
    live = apply_kinds(ws, sim)
    ws.write(file, text.replace("spec:\n", "desiredPhase: Stopped\nspec:\n", 1))
    rc = changes_by_address(ws.plan_json())[f"{kind}/7/{name}"]
    assert (rc["change"]["actions"], rc["action"]) == (["update"], "suspend")
    sim.clear_requests()
    assert ws.apply().exit_code == 0
    assert [(w["method"], w["path"]) for w in sim.writes()] == [
        ("POST", f"/api/v1/workloads/{path}/{live[name]['id']}/suspend")]
    assert ws.plan("--detailed-exitcode").exit_code == 0


@pytest.mark.parametrize("kind", sorted(SUSPENDING))
def test_out_of_band_suspend_is_drift_resumed(ws, sim, kind):
    _, _, name, path = SUSPENDING[kind]
    wid = apply_kinds(ws, sim)[name]["id"]
    assert sim.api("POST", f"/api/v1/workloads/{path}/{wid}/suspend").status_code == 202
    doc = ws.plan_json()
    rc = changes_by_address(doc)[f"{kind}/7/{name}"]
    assert (rc["change"]["actions"], rc["action"]) == (["update"], "resume")
    assert f"{kind}/7/{name}" in {d["address"] for d in doc["resource_drift"]}
    sim.clear_requests()
    assert ws.apply().exit_code == 0
    assert [w["path"] for w in sim.writes()] == [f"/api/v1/workloads/{path}/{wid}/resume"]
    assert ws.plan("--detailed-exitcode").exit_code == 0


def _one_patch(ws, sim, wid: str) -> dict:
    rc = changes_by_address(ws.plan_json())["Inference/7/mistral-chat"]
    assert rc["change"]["actions"] == ["update"]
    sim.clear_requests()
    assert ws.apply().exit_code == 0
    writes = sim.writes()
    assert [(w["method"], w["path"]) for w in writes] == [
        ("PATCH", f"/api/v1/workloads/inferences/{wid}")]
    assert ws.plan("--detailed-exitcode").exit_code == 0
    return writes[0]["body"]


def test_inference_image_change_is_one_patch_of_the_image_alone(ws, sim):
    wid = apply_kinds(ws, sim)["mistral-chat"]["id"]
    ws.write("serve.yaml", INFERENCE.replace("v0.6.3", "v0.6.4"))
    assert _one_patch(ws, sim, wid) == {"spec": {"image": "vllm/vllm-openai:v0.6.4"}}


def test_inference_autoscaling_change_is_one_patch_of_its_full_value(ws, sim):
    wid = apply_kinds(ws, sim)["mistral-chat"]["id"]
    ws.write("serve.yaml", INFERENCE.replace("maxReplicas: 4", "maxReplicas: 8"))
    assert _one_patch(ws, sim, wid) == {"spec": {"autoscaling": {
        "minReplicas": 1, "maxReplicas": 8, "metric": "concurrency", "metricThreshold": 16}}}


def test_inference_image_and_compute_change_is_one_patch_of_both(ws, sim):
    wid = apply_kinds(ws, sim)["mistral-chat"]["id"]
    ws.write("serve.yaml", INFERENCE.replace("v0.6.3", "v0.6.4").replace(
        "gpuDevicesRequest: 1", "gpuDevicesRequest: 2"))
    assert _one_patch(ws, sim, wid) == {"spec": {"image": "vllm/vllm-openai:v0.6.4",
                                                 "compute": {"gpuDevicesRequest": 2}}}


def test_inference_serving_port_change_is_a_replace_naming_it(ws, sim):
    before = apply_kinds(ws, sim)
    ws.write("serve.yaml", INFERENCE.replace("container: 8000", "container: 8080").replace(
        "--port 8000", "--port 8080"))
    rc = changes_by_address(ws.plan_json())["Inference/7/mistral-chat"]
    assert rc["change"]["actions"] == ["delete", "create"]
    assert rc["replace_paths"] == ["spec.servingPort.container"]
    text = ws.plan().output
    assert "forces replacement" in text and "spec.servingPort.container" in text
    assert ws.apply().exit_code == 0
    after = {w["name"]: w for w in sim.live()}
    assert after["mistral-chat"]["id"] != before["mistral-chat"]["id"]
    assert ws.plan("--detailed-exitcode").exit_code == 0


def test_inference_patched_out_of_band_is_drift_patched_back(ws, sim):
    wid = apply_kinds(ws, sim)["mistral-chat"]["id"]
    r = sim.admin.patch(f"/_sim/workloads/{wid}", json={"spec": {"autoscaling": {"maxReplicas": 2}}})
    assert r.status_code == 200, r.text
    doc = ws.plan_json()
    assert "Inference/7/mistral-chat" in {d["address"] for d in doc["resource_drift"]}
    body = _one_patch(ws, sim, wid)
    assert body == {"spec": {"autoscaling": {
        "minReplicas": 1, "maxReplicas": 4, "metric": "concurrency", "metricThreshold": 16}}}


def test_inference_patched_through_the_api_out_of_band_is_drift_patched_back(ws, sim):
    wid = apply_kinds(ws, sim)["mistral-chat"]["id"]
    r = sim.api("PATCH", f"/api/v1/workloads/inferences/{wid}",
                json={"spec": {"image": "vllm/vllm-openai:nightly"}})
    assert r.status_code == 202, r.text
    doc = ws.plan_json()
    drift = {d["address"]: d for d in doc["resource_drift"]}
    assert "Inference/7/mistral-chat" in drift
    assert "nightly" in ws.plan().output
    sim.clear_requests()
    assert _one_patch(ws, sim, wid) == {"spec": {"image": "vllm/vllm-openai:v0.6.3"}}


def test_removing_an_inference_environment_variable_is_one_patch_of_the_rest(ws, sim):
    wid = apply_kinds(ws, sim)["mistral-chat"]["id"]
    ws.write("serve.yaml", INFERENCE.replace("    - name: VLLM_LOGGING_LEVEL\n      value: INFO\n", ""))
    assert _one_patch(ws, sim, wid) == {"spec": {"environmentVariables": [
        {"name": "HF_HOME", "value": "/models/hf"}]}}
