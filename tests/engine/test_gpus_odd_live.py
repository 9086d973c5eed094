"""GPU accounting of odd live bodies (what the API, not a checked spec, may hold): NaN, an
infinity, integers past a float's range, numbers of GPU memory no float holds. No
exception, and finite numbers only, so that a plan's JSON stays JSON; a count that cannot
be read (`lots`, `-8`, `8.5` devices) is unknown, never 0."""

from __future__ import annotations

import json
import math

import pytest

from reconciler import gpus
from reconciler.render import impact

BIG = 10 ** 400
BODIES = {
    "workers-past-a-float": ("DistributedTraining", {"spec": {"numWorkers": BIG, "compute": {
        "gpuDevicesRequest": 1, "gpuRequestType": "portion", "gpuPortionRequest": 0.5}}}),
    "devices-and-portion-overflowing": ("Training", {"spec": {"compute": {
        "gpuDevicesRequest": 1e308, "gpuRequestType": "portion", "gpuPortionRequest": 1e308}}}),
    "nan-devices": ("Training", {"spec": {"compute": {"gpuDevicesRequest": float("nan")}}}),
    "infinite-devices": ("Workspace", {"spec": {"compute": {"gpuDevicesRequest": math.inf}}}),
    "memory-past-a-float": ("Training", {"spec": {"compute": {
        "gpuDevicesRequest": 2, "gpuMemoryRequest": "9" * 5000}}}),
    "replicas-past-a-float": ("Inference", {"spec": {"autoscaling": {
        "minReplicas": "x", "maxReplicas": BIG}, "compute": {"gpuDevicesRequest": 1}}}),
    "distributed-inference-huge": ("DistributedInference", {"spec": {
        "replicas": BIG, "workers": -BIG, "leader": {"compute": {"gpuDevicesRequest": 1.5}},
        "worker": {"compute": {"gpuDevicesRequest": 1}}}}),
}


@pytest.mark.parametrize("name", list(BODIES))
def test_odd_live_bodies_count_finite_gpus(name):
    kind, body = BODIES[name]
    held = gpus.held(kind, body)
    numbers = [held.low, held.high, held.memory_low, held.memory_high]
    assert all(math.isfinite(x) for x in numbers), held
    json.dumps(numbers, allow_nan=False)


def _job(*gpus_per_pod) -> dict:
    """A Manifest body: one PyTorchJob role of 2 pods per value of nvidia.com/gpu."""
    roles = {f"R{i}": {"replicas": 2, "template": {"spec": {"containers": [
        {"name": "c", "resources": {"limits": {"nvidia.com/gpu": g}}}]}}}
        for i, g in enumerate(gpus_per_pod)}
    return {"manifest": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                         "spec": {"pytorchReplicaSpecs": roles}}}


@pytest.mark.parametrize("kind,body", [
    ("Manifest", _job(4, "lots")), ("Manifest", _job(4, -8)), ("Manifest", _job(4, 8.5)),
    ("Manifest", _job(4, "500m")),
    ("Training", {"spec": {"compute": {"gpuDevicesRequest": "lots"}}}),
    ("Training", {"spec": {"compute": {"gpuDevicesRequest": -8}}}),
    ("Workspace", {"spec": {"compute": {"gpuDevicesRequest": 8.5}}}),
    ("Training", {"spec": {"compute": {"gpuRequestType": "memory", "gpuMemoryRequest": "8gi"}}}),
    ("Inference", {"spec": {"compute": {"gpuRequestType": "portion", "gpuPortionRequest": "half"}}}),
    ("DistributedTraining", {"spec": {"numWorkers": "four", "compute": {"gpuDevicesRequest": 1}}}),
    ("NIMService", {"spec": {"replicas": -1, "compute": {"gpuDevicesRequest": 1}}}),
])
def test_a_gpu_value_that_cannot_be_read_is_unknown_never_zero(kind, body):
    held = gpus.held(kind, body)
    assert held.unknown, held
    # What could be read is counted: the other role's 2 pods x 4 GPUs; the device of a
    # GPU memory request whose size cannot be read.
    memory = body.get("spec", {}).get("compute", {}).get("gpuMemoryRequest")
    assert held.high == (8 if kind == "Manifest" else 1 if memory else 0)
    assert held.memory_high == 0


def test_readable_values_are_known():
    assert gpus.held("Manifest", _job(4, "8")) == gpus.Gpus(24, 24)
    assert not gpus.held("Training", {"spec": {"compute": {"gpuDevicesRequest": 8}}}).unknown


def test_the_impact_says_unknown_where_a_value_could_not_be_read():
    before, after = gpus.held("Manifest", _job(4, 8)), gpus.held("Manifest", _job(4, "lots"))
    assert impact.moves(before, after) == "24 -> 8 + unknown (unknown)"
    assert impact.amount(gpus.held("Manifest", _job("lots"))) == "unknown"
    assert impact.gpus_doc(after) == {"min": 8, "max": 8, "memory_bytes_min": 0,
                                      "memory_bytes_max": 0, "unknown": True}


def test_pods_that_cannot_be_counted_but_hold_no_gpus_are_known():
    body = {"spec": {"replicas": 2, "workers": "lots", "leader": {"compute": {"gpuDevicesRequest": 1}},
                     "worker": {"compute": {"gpuDevicesRequest": 0}}}}
    assert gpus.held("DistributedInference", body) == gpus.Gpus(2, 2)
    body["spec"]["worker"]["compute"]["gpuDevicesRequest"] = 1
    assert gpus.held("DistributedInference", body) == gpus.Gpus(2, 2, unknown=True)
