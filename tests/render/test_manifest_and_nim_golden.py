"""The v2 kinds rendered: a Manifest's own kind (`PyTorchJob`, `RayJob`) beside
`Manifest` in the plan's text, markdown and JSON (`manifest_kind`), in the drift report's
text, markdown and JSON, and a secret-looking variable's value masked inside a manifest's
`env` and a NIM service's `environmentVariables`. Golden files in golden_v2/ (apart from
golden/, whose examples other areas render too); UPDATE_GOLDEN=1 rewrites them."""

from __future__ import annotations

import json
import pathlib

import pytest

from reconciler import drift, gpus, plans
from reconciler.plans import Action, FieldChange, Plan, ResourceChange
from reconciler.render import drift as drift_render
from reconciler.render import json as json_render
from reconciler.render import markdown
from reconciler.render import text as text_render
from tests.helpers.finishing import finished
from tests.helpers.golden import assert_golden, versionless

GOLDEN = pathlib.Path(__file__).parent / "golden_v2"
CLUSTER = "71f69d83-ba66-4822-adf5-55ce55efd210"
IDS = {"bert-ddp": "0b6f6a4e-1d2c-4a43-9c44-3d1d5f1c9a01",
       "llama-70b-serve": "5d9e3c1a-7f2b-4e8d-a6c4-2b1f0e9d8c72"}
SECRETS = ("wandb-secret-value", "nvapi-secret")


def plan(*changes: ResourceChange) -> Plan:
    return Plan(changes=sorted(changes, key=lambda c: c.address),
                lineage="6b0c5a52-9f57-4b5b-9d3c-7c2b1a0e4d11", serial=3)


def _change(kind: str, project: str, name: str, action: Action, reason: str,
            **kw) -> ResourceChange:
    return ResourceChange(address=f"{kind}/{project}/{name}", kind=kind, name=name,
                          project_id=project, action=action, reason=reason, **kw)


def _pytorchjob(workers: int) -> dict:
    pod = {"spec": {"containers": [{
        "name": "pytorch", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "env": [{"name": "WANDB_API_KEY", "value": "wandb-secret-value"}],
        "resources": {"limits": {"nvidia.com/gpu": 8}}}]}}
    return {"name": "gpt-pretrain", "projectId": "7", "clusterId": CLUSTER,
            "priority": "medium", "category": "Train",
            "manifest": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                         "metadata": {"name": "gpt-pretrain"},
                         "spec": {"pytorchReplicaSpecs": {
                             "Master": {"replicas": 1, "template": pod},
                             "Worker": {"replicas": workers, "template": pod}}}}}


def _nim(image: str) -> dict:
    return {"name": "llama-nim", "projectId": "7", "clusterId": CLUSTER,
            "spec": {"image": image, "compute": {"gpuDevicesRequest": 1},
                     "servingPort": {"port": 8000},
                     "environmentVariables": [{"name": "NGC_API_KEY", "value": "nvapi-secret"}]}}


def v2_kinds() -> Plan:
    """The v2 kinds: a PyTorchJob Manifest whose workers change (a replace: its replica
    specs are frozen), a RayJob Manifest created, a NIM service updated in place (one
    PATCH of its whole spec); the manifest's own kind beside `Manifest` in every line, the
    secret-looking values masked."""
    ray = {"name": "ray-sweep", "projectId": "7", "clusterId": CLUSTER,
           "manifest": {"apiVersion": "ray.io/v1", "kind": "RayJob",
                        "metadata": {"name": "ray-sweep"},
                        "spec": {"entrypoint": "python sweep.py", "rayClusterSpec": {
                            "headGroupSpec": {"template": {"spec": {"containers": [
                                {"name": "head", "image": "rayproject/ray:2.9.0"}]}}},
                            "workerGroupSpecs": [{
                                "groupName": "gpu", "replicas": 2, "minReplicas": 2,
                                "maxReplicas": 6, "template": {"spec": {"containers": [{
                                    "name": "worker", "image": "rayproject/ray:2.9.0-gpu",
                                    "resources": {"limits": {"nvidia.com/gpu": 4}}}]}}}]}}}}
    return plan(
        _change("Manifest", "7", "gpt-pretrain", Action.REPLACE, plans.REASON_SPEC_CHANGED,
                changes=[FieldChange("manifest.spec.pytorchReplicaSpecs.Worker.replicas", 2, 3,
                                     forces_replacement=True)],
                workload_id=IDS["bert-ddp"], before=_pytorchjob(2), after=_pytorchjob(3),
                desired_phase="Running", live_phase="Running"),
        _change("Manifest", "7", "ray-sweep", Action.CREATE, plans.REASON_NEW, after=ray,
                desired_phase="Running", project_name="team-a"),
        _change("NIMService", "7", "llama-nim", Action.UPDATE, plans.REASON_SPEC_CHANGED,
                changes=[FieldChange("spec.image", "nvcr.io/nim/meta/llama:1.3.3",
                                     "nvcr.io/nim/meta/llama:1.3.4")],
                workload_id=IDS["llama-70b-serve"], before=_nim("nvcr.io/nim/meta/llama:1.3.3"),
                after=_nim("nvcr.io/nim/meta/llama:1.3.4"), desired_phase="Running",
                live_phase="Running",
                patch={"spec": _nim("nvcr.io/nim/meta/llama:1.3.4")["spec"]}))


