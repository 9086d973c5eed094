"""Server defaults through the CLI against `sim serve`: a spec that spells a server default
(CONTRACT.md §5) and then drops it, as `export` writes it, plans no change, for every kind;
so does a spec that adds a default live lacks. And an update's `change.patch` holds only
what apply sends, no `remove` of a server default the spec never set."""

from __future__ import annotations

import json
import textwrap

import pytest
import yaml

from tests.helpers.constants import CLUSTER
from tests.helpers.workspace import changes_by_address

pytestmark = pytest.mark.http

# Each kind's spec, spelling defaults the server would fill in: a `:latest` tag's
# `imagePullPolicy: Always`, `security.uidGidSource`, `ports[].exclude`, the workload type's
# priorityClass and preemptibility, and kind-specific ones.
SPELLED = {
    "Training": """
        kind: Training
        name: lora
        projectId: "7"
        clusterId: {cluster}
        spec:
          image: nvcr.io/nvidia/pytorch:latest
          imagePullPolicy: Always
          priorityClass: train
          preemptibility: preemptible
          backoffLimit: 6
          security: {{uidGidSource: fromTheImage, hostIpc: false}}
          ports: [{{container: 8080, serviceType: ClusterIP, exclude: false}}]
          compute: {{gpuDevicesRequest: 1}}
    """,
    "Workspace": """
        kind: Workspace
        name: jupyter
        projectId: "7"
        clusterId: {cluster}
        spec:
          image: jupyter/base-notebook:2024.10
          imagePullPolicy: IfNotPresent
          priorityClass: build
          preemptibility: non-preemptible
          security: {{uidGidSource: fromTheImage}}
          storage:
            pvc: [{{name: home, path: /home/jovyan, existingPvc: true, claimName: home-pvc,
                    readOnly: false}}]
    """,
    "Inference": """
        kind: Inference
        name: chat
        projectId: "7"
        clusterId: {cluster}
        spec:
          image: vllm/vllm-openai:latest
          imagePullPolicy: Always
          priorityClass: inference
          servingPort: {{container: 8000, protocol: http}}
          autoscaling: {{minReplicas: 2, maxReplicas: 2, metric: concurrency, metricThreshold: 8,
                         metricThresholdPercentage: 70}}
          compute: {{gpuDevicesRequest: 1}}
    """,
    "DistributedTraining": """
        kind: DistributedTraining
        name: ddp
        projectId: "7"
        clusterId: {cluster}
        spec:
          image: nvcr.io/nvidia/pytorch:latest
          imagePullPolicy: Always
          distributedFramework: MPI
          numWorkers: 2
          slotsPerWorker: 1
          sshAuthMountPath: /root/.ssh
          preemptibility: preemptible
          compute: {{gpuDevicesRequest: 1}}
        masterSpecSameAsWorker: true
    """,
    "DistributedInference": """
        kind: DistributedInference
        name: serve
        projectId: "7"
        clusterId: {cluster}
        spec:
          workers: 1
          replicas: 1
          startupPolicy: LeaderCreated
          servingPort: {{port: 8000, authorizationType: public}}
          leader: {{image: vllm/vllm-openai:latest, imagePullPolicy: Always,
                    compute: {{gpuDevicesRequest: 1}}}}
          worker: {{image: vllm/vllm-openai:latest, security: {{uidGidSource: fromTheImage}},
                    compute: {{gpuDevicesRequest: 1}}}}
    """,
}


def _write(ws, kind: str, text: str) -> None:
    ws.write(f"{kind}.yaml", textwrap.dedent(text).format(cluster=CLUSTER))


def _exported(ws, tmp_path) -> dict[str, str]:
    """What `export` writes for the live workloads: {kind: file text}."""
    out = tmp_path / "exported"
    res = ws.cli("export", "--out", str(out))
    assert res.exit_code == 0, res.output
    return {yaml.safe_load(p.read_text())["kind"]: p.read_text() for p in out.rglob("*.yaml")}


def test_dropping_spelled_defaults_as_export_writes_them_plans_no_change(ws, sim_server, tmp_path):
    for kind, text in SPELLED.items():
        _write(ws, kind, text)
    applied = ws.apply()
    assert applied.exit_code == 0, applied.output
    exported = _exported(ws, tmp_path)
    assert set(exported) == set(SPELLED)
    training = yaml.safe_load(exported["Training"])["spec"]
    assert "imagePullPolicy" not in training and "security" not in training  # dropped
    for kind, text in exported.items():
        ws.write(f"{kind}.yaml", text)

    sim_server.clear_requests()
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 0, res.output
    assert "No changes" in res.output
    assert "forces replacement" not in res.output
    res = ws.apply()
    assert res.exit_code == 0, res.output
    assert sim_server.writes() == []


def test_adding_a_default_that_live_lacks_plans_no_change(ws, sim_server):
    ws.write("job.yaml", f"""
        kind: Training
        name: plain
        projectId: "7"
        clusterId: {CLUSTER}
        spec:
          image: python:3.12
          compute: {{gpuDevicesRequest: 1}}
    """)
    assert ws.apply().exit_code == 0
    ws.write("job.yaml", f"""
        kind: Training
        name: plain
        projectId: "7"
        clusterId: {CLUSTER}
        spec:
          image: python:3.12
          imagePullPolicy: IfNotPresent
          security: {{uidGidSource: fromTheImage}}
          compute: {{gpuDevicesRequest: 1}}
    """)
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 0, res.output
    assert "No changes" in res.output


def test_a_default_the_workload_type_does_not_have_is_a_change(ws, sim_server):
    """The control: `priorityClass: train` is a Training's default, not a Workspace's."""
    ws.write("ws.yaml", f"""
        kind: Workspace
        name: jupyter
        projectId: "7"
        clusterId: {CLUSTER}
        spec: {{image: jupyter/base-notebook:2024.10, priorityClass: train}}
    """)
    assert ws.apply().exit_code == 0
    ws.write("ws.yaml", f"""
        kind: Workspace
        name: jupyter
        projectId: "7"
        clusterId: {CLUSTER}
        spec: {{image: jupyter/base-notebook:2024.10}}
    """)
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 2, res.output
    assert 'spec.priorityClass: "train" -> null' in res.output


def test_an_update_s_change_patch_holds_only_what_apply_sends(ws, sim_server):
    inference = textwrap.dedent(SPELLED["Inference"]).format(cluster=CLUSTER)
    ws.write("chat.yaml", inference)
    assert ws.apply().exit_code == 0
    ws.write("chat.yaml", inference.replace("metricThreshold: 8", "metricThreshold: 16"))
    doc = ws.plan_json()
    rc = changes_by_address(doc)["Inference/7/chat"]
    assert rc["change"]["actions"] == ["update"]
    assert rc["patch"]["spec"].keys() == {"autoscaling"}
    # Live holds defaults the spec never set (servingPort.authorizationType,
    # preemptibility, ...): the patch does not remove them, nor anything apply leaves alone.
    assert rc["change"]["patch"] == [
        {"op": "replace", "path": "/spec/autoscaling/metricThreshold", "value": 16}], \
        json.dumps(rc["change"]["patch"])
