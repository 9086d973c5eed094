"""Workloads V2 jobs that finish: a Job, PyTorchJob or RayJob Manifest that
completed is left alone, and not created again after the API deleted it, as a Training
is; a Deployment (which serves until deleted) deleted outside is created again. The CLI
against `sim serve` over HTTP; the simulator's `/_sim/workloads/{id}/phase` finishes a
v2 workload (its `workloadManifest.status` then says so, in the type's own words) and
`DELETE /_sim/workloads/{id}` removes it, as the control plane's clean-up would."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.http

CLUSTER = "71f69d83-ba66-4822-adf5-55ce55efd210"
HEAD = f"""
kind: Manifest
name: {{name}}
projectId: "7"
clusterId: {CLUSTER}
manifest:
"""
POD = """
          spec:
            restartPolicy: Never
            containers:
              - name: main
                image: busybox:1.36
                command: ["sh", "-c", "echo done"]
"""
MANIFESTS = {
    "Job": """  apiVersion: batch/v1
  kind: Job
  metadata:
    name: {name}
  spec:
    template:
      spec:
        restartPolicy: Never
        containers:
          - name: main
            image: busybox:1.36
            command: ["sh", "-c", "echo done"]
""",
    "PyTorchJob": """  apiVersion: kubeflow.org/v1
  kind: PyTorchJob
  metadata:
    name: {name}
  spec:
    pytorchReplicaSpecs:
      Master:
        replicas: 1
        template:""" + POD,
    "RayJob": """  apiVersion: ray.io/v1
  kind: RayJob
  metadata:
    name: {name}
  spec:
    entrypoint: python /app/main.py
    rayClusterSpec:
      headGroupSpec:
        template:""" + POD,
}
# The Kubernetes status each type's operator writes when it succeeded.
FINISHED = {
    "Job": lambda s: {"type": "Complete", "status": "True"} in s["conditions"],
    "PyTorchJob": lambda s: {"type": "Succeeded", "status": "True"} in s["conditions"],
    "RayJob": lambda s: s["jobStatus"] == "SUCCEEDED",
}


def spec(manifest_type: str, name: str) -> str:
    return HEAD.format(name=name) + MANIFESTS[manifest_type].format(name=name)


def _id(sim, name: str) -> str:
    [item] = [w for w in sim.live() if w["name"] == name]
    return item["id"]


@pytest.mark.parametrize("manifest_type", sorted(MANIFESTS))
def test_a_finished_job_is_left_alone_and_not_created_again_once_deleted(
        ws, sim_server, manifest_type):
    name = f"done-{manifest_type.lower()}"
    address = f"Manifest/7/{name}"
    ws.write("job.yaml", spec(manifest_type, name))
    res = ws.apply()
    assert res.exit_code == 0, res.output
    wid = _id(sim_server, name)

    r = sim_server.admin.post(f"/_sim/workloads/{wid}/phase", json={"phase": "Completed"})
    assert r.status_code == 200, r.text
    answer = sim_server.api("GET", f"/api/v2/workloads/{wid}").json()
    assert FINISHED[manifest_type](answer["workload"]["workloadManifest"]["status"])
    assert "status" not in answer["workload"]["rawManifest"]

    for refresh in ("auto", "full"):
        [rc] = ws.plan_json(f"--refresh={refresh}")["resource_changes"]
        assert (rc["action"], rc["action_reason"], rc["live_phase"]) == (
            "no-op", "completed", "Completed"), refresh
    sim_server.clear_requests()
    assert ws.apply().exit_code == 0
    assert sim_server.writes() == []
    assert ws.state()["resources"][address]["completed"] is True

    # The control plane cleans it up: it is not created again.
    assert sim_server.admin.delete(f"/_sim/workloads/{wid}").status_code == 200
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 0, res.output
    [rc] = ws.plan_json()["resource_changes"]
    assert (rc["action"], rc["action_reason"]) == ("no-op", "completed")
    sim_server.clear_requests()
    assert ws.apply().exit_code == 0
    assert sim_server.writes() == []
    assert ws.cli("drift", str(ws.specs), "--detailed-exitcode").exit_code == 0

    # A change of its spec runs it again.
    ws.write("job.yaml", spec(manifest_type, name).replace("echo done", "echo again"))
    [rc] = ws.plan_json()["resource_changes"]
    assert rc["action"] == "create", rc
    sim_server.clear_requests()
    assert ws.apply().exit_code == 0
    assert [(w["method"], w["path"]) for w in sim_server.writes()] == [
        ("POST", "/api/v2/workloads")]


def test_a_job_deleted_before_it_finished_is_created_again(ws, sim_server):
    ws.write("job.yaml", spec("PyTorchJob", "cut-short"))
    assert ws.apply().exit_code == 0
    assert sim_server.admin.delete(
        f"/_sim/workloads/{_id(sim_server, 'cut-short')}").status_code == 200
    [rc] = ws.plan_json()["resource_changes"]
    assert (rc["action"], rc["action_reason"]) == ("create", "deleted_outside")


def test_a_deployment_is_not_a_job_a_finished_looking_one_deleted_is_created_again(
        ws, sim_server):
    """A Deployment serves until deleted: its Manifest is not one that completes, so a
    phase forced to Completed does not make its deletion final."""
    ws.write("web.yaml", HEAD.format(name="web") + """  apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: web
  spec:
    replicas: 1
    template:
      spec:
        containers:
          - name: app
            image: nginx:1.27
""")
    assert ws.apply().exit_code == 0
    wid = _id(sim_server, "web")
    sim_server.admin.post(f"/_sim/workloads/{wid}/phase", json={"phase": "Completed"})
    assert ws.apply().exit_code == 0
    assert sim_server.admin.delete(f"/_sim/workloads/{wid}").status_code == 200
    [rc] = ws.plan_json()["resource_changes"]
    assert (rc["action"], rc["action_reason"]) == ("create", "deleted_outside")