def drift_report() -> drift.DriftReport:
    """A PyTorchJob Manifest whose workers were scaled outside, and pending: a RayJob."""
    pending = v2_kinds()
    pending.changes = [c for c in pending.changes if c.name == "ray-sweep"]
    return drift.DriftReport(drifted=[
        drift.DriftedWorkload(
            "Manifest/7/gpt-pretrain", "Manifest", "gpt-pretrain", "7", IDS["bert-ddp"], "drift",
            [drift.DriftedPath("manifest.spec.pytorchReplicaSpecs.Worker.replicas", 2, 4),
             drift.DriftedPath("manifest.spec.pytorchReplicaSpecs.Worker.template.spec."
                               "containers[pytorch].env[WANDB_API_KEY].value",
                               "wandb-secret-value", "wandb-secret-value-2")],
            gpus_state=gpus.Gpus(24, 24), gpus_live=gpus.Gpus(40, 40),
            manifest_kind="PyTorchJob"),
    ], pending=pending, lineage="6b0c", serial=3)


RENDERED = {
    "plan.txt": lambda: text_render.render_plan(finished(v2_kinds())),
    "plan.json": lambda: versionless(json_render.render_plan(finished(v2_kinds()))) + "\n",
    "plan.md": lambda: markdown.render_plan(finished(v2_kinds())),
    "drift.txt": lambda: drift_render.render_text(drift_report()),
    "drift.json": lambda: drift_render.render_json(drift_report()) + "\n",
    "drift.md": lambda: markdown.render_drift(drift_report()),
}


@pytest.mark.parametrize("name", sorted(RENDERED))
def test_matches_golden(name):
    got = RENDERED[name]()
    assert_golden(GOLDEN / name, got)
    for secret in SECRETS:
        assert secret not in got, name


def test_the_manifest_kind_is_said_in_every_format():
    text = RENDERED["plan.txt"]()
    assert "-/+ Manifest gpt-pretrain (PyTorchJob, project 7)" in text
    assert "+ Manifest ray-sweep (RayJob, project 7, team-a)" in text
    assert "<b>Manifest/7/gpt-pretrain</b> (PyTorchJob)" in RENDERED["plan.md"]()
    doc = json.loads(RENDERED["plan.json"]())
    assert {rc["address"]: rc.get("manifest_kind") for rc in doc["resource_changes"]} == {
        "Manifest/7/gpt-pretrain": "PyTorchJob", "Manifest/7/ray-sweep": "RayJob",
        "NIMService/7/llama-nim": None}
    assert "# Manifest/7/gpt-pretrain (PyTorchJob) was changed outside" in RENDERED["drift.txt"]()
    assert "<b>Manifest/7/gpt-pretrain</b> (PyTorchJob) changed" in RENDERED["drift.md"]()
    drifted = json.loads(RENDERED["drift.json"]())
    assert drifted["drift"][0]["manifest_kind"] == "PyTorchJob"
    assert drifted["pending_changes"][0]["manifest_kind"] == "RayJob"
    assert drifted["format_version"] == "1.5" and doc["format_version"] == "1.10"
