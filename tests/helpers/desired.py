"""Desired workloads built by hand (a DistributedTraining `dt`, a DistributedInference
`di`) for the tests that drive the executor in process (e2e's executor tests, reliability's
recovery waits)."""

from __future__ import annotations

from reconciler.desired.types import DesiredWorkload
from tests.helpers.constants import CLUSTER


def dt(name: str, image: str = "nvcr.io/nvidia/pytorch:24.05-py3", phase: str = "Running") -> DesiredWorkload:
    body = {"name": name, "projectId": "7", "clusterId": CLUSTER,
            "spec": {"image": image, "distributedFramework": "PyTorch", "numWorkers": 1}}
    return DesiredWorkload("DistributedTraining", name, "7", CLUSTER, body, desired_phase=phase)


def di(name: str, replicas: int = 1) -> DesiredWorkload:
    body = {"name": name, "projectId": "7", "clusterId": CLUSTER,
            "spec": {"replicas": replicas, "leader": {"image": "vllm/vllm-openai:v0.6.3"}}}
    return DesiredWorkload("DistributedInference", name, "7", CLUSTER, body)
