"""Quantities and the values the control plane checks, through the CLI against `sim serve`
as a user drives it: the example specs (every kind) applied, each quantity respelt
(`256Gi` as `262144Mi`, `0.25Ti`) plans no change and sends nothing; a changed value plans
the change as written; an update sends the spec's own spelling. A manifest with values
Kubernetes refuses is an error naming each file, line and field, exit 1, nothing sent."""

from __future__ import annotations

import re

import pytest

from tests.helpers.workspace import changes_by_address

pytestmark = pytest.mark.http

_GI = re.compile(r"(?m)^(\s*(?:cpuMemoryRequest|size|sizeLimit|memory): )(\d+)Gi$")


def _respell(ws, fmt) -> int:
    """Every `<N>Gi` quantity of the example specs written as `fmt(N)`; how many."""
    count = 0
    for path in ws.specs.rglob("*.yaml"):
        text, n = _GI.subn(lambda m: m.group(1) + fmt(int(m.group(2))), path.read_text())
        path.write_text(text)
        count += n
    return count


@pytest.mark.parametrize("fmt", [lambda n: f"{n * 1024}Mi", lambda n: f"{n / 1024}Ti",
                                 lambda n: f'"{n * 2**30}"'], ids=["Mi", "Ti", "bytes"])
def test_a_respelt_quantity_plans_no_change_in_any_kind(ws, sim_server, fmt):
    ws.copy_examples()
    assert ws.apply().exit_code == 0
    kinds = {rc["kind"] for rc in ws.plan_json()["resource_changes"]}
    assert kinds >= {"Training", "DistributedTraining", "DistributedInference", "Inference",
                     "Workspace", "NIMService", "Manifest"}
    assert _respell(ws, fmt) >= 16
    sim_server.clear_requests()
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 0, res.output
    assert "No changes." in res.output
    res = ws.apply()
    assert res.exit_code == 0 and "No changes." in res.output, res.output
    assert sim_server.writes() == []


def test_a_changed_quantity_plans_the_change_as_written(ws, sim_server):
    ws.copy_examples()
    assert ws.apply().exit_code == 0
    lora = ws.specs / "training" / "llama-8b-lora.yaml"
    lora.write_text(lora.read_text().replace("cpuMemoryRequest: 256Gi", "cpuMemoryRequest: 300Gi"))
    res = ws.plan()
    assert res.exit_code == 0, res.output
    assert '~ spec.compute.cpuMemoryRequest: "256Gi" -> "300Gi"  # forces replacement' in res.output
    assert "Plan: 0 to create, 0 to update, 1 to replace" in res.output


def test_an_update_sends_the_spec_s_own_spelling(ws, sim_server):
    ws.copy_examples()
    assert ws.apply().exit_code == 0
    nim = ws.specs / "nim" / "llama-8b-nim.yaml"
    nim.write_text(nim.read_text().replace("cpuMemoryRequest: 32Gi", "cpuMemoryRequest: 32768Mi")
                   .replace("maxReplicas: 2", "maxReplicas: 3"))
    rc = changes_by_address(ws.plan_json())["NIMService/7/llama-8b-nim"]
    assert rc["change"]["actions"] == ["update"]
    shown = ws.plan().output
    assert "~ spec.autoscaling.maxReplicas: 2 -> 3" in shown and "cpuMemoryRequest" not in shown
    res = ws.apply()
    assert res.exit_code == 0 and "1 updated" in res.output, res.output
    patch = [r for r in sim_server.writes() if r["method"] == "PATCH"]
    assert len(patch) == 1
    live = next(w for w in sim_server.live() if w["name"] == "llama-8b-nim")
    got = sim_server.api("GET", f"/api/v2/workloads/nim-services/{live['id']}").json()
    assert got["spec"]["compute"]["cpuMemoryRequest"] == "32768Mi"
    assert ws.plan("--detailed-exitcode").exit_code == 0


BAD_JOB = """\
kind: Manifest
name: bad-job
projectId: "7"
clusterId: 71f69d83-ba66-4822-adf5-55ce55efd210
manifest:
  apiVersion: batch/v1
  kind: Job
  metadata: {name: bad-job}
  spec:
    template:
      spec:
        containers:
          - name: main
            image: "busybox:1\\nFOO bar"
            resources:
              requests: {memory: "8gi"}
              limits: {nvidia.com/gpu: "lots", cpu: "0x10"}
"""


def test_values_kubernetes_refuses_are_errors_and_nothing_is_sent(ws, sim_server):
    ws.write("job.yaml", BAD_JOB)
    ws.write("train.yaml", """\
        kind: Training
        name: t
        projectId: "7"
        clusterId: 71f69d83-ba66-4822-adf5-55ce55efd210
        spec:
          image: nvcr.io/nvidia/pytorch:24.05-py3
          compute: {gpuDevicesRequest: 1, cpuMemoryRequest: 1.5.5Gi}
        """)
    sim_server.clear_requests()
    res = ws.apply()
    assert res.exit_code == 1
    job, train = ws.specs / "job.yaml", ws.specs / "train.yaml"
    c = "manifest.spec.template.spec.containers[0]"
    for line in (f"{job}:14: {c}.image: must be an image reference",
                 f'{job}:16: {c}.resources.requests.memory: must be a Kubernetes quantity '
                 'such as 500m, 16Gi or 2, got "8gi"',
                 f'{job}:17: {c}.resources.limits.nvidia.com/gpu: must be a Kubernetes quantity',
                 f'{job}:17: {c}.resources.limits.cpu: must be a Kubernetes quantity',
                 f'{train}:7: spec.compute.cpuMemoryRequest: must be a Kubernetes quantity '
                 'such as 500m, 16Gi or 2, got "1.5.5Gi"'):
        assert line in res.output, res.output
    assert "Traceback" not in res.output
    assert sim_server.writes() == [] and not ws.state_path.exists()
