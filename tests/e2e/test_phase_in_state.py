"""After apply suspends or resumes a workload the state records the phase it is moving
to, so a plan without refresh counts its GPUs as they are: none while suspended."""

from __future__ import annotations

import pytest

from tests.helpers.constants import CLUSTER

pytestmark = pytest.mark.http


def spec(workers: int, phase: str = "Running") -> str:
    return f"""\
kind: DistributedTraining
name: bert-ddp
projectId: "7"
clusterId: {CLUSTER}
desiredPhase: {phase}
spec:
  image: nvcr.io/nvidia/pytorch:24.05-py3
  distributedFramework: PyTorch
  numWorkers: {workers}
  compute: {{gpuDevicesRequest: 8}}
"""


def gpus_before(ws) -> float:
    """The GPUs project 7 holds before apply, as a plan without refresh counts them."""
    doc = ws.plan_json("--no-refresh")
    (project,) = doc["gpu_impact"]["projects"]
    return project["before"]["min"]


def test_a_plan_without_refresh_counts_no_gpus_for_a_workload_apply_suspended(ws, sim_server):
    ws.write("a.yaml", spec(2))
    assert ws.apply().exit_code == 0
    ws.write("a.yaml", spec(2, "Stopped"))
    res = ws.apply()
    assert res.exit_code == 0 and "1 suspended" in res.output
    assert ws.state()["resources"]["DistributedTraining/7/bert-ddp"]["last_phase"] == "Stopping"
    ws.write("a.yaml", spec(3, "Stopped"))  # a replacement of the suspended workload
    assert gpus_before(ws) == 0  # it holds nothing now (the state said Running: 16)

    ws.write("a.yaml", spec(2))
    res = ws.apply()
    assert res.exit_code == 0 and "1 resumed" in res.output
    assert ws.state()["resources"]["DistributedTraining/7/bert-ddp"]["last_phase"] == "Resuming"
    ws.write("a.yaml", spec(3))
    assert gpus_before(ws) == 16  # running again: 2 pods of 8
