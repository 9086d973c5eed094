"""GPU accounting of odd live bodies (what the API, not a checked spec, may hold): NaN, an
infinity, integers past a float's range, numbers of GPU memory no float holds. No
exception, and finite numbers only, so that a plan's JSON stays JSON."""

from __future__ import annotations

import json
import math

import pytest

from reconciler import gpus

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
