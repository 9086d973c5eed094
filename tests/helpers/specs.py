"""Spec files the test areas share: a DistributedTraining and a DistributedInference (the
specs of the end-to-end plan/apply tests, also applied by the `applied` fixture), and
`training_doc`, a small training by name (fleets of the reliability and state tests)."""

from __future__ import annotations

from tests.helpers.constants import CLUSTER


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
    - name: HF_HOME
      value: /data/hf
    - name: WANDB_API_KEY
      value: wandb-0123456789
  labels:
    - name: team
      value: nlp
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
    command: python3 -m vllm.entrypoints.openai.api_server
    compute:
      gpuDevicesRequest: 8
  worker:
    image: vllm/vllm-openai:v0.6.3
    compute:
      gpuDevicesRequest: 8
"""


def training_doc(name: str, image: str = "nvcr.io/nvidia/pytorch:24.05-py3") -> str:
    return (f"kind: DistributedTraining\nname: {name}\nprojectId: \"7\"\nclusterId: {CLUSTER}\n"
            f"spec:\n  image: {image}\n  distributedFramework: PyTorch\n  numWorkers: 2\n")
