"""What the other Manifest tests do not show, over HTTP against
`sim serve`: the simulator refuses a v2 body holding a key its schema does not define
(so the bodies the reconciler sends, which it accepts, hold none), and the GPU impact a
plan shows for a PyTorchJob (a master and 2 workers of 8 GPUs: 24) and a RayJob (a head
of no GPU and a worker group of 2..6 replicas of 4 GPUs: 8..24)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.http

CLUSTER = "71f69d83-ba66-4822-adf5-55ce55efd210"
META = {"name": "bodies", "projectId": "7", "clusterId": CLUSTER}
JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "bodies"}}
NIM = {"image": "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3", "servingPort": {"port": 8000}}


def test_a_v2_body_with_a_key_the_api_does_not_define_is_refused(sim_server):
    api = sim_server.api
    refused = {
        "create, top level": ("POST", "/api/v2/workloads",
                              {"metadata": META, "manifest": JOB, "spec": {}}),
        "create, metadata": ("POST", "/api/v2/workloads",
                             {"metadata": {**META, "nodePool": "a"}, "manifest": JOB}),
        "NIM create, clusterId": ("POST", "/api/v2/workloads/nim-services",
                                  {"metadata": META, "spec": NIM}),
        "NIM create, spec": ("POST", "/api/v2/workloads/nim-services",
                             {"metadata": {"name": "n", "projectId": "7"},
                              "spec": {**NIM, "imagePullPolcy": "Always"}}),
    }
    for what, (method, path, body) in refused.items():
        r = api(method, path, json=body)
        assert r.status_code == 400 and "unknown field" in r.json()["message"], what
    job = api("POST", "/api/v2/workloads", json={"metadata": META, "manifest": JOB})
    nim = api("POST", "/api/v2/workloads/nim-services",
              json={"metadata": {"name": "n", "projectId": "7"}, "spec": NIM})
    assert (job.status_code, nim.status_code) == (202, 202)
    job_id, nim_id = job.json()["metadata"]["id"], nim.json()["metadata"]["id"]
    # Updates: name is create-only (not in the PUT's metadata); a PATCH is `{spec}` alone.
    for method, path, body in (
            ("PUT", f"/api/v2/workloads/{job_id}",
             {"metadata": {"priority": "low", "name": "x"}, "manifest": JOB}),
            ("PATCH", f"/api/v2/workloads/nim-services/{nim_id}",
             {"spec": NIM, "metadata": {"name": "n"}})):
        r = api(method, path, json=body)
        assert r.status_code == 400 and "unknown field" in r.json()["message"], (method, r.text)
    assert api("PUT", f"/api/v2/workloads/{job_id}",
               json={"metadata": {"priority": "low"}, "manifest": JOB}).status_code == 202
    assert api("PATCH", f"/api/v2/workloads/nim-services/{nim_id}",
               json={"spec": NIM}).status_code == 202


PYTORCHJOB = f"""
kind: Manifest
name: gpt
projectId: "7"
clusterId: {CLUSTER}
manifest:
  apiVersion: kubeflow.org/v1
  kind: PyTorchJob
  metadata: {{name: gpt}}
  spec:
    pytorchReplicaSpecs:
      Master:
        replicas: 1
        template:
          spec:
            containers:
              - name: pytorch
                image: nvcr.io/nvidia/pytorch:24.05-py3
                resources: {{limits: {{nvidia.com/gpu: 8}}}}
      Worker:
        replicas: 2
        template:
          spec:
            containers:
              - name: pytorch
                image: nvcr.io/nvidia/pytorch:24.05-py3
                resources: {{limits: {{nvidia.com/gpu: 8}}}}
"""
RAYJOB = f"""
kind: Manifest
name: sweep
projectId: "7"
clusterId: {CLUSTER}
manifest:
  apiVersion: ray.io/v1
  kind: RayJob
  metadata: {{name: sweep}}
  spec:
    entrypoint: python sweep.py
    rayClusterSpec:
      headGroupSpec:
        template:
          spec:
            containers:
              - name: head
                image: rayproject/ray:2.9.0
      workerGroupSpecs:
        - groupName: gpu
          replicas: 2
          minReplicas: 2
          maxReplicas: 6
          template:
            spec:
              containers:
                - name: worker
                  image: rayproject/ray:2.9.0-gpu
                  resources: {{requests: {{nvidia.com/gpu: "4"}}}}
"""


def test_the_gpu_impact_of_a_pytorchjob_and_a_rayjob(ws, sim_server):
    ws.write("gpt.yaml", PYTORCHJOB)
    ws.write("sweep.yaml", RAYJOB)
    doc = ws.plan_json()["gpu_impact"]
    assert {w["address"]: (w["after"]["min"], w["after"]["max"]) for w in doc["workloads"]} == {
        "Manifest/7/gpt": (24, 24), "Manifest/7/sweep": (8, 24)}
    text = ws.plan().output
    assert "Manifest/7/gpt: 0 -> 24 (+24)" in text
    assert "Manifest/7/sweep: 0 -> 8..24 (min +8, max +24)" in text
    assert ws.apply().exit_code == 0
    assert ws.plan("--detailed-exitcode").exit_code == 0
