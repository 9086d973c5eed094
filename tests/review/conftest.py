"""Fixtures for the review and drift tests: the e2e `sim serve` and workspace, and specs."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import CLUSTER, _sim_process, sim_server, ws  # noqa: F401 - fixtures

TRAINING = f"""
kind: DistributedTraining
name: bert-ddp
projectId: "7"
clusterId: {CLUSTER}
spec:
  image: nvcr.io/nvidia/pytorch:24.05-py3
  distributedFramework: PyTorch
  numWorkers: 2
  command: torchrun
  args: --nproc_per_node=8 train.py
  compute:
    gpuDevicesRequest: 8
  environmentVariables:
    - name: NCCL_DEBUG
      value: INFO
masterSpecSameAsWorker: true
"""

INFERENCE = f"""
kind: DistributedInference
name: llama-serve
projectId: "7"
clusterId: {CLUSTER}
spec:
  replicas: 2
  workers: 1
  servingPort:
    port: 8000
  leader:
    image: vllm/vllm-openai:v0.6.3
    compute:
      gpuDevicesRequest: 8
  worker:
    image: vllm/vllm-openai:v0.6.3
    compute:
      gpuDevicesRequest: 8
"""


@pytest.fixture
def applied(ws, sim_server):
    """A workspace with the training and the inference applied: name -> live list item."""
    ws.write("train.yaml", TRAINING)
    ws.write("serve.yaml", INFERENCE)
    res = ws.apply()
    assert res.exit_code == 0, res.output
    return {w["name"]: w for w in sim_server.live()}
